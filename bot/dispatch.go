package bot

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// Dispatch is what the bot needs from the dispatch workflow
// (*dispatch.Service implements it).
type Dispatch interface {
	RegisterMaster(ctx context.Context, userID int64, args string) (dispatch.Master, bool, error)
	Master(ctx context.Context, userID int64) (dispatch.Master, dispatch.MasterStats, error)
	SetActive(ctx context.Context, userID int64, active bool) (bool, error)
	CreateOrder(ctx context.Context, adminID int64, src domain.MessageRef, args string) (dispatch.Order, error)
	Orders(ctx context.Context) (dispatch.OrderList, error)
	Roster
	Complete(ctx context.Context, id int64) (dispatch.Order, dispatch.Master, error)
	Cancel(ctx context.Context, id int64) (dispatch.Order, error)
	Paid(ctx context.Context, ref string, by domain.MessageRef) (dispatch.Master, dispatch.Debt, bool, error)
	Accept(ctx context.Context, offerID, masterID int64) (dispatch.Offer, dispatch.Order, error)
	Decline(ctx context.Context, offerID, masterID int64) (dispatch.Offer, dispatch.Order, error)
	View(ctx context.Context, offerID, masterID int64) (dispatch.Offer, dispatch.Order, error)
	Step(ctx context.Context, offerID, masterID int64, step dispatch.Step) (dispatch.Order, error)
	Assigned(ctx context.Context, offerID, masterID int64) (dispatch.Order, error)
	Finish(ctx context.Context, offerID, masterID int64) (dispatch.Order, error)
	GiveBack(ctx context.Context, offerID, masterID int64) (dispatch.Order, error)
	Photo(ctx context.Context, masterID int64, messageID int, fileID, caption string) (dispatch.Order, error)
	Config() dispatch.Config
	Opening(city string) (open bool, at time.Time, h dispatch.Hours)
	JoinOrder(ctx context.Context, userID int64, token string, messageID int) (dispatch.Order, error)
	ReissueLink(ctx context.Context, orderID int64, pressID string) (dispatch.Order, error)
	CustomerOrder(ctx context.Context, orderID, userID int64) (dispatch.Order, error)
	CustomerCancel(ctx context.Context, orderID, userID int64) (dispatch.Order, error)
	StepWithETA(ctx context.Context, offerID, masterID int64, step dispatch.Step, eta time.Duration) (dispatch.Order, error)
	Relay(ctx context.Context, senderID, chatID int64, replyTo, messageID int, text string) (dispatch.Order, dispatch.RelayOutcome, error)
	ShareLocation(ctx context.Context, masterID int64, w dispatch.Where) (dispatch.Order, error)
	Thread(ctx context.Context, id int64) (dispatch.Order, []dispatch.Relayed, error)
	Rate(ctx context.Context, orderID, customerID int64, stars int, comment string) (dispatch.Rating, error)
}

var (
	_ Dispatch          = (*dispatch.Service)(nil)
	_ dispatch.Notifier = dispatchNotes{}
)

// Button actions on an offer message; each carries the offer id. Who may
// press them is decided by the domain, against the presser's id.
var (
	actionOfferAccept  = NewAction("oa", 1)
	actionOfferDecline = NewAction("od", 1)
	actionOfferView    = NewAction("ov", 1)
)

// Budgets, in UTF-16 units of escaped HTML, for what admins, masters and
// customers wrote. With the fixed texts an offer stays one message (its
// buttons are edited in place), and /orders lists MaxListedOrders orders
// in one.
const (
	placeBudget     = 200
	skillBudget     = 100
	shortDescBudget = 300
	fullDescBudget  = 3000
	nameBudget      = 64
	// The assigned master's message also carries the address and the
	// customer's contact, so its description and places get less.
	assignedDescBudget  = 2200
	assignedPlaceBudget = 120
	addressBudget       = 400
	contactBudget       = 150
	// The admins' copy of a photo's caption (Telegram: 1024 characters).
	photoCaptionBudget = 600
	// Per order line of /orders.
	listPlaceBudget = 40
	listSkillBudget = 30
	listNameBudget  = 40
	// A customer's comment on their rating: one line of /orders and of the
	// live log; in their done note, room for all MaxRatingComment
	// characters unless escaping swells them, with the note well within a
	// message.
	listCommentBudget = 80
	logCommentBudget  = 300
	noteCommentBudget = 3000
)

type dispatchUI struct {
	b *Bot
	d Dispatch
}

// RegisterDispatch adds the masters' /master, /pause and /resume, the
// admins' /order, /orders, /done, /cancel, /paid and /masters, and the
// offer buttons; call it before Run (New does, for Deps.Dispatch).
func (b *Bot) RegisterDispatch(d Dispatch) {
	u := &dispatchUI{b: b, d: d}
	b.masters = dispatchMasters{d}
	b.Handle(Command{Name: "master", Desc: "cmd.master", Section: SectionMaster, Handle: u.master})
	b.Handle(Command{Name: "pause", Desc: "cmd.pause", Section: SectionMaster, Handle: u.setActive(false)})
	b.Handle(Command{Name: "resume", Desc: "cmd.resume", Section: SectionMaster, Handle: u.setActive(true)})
	b.Handle(Command{Name: "order", Desc: "cmd.order", Section: SectionAdminOrders, Role: RoleAdmin, Handle: u.order})
	b.Handle(Command{Name: "orders", Desc: "cmd.orders", Section: SectionAdminOrders, Role: RoleAdmin, Handle: u.orders})
	b.Handle(Command{Name: "done", Desc: "cmd.done", Section: SectionAdminOrders, Role: RoleAdmin, Handle: u.done})
	b.Handle(Command{Name: "cancel", Desc: "cmd.cancel", Section: SectionAdminOrders, Role: RoleAdmin, Handle: u.cancel})
	b.Handle(Command{Name: "paid", Desc: "cmd.paid", Section: SectionAdminOrders, Role: RoleAdmin, Handle: u.paid})
	u.registerRoster()
	b.HandleButton(actionOfferAccept, u.accept)
	b.HandleButton(actionOfferDecline, u.decline)
	b.HandleButton(actionOfferView, u.view)
	b.HandleButton(actionEnRoute, u.step(dispatch.StepEnRoute))
	b.HandleButton(actionArrived, u.step(dispatch.StepArrived))
	b.HandleButton(actionFinish, u.confirm(confirmFinish))
	b.HandleButton(actionGiveBack, u.confirm(confirmGiveBack))
	b.HandleButton(actionFinishYes, u.finish)
	b.HandleButton(actionGiveBackYes, u.giveBack)
	b.HandleButton(actionAssignedBack, u.back)
	b.tb.Handle(tele.OnPhoto, u.photo)
	u.registerCustomer()
}

