package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchboard/domain"
)

// Service runs the dispatch workflow: what the bot's commands and buttons
// call, distribution, the watchdog and its timer, commission and autoclose.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *metrics
	// wakeAll and wakeFree ask Run's distributor for a pass (see Wake and
	// freed).
	wakeAll, wakeFree chan struct{}
	// timer is this replica's earliest known expires_at.
	timer expiryTimer
	// slots bound the expiry follow-ups in flight on this replica.
	slots chan struct{}
	// pending counts this replica's steps queued or running per order
	// (see stepping).
	pending pendingSteps
}

// NewService builds the workflow. It starts nothing; see Run.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Orders == nil || deps.Masters == nil || deps.Notifier == nil {
		return nil, errors.New("dispatch: Orders, Masters and Notifier are required")
	}
	m, log, err := domain.Prepare("dispatch", &deps.Clock, &deps.Log, &deps.Registerer, newMetrics)
	if err != nil {
		return nil, err
	}
	deps.CalendarClock = cmp.Or(deps.CalendarClock, deps.Clock)
	s := &Service{cfg: cfg.withDefaults(), deps: deps, log: log, m: m}
	s.wakeAll, s.wakeFree = make(chan struct{}, 1), make(chan struct{}, 1)
	s.slots = make(chan struct{}, s.cfg.Workers)
	s.pending.n = map[int64]int{}
	s.timer.init(deps.Clock)
	return s, nil
}

// Config returns the effective configuration (for texts that quote it).
func (s *Service) Config() Config { return s.cfg }

// Opening says whether the city takes offers now and, if not, when it
// opens; its hours come with it, for the admins' texts.
func (s *Service) Opening(city string) (open bool, at time.Time, h Hours) {
	h = s.cfg.Calendar.For(city)
	now := s.deps.CalendarClock.Now()
	at = h.NextOpen(now)
	return !at.After(now), at, h
}

// RegisterMaster registers or updates the user as a master from
// `/master <city> <district> <skill[,skill]>`; true if new.
func (s *Service) RegisterMaster(ctx context.Context, userID int64, args string) (Master, bool, error) {
	city, district, skills, err := ParseMaster(args)
	if err != nil {
		return Master{}, false, err
	}
	m, created, err := s.deps.Masters.Save(ctx, userID, city, district, skills)
	if err != nil {
		return Master{}, false, err
	}
	// A new or moved master may be the candidate an order owed a step lacks.
	s.Wake()
	return m, created, nil
}

// Master returns the user's master profile and stats; ErrNotMaster if they
// have not registered.
func (s *Service) Master(ctx context.Context, userID int64) (Master, MasterStats, error) {
	m, err := s.master(ctx, userID)
	if err != nil {
		return Master{}, MasterStats{}, err
	}
	st, err := s.deps.Masters.Stats(ctx, userID)
	if err != nil {
		return Master{}, MasterStats{}, err
	}
	return m, st, nil
}

func (s *Service) master(ctx context.Context, userID int64) (Master, error) {
	m, err := s.deps.Masters.Get(ctx, userID)
	if errors.Is(err, domain.ErrNotFound) {
		return Master{}, ErrNotMaster
	}
	return m, err
}

// SetActive is /pause (false) and /resume (true); false if nothing changed.
func (s *Service) SetActive(ctx context.Context, userID int64, active bool) (bool, error) {
	changed, err := s.deps.Masters.SetActive(ctx, userID, active)
	if errors.Is(err, domain.ErrNotFound) {
		return false, ErrNotMaster
	}
	if err != nil {
		return false, err
	}
	if changed && active {
		s.Wake()
	}
	return changed, nil
}

