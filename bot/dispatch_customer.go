package bot

import (
	"errors"
	"strconv"
	"strings"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// An order's customer: the person the work is for opens the order's link
// (t.me/<bot>?start=o_<token>, which the admins forward) and follows the
// order in their private chat with the bot — one status message edited as
// the order moves, a short note where a change needs them (a master found,
// on the way, arrived, done), and a Cancel button until the master is on
// the way. Admins see the link under /order's confirmation and in /orders,
// with Reissue to revoke it.

var (
	actionCustomerCancel    = NewAction("kc", 1)  // order id: asks
	actionCustomerCancelYes = NewAction("ky", 1)  // order id: cancels
	actionCustomerKeep      = NewAction("kk", 1)  // order id: the status buttons again
	actionReissueLink       = NewAction("ol", 1)  // order id: admins only
	actionEnRouteETA        = NewAction("aet", 2) // offer id, minutes to arrival
	actionCustomerRate      = NewAction("kr", 2)  // order id, stars
)

// registerCustomer adds the customer's buttons, the admins' Reissue and
// the master's On my way with an ETA, and makes /start o_<token> open an
// order.
func (u *dispatchUI) registerCustomer() {
	b := u.b
	b.joinOrder = u.join
	b.orderRelay = u.relay
	b.location = u.shareLocation
	b.Handle(Command{Name: "thread", Desc: "cmd.thread", Section: SectionAdminOrders, Role: RoleAdmin, Handle: u.thread})
	b.HandleButton(actionCustomerCancel, u.customerAsk)
	b.HandleButton(actionCustomerCancelYes, u.customerCancel)
	b.HandleButton(actionCustomerKeep, u.customerKeep)
	b.HandleButtonIn(actionReissueLink, InPrivate|InAdminChat, u.reissue)
	b.HandleButton(actionEnRouteETA, u.enRouteETA)
	b.HandleButton(actionCustomerRate, u.rate)
}

// orderLink is the order's link for its customer ("" without a bot
// username or a token).
func (b *Bot) orderLink(o dispatch.Order) string {
	if o.CustomerToken == "" || b.tb.Me == nil || b.tb.Me.Username == "" {
		return ""
	}
	return deepLink(b.tb.Me.Username, dispatch.LinkPayload(o.CustomerToken))
}

// join is /start o_<token>: the user becomes the order's customer (or is
// its customer already) and gets its status; a link replaced or taken is
// answered so. The message is the join's key: its update run again tells
// nothing twice.
func (u *dispatchUI) join(r *Request, token string) error {
	_, err := u.d.JoinOrder(r.Ctx, r.User.ID, token, r.Message().ID)
	switch {
	case errors.Is(err, dispatch.ErrLinkInvalid):
		return r.Reply(r.T("customer.link_invalid"), nil)
	case errors.Is(err, dispatch.ErrLinkTaken):
		return r.Reply(r.T("customer.link_taken"), nil)
	}
	// The status message goes through the outbox with the change.
	return err
}

// customerOrder authorizes a customer's press: their order, or the
// answer that it is not (a forged or stale press).
func (u *dispatchUI) customerOrder(r *Request, orderID int64) (dispatch.Order, bool, error) {
	o, err := u.d.CustomerOrder(r.Ctx, orderID, r.User.ID)
	switch {
	case errors.Is(err, dispatch.ErrNotCustomer):
		return o, false, r.Forbidden()
	case errors.Is(err, domain.ErrNotFound):
		return o, false, r.Alert("error.callback_invalid")
	case err != nil:
		return o, false, err
	}
	return o, true, nil
}

// customerAsk is Cancel on the status message: it asks to confirm.
func (u *dispatchUI) customerAsk(r *Request, cb Callback) error {
	o, ok, err := u.customerOrder(r, cb.IDs[0])
	if !ok {
		return err
	}
	if !o.Cancellable() {
		u.b.editMarkupPressed(r, nil)
		return r.Alert("customer.too_late")
	}
	pair, err := buttonPair(confirmLoss, r.T("customer.button_cancel_yes"), actionCustomerCancelYes,
		r.T("customer.button_keep"), actionCustomerKeep, o.ID)
	if err != nil {
		return err
	}
	u.b.editMarkupPressed(r, &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{pair}})
	return r.Toast("")
}

// customerKeep is Keep it: the status buttons again.
func (u *dispatchUI) customerKeep(r *Request, cb Callback) error {
	o, ok, err := u.customerOrder(r, cb.IDs[0])
	if !ok {
		return err
	}
	kb, err := customerMarkup(u.b.cat, r.Lang, o)
	if err != nil {
		return err
	}
	u.b.editMarkupPressed(r, kb)
	return r.Toast("")
}