// --- masters ---------------------------------------------------------------

func (u *dispatchUI) master(r *Request) error {
	args := commandArgs(r.Message())
	if args == "" {
		m, st, err := u.d.Master(r.Ctx, r.User.ID)
		if errors.Is(err, dispatch.ErrNotMaster) {
			return r.Reply(r.T("master.not_registered")+"\n\n"+r.T("master.usage"), nil)
		}
		if err != nil {
			return err
		}
		return r.Reply(u.b.renderMaster(r.Lang, m, st), nil)
	}
	m, created, err := u.d.RegisterMaster(r.Ctx, r.User.ID, args)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		// The one line that matters, without the usage that would bury it.
		return r.Reply(r.InputText(ie, shortArg(ie.Arg())), nil)
	}
	if err != nil {
		return err
	}
	head := r.T("master.updated")
	if created {
		head = r.T("master.registered")
	}
	m, st, err := u.d.Master(r.Ctx, m.UserID)
	if err != nil {
		return err
	}
	return r.Reply(head+"\n\n"+u.b.renderMaster(r.Lang, m, st), nil)
}

// renderMaster is /master: the profile, availability, commission and
// counts of offers and orders by state.
func (b *Bot) renderMaster(lang string, m dispatch.Master, st dispatch.MasterStats) string {
	cat := b.cat
	// The master's zone as it is now: a master who just registered
	// asked with no city yet.
	zone := b.masterZone(m)
	var skills []string
	for _, s := range m.Skills {
		skills = append(skills, clip(oneLine(s), skillBudget))
	}
	status := cat.T(lang, "master.paused")
	switch {
	case m.Active && !m.BlockedAt.IsZero():
		// Not paused, yet distribution passes over a blocked master:
		// "you receive offers" would be untrue.
		status = cat.T(lang, "master.active_blocked")
	case m.Active:
		status = cat.T(lang, "master.active")
	}
	lines := []string{cat.T(lang, "master.profile", locales.Data{
		"City":     locales.HTML(clip(oneLine(m.City), placeBudget)),
		"District": locales.HTML(clip(oneLine(m.District), placeBudget)),
		"Skills":   locales.HTML(strings.Join(skills, ", ")),
		"Status":   locales.HTML(status),
	})}
	if !m.BlockedAt.IsZero() {
		lines = append(lines, cat.T(lang, "master.blocked", locales.Data{
			"Since": b.timeTag(lang, m.BlockedAt, zone), "Overdue": b.money(lang, st.Overdue),
		}))
	}
	if st.Owed > 0 {
		key, due := "master.owed", locales.HTML("—")
		if !st.NextDue.IsZero() {
			due = b.timeTag(lang, st.NextDue, zone)
			if !st.NextDue.After(b.now()) {
				key = "master.owed_overdue"
			}
		}
		lines = append(lines, cat.T(lang, key, locales.Data{"Owed": b.money(lang, st.Owed), "Due": due}))
	} else {
		lines = append(lines, cat.T(lang, "master.owed_none"))
	}
	var offers, orders []string
	for _, s := range dispatch.OfferStates {
		if n := st.Offers[s]; n > 0 {
			offers = append(offers, cat.T(lang, "master.count", locales.Data{"State": offerStateKeys.name(cat, lang, s), "Count": n}))
		}
	}
	for _, s := range dispatch.OrderStates {
		if n := st.Orders[s]; n > 0 {
			orders = append(orders, cat.T(lang, "master.count", locales.Data{"State": orderStateKeys.name(cat, lang, s), "Count": n}))
		}
	}
	none := cat.T(lang, "master.none")
	lines = append(lines,
		cat.T(lang, "master.offers", locales.Data{"Counts": locales.HTML(joinOr(offers, none))}),
		cat.T(lang, "master.orders", locales.Data{"Counts": locales.HTML(joinOr(orders, none))}),
	)
	return strings.Join(lines, "\n")
}

func joinOr(parts []string, none string) string {
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, ", ")
}

// setActive is /pause (false) and /resume (true).
func (u *dispatchUI) setActive(active bool) func(r *Request) error {
	return func(r *Request) error {
		changed, err := u.d.SetActive(r.Ctx, r.User.ID, active)
		if errors.Is(err, dispatch.ErrNotMaster) {
			return r.Reply(r.T("master.not_registered")+"\n\n"+r.T("master.usage"), nil)
		}
		if err != nil {
			return err
		}
		if !active {
			if changed {
				return r.Reply(r.T("pause.done"), nil)
			}
			return r.Reply(r.T("pause.already"), nil)
		}
		// Resuming does not lift a commission block; say so rather than
		// promise offers that cannot come.
		m, _, err := u.d.Master(r.Ctx, r.User.ID)
		blocked := err == nil && !m.BlockedAt.IsZero()
		key := "resume.already"
		switch {
		case changed && blocked:
			key = "resume.done_blocked"
		case changed:
			key = "resume.done"
		case blocked:
			key = "resume.already_blocked"
		}
		return r.Reply(r.T(key), nil)
	}
}