// CreateOrder is `/order <city> <district> <skill> <price> <description>`,
// sent as message src; the order is offered at once. The same message
// again (its update run a second time) returns the order it created.
func (s *Service) CreateOrder(ctx context.Context, adminID int64, src domain.MessageRef, args string) (Order, error) {
	// The calendar's day in UTC: a visit's date is checked against it
	// with a day's leeway, which covers every city's zone.
	no, err := ParseOrder(args, s.deps.CalendarClock.Now().UTC())
	if err != nil {
		return Order{}, err
	}
	no.CreatedBy, no.Source = adminID, src
	if no.CustomerToken, err = NewCustomerToken(); err != nil {
		return Order{}, err
	}
	st := s.newStory()
	o, err := s.deps.Orders.Create(ctx, no, st.tell(func(c Changed) {
		st.event(Event{Kind: EventOrderCreated, OrderID: c.Order.ID})
	}))
	if err != nil {
		return Order{}, err
	}
	st.logged()
	s.m.orders.WithLabelValues(string(Searching)).Inc()
	s.distributeOrder(ctx, o.ID)
	return o, nil
}

// Orders lists open orders for /orders, the finished ones with their
// customers' ratings, and how many of each there are.
func (s *Service) Orders(ctx context.Context) (OrderList, error) {
	list, err := s.deps.Orders.Open(ctx, MaxListedOrders)
	if err != nil {
		return OrderList{}, err
	}
	return list, s.withRatings(ctx, list.Lines)
}

// MaxListedOrders bounds each section of /orders to what fits one
// message; the sections' totals count the rest.
const MaxListedOrders = 30

// Complete is /done: ASSIGNED → DONE, with the commission due; the master
// is told and their message loses the address and contact. It returns the
// master too (zero if not found). ErrOrderState (with the order as it is)
// if it was not ASSIGNED.
func (s *Service) Complete(ctx context.Context, id int64) (Order, Master, error) {
	return s.complete(ctx, id, 0)
}

// complete is ASSIGNED → DONE for /done (masterID 0) and for the assigned
// master's Done button (only if the order is assigned to masterID).
func (s *Service) complete(ctx context.Context, id, masterID int64) (Order, Master, error) {
	if err := checkOrder(Assigned, Done); err != nil {
		return Order{}, Master{}, err
	}
	st := s.newStory()
	var master Master
	byMaster := masterID != 0
	o, ok, err := s.deps.Orders.Complete(ctx, id, masterID, s.cfg.CommissionRate, s.cfg.CommissionDeadline, st.tell(func(c Changed) {
		o := c.Order
		m, found := masterOf(c, o.MasterID)
		master = m
		st.event(Event{Kind: EventOrderDone, OrderID: o.ID, MasterID: o.MasterID, Master: known(m), Amount: o.Commission, ByMaster: byMaster})
		if c.Assigned != nil {
			st.assigned(s.assignment(m, o, *c.Assigned, byMaster))
		}
		if found && !byMaster {
			st.note(Note{Kind: NoteOrderDone, Master: m, Order: &o, Amount: o.Commission})
		}
		st.customer(c, CustomerDone)
	}))
	if o, err = st.orderMoved(o, ok, err); err != nil {
		return o, Master{}, err
	}
	s.m.orders.WithLabelValues(string(Done)).Inc()
	return o, master, nil
}

// assignment is the assigned master's message about o.
func (s *Service) assignment(m Master, o Order, f Offer, pressed bool) Assignment {
	return Assignment{Master: m, Order: o, Offer: f, CommissionRate: s.cfg.CommissionRate,
		CommissionDeadline: s.cfg.CommissionDeadline, PhotoWindow: PhotoWindow, Pressed: pressed}
}

// Cancel is /cancel: SEARCHING or ASSIGNED → CANCELLED; an open offer is
// withdrawn and its message edited, an assigned master is told.
func (s *Service) Cancel(ctx context.Context, id int64) (Order, error) {
	return s.cancel(ctx, id, 0)
}