// customerCancel is Yes, cancel it: the order is cancelled (its status
// message edited with the change) unless the master is on the way.
func (u *dispatchUI) customerCancel(r *Request, cb Callback) error {
	if _, ok, err := u.customerOrder(r, cb.IDs[0]); !ok {
		return err
	}
	_, err := u.d.CustomerCancel(r.Ctx, cb.IDs[0], r.User.ID)
	switch {
	case errors.Is(err, dispatch.ErrOrderState):
		u.b.editMarkupPressed(r, nil)
		return r.Alert("customer.too_late")
	case err != nil:
		return err
	}
	return r.Toast(r.T("customer.cancelled_toast"))
}

// rate is a star under the done note: the customer's rating of the work,
// once.
func (u *dispatchUI) rate(r *Request, cb Callback) error {
	o, ok, err := u.customerOrder(r, cb.IDs[0])
	if !ok {
		return err
	}
	_, err = u.d.Rate(r.Ctx, o.ID, r.User.ID, int(cb.IDs[1]), "")
	switch {
	case errors.Is(err, dispatch.ErrNotCustomer):
		// Unlinked between the look above and the rating.
		return r.Forbidden()
	case errors.Is(err, domain.ErrNotFound):
		return r.Alert("error.callback_invalid")
	case errors.Is(err, dispatch.ErrRated):
		u.b.editMarkupPressed(r, nil)
		return r.Alert("customer.rated_already")
	case errors.Is(err, dispatch.ErrOrderState):
		return r.Alert("error.callback_invalid")
	case err != nil:
		var ie *domain.InputError
		if errors.As(err, &ie) {
			return r.Alert("error.callback_invalid")
		}
		return err
	}
	return r.Toast(r.T("customer.rated_toast"))
}

// rateMarkup is the done note's stars, 1 to 5.
func rateMarkup(orderID int64) (*tele.ReplyMarkup, error) {
	var row []tele.InlineButton
	for n := int64(dispatch.MinStars); n <= dispatch.MaxStars; n++ {
		data, err := Encode(actionCustomerRate, orderID, n)
		if err != nil {
			return nil, err
		}
		row = append(row, tele.InlineButton{Text: strconv.FormatInt(n, 10) + " ★", Data: data})
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{row}}, nil
}

// reissue is the admins' Reissue: a new link, the old one dead, its
// customer (if any) told.
func (u *dispatchUI) reissue(r *Request, cb Callback) error {
	if !r.Admin {
		return r.Forbidden()
	}
	o, err := u.d.ReissueLink(r.Ctx, cb.IDs[0], r.Callback().ID)
	if errors.Is(err, domain.ErrNotFound) {
		return r.Alert("error.callback_invalid")
	}
	if err != nil {
		return err
	}
	if err := r.Reply(r.T("order.reissued", locales.Data{"Order": o.ID, "Link": u.b.orderLink(o)}), reissueMarkup(r, o.ID)); err != nil {
		return err
	}
	return r.Toast(r.T("order.reissued_toast"))
}

// reissueMarkup is the Reissue button under an order's link.
func reissueMarkup(r *Request, orderID int64) *tele.ReplyMarkup {
	data, err := Encode(actionReissueLink, orderID)
	if err != nil {
		return nil // unreachable: one id always fits
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{{Text: r.T("order.button_reissue"), Data: data}}}}
}

// enRouteETA is On my way with the master's ETA.
func (u *dispatchUI) enRouteETA(r *Request, cb Callback) error {
	eta := time.Duration(cb.IDs[1]) * time.Minute
	if !dispatch.ValidETA(eta) {
		return r.Alert("error.callback_invalid")
	}
	o, err := u.d.StepWithETA(r.Ctx, cb.IDs[0], r.User.ID, dispatch.StepEnRoute, eta)
	if err != nil {
		again := stepRefusals[dispatch.StepEnRoute]
		if !o.ArrivedAt.IsZero() {
			again = stepRefusals[dispatch.StepArrived]
		}
		return u.staleStep(r, o, err, again)
	}
	return r.Toast(r.T(stepToasts[dispatch.StepEnRoute]))
}

// customerKey names the customer's status message of an order: per
// customer, so a reissued link's next customer gets their own.
func customerKey(orderID, userID int64) string {
	return MessageKey("customer", orderID) + ":" + strconv.FormatInt(userID, 10)
}

// rateKey names the done note, whose rating buttons its rating edits.
func rateKey(orderID, userID int64) string {
	return MessageKey("customer_done", orderID) + ":" + strconv.FormatInt(userID, 10)
}