// --- admins ----------------------------------------------------------------

// money writes a dispatch amount (whole units of DISPATCH_CURRENCY) as the
// reader writes money: digits grouped, the currency's sign if one is set.
func (rd *Renderer) money(lang string, amount int64) string {
	return locales.Money(lang, amount, rd.rc.Currency)
}

func (u *dispatchUI) order(r *Request) error {
	args := commandArgs(r.Message())
	if args == "" {
		return r.Reply(r.T("order.usage"), nil)
	}
	o, err := u.d.CreateOrder(r.Ctx, r.User.ID, domain.MessageRef{Chat: r.Chat().ID, ID: r.Message().ID}, args)
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return r.Reply(r.InputText(ie, shortArg(ie.Arg())), nil)
	}
	if err != nil {
		return err
	}
	// The admin sees what was read from their lines, contact included.
	var details []string
	if v := u.b.visitText(r.Lang, o.Visit, o.City); v != "" {
		details = append(details, v)
	}
	details = append(details, u.b.contactLines(r.Lang, o.Contact)...)
	if !o.Contact.Empty() {
		details = append(details, r.T("order.created_private"))
	}
	extra := ""
	if len(details) > 0 {
		extra = "\n" + strings.Join(details, "\n")
	}
	data := locales.Data{
		"Order":       o.ID,
		"City":        locales.HTML(clip(oneLine(o.City), placeBudget)),
		"District":    locales.HTML(clip(oneLine(o.District), placeBudget)),
		"Skill":       locales.HTML(clip(oneLine(o.Skill), skillBudget)),
		"Price":       u.b.money(r.Lang, o.Price),
		"Description": locales.HTML(clip(oneLine(o.Description), shortDescBudget)),
		"Details":     locales.HTML(extra),
	}
	key := "order.created"
	if open, at, h := u.d.Opening(o.City); !open {
		// "It is being offered" would not be true until the city opens.
		key = "order.created_after_hours"
		// The hours are the city's "local time", so they are kept as
		// written (format ""), each with its moment on the day it opens.
		zone := u.b.cfg.Calendar.Zone(o.City)
		y, m, d := at.In(zone).Date()
		closes := dispatch.OnClock(y, m, d, h.Close, zone)
		if !closes.After(at) { // a window that runs past midnight
			closes = closes.AddDate(0, 0, 1)
		}
		data["From"] = locales.Stamp(h.From(), at, "")
		data["To"] = locales.Stamp(h.To(), closes, "")
		data["Opens"] = u.b.cityTime(r.Lang, at, o.City)
	}
	text := r.T(key, data)
	var kb *tele.ReplyMarkup
	if link := u.b.orderLink(o); link != "" {
		// The customer's link, to forward: whoever opens it first follows
		// the order in their chat with the bot.
		text += "\n\n" + r.T("order.link", locales.Data{"Link": link})
		kb = reissueMarkup(r, o.ID)
	}
	return r.Reply(text, kb)
}

func (u *dispatchUI) orders(r *Request) error {
	lines, err := u.d.Orders(r.Ctx)
	if err != nil {
		return err
	}
	return r.Reply(u.b.renderOrders(r.Lang, lines, u.d.Opening), nil)
}

// renderOrders is /orders, always one message: the open orders (searching
// or assigned), then those done but not yet closed, each section under a
// heading with its true total, and under each the count of its orders
// not listed (past dispatch.MaxListedOrders, or not fitting). Room for
// every later heading and count is kept before an entry is written, so
// a long first section never hides that there is a second.
func (b *Bot) renderOrders(lang string, list dispatch.OrderList, opening func(city string) (bool, time.Time, dispatch.Hours)) string {
	cat := b.cat
	var open, done []dispatch.OrderLine
	for _, l := range list.Lines {
		if l.Order.State == dispatch.Done {
			done = append(done, l)
		} else {
			open = append(open, l)
		}
	}
	more := func(n int) string { return "\n\n" + cat.T(lang, "orders.more", locales.Data{"Count": n}) }
	var sb strings.Builder
	if list.Open == 0 {
		sb.WriteString(cat.T(lang, "orders.empty"))
	} else {
		sb.WriteString(cat.T(lang, "orders.header", locales.Data{"Count": list.Open}))
	}
	sections := []struct {
		head  string
		lines []dispatch.OrderLine
		total int
	}{
		{"", open, list.Open},
		{"\n\n" + cat.T(lang, "orders.done_header", locales.Data{"Count": list.Done}), done, list.Done},
	}
	// reserve is what section i must leave room for after its entries: its
	// own count of the rest (at most its total) and each later section's
	// heading and count.
	reserve := func(i int) int {
		n := 0
		for j := i; j < len(sections); j++ {
			if sections[j].total == 0 {
				continue
			}
			n += utf16Len(more(sections[j].total))
			if j > i {
				n += utf16Len(sections[j].head)
			}
		}
		return n
	}
	for i, sec := range sections {
		if sec.total == 0 {
			continue
		}
		sb.WriteString(sec.head)
		shown := 0
		for _, l := range sec.lines {
			entry := "\n\n" + b.orderEntry(lang, l, opening)
			if utf16Len(sb.String())+utf16Len(entry)+reserve(i) > MaxMessageLen {
				break
			}
			sb.WriteString(entry)
			shown++
		}
		if left := sec.total - shown; left > 0 {
			sb.WriteString(more(left))
		}
	}
	return sb.String()
}