// cancel is /cancel (customerID 0) and the customer's Cancel.
func (s *Service) cancel(ctx context.Context, id, customerID int64) (Order, error) {
	if err := checkOrder(Searching, Cancelled); err != nil {
		return Order{}, err
	}
	st := s.newStory()
	o, withdrawn, ok, err := s.deps.Orders.Cancel(ctx, id, customerID, st.tell(func(c Changed) {
		o := c.Order
		for _, f := range c.Offers {
			m, _ := masterOf(c, f.MasterID)
			st.event(Event{Kind: EventOfferWithdrawn, OrderID: o.ID, OfferID: f.ID, MasterID: f.MasterID, Master: known(m)})
			st.closed(m, o, f)
		}
		var assigned Master
		if o.MasterID != 0 {
			assigned, _ = masterOf(c, o.MasterID)
		}
		kind, note := EventOrderCancelled, CustomerCancelled
		if customerID != 0 {
			kind, note = EventCustomerCancel, CustomerWithdrawn
		}
		st.event(Event{Kind: kind, OrderID: o.ID, MasterID: o.MasterID, Master: known(assigned)})
		if assigned.UserID != 0 {
			if c.Assigned != nil {
				st.assigned(s.assignment(assigned, o, *c.Assigned, false))
			}
			st.note(Note{Kind: NoteCancelled, Master: assigned, Order: &o})
		}
		st.customer(c, note)
	}))
	if o, err = st.orderMoved(o, ok, err); err != nil {
		return o, err
	}
	s.m.orders.WithLabelValues(string(Cancelled)).Inc()
	s.m.offers.WithLabelValues(string(Withdrawn)).Add(float64(len(withdrawn)))
	return o, nil
}

// Paid is `/paid MASTER` (a user id or @username), written as message by:
// the master's unpaid commission is settled and the block lifted. The same
// message handled again (after a crash) settles nothing that fell due
// since: it finds what it settled.
func (s *Service) Paid(ctx context.Context, ref string, by domain.MessageRef) (Master, Debt, bool, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return Master{}, Debt{}, false, inputError("paid.usage", "")
	}
	if strings.ContainsAny(ref, " \n\t") {
		return Master{}, Debt{}, false, inputError("paid.error_ref", ref)
	}
	var m Master
	var err error
	if id, perr := strconv.ParseInt(ref, 10, 64); perr == nil && id > 0 {
		m, err = s.master(ctx, id)
	} else {
		m, err = s.deps.Masters.ByUsername(ctx, strings.TrimPrefix(ref, "@"))
		if errors.Is(err, domain.ErrNotFound) {
			err = ErrNotMaster
		}
	}
	if err != nil {
		return Master{}, Debt{}, false, err
	}
	st := s.newStory()
	d, wasBlocked, err := s.deps.Masters.SettleCommission(ctx, m.UserID, by, st.tell(func(c Changed) {
		var d Debt
		if len(c.Debts) > 0 {
			d = c.Debts[0]
		}
		if d.Amount > 0 || c.WasBlocked {
			st.event(Event{Kind: EventCommissionPaid, MasterID: m.UserID, Master: &m, Amount: d.Amount, Unblocked: c.WasBlocked})
		}
		switch {
		case c.WasBlocked:
			unblocked := m
			unblocked.BlockedAt = time.Time{}
			st.note(Note{Kind: NoteUnblocked, Master: unblocked, Amount: d.Amount})
		case d.Amount > 0:
			st.note(Note{Kind: NotePaid, Master: m, Amount: d.Amount, Orders: len(d.Orders)})
		}
	}))
	if err != nil {
		return Master{}, Debt{}, false, err
	}
	st.logged()
	if wasBlocked {
		m.BlockedAt = time.Time{}
		s.Wake()
	}
	return m, d, wasBlocked, nil
}

// Accept is the master's Accept button. ErrForbidden for another master's
// offer; ErrBlocked (with the offer as it is) when the master is blocked
// for commission; ErrOfferClosed (with the offer as it is) when it is no
// longer open or is past expires_at; domain.ErrNotFound for an unknown
// offer. The block is decided by the statement that would accept, not
// read before it, so a block committing meanwhile cannot slip between.
func (s *Service) Accept(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	if err := checkOffer(Sent, Accepted); err != nil {
		return Offer{}, Order{}, err
	}
	st := s.newStory()
	f, o, ok, err := s.deps.Orders.AcceptOffer(ctx, offerID, masterID, st.offerEventsTelling(masterID, CustomerAssigned, EventOfferAccepted, EventOrderAssigned))
	if err != nil {
		return Offer{}, Order{}, err
	}
	if !ok {
		// With the order as it is: accepted already, the master is shown
		// it again if it is still theirs.
		f, o, err := s.refusal(ctx, offerID, masterID)
		if errors.Is(err, ErrOfferClosed) && f.State != Accepted && s.blocked(ctx, masterID) {
			// Told before anything else about the offer: whatever else
			// stood in the way, the block would have, and paying is what
			// the master can do about it.
			err = fmt.Errorf("offer %d is %s, master %d: %w", f.ID, f.State, masterID, ErrBlocked)
		}
		return f, o, err
	}
	st.logged()
	s.m.offers.WithLabelValues(string(Accepted)).Inc()
	s.m.orders.WithLabelValues(string(Assigned)).Inc()
	return f, o, nil
}

