package bot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// The assigned master's buttons, on the message of their accepted offer;
// each carries that offer's id. Who may press them is decided by the
// domain, against the presser's id.
//
// Done and Can't do it cannot be undone, so they only ask: their press
// changes nothing but the message's buttons, which become Yes and Back;
// only Yes finishes or gives the order back, and Back brings the step
// buttons back. Every ad and ax press asks, an old message's too: a master
// who meant it taps once more, while an irreversible change nobody
// confirmed cannot be taken back.
var (
	actionEnRoute      = NewAction("ae", 1)
	actionArrived      = NewAction("aa", 1)
	actionFinish       = NewAction("ad", 1)  // asks: Yes, the work is done / Back
	actionGiveBack     = NewAction("ax", 1)  // asks: Yes, give the order back / Back
	actionFinishYes    = NewAction("adc", 1) // Finish
	actionGiveBackYes  = NewAction("axc", 1) // GiveBack
	actionAssignedBack = NewAction("ab", 1)  // the step buttons again
)

// confirmation is what a confirmation keyboard asks for.
type confirmation struct {
	yes    Action
	button string // the Yes button's text
	style  pairStyle
}

var (
	confirmFinish   = confirmation{actionFinishYes, "assigned.button_done_yes", confirmGo}
	confirmGiveBack = confirmation{actionGiveBackYes, "assigned.button_return_yes", confirmLoss}
)

// stepToasts confirm a press that moved the order.
var stepToasts = map[dispatch.Step]string{
	dispatch.StepEnRoute: "assigned.en_route_toast",
	dispatch.StepArrived: "assigned.arrived_toast",
}

// stepRefusals explain a step pressed again.
var stepRefusals = map[dispatch.Step]string{
	dispatch.StepEnRoute: "assigned.refused_en_route",
	dispatch.StepArrived: "assigned.refused_arrived",
}

func (u *dispatchUI) step(step dispatch.Step) CallbackHandler {
	return func(r *Request, cb Callback) error {
		o, err := u.d.Step(r.Ctx, cb.IDs[0], r.User.ID, step)
		if err != nil {
			again := stepRefusals[step]
			if step == dispatch.StepEnRoute && !o.ArrivedAt.IsZero() {
				again = stepRefusals[dispatch.StepArrived]
			}
			return u.staleStep(r, o, err, again)
		}
		return r.Toast(r.T(stepToasts[step]))
	}
}

// confirm is Done's or Can't do it's press: the order is left as it is and
// the message keeps its text; its buttons become [Yes …] [Back]. Refused,
// like the steps, to anyone but the order's assigned master, and when the
// order is no longer theirs.
func (u *dispatchUI) confirm(c confirmation) CallbackHandler {
	return func(r *Request, cb Callback) error {
		return u.editAssigned(r, cb.IDs[0], r.T("assigned.confirm_toast"), func(offerID int64, _ dispatch.Order) (*tele.ReplyMarkup, error) {
			return confirmMarkup(u.b.cat, r.Lang, offerID, c)
		})
	}
}

// back is Back on a confirmation: the step buttons for the order as it is
// (steps done are not shown again), the text left as it is.
func (u *dispatchUI) back(r *Request, cb Callback) error {
	return u.editAssigned(r, cb.IDs[0], "", func(offerID int64, o dispatch.Order) (*tele.ReplyMarkup, error) {
		return assignedMarkup(u.b.cat, r.Lang, offerID, o)
	})
}

// editAssigned gives the pressed message of the assigned master's offer the
// buttons markup builds for the order as it is, the text left as it is, and
// answers the press with toast (none when empty). Refused, like the steps,
// to anyone but the order's assigned master, and when the order is no
// longer theirs.
func (u *dispatchUI) editAssigned(r *Request, offerID int64, toast string,
	markup func(offerID int64, o dispatch.Order) (*tele.ReplyMarkup, error)) error {
	o, err := u.d.Assigned(r.Ctx, offerID, r.User.ID)
	if err != nil {
		return u.staleStep(r, o, err, "")
	}
	kb, err := markup(offerID, o)
	if err != nil {
		return err
	}
	u.b.editMarkupPressed(r, kb)
	return r.Toast(toast)
}

// confirmMarkup is [[Yes …, Back]].
func confirmMarkup(cat *locales.Catalog, lang string, offerID int64, c confirmation) (*tele.ReplyMarkup, error) {
	pair, err := buttonPair(c.style, cat.T(lang, c.button), c.yes, cat.T(lang, "assigned.button_back"), actionAssignedBack, offerID)
	if err != nil {
		return nil, err
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{pair}}, nil
}