// orderEntry is one order of /orders with its offer, master or wait.
func (b *Bot) orderEntry(lang string, l dispatch.OrderLine, opening func(city string) (bool, time.Time, dispatch.Hours)) string {
	cat := b.cat
	o := l.Order
	entry := cat.T(lang, "orders.line", locales.Data{
		"Order":    o.ID,
		"State":    orderStateKeys.name(cat, lang, o.State),
		"Price":    b.money(lang, o.Price),
		"City":     locales.HTML(clip(oneLine(o.City), listPlaceBudget)),
		"District": locales.HTML(clip(oneLine(o.District), listPlaceBudget)),
		"Skill":    locales.HTML(clip(oneLine(o.Skill), listSkillBudget)),
	})
	var who locales.HTML
	if l.Master != nil {
		who = locales.HTML(masterRef(l.Master, l.Master.UserID, listNameBudget))
	}
	switch {
	case l.Offer != nil:
		if who == "" {
			who = locales.HTML(masterRef(nil, l.Offer.MasterID, listNameBudget))
		}
		entry += "\n" + cat.T(lang, "orders.offer", locales.Data{
			"Master": who,
			"State":  offerStateKeys.name(cat, lang, l.Offer.State),
			"Left":   b.duration(lang, l.Offer.ExpiresAt.Sub(b.now())),
		})
	case o.MasterID != 0:
		if who == "" {
			who = locales.HTML(masterRef(nil, o.MasterID, listNameBudget))
		}
		entry += "\n" + cat.T(lang, "orders.master", locales.Data{"Master": who})
	case o.State == dispatch.Searching && !o.Unassignable.IsZero():
		entry += "\n" + cat.T(lang, "orders.unassignable", locales.Data{"Round": o.Round})
	case o.State == dispatch.Searching:
		if open, at, _ := opening(o.City); !open {
			entry += "\n" + cat.T(lang, "orders.after_hours", locales.Data{"Opens": b.cityTime(lang, at, o.City)})
			break
		}
		entry += "\n" + cat.T(lang, "orders.waiting", locales.Data{"Round": o.Round})
	}
	if l.Rating != nil {
		entry += "\n" + cat.T(lang, "orders.rating", locales.Data{"Stars": stars(l.Rating.Stars)})
		if l.Rating.Comment != "" {
			entry += "\n" + cat.T(lang, "orders.comment", locales.Data{"Comment": locales.HTML(clip(oneLine(l.Rating.Comment), listCommentBudget))})
		}
	}
	if link := b.orderLink(o); link != "" && o.State != dispatch.Done {
		key := "orders.link"
		if o.CustomerID != 0 {
			key = "orders.link_opened"
		}
		entry += "\n" + cat.T(lang, key, locales.Data{"Link": link})
	}
	return entry
}

// orderID reads the ID of /done and /cancel ("12" or "#12"); when there
// is none it returns the refusal to send: the usage without an argument,
// else what was wrong with it.
func orderID(r *Request, command, usage string) (int64, string) {
	arg := strings.TrimSpace(commandArgs(r.Message()))
	if arg == "" {
		return 0, r.T(usage)
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(arg, "#"), 10, 64)
	if err != nil || id <= 0 {
		return 0, r.T("order.error_id", locales.Data{"Arg": shortArg(arg), "Command": command})
	}
	return id, ""
}

func (u *dispatchUI) done(r *Request) error {
	var m dispatch.Master
	return u.orderCommand(r, "done", "done.usage", "done.error_state", func(id int64) (o dispatch.Order, err error) {
		o, m, err = u.d.Complete(r.Ctx, id)
		return o, err
	}, func(o dispatch.Order) error {
		if o.Commission == 0 {
			return r.Reply(r.T("done.ok_free", locales.Data{"Order": o.ID}), nil)
		}
		return r.Reply(r.T("done.ok", locales.Data{
			"Order": o.ID, "Amount": u.b.money(r.Lang, o.Commission), "Due": r.Time(o.CommissionDueAt),
			"Master": locales.HTML(masterRef(&m, o.MasterID, nameBudget)),
		}), nil)
	})
}

func (u *dispatchUI) cancel(r *Request) error {
	return u.orderCommand(r, "cancel", "cancel.usage", "cancel.error_state", func(id int64) (dispatch.Order, error) {
		return u.d.Cancel(r.Ctx, id)
	}, func(o dispatch.Order) error {
		if o.MasterID != 0 {
			return r.Reply(r.T("cancel.ok_assigned", locales.Data{"Order": o.ID}), nil)
		}
		return r.Reply(r.T("cancel.ok", locales.Data{"Order": o.ID}), nil)
	})
}

// orderCommand is /done or /cancel: change makes the command's change to
// the order its argument names and ok answers it. The refusals are
// replied here: the argument missing (usage) or wrong, the order unknown,
// or in a state the command does not apply to (stateKey).
func (u *dispatchUI) orderCommand(r *Request, command, usage, stateKey string,
	change func(id int64) (dispatch.Order, error), ok func(dispatch.Order) error) error {
	id, rejection := orderID(r, command, usage)
	if rejection != "" {
		return r.Reply(rejection, nil)
	}
	o, err := change(id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return r.Reply(r.T("order.not_found", locales.Data{"Order": id}), nil)
	case errors.Is(err, dispatch.ErrOrderState):
		return r.Reply(r.T(stateKey, locales.Data{
			"Order": id, "State": orderStateKeys.name(u.b.cat, r.Lang, o.State),
		}), nil)
	case err != nil:
		return err
	}
	return ok(o)
}