// customerMarkup is the status message's buttons: Cancel while the order
// may still be cancelled.
func customerMarkup(cat *locales.Catalog, lang string, o dispatch.Order) (*tele.ReplyMarkup, error) {
	if !o.Cancellable() || o.CustomerID == 0 {
		return nil, nil
	}
	data, err := Encode(actionCustomerCancel, o.ID)
	if err != nil {
		return nil, err
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{{Text: cat.T(lang, "customer.button_cancel"), Data: data}}}}, nil
}

// Customer tells an order's customer of a change: their status message
// (sent when they open the link, edited after), and a note where the
// change needs them.
func (d dispatchNotes) Customer(u dispatch.CustomerUpdate) []domain.Message {
	b := d.b
	cu, o := u.Customer, u.Order
	lang := cu.Lang
	zone, _ := b.readerZone(cu.Zone, o.City, lang)
	data := locales.Data{
		"Order":  o.ID,
		"Master": locales.HTML(clip(oneLine(u.MasterName), nameBudget)),
	}
	switch {
	case u.Note == dispatch.CustomerPhoto:
		return []domain.Message{{ChatID: cu.UserID, Kind: domain.KindCustomer, Ref: o.ID,
			Text: b.cat.T(lang, "customer.photo", data), Photo: u.Photo}}
	case u.Note == dispatch.CustomerWhere && u.Where != nil:
		return b.whereabouts(cu, o, *u.Where, data)
	case u.Note == dispatch.CustomerCommented:
		// The status says nothing of the comment: only the done note
		// changes.
		return []domain.Message{b.ratedNote(lang, u, data)}
	}
	status := b.renderCustomerStatus(lang, zone, u)
	var kb *tele.ReplyMarkup
	if u.Note != dispatch.CustomerRevoked {
		var err error
		if kb, err = customerMarkup(b.cat, lang, o); err != nil {
			b.log.Error("render customer status", "order", o.ID, "err", err)
			return nil
		}
	}
	key := customerKey(o.ID, cu.UserID)
	var out []domain.Message
	if u.Note == dispatch.CustomerJoined {
		out = append(out, Keyed(cu.UserID, domain.KindCustomer, o.ID, key, status, kb))
	} else {
		out = append(out, EditOf(cu.UserID, domain.KindCustomer, o.ID, key, status, kb, domain.IfGoneDrop))
	}
	noteKey := map[dispatch.CustomerNote]string{
		dispatch.CustomerAssigned:  "customer.note_assigned",
		dispatch.CustomerEnRoute:   "customer.note_en_route",
		dispatch.CustomerArrived:   "customer.note_arrived",
		dispatch.CustomerDone:      "customer.note_done",
		dispatch.CustomerCancelled: "customer.note_cancelled",
		dispatch.CustomerReturned:  "customer.note_returned",
		dispatch.CustomerRevoked:   "customer.note_revoked",
		dispatch.CustomerLate:      "customer.note_late",
	}[u.Note]
	if u.Note == dispatch.CustomerEnRoute && !o.ETA.IsZero() {
		noteKey = "customer.note_en_route_eta"
		data["ETA"] = etaClock(o.ETA, zone)
		data["Minutes"] = int(o.ETA.Sub(o.EnRouteAt).Round(time.Minute) / time.Minute)
	}
	switch {
	case u.Note == dispatch.CustomerDone:
		// The done note asks for the rating: its stars, which the rating
		// edits away.
		kb, err := rateMarkup(o.ID)
		if err != nil {
			b.log.Error("render the rating's stars", "order", o.ID, "err", err)
			return out
		}
		out = append(out, Keyed(cu.UserID, domain.KindCustomer, o.ID, rateKey(o.ID, cu.UserID),
			b.cat.T(lang, "customer.note_done", data)+"\n"+b.cat.T(lang, "customer.rate_ask"), kb))
	case u.Note == dispatch.CustomerRated:
		out = append(out, b.ratedNote(lang, u, data))
	case noteKey != "":
		out = append(out, Messages(cu.UserID, domain.KindCustomer, o.ID, b.cat.T(lang, noteKey, data), nil)...)
	}
	if u.EndsWhereabouts() {
		// The master's live location, if the customer was shown one,
		// stops where it is. Behind the positions in their lane; with
		// none ever delivered it is dropped without a call.
		out = append(out, domain.Message{ChatID: cu.UserID, Kind: domain.KindCustomer, Ref: o.ID,
			Key: whereKey(o.ID, cu.UserID), Edit: true, Lane: whereKey(o.ID, cu.UserID),
			Location: &domain.Location{Stop: true}})
	}
	return out
}