func (u *dispatchUI) finish(r *Request, cb Callback) error {
	o, err := u.d.Finish(r.Ctx, cb.IDs[0], r.User.ID)
	if err != nil {
		return u.staleStep(r, o, err, "")
	}
	return r.Toast(r.T("assigned.done_toast"))
}

func (u *dispatchUI) giveBack(r *Request, cb Callback) error {
	o, err := u.d.GiveBack(r.Ctx, cb.IDs[0], r.User.ID)
	if err != nil {
		return u.staleStep(r, o, err, "")
	}
	return r.Toast(r.T("assigned.returned_toast"))
}

// staleStep answers an assigned master's press that changed nothing,
// truthfully: the order is done, cancelled or no longer theirs, or the step
// (again) was done already.
func (u *dispatchUI) staleStep(r *Request, o dispatch.Order, err error, again string) error {
	switch {
	case errors.Is(err, dispatch.ErrForbidden):
		return r.Forbidden()
	case errors.Is(err, domain.ErrNotFound):
		return r.Alert("error.callback_invalid")
	case !errors.Is(err, dispatch.ErrOrderState):
		return err
	}
	data := locales.Data{"Order": o.ID}
	switch {
	case o.State == dispatch.Done || o.State == dispatch.Closed:
		return r.Alert("assigned.refused_done", data)
	case o.State == dispatch.Cancelled:
		return r.Alert("assigned.refused_cancelled", data)
	case o.State != dispatch.Assigned || o.MasterID != r.User.ID:
		return r.Alert("assigned.refused_returned", data)
	case again != "":
		return r.Alert(again, data)
	}
	return r.Alert("error.callback_invalid")
}

// photo takes a master's private photo: the photo of the work of the order
// they finished within dispatch.PhotoWindow goes to the admins. Anyone
// else's photo is left alone, as before.
func (u *dispatchUI) photo(c tele.Context) error {
	r := requestOf(c)
	if r == nil {
		return nil
	}
	msg := r.Message()
	if !msg.Private() || msg.Photo == nil {
		return nil
	}
	if u.b.cfg.AdminChatID == 0 {
		if _, _, err := u.d.Master(r.Ctx, r.User.ID); err != nil {
			return u.b.unread(r) // not a master: no workflow reads it
		}
		return r.Reply(r.T("photo.no_admin_chat"), nil)
	}
	o, err := u.d.Photo(r.Ctx, r.User.ID, msg.ID, msg.Photo.FileID, msg.Caption)
	switch {
	case errors.Is(err, dispatch.ErrNotMaster):
		return u.b.unread(r)
	case errors.Is(err, dispatch.ErrNoDoneOrder):
		return r.Reply(r.T("photo.no_order", locales.Data{"Window": u.b.duration(r.Lang, dispatch.PhotoWindow)}), nil)
	case errors.Is(err, dispatch.ErrPhotoLimit):
		return r.Reply(r.T("photo.limit", locales.Data{"Order": o.ID, "Max": dispatch.MaxPhotos}), nil)
	case err != nil:
		return err
	}
	return r.Reply(r.T("photo.forwarded", locales.Data{"Order": o.ID}), nil)
}