func (u *dispatchUI) paid(r *Request) error {
	ref := commandArgs(r.Message())
	m, d, wasBlocked, err := u.d.Paid(r.Ctx, ref, domain.MessageRef{Chat: r.Chat().ID, ID: r.Message().ID})
	if ie := (*domain.InputError)(nil); errors.As(err, &ie) {
		return r.Reply(r.InputText(ie, shortArg(ie.Arg())), nil)
	}
	switch {
	case errors.Is(err, dispatch.ErrNotMaster), errors.Is(err, domain.ErrNotFound):
		return r.Reply(r.T("paid.not_master", locales.Data{"Ref": locales.HTML(clip(ref, nameBudget))}), nil)
	case err != nil:
		return err
	}
	who := locales.HTML(masterRef(&m, m.UserID, nameBudget))
	if d.Amount == 0 && !wasBlocked {
		return r.Reply(r.T("paid.nothing", locales.Data{"Master": who}), nil)
	}
	text := r.T("paid.ok", locales.Data{"Master": who, "Amount": u.b.money(r.Lang, d.Amount), "Orders": len(d.Orders)})
	switch {
	case wasBlocked && !m.Active:
		text += "\n" + r.T("paid.unblocked_paused")
	case wasBlocked:
		text += "\n" + r.T("paid.unblocked")
	}
	return r.Reply(text, nil)
}

// --- offer buttons ---------------------------------------------------------

// stalePress answers a press that changed nothing. An offer that is past its
// time also gets its message edited, since the watchdog may not have run yet.
func (u *dispatchUI) stalePress(r *Request, f dispatch.Offer, o dispatch.Order, err error) error {
	switch {
	case errors.Is(err, dispatch.ErrForbidden):
		return r.Forbidden()
	case errors.Is(err, domain.ErrNotFound):
		return r.Alert("error.callback_invalid")
	case errors.Is(err, dispatch.ErrOfferClosed) && f.State == dispatch.Accepted && o.State == dispatch.Assigned && o.MasterID == r.User.ID:
		// Accepted already and still theirs: show the order again, in
		// case the first edit never reached them.
		text, kb, kerr := u.b.renderAssigned(r.Lang, r.Zone, u.assignment(o, f))
		if kerr != nil {
			return kerr
		}
		u.b.editPressed(r, text, kb)
		return r.Alert("offer.refused_accepted")
	case errors.Is(err, dispatch.ErrBlocked):
		// Whether the block's withdrawal has run yet or not, the master
		// hears why and what lifts it; the withdrawal edits the message.
		return r.Alert("offer.refused_blocked")
	case errors.Is(err, dispatch.ErrOfferClosed):
		state := f.State
		if state.Open() {
			state = dispatch.Expired // past expires_at, not yet swept
		}
		if state == dispatch.Expired {
			if o.ID == 0 {
				o.ID = f.OrderID
			}
			u.b.editPressed(r, u.b.renderClosed(r.Lang, o, state), u.b.closedMarkup(r.Lang, o, state))
		}
		key, ok := staleOfferKeys[closingOf(o, state)]
		if !ok {
			key = staleOfferKeys[closing(dispatch.Expired)]
		}
		return r.Alert(key)
	}
	return err
}

// staleOfferKeys explain why a press on a closed offer did nothing.
var staleOfferKeys = map[closing]string{
	closing(dispatch.Expired):   "offer.refused_expired",
	closing(dispatch.Accepted):  "offer.refused_accepted",
	closing(dispatch.Declined):  "offer.refused_declined",
	closing(dispatch.Withdrawn): "offer.refused_withdrawn",
	withdrawnBlocked:            "offer.refused_withdrawn_blocked",
}

func (u *dispatchUI) accept(r *Request, cb Callback) error {
	f, o, err := u.d.Accept(r.Ctx, cb.IDs[0], r.User.ID)
	if err != nil {
		return u.stalePress(r, f, o, err)
	}
	// The order's address and contact, its visit and the next steps: the
	// master's message from now on.
	text, kb, err := u.b.renderAssigned(r.Lang, r.Zone, u.assignment(o, f))
	if err != nil {
		return err
	}
	u.b.editPressed(r, text, kb)
	return r.Toast(r.T("offer.accepted_toast"))
}

// assignment is the presser's message about their order as the bot renders
// it right after a press.
func (u *dispatchUI) assignment(o dispatch.Order, f dispatch.Offer) dispatch.Assignment {
	cfg := u.d.Config()
	return dispatch.Assignment{Order: o, Offer: f, CommissionRate: cfg.CommissionRate,
		CommissionDeadline: cfg.CommissionDeadline, PhotoWindow: dispatch.PhotoWindow, Pressed: true}
}

func (u *dispatchUI) decline(r *Request, cb Callback) error {
	f, o, err := u.d.Decline(r.Ctx, cb.IDs[0], r.User.ID)
	if err != nil {
		return u.stalePress(r, f, o, err)
	}
	if o.ID == 0 {
		o.ID = f.OrderID
	}
	u.b.editPressed(r, u.b.renderClosed(r.Lang, o, dispatch.Declined), u.b.closedMarkup(r.Lang, o, dispatch.Declined))
	return r.Toast(r.T("offer.declined_toast"))
}

func (u *dispatchUI) view(r *Request, cb Callback) error {
	f, o, err := u.d.View(r.Ctx, cb.IDs[0], r.User.ID)
	if err != nil {
		return u.stalePress(r, f, o, err)
	}
	if !f.ExpiresAt.After(u.b.now()) {
		// Past its time but not yet swept: Accept would be refused, so the
		// details would only invite a press that cannot succeed.
		return u.stalePress(r, f, o, dispatch.ErrOfferClosed)
	}
	kb, err := offerMarkup(u.b.cat, r.Lang, f.ID, false)
	if err != nil {
		return err
	}
	cfg := u.d.Config()
	u.b.editPressed(r, u.b.renderDetails(r.Lang, o, f, cfg.CommissionRate, cfg.CommissionDeadline), kb)
	return r.Toast(r.T("offer.details_toast"))
}

// --- rendering -------------------------------------------------------------

// renderOffer is the offer message: the order with a short (one line,
// clipped) description, and how long the master has. Never the address or
// the customer's contact: only the master who accepts sees those.
func (rd *Renderer) renderOffer(lang string, o dispatch.Order, f dispatch.Offer) string {
	cat := rd.cat
	return cat.T(lang, "offer.new", locales.Data{"Order": o.ID}) + "\n" +
		rd.orderText(lang, o, clip(oneLine(o.Description), shortDescBudget), placeBudget) + "\n\n" +
		cat.T(lang, "offer.time_left", locales.Data{"Left": rd.duration(lang, f.ExpiresAt.Sub(rd.now()))})
}