// whereKey names the customer's live location of their master on the
// way, and its lane.
func whereKey(orderID, userID int64) string {
	return MessageKey("customer_where", orderID) + ":" + strconv.FormatInt(userID, 10)
}

// whereEvery paces the live location's moves in the customer's chat: a
// client shares a position every few seconds, and the customer needs no
// more than one every few; the latest always goes.
const whereEvery = 3 * time.Second

// whereabouts is the master's location for the customer. A share starts
// with words and the map, in the chat's main lane so that they follow the
// notes before them (On my way); its moves edit that map in a lane of
// their own, paced, each waiting while the map's send is pending (posted
// anew if the map is gone), and a stop stops it there.
func (rd *Renderer) whereabouts(cu dispatch.Customer, o dispatch.Order, w dispatch.Where, data locales.Data) []domain.Message {
	loc := w.Location
	origin := w.Origin(o.ID, cu.UserID)
	key := whereKey(o.ID, cu.UserID)
	if w.Started {
		text, m := "customer.where_still", domain.Message{ChatID: cu.UserID, Kind: domain.KindCustomer, Ref: o.ID,
			Location: &loc, Origin: origin}
		if loc.Live > 0 {
			text, m.Key = "customer.where_live", key
		}
		return []domain.Message{{ChatID: cu.UserID, Kind: domain.KindCustomer, Ref: o.ID,
			Text: rd.cat.T(cu.Lang, text, data), Origin: origin + ":note"}, m}
	}
	m := domain.Message{ChatID: cu.UserID, Kind: domain.KindCustomer, Ref: o.ID, Key: key, Edit: true,
		Lane: key, Every: whereEvery, Location: &loc, Origin: origin}
	if !loc.Stop {
		m.IfGone = domain.IfGoneSend
	}
	return []domain.Message{m}
}

// ratedNote is the edit of the done note once its stars are given: the
// rating, and the comment, or the invitation to reply with one.
func (rd *Renderer) ratedNote(lang string, u dispatch.CustomerUpdate, data locales.Data) domain.Message {
	data["Stars"] = stars(u.Rating)
	text := rd.cat.T(lang, "customer.note_done", data) + "\n" + rd.cat.T(lang, "customer.rated", data) + "\n"
	if u.Comment == "" {
		text += rd.cat.T(lang, "customer.comment_ask")
	} else {
		text += rd.cat.T(lang, "customer.commented", locales.Data{"Comment": locales.HTML(clip(u.Comment, noteCommentBudget))})
	}
	return EditOf(u.Customer.UserID, domain.KindCustomer, u.Order.ID, rateKey(u.Order.ID, u.Customer.UserID), text, nil, domain.IfGoneDrop)
}

// renderCustomerStatus is the customer's status message: the order, the
// visit, and where it stands.
func (rd *Renderer) renderCustomerStatus(lang string, zone *time.Location, u dispatch.CustomerUpdate) string {
	cat, o := rd.cat, u.Order
	lines := []string{cat.T(lang, "customer.status_head", locales.Data{
		"Order":    o.ID,
		"Skill":    locales.HTML(clip(oneLine(o.Skill), skillBudget)),
		"City":     locales.HTML(clip(oneLine(o.City), placeBudget)),
		"District": locales.HTML(clip(oneLine(o.District), placeBudget)),
	})}
	if v := rd.visitText(lang, o.Visit, o.City); v != "" {
		lines = append(lines, v)
	}
	master := locales.HTML(clip(oneLine(u.MasterName), nameBudget))
	data := locales.Data{"Master": master, "Order": o.ID}
	var key string
	switch {
	case u.Note == dispatch.CustomerRevoked:
		key = "customer.status_revoked"
	case o.State == dispatch.Cancelled:
		key = "customer.status_cancelled"
	case o.State == dispatch.Done || o.State == dispatch.Closed:
		key = "customer.status_done"
		if u.Rating > 0 {
			key = "customer.status_done_rated"
			data["Stars"] = stars(u.Rating)
		}
	case o.State == dispatch.Assigned && !o.ArrivedAt.IsZero():
		key = "customer.status_arrived"
	case o.State == dispatch.Assigned && !o.EnRouteAt.IsZero() && !o.ETA.IsZero():
		key = "customer.status_en_route_eta"
		data["ETA"] = etaClock(o.ETA, zone)
	case o.State == dispatch.Assigned && !o.EnRouteAt.IsZero():
		key = "customer.status_en_route"
	case o.State == dispatch.Assigned:
		key = "customer.status_assigned"
	default:
		key = "customer.status_searching"
	}
	lines = append(lines, "", cat.T(lang, key, data))
	if o.Cancellable() && u.Note != dispatch.CustomerRevoked {
		lines = append(lines, cat.T(lang, "customer.cancel_hint"))
	}
	if o.State == dispatch.Assigned && u.Note != dispatch.CustomerRevoked {
		lines = append(lines, cat.T(lang, "customer.relay_hint", data))
	}
	return strings.Join(lines, "\n")
}