// renderAssigned is the assigned master's message about their order as it
// is: while ASSIGNED the address, the customer's contact, the visit, the
// whole order, the commission terms, the next step and the step buttons;
// once DONE, CANCELLED or given back, a line without address or contact.
func (rd *Renderer) renderAssigned(lang string, zone *time.Location, a dispatch.Assignment) (string, *tele.ReplyMarkup, error) {
	cat := rd.cat
	o := a.Order
	where := locales.Data{
		"Order":    o.ID,
		"Skill":    locales.HTML(clip(oneLine(o.Skill), skillBudget)),
		"City":     locales.HTML(clip(oneLine(o.City), assignedPlaceBudget)),
		"District": locales.HTML(clip(oneLine(o.District), assignedPlaceBudget)),
	}
	mine := o.MasterID == a.Offer.MasterID && a.Offer.MasterID != 0
	switch {
	case (o.State == dispatch.Done || o.State == dispatch.Closed) && mine:
		lines := []string{cat.T(lang, "assigned.done", where)}
		if o.Commission > 0 {
			lines = append(lines, cat.T(lang, "assigned.done_commission", locales.Data{"Amount": rd.money(lang, o.Commission), "Due": rd.timeTag(lang, o.CommissionDueAt, zone)}))
		}
		lines = append(lines, cat.T(lang, "assigned.photo_hint", locales.Data{"Window": rd.duration(lang, a.PhotoWindow)}))
		return strings.Join(lines, "\n"), nil, nil
	case o.State == dispatch.Cancelled && mine:
		return cat.T(lang, "assigned.cancelled", where), nil, nil
	case o.State != dispatch.Assigned || !mine:
		return cat.T(lang, "assigned.returned", where), nil, nil
	}

	lines := []string{cat.T(lang, "offer.accepted", locales.Data{"Order": o.ID})}
	body := rd.orderText(lang, o, clip(strings.TrimSpace(o.Description), assignedDescBudget), assignedPlaceBudget)
	// The address right under the coarse place, then who to ask for.
	place, rest, _ := strings.Cut(body, "\n")
	lines = append(lines, place)
	lines = append(lines, rd.contactLines(lang, o.Contact)...)
	lines = append(lines, rest)
	if o.Contact.Empty() {
		lines = append(lines, "", cat.T(lang, "assigned.no_contact"))
	}
	if a.CommissionRate > 0 {
		lines = append(lines, "", cat.T(lang, "offer.commission_terms", locales.Data{
			"Rate": strconv.FormatFloat(a.CommissionRate, 'f', -1, 64), "Deadline": rd.duration(lang, a.CommissionDeadline),
		}))
	}
	next := "assigned.next"
	switch {
	case !o.ArrivedAt.IsZero():
		next = "assigned.arrived"
	case !o.EnRouteAt.IsZero():
		next = "assigned.en_route"
	}
	lines = append(lines, "", cat.T(lang, next))
	if o.CustomerID != 0 {
		lines = append(lines, cat.T(lang, "assigned.relay_hint"))
		if !o.EnRouteAt.IsZero() && o.ArrivedAt.IsZero() {
			lines = append(lines, cat.T(lang, "assigned.where_hint"))
		}
	}
	kb, err := assignedMarkup(cat, lang, a.Offer.ID, o)
	if err != nil {
		return "", nil, err
	}
	return strings.Join(lines, "\n"), kb, nil
}

// assignedMarkup is [[Copy address, Copy phone], [On my way, Arrived],
// [Done, Can't do it]], without the steps already done and the contact not
// given.
func assignedMarkup(cat *locales.Catalog, lang string, offerID int64, o dispatch.Order) (*tele.ReplyMarkup, error) {
	button := func(a Action, key string) (tele.InlineButton, error) {
		data, err := Encode(a, offerID)
		return tele.InlineButton{Text: cat.T(lang, key), Data: data}, err
	}
	var steps, etas []tele.InlineButton
	if o.EnRouteAt.IsZero() && o.ArrivedAt.IsZero() {
		// On my way, with when they expect to be there: the customer is
		// told it.
		for _, eta := range dispatch.ETAs {
			data, err := Encode(actionEnRouteETA, offerID, int64(eta/time.Minute))
			if err != nil {
				return nil, err
			}
			etas = append(etas, tele.InlineButton{Text: cat.T(lang, "assigned.button_en_route_in", locales.Data{
				"In": etaText(cat, lang, eta)}), Data: data})
		}
	}
	if o.ArrivedAt.IsZero() {
		btn, err := button(actionArrived, "assigned.button_arrived")
		if err != nil {
			return nil, err
		}
		steps = append(steps, btn)
	}
	done, err := button(actionFinish, "assigned.button_done")
	if err != nil {
		return nil, err
	}
	giveBack, err := button(actionGiveBack, "assigned.button_return")
	if err != nil {
		return nil, err
	}
	kb := &tele.ReplyMarkup{}
	// The address and the phone, to paste into a map or dial, as the
	// master's message shows them.
	var copies []tele.InlineButton
	if b, ok := copyButton(cat.T(lang, "assigned.button_copy_address"), o.Contact.Address); ok {
		copies = append(copies, b)
	}
	if b, ok := copyButton(cat.T(lang, "assigned.button_copy_phone"), o.Contact.Phone); ok {
		copies = append(copies, b)
	}
	if len(copies) > 0 {
		kb.InlineKeyboard = append(kb.InlineKeyboard, copies)
	}
	if len(etas) > 0 {
		kb.InlineKeyboard = append(kb.InlineKeyboard, etas)
	}
	if len(steps) > 0 {
		kb.InlineKeyboard = append(kb.InlineKeyboard, steps)
	}
	kb.InlineKeyboard = append(kb.InlineKeyboard, []tele.InlineButton{done, giveBack})
	return kb, nil
}