// renderDetails is the offer message after Details: the full description,
// what the commission would be, and that the address and contact come
// with Accept.
func (b *Bot) renderDetails(lang string, o dispatch.Order, f dispatch.Offer, rate float64, deadline time.Duration) string {
	cat := b.cat
	text := cat.T(lang, "offer.new", locales.Data{"Order": o.ID}) + "\n" + b.orderText(lang, o, clip(strings.TrimSpace(o.Description), fullDescBudget), placeBudget) + "\n"
	if rate > 0 {
		text += "\n" + cat.T(lang, "offer.details_commission", locales.Data{
			"Amount": b.money(lang, dispatch.CommissionOf(o.Price, rate)), "Rate": strconv.FormatFloat(rate, 'f', -1, 64),
			"Deadline": b.duration(lang, deadline),
		})
	}
	return text + "\n" + cat.T(lang, "offer.details_private") + "\n\n" +
		cat.T(lang, "offer.time_left", locales.Data{"Left": b.duration(lang, f.ExpiresAt.Sub(b.now()))})
}

// orderText is the order as any master offered it sees it: the place
// coarsely (city, district, each within place), the visit, skill, price
// and desc, the description already clipped and escaped.
func (rd *Renderer) orderText(lang string, o dispatch.Order, desc string, place int) string {
	visit := ""
	if v := rd.visitText(lang, o.Visit, o.City); v != "" {
		visit = "\n" + v
	}
	return rd.cat.T(lang, "offer.order", locales.Data{
		"City":        locales.HTML(clip(oneLine(o.City), place)),
		"District":    locales.HTML(clip(oneLine(o.District), place)),
		"Visit":       locales.HTML(visit),
		"Skill":       locales.HTML(clip(oneLine(o.Skill), skillBudget)),
		"Price":       rd.money(lang, o.Price),
		"Description": locales.HTML(desc),
	})
}

// renderClosed is the offer message once it ended without the master
// getting the order: how it ended, and which order it was (the short
// text, as the offer showed it), so a master reading back knows what they
// declined or missed. An order known only by id gets the first line.
func (rd *Renderer) renderClosed(lang string, o dispatch.Order, state dispatch.OfferState) string {
	key, ok := offerClosedKeys[closingOf(o, state)]
	if !ok {
		key = offerClosedKeys[closing(dispatch.Expired)]
	}
	text := rd.cat.T(lang, key, locales.Data{"Order": o.ID})
	if o.City != "" {
		text += "\n" + rd.orderText(lang, o, clip(oneLine(o.Description), shortDescBudget), placeBudget)
	}
	return text
}

// closedMarkup is a closed offer's keyboard: where Accept and Decline
// stood, one button that does nothing and says how it ended, so the
// message keeps its shape (a server without disabled buttons gets the
// message without it; its first line says the same).
func (rd *Renderer) closedMarkup(lang string, o dispatch.Order, state dispatch.OfferState) *tele.ReplyMarkup {
	key, ok := offerClosedButtons[closingOf(o, state)]
	if !ok {
		key = offerClosedButtons[closing(dispatch.Expired)]
	}
	return &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{disabledButton(rd.cat.T(lang, key))}}}
}

// closing is how an offer of o ended as its master reads it: its state,
// except that a withdrawal for the master's block is not the order's
// cancellation and must not read as one (dispatch.WithdrawnByBlock).
type closing string

const withdrawnBlocked closing = "withdrawn_blocked"

func closingOf(o dispatch.Order, state dispatch.OfferState) closing {
	if state == dispatch.Withdrawn && dispatch.WithdrawnByBlock(o) {
		return withdrawnBlocked
	}
	return closing(state)
}

var offerClosedButtons = map[closing]string{
	closing(dispatch.Expired):   "offer.closed_button_expired",
	closing(dispatch.Declined):  "offer.closed_button_declined",
	closing(dispatch.Withdrawn): "offer.closed_button_withdrawn",
	withdrawnBlocked:            "offer.closed_button_blocked",
}

var offerClosedKeys = map[closing]string{
	closing(dispatch.Expired):   "offer.expired",
	closing(dispatch.Declined):  "offer.declined",
	closing(dispatch.Withdrawn): "offer.withdrawn",
	withdrawnBlocked:            "offer.withdrawn_blocked",
}

// offerMarkup is [[Accept, Decline], [Details]]; Details is left out once
// the full text is shown.
func offerMarkup(cat *locales.Catalog, lang string, offerID int64, details bool) (*tele.ReplyMarkup, error) {
	pair, err := buttonPair(yesNo, cat.T(lang, "offer.button_accept"), actionOfferAccept,
		cat.T(lang, "offer.button_decline"), actionOfferDecline, offerID)
	if err != nil {
		return nil, err
	}
	kb := &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{pair}}
	if details {
		view, err := Encode(actionOfferView, offerID)
		if err != nil {
			return nil, err
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, []tele.InlineButton{{Text: cat.T(lang, "offer.button_details"), Data: view}})
	}
	return kb, nil
}

// orderStateKeys and offerStateKeys name every state; spelled out so the
// catalogue test sees them used.
var orderStateKeys = stateKeys[dispatch.OrderState]{
	dispatch.Searching: "dispatch.order_state.SEARCHING",
	dispatch.Assigned:  "dispatch.order_state.ASSIGNED",
	dispatch.Done:      "dispatch.order_state.DONE",
	dispatch.Closed:    "dispatch.order_state.CLOSED",
	dispatch.Cancelled: "dispatch.order_state.CANCELLED",
}