// Decline is the master's Decline button; the order is offered on at once.
func (s *Service) Decline(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	f, o, ok, err := s.press(ctx, offerID, masterID, Declined, EventOfferDeclined, s.deps.Orders.DeclineOffer)
	if !ok {
		return f, o, err
	}
	o, err = s.deps.Orders.Get(ctx, f.OrderID)
	if err != nil {
		return f, Order{}, err
	}
	s.distributeOrder(ctx, o.ID)
	s.freed()
	return f, o, nil
}

// View is the Details button: SENT → VIEWED, and the order's full text.
// Pressing it again on a VIEWED offer shows the text again.
func (s *Service) View(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	f, o, ok, err := s.press(ctx, offerID, masterID, Viewed, EventOfferViewed, s.deps.Orders.ViewOffer)
	if !ok && (!errors.Is(err, ErrOfferClosed) || f.State != Viewed || !s.deps.Clock.Now().Before(f.ExpiresAt)) {
		return f, o, err
	}
	o, err = s.deps.Orders.Get(ctx, f.OrderID)
	return f, o, err
}

// press moves the master's SENT offer to `to` with move, telling ev, and
// counts the move. ok false is a press that changed nothing: with the
// refusal's offer, order and error (see refusal), or move's error.
func (s *Service) press(ctx context.Context, offerID, masterID int64, to OfferState, ev EventKind,
	move func(ctx context.Context, offerID, masterID int64, tell domain.Render[Changed]) (Offer, bool, error),
) (f Offer, o Order, ok bool, err error) {
	if err := checkOffer(Sent, to); err != nil {
		return Offer{}, Order{}, false, err
	}
	st := s.newStory()
	f, ok, err = move(ctx, offerID, masterID, st.offerEvents(masterID, ev))
	if err != nil {
		return Offer{}, Order{}, false, err
	}
	if !ok {
		f, o, err = s.refusal(ctx, offerID, masterID)
		return f, o, false, err
	}
	st.logged()
	s.m.offers.WithLabelValues(string(to)).Inc()
	return f, Order{}, true, nil
}

// refusal explains why a press changed nothing.
// The offer's order comes with it, so the master's message can say which
// order it was about (zero if it could not be read).
func (s *Service) refusal(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	f, err := s.deps.Orders.Offer(ctx, offerID)
	if err != nil {
		return Offer{}, Order{}, err // domain.ErrNotFound included
	}
	if f.MasterID != masterID {
		return Offer{}, Order{}, ErrForbidden
	}
	o, err := s.deps.Orders.Get(ctx, f.OrderID)
	if err != nil {
		s.log.Warn("order of a refused press", "offer", f.ID, "order", f.OrderID, "err", err)
		o = Order{ID: f.OrderID}
	}
	return f, o, fmt.Errorf("offer %d is %s: %w", f.ID, f.State, ErrOfferClosed)
}

// blocked reports whether the master is blocked now, to say so to a
// refused Accept; the statement that refused it decided on its own.
func (s *Service) blocked(ctx context.Context, masterID int64) bool {
	m, err := s.deps.Masters.Get(ctx, masterID)
	if err != nil {
		s.log.Warn("master of a refused accept", "master", masterID, "err", err)
		return false
	}
	return !m.BlockedAt.IsZero()
}

// known is m for an event, or nil if it was not loaded.
func known(m Master) *Master {
	if m.UserID == 0 {
		return nil
	}
	return &m
}

// workers runs fn over items with at most n at once.
func workers[T any](n int, items []T, fn func(T)) {
	if len(items) <= 1 || n <= 1 {
		for _, it := range items {
			fn(it)
		}
		return
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, it := range items {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			fn(it)
		}()
	}
	wg.Wait()
}