// etaText is an ETA on a button: "15 min", "1 h".
func etaText(cat *locales.Catalog, lang string, eta time.Duration) string {
	if eta%time.Hour == 0 {
		return cat.T(lang, "time.h", locales.Data{"H": int64(eta / time.Hour)})
	}
	return cat.T(lang, "time.m", locales.Data{"M": int64(eta / time.Minute)})
}

// contactLines are the customer's address, name and phone, those given.
// The phone is plain text: Telegram makes it a link to call.
func (rd *Renderer) contactLines(lang string, c dispatch.Contact) []string {
	cat := rd.cat
	var out []string
	if c.Address != "" {
		out = append(out, cat.T(lang, "order.address", locales.Data{"Address": locales.HTML(clip(oneLine(c.Address), addressBudget))}))
	}
	if c.Name != "" {
		out = append(out, cat.T(lang, "order.customer", locales.Data{"Name": locales.HTML(clip(oneLine(c.Name), contactBudget))}))
	}
	if c.Phone != "" {
		out = append(out, cat.T(lang, "order.phone", locales.Data{"Phone": locales.HTML(clip(oneLine(c.Phone), contactBudget))}))
	}
	return out
}

// visitText is the visit's line, "" if none: the day and time window as
// the admin wrote them, local to the order's city. Each part carries its
// moment (a date_time entity), so a reader whose client knows them sees
// the window in their own clock even when they are not in the city.
func (rd *Renderer) visitText(lang string, v dispatch.Visit, city string) string {
	if !v.Given() {
		return ""
	}
	cat := rd.cat
	zone := rd.rc.Calendar.Zone(city)
	y, m, d := v.Date.Date()
	// Written as every other date the bot writes ("27 Nov"), with the
	// year only when it is not this one.
	day := rd.dateTag(lang, time.Date(y, m, d, 0, 0, 0, 0, zone))
	if !v.Window() {
		return cat.T(lang, "order.visit_day", locales.Data{"Date": day})
	}
	return cat.T(lang, "order.visit", locales.Data{"Date": day,
		"From": locales.Stamp(hhmm(v.From), dispatch.OnClock(y, m, d, v.From, zone), "t"),
		"To":   locales.Stamp(hhmm(v.To), dispatch.OnClock(y, m, d, v.To, zone), "t")})
}

// hhmm is a time of day, "09:30".
func hhmm(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// shortArg is a piece of refused input quoted back, on one line and at
// most 40 characters: enough to recognise, never the whole paste.
func shortArg(s string) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	return string([]rune(s)[:39]) + "…"
}

// assignedKey names the assigned master's message: their offer's.
func assignedKey(offerID int64) string { return offerKey(offerID) }

// Assigned edits the assigned master's message to show their order as it
// is. A press of theirs posts it anew if the outbox no longer knows the
// message; anything else does not (a note tells them, where it matters).
func (d dispatchNotes) Assigned(a dispatch.Assignment) []domain.Message {
	b := d.b
	text, kb, err := b.renderAssigned(a.Master.Lang, b.masterZone(a.Master), a)
	if err != nil {
		b.log.Error("render assigned order", "order", a.Order.ID, "offer", a.Offer.ID, "err", err)
		return nil
	}
	ifGone := domain.IfGoneDrop
	if a.Pressed {
		ifGone = domain.IfGoneSend
	}
	return []domain.Message{EditOf(a.Master.UserID, domain.KindAssigned, a.Offer.ID, assignedKey(a.Offer.ID), text, kb, ifGone)}
}

// Photo is a master's photo of the finished work in the admin chat, with
// the order and who sent it; none without an admin chat.
func (d dispatchNotes) Photo(m dispatch.Master, o dispatch.Order, fileID, caption string) []domain.Message {
	b := d.b
	if b.rc.AdminChatID == 0 {
		return nil
	}
	text := b.cat.T(b.rc.AdminLang, "photo.caption", locales.Data{
		"Order": o.ID, "Master": locales.HTML(masterRef(&m, o.MasterID, nameBudget)),
	})
	if c := strings.TrimSpace(caption); c != "" {
		text += "\n" + clip(c, photoCaptionBudget)
	}
	return []domain.Message{{ChatID: b.rc.AdminChatID, Kind: domain.KindPhoto, Ref: o.ID, Text: text, Photo: fileID}}
}