var offerStateKeys = stateKeys[dispatch.OfferState]{
	dispatch.Sent:      "dispatch.offer_state.SENT",
	dispatch.Viewed:    "dispatch.offer_state.VIEWED",
	dispatch.Accepted:  "dispatch.offer_state.ACCEPTED",
	dispatch.Declined:  "dispatch.offer_state.DECLINED",
	dispatch.Expired:   "dispatch.offer_state.EXPIRED",
	dispatch.Withdrawn: "dispatch.offer_state.WITHDRAWN",
}

// masterRef names a master for admins, as escaped HTML: "Ann (@ann, id 42)";
// only the id when the master is not at hand.
func masterRef(m *dispatch.Master, id int64, budget int) string {
	idText := "id " + strconv.FormatInt(id, 10)
	if m == nil || m.UserID == 0 {
		return idText
	}
	name := clip(oneLine(m.Name), budget)
	user := ""
	if m.Username != "" {
		user = "@" + clip(m.Username, budget) + ", "
	}
	if name == "" {
		return strings.TrimSuffix(user, ", ") + " (" + idText + ")"
	}
	return name + " (" + user + idText + ")"
}

// cityTime is a time about a city's working hours, in the city's zone
// (DISPATCH_CITIES, else DISPATCH_TIMEZONE), which its hours are in.
func (b *Bot) cityTime(lang string, t time.Time, city string) locales.HTML {
	return b.timeTag(lang, t, b.cfg.Calendar.Zone(city))
}

// masterZone is the zone a master reads times in, for what the
// workflow sends them outside a request of theirs.
func (rd *Renderer) masterZone(m dispatch.Master) *time.Location {
	loc, _ := rd.readerZone(m.TimeZone, m.City, m.Lang)
	return loc
}

// duration renders d for people, at most two units: "1 min 45 s", "3 h".
// A negative d reads as zero.
func (rd *Renderer) duration(lang string, d time.Duration) string {
	cat := rd.cat
	d = max(d, 0).Round(time.Second)
	days, hours := int64(d/(24*time.Hour)), int64(d/time.Hour)%24
	mins, secs := int64(d/time.Minute)%60, int64(d/time.Second)%60
	switch {
	case days > 0 && hours > 0:
		return cat.T(lang, "time.dh", locales.Data{"D": days, "H": hours})
	case days > 0:
		// "7 d", not "7 d 0 h": a whole number of days is how a deadline
		// is usually set.
		return cat.T(lang, "time.d", locales.Data{"D": days})
	case hours > 0 && mins > 0:
		return cat.T(lang, "time.hm", locales.Data{"H": hours, "M": mins})
	case hours > 0:
		return cat.T(lang, "time.h", locales.Data{"H": hours})
	case mins > 0 && secs > 0:
		return cat.T(lang, "time.ms", locales.Data{"M": mins, "S": secs})
	case mins > 0:
		return cat.T(lang, "time.m", locales.Data{"M": mins})
	}
	return cat.T(lang, "time.s", locales.Data{"S": secs})
}

func (rd *Renderer) now() time.Time {
	if rd.rc.Clock != nil {
		return rd.rc.Clock.Now()
	}
	return time.Now()
}

// today is the calendar's now (RenderConfig.CalendarClock): a demo's
// CLOCK_START moves it, while offers keep counting down on now.
func (rd *Renderer) today() time.Time {
	if rd.rc.CalendarClock != nil {
		return rd.rc.CalendarClock.Now()
	}
	return rd.now()
}

// timeTag is locales.TimeTag against today, so that a time of the
// calendar's year goes without one whatever year the host is in.
func (rd *Renderer) timeTag(lang string, t time.Time, zone *time.Location) locales.HTML {
	return locales.TimeTag(lang, t, zone, rd.today())
}

// dateTag is locales.DateTag against today, as timeTag.
func (rd *Renderer) dateTag(lang string, t time.Time) locales.HTML {
	return locales.DateTag(lang, t, rd.today())
}

// --- dispatch.Notifier -------------------------------------------------------

// DispatchNotes renders the dispatch workflow's messages (dispatch.Notifier)
// for the outbox.
func (b *Renderer) DispatchNotes() dispatch.Notifier { return dispatchNotes{b} }

type dispatchNotes struct{ b *Renderer }

// offerKey names an offer's message, which its closing edit changes.
func offerKey(id int64) string { return MessageKey("offer", id) }

// Offer is an offer to its master with Accept, Decline and Details.
func (d dispatchNotes) Offer(m dispatch.Master, o dispatch.Order, f dispatch.Offer) []domain.Message {
	b := d.b
	kb, err := offerMarkup(b.cat, m.Lang, f.ID, true)
	if err != nil {
		// Callback data over 64 bytes: a bug, and the offer would be
		// unanswerable; without a message the watchdog ends it.
		b.log.Error("render offer", "offer", f.ID, "err", err)
		return nil
	}
	return []domain.Message{Keyed(m.UserID, domain.KindOffer, f.ID, offerKey(f.ID), b.renderOffer(m.Lang, o, f), kb)}
}

// Closed edits an offer's message to show how the offer ended, its
// buttons one disabled button saying so. An offer whose message never
// went out has nothing to edit.
func (d dispatchNotes) Closed(m dispatch.Master, o dispatch.Order, f dispatch.Offer) []domain.Message {
	b := d.b
	text := b.renderClosed(m.Lang, o, f.State)
	return []domain.Message{EditOf(m.UserID, domain.KindOfferClose, f.ID, offerKey(f.ID), text, b.closedMarkup(m.Lang, o, f.State), domain.IfGoneDrop)}
}