// stars is a rating as ★ and ☆.
func stars(n int) string {
	n = min(max(n, 0), 5)
	return strings.Repeat("★", n) + strings.Repeat("☆", 5-n)
}

// etaClock is a moment within the hour as a clock shows it, "14:05" in
// the reader's zone (a client that knows the entity shows its own).
func etaClock(t time.Time, zone *time.Location) locales.HTML {
	return locales.Stamp(t.In(zone).Format("15:04"), t, "t")
}

// relay is a private text that replies to one of the bot's messages about
// an order: passed to the other side (customer ↔ assigned master), or,
// once the order is done, the customer's comment on their rating. Not
// handled when the reply is to nothing about an order.
func (u *dispatchUI) relay(r *Request) (bool, error) {
	msg := r.Message()
	if msg.ReplyTo == nil || msg.ReplyTo.Sender == nil || !msg.ReplyTo.Sender.IsBot {
		return false, nil
	}
	_, outcome, err := u.d.Relay(r.Ctx, r.User.ID, msg.Chat.ID, msg.ReplyTo.ID, msg.ID, msg.Text)
	var ie *domain.InputError
	switch {
	case outcome == dispatch.RelayIgnored:
		return false, err
	case errors.Is(err, dispatch.ErrNotCustomer):
		return true, r.Reply(r.T("relay.not_yours"), nil)
	case errors.Is(err, dispatch.ErrRelayClosed):
		return true, r.Reply(r.T("relay.closed"), nil)
	case errors.Is(err, dispatch.ErrRelayTooLong):
		return true, r.Reply(r.T("relay.too_long", locales.Data{"Max": dispatch.MaxRelay}), nil)
	case errors.Is(err, dispatch.ErrNotRated):
		return true, r.Reply(r.T("customer.comment_unrated"), nil)
	case errors.Is(err, dispatch.ErrCommented):
		return true, r.Reply(r.T("customer.comment_already"), nil)
	case errors.As(err, &ie):
		return true, r.Reply(r.InputText(ie, ""), nil)
	case err != nil:
		return true, err
	case outcome == dispatch.RelayCommented:
		return true, r.Reply(r.T("customer.comment_saved"), nil)
	}
	return true, r.Reply(r.T("relay.sent"), nil)
}

// Relay is a text from an order's customer to its master or back: the
// sender by first name only, and how to answer.
func (d dispatchNotes) Relay(n dispatch.RelayNote) []domain.Message {
	key := "relay.to_customer"
	if n.ToMaster {
		key = "relay.to_master"
	}
	text := d.b.cat.T(n.Lang, key, locales.Data{
		"Order": n.Order.ID, "From": locales.HTML(clip(oneLine(n.From), nameBudget)), "Text": n.Text,
	})
	return Messages(n.To, domain.KindRelay, n.Order.ID, text, nil)
}

// thread is /thread <order>: what the customer and the master of an order
// sent each other, for the admins.
func (u *dispatchUI) thread(r *Request) error {
	id, err := strconv.ParseInt(strings.TrimPrefix(strings.TrimSpace(commandArgs(r.Message())), "#"), 10, 64)
	if err != nil || id <= 0 {
		return r.Reply(r.T("thread.usage"), nil)
	}
	o, rs, err := u.d.Thread(r.Ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return r.Reply(r.T("thread.no_order", locales.Data{"Order": id}), nil)
	}
	if err != nil {
		return err
	}
	if len(rs) == 0 {
		return r.Reply(r.T("thread.empty", locales.Data{"Order": o.ID}), nil)
	}
	var sb strings.Builder
	sb.WriteString(r.T("thread.header", locales.Data{"Order": o.ID, "Count": len(rs)}))
	for i, x := range rs {
		key := "thread.customer"
		if x.FromMaster {
			key = "thread.master"
		}
		line := "\n" + r.T(key, locales.Data{"At": r.Time(x.At), "Text": locales.HTML(clip(oneLine(x.Text), 300))})
		if utf16Len(sb.String())+utf16Len(line) > MaxMessageLen-100 {
			sb.WriteString("\n" + r.T("orders.more", locales.Data{"Count": len(rs) - i}))
			break
		}
		sb.WriteString(line)
	}
	return r.Reply(sb.String(), nil)
}