// Note is a note to a master in their language.
func (d dispatchNotes) Note(n dispatch.Note) []domain.Message {
	b := d.b
	cat, lang := b.cat, n.Master.Lang
	var orderID int64
	if n.Order != nil {
		orderID = n.Order.ID
	}
	var text string
	switch n.Kind {
	case dispatch.NoteOrderDone:
		due := locales.HTML("—")
		if n.Order != nil && !n.Order.CommissionDueAt.IsZero() {
			due = b.timeTag(lang, n.Order.CommissionDueAt, b.masterZone(n.Master))
		}
		text = cat.T(lang, "note.order_done", locales.Data{"Order": orderID, "Amount": b.money(lang, n.Amount), "Due": due})
		if n.Amount == 0 {
			text = cat.T(lang, "note.order_done_free", locales.Data{"Order": orderID})
		}
	case dispatch.NoteCancelled:
		text = cat.T(lang, "note.cancelled", locales.Data{"Order": orderID})
	case dispatch.NoteBlocked:
		text = cat.T(lang, "note.blocked", locales.Data{"Amount": b.money(lang, n.Amount)})
	case dispatch.NoteUnblocked:
		key := "note.unblocked"
		if !n.Master.Active {
			// Paying lifts the block, not the master's own pause.
			key = "note.unblocked_paused"
		}
		text = cat.T(lang, key, locales.Data{"Amount": b.money(lang, n.Amount)})
	case dispatch.NotePaid:
		text = cat.T(lang, "note.paid", locales.Data{"Amount": b.money(lang, n.Amount), "Orders": n.Orders})
	default:
		b.log.Error("render note: unknown kind", "note", n.Kind, "master", n.Master.UserID)
		return nil
	}
	return Messages(n.Master.UserID, domain.KindNote, orderID, text, nil)
}

// eventKeys gives every live-log event its line; spelled out so the
// catalogue test sees them used.
var eventKeys = map[dispatch.EventKind]string{
	dispatch.EventOrderCreated:     "dispatch.event.order_created",
	dispatch.EventOfferSent:        "dispatch.event.offer_sent",
	dispatch.EventOfferViewed:      "dispatch.event.offer_viewed",
	dispatch.EventOfferAccepted:    "dispatch.event.offer_accepted",
	dispatch.EventOfferDeclined:    "dispatch.event.offer_declined",
	dispatch.EventOfferExpired:     "dispatch.event.offer_expired",
	dispatch.EventOfferWithdrawn:   "dispatch.event.offer_withdrawn",
	dispatch.EventOrderAssigned:    "dispatch.event.order_assigned",
	dispatch.EventUnassignable:     "dispatch.event.order_unassignable",
	dispatch.EventOrderDone:        "dispatch.event.order_done",
	dispatch.EventOrderCancelled:   "dispatch.event.order_cancelled",
	dispatch.EventOrderClosed:      "dispatch.event.order_closed",
	dispatch.EventMasterBlocked:    "dispatch.event.master_blocked",
	dispatch.EventCommissionPaid:   "dispatch.event.commission_paid",
	dispatch.EventOfferUndelivered: "dispatch.event.offer_undelivered",
	dispatch.EventMasterEnRoute:    "dispatch.event.master_en_route",
	dispatch.EventMasterArrived:    "dispatch.event.master_arrived",
	dispatch.EventOrderReturned:    "dispatch.event.order_returned",
	dispatch.EventCustomerJoined:   "dispatch.event.customer_joined",
	dispatch.EventLinkReissued:     "dispatch.event.link_reissued",
	dispatch.EventCustomerCancel:   "dispatch.event.customer_cancelled",
	dispatch.EventMasterLate:       "dispatch.event.master_late",
	dispatch.EventOrderRated:       "dispatch.event.order_rated",
	dispatch.EventRatingCommented:  "dispatch.event.rating_commented",
}

// renderEvent is one line of the live log.
func (rd *Renderer) renderEvent(lang string, e dispatch.Event) string {
	key, ok := eventKeys[e.Kind]
	if !ok {
		key = "dispatch.event.other"
	}
	switch {
	case e.Kind == dispatch.EventOrderCancelled && e.MasterID != 0:
		key = "dispatch.event.order_cancelled_assigned"
	case e.Kind == dispatch.EventOrderDone && e.ByMaster:
		key = "dispatch.event.order_done_master"
	case e.Kind == dispatch.EventCommissionPaid && e.Unblocked:
		key = "dispatch.event.commission_paid_unblocked"
	case e.Kind == dispatch.EventOfferWithdrawn && e.Blocked:
		key = "dispatch.event.offer_withdrawn_blocked"
	}
	var rated string
	var comment locales.HTML
	if e.Rating != nil {
		rated = stars(e.Rating.Stars)
		comment = locales.HTML(clip(oneLine(e.Rating.Comment), logCommentBudget))
	}
	return rd.cat.T(lang, key, locales.Data{
		"Stars":   rated,
		"Comment": comment,
		"Kind":    string(e.Kind),
		"Order":   e.OrderID,
		"Offer":   e.OfferID,
		"Master":  locales.HTML(masterRef(e.Master, e.MasterID, nameBudget)),
		"Round":   e.Round,
		"Amount":  rd.money(lang, e.Amount),
	})
}

// Event is one line of the admins' live log; without an admin chat, none.
func (d dispatchNotes) Event(e dispatch.Event) []domain.Message {
	if d.b.rc.AdminChatID == 0 {
		return nil
	}
	return liveLog(Messages(d.b.rc.AdminChatID, domain.KindLiveLog, e.OrderID, d.b.renderEvent(d.b.rc.AdminLang, e), nil), d.b.rc.LiveLogEvery)
}

// liveLogLane is the admin chat's lane of live-log lines: they keep their
// own order, not the chat's, and gather into one message per interval.
const liveLogLane = "live_log"

// liveLog makes live-log lines gather: lines that burst within every go
// out as one message, each line once and in order (storage's merge).
func liveLog(msgs []domain.Message, every time.Duration) []domain.Message {
	for i := range msgs {
		msgs[i].Lane, msgs[i].Every, msgs[i].Merge = liveLogLane, every, true
	}
	return msgs
}
