package dispatch

import (
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
}

// NewService builds the workflow. It starts nothing; see Run.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Repo == nil {
		return nil, errors.New("dispatch: Repo is required")
	}
	domain.Defaults(&deps.Clock, &deps.Log, &deps.Registerer)
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Service{
		cfg:      cfg.withDefaults(),
		deps:     deps,
		log:      deps.Log.With("component", "dispatch"),
		m:        m,
		wakeAll:  make(chan struct{}, 1),
		wakeFree: make(chan struct{}, 1),
	}
	s.slots = make(chan struct{}, s.cfg.Workers)
	s.timer.init(deps.Clock)
	return s, nil
}

// SetNotifier sets the bot after construction: the bot routes buttons to
// the service, and the service writes through the bot.
func (s *Service) SetNotifier(n Notifier) { s.deps.Notifier = n }

// Config returns the effective configuration (for texts that quote it).
func (s *Service) Config() Config { return s.cfg }

// RegisterMaster registers or updates the user as a master from
// `/master <city> <district> <skill[,skill]>`; true if new.
func (s *Service) RegisterMaster(ctx context.Context, userID int64, args string) (Master, bool, error) {
	city, district, skills, err := ParseMaster(args)
	if err != nil {
		return Master{}, false, err
	}
	m, created, err := s.deps.Repo.SaveMaster(ctx, userID, city, district, skills)
	if err != nil {
		return Master{}, false, err
	}
	// A new or moved master may be the candidate a waiting order lacks.
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
	st, err := s.deps.Repo.MasterStats(ctx, userID)
	if err != nil {
		return Master{}, MasterStats{}, err
	}
	return m, st, nil
}

func (s *Service) master(ctx context.Context, userID int64) (Master, error) {
	m, err := s.deps.Repo.Master(ctx, userID)
	if errors.Is(err, domain.ErrNotFound) {
		return Master{}, ErrNotMaster
	}
	return m, err
}

// SetActive is /pause (false) and /resume (true); false if nothing changed.
func (s *Service) SetActive(ctx context.Context, userID int64, active bool) (bool, error) {
	changed, err := s.deps.Repo.SetActive(ctx, userID, active)
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

// CreateOrder is `/order <city> <district> <skill> <price> <description>`;
// the order is offered at once.
func (s *Service) CreateOrder(ctx context.Context, adminID int64, args string) (Order, error) {
	no, err := ParseOrder(args)
	if err != nil {
		return Order{}, err
	}
	no.CreatedBy = adminID
	o, err := s.deps.Repo.CreateOrder(ctx, no)
	if err != nil {
		return Order{}, err
	}
	s.m.orders.WithLabelValues(string(Searching)).Inc()
	s.event(ctx, Event{Kind: EventOrderCreated, OrderID: o.ID})
	s.distributeOrder(ctx, o.ID)
	return o, nil
}

// Orders lists open orders for /orders.
func (s *Service) Orders(ctx context.Context) ([]OrderLine, error) {
	return s.deps.Repo.OpenOrders(ctx, MaxListedOrders)
}

// MaxListedOrders bounds /orders to what fits one message.
const MaxListedOrders = 30

// Complete is /done: ASSIGNED → DONE, with the commission due.
// ErrOrderState (with the order as it is) if it was not ASSIGNED.
func (s *Service) Complete(ctx context.Context, id int64) (Order, error) {
	if err := checkOrder(Assigned, Done); err != nil {
		return Order{}, err
	}
	o, ok, err := s.deps.Repo.CompleteOrder(ctx, id, s.cfg.CommissionRate, s.cfg.CommissionDeadline)
	if err != nil {
		return Order{}, err
	}
	if !ok {
		return o, ErrOrderState
	}
	s.m.orders.WithLabelValues(string(Done)).Inc()
	m, err := s.deps.Repo.Master(ctx, o.MasterID)
	if err != nil {
		s.log.Error("load master of done order", "order", o.ID, "err", err)
	}
	s.event(ctx, Event{Kind: EventOrderDone, OrderID: o.ID, MasterID: o.MasterID, Master: known(m), Amount: o.Commission})
	if err == nil {
		s.tell(ctx, Note{Kind: NoteOrderDone, Master: m, Order: &o, Amount: o.Commission})
	}
	return o, nil
}

// Cancel is /cancel: SEARCHING or ASSIGNED → CANCELLED; an open offer is
// withdrawn and its message edited, an assigned master is told.
func (s *Service) Cancel(ctx context.Context, id int64) (Order, error) {
	if err := checkOrder(Searching, Cancelled); err != nil {
		return Order{}, err
	}
	o, withdrawn, ok, err := s.deps.Repo.CancelOrder(ctx, id)
	if err != nil {
		return Order{}, err
	}
	if !ok {
		return o, ErrOrderState
	}
	s.m.orders.WithLabelValues(string(Cancelled)).Inc()
	for _, f := range withdrawn {
		s.m.offers.WithLabelValues(string(Withdrawn)).Inc()
		m, err := s.deps.Repo.Master(ctx, f.MasterID)
		s.event(ctx, Event{Kind: EventOfferWithdrawn, OrderID: o.ID, OfferID: f.ID, MasterID: f.MasterID, Master: known(m)})
		if err == nil {
			s.closeOffer(ctx, m, o, f)
		}
	}
	var assigned Master
	if o.MasterID != 0 {
		var err error
		if assigned, err = s.deps.Repo.Master(ctx, o.MasterID); err != nil {
			s.log.Error("load master of cancelled order", "order", o.ID, "err", err)
		}
	}
	s.event(ctx, Event{Kind: EventOrderCancelled, OrderID: o.ID, MasterID: o.MasterID, Master: known(assigned)})
	if assigned.UserID != 0 {
		s.tell(ctx, Note{Kind: NoteCancelled, Master: assigned, Order: &o})
	}
	return o, nil
}

// Paid is `/paid MASTER` (a user id or @username): the master's unpaid
// commission is settled and the block lifted.
func (s *Service) Paid(ctx context.Context, ref string) (Master, Debt, bool, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" || strings.ContainsAny(ref, " \n\t") {
		return Master{}, Debt{}, false, &InputError{Key: "paid.usage"}
	}
	var m Master
	var err error
	if id, perr := strconv.ParseInt(ref, 10, 64); perr == nil && id > 0 {
		m, err = s.master(ctx, id)
	} else {
		m, err = s.deps.Repo.MasterByUsername(ctx, strings.TrimPrefix(ref, "@"))
		if errors.Is(err, domain.ErrNotFound) {
			err = ErrNotMaster
		}
	}
	if err != nil {
		return Master{}, Debt{}, false, err
	}
	d, wasBlocked, err := s.deps.Repo.SettleCommission(ctx, m.UserID)
	if err != nil {
		return Master{}, Debt{}, false, err
	}
	if d.Amount > 0 || wasBlocked {
		s.event(ctx, Event{Kind: EventCommissionPaid, MasterID: m.UserID, Master: &m, Amount: d.Amount})
	}
	if wasBlocked {
		m.BlockedAt = time.Time{}
		s.tell(ctx, Note{Kind: NoteUnblocked, Master: m, Amount: d.Amount})
		s.Wake()
	}
	return m, d, wasBlocked, nil
}

// Accept is the master's Accept button. ErrForbidden for another master's
// offer; ErrOfferClosed (with the offer as it is) when it is no longer
// open or is past expires_at; domain.ErrNotFound for an unknown offer.
func (s *Service) Accept(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	if err := checkOffer(Sent, Accepted); err != nil {
		return Offer{}, Order{}, err
	}
	f, o, ok, err := s.deps.Repo.Accept(ctx, offerID, masterID)
	if err != nil {
		return Offer{}, Order{}, err
	}
	if !ok {
		f, err := s.refusal(ctx, offerID, masterID)
		return f, Order{}, err
	}
	s.m.offers.WithLabelValues(string(Accepted)).Inc()
	s.m.orders.WithLabelValues(string(Assigned)).Inc()
	m, _ := s.deps.Repo.Master(ctx, masterID)
	s.event(ctx, Event{Kind: EventOfferAccepted, OrderID: o.ID, OfferID: f.ID, MasterID: masterID, Master: known(m)})
	s.event(ctx, Event{Kind: EventOrderAssigned, OrderID: o.ID, OfferID: f.ID, MasterID: masterID, Master: known(m)})
	return f, o, nil
}

// Decline is the master's Decline button; the order is offered on at once.
func (s *Service) Decline(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	if err := checkOffer(Sent, Declined); err != nil {
		return Offer{}, Order{}, err
	}
	f, ok, err := s.deps.Repo.Decline(ctx, offerID, masterID)
	if err != nil {
		return Offer{}, Order{}, err
	}
	if !ok {
		f, err := s.refusal(ctx, offerID, masterID)
		return f, Order{}, err
	}
	s.m.offers.WithLabelValues(string(Declined)).Inc()
	o, err := s.deps.Repo.Order(ctx, f.OrderID)
	if err != nil {
		return f, Order{}, err
	}
	m, _ := s.deps.Repo.Master(ctx, masterID)
	s.event(ctx, Event{Kind: EventOfferDeclined, OrderID: o.ID, OfferID: f.ID, MasterID: masterID, Master: known(m)})
	s.distributeOrder(ctx, o.ID)
	s.freed()
	return f, o, nil
}

// View is the Details button: SENT → VIEWED, and the order's full text.
// Pressing it again on a VIEWED offer shows the text again.
func (s *Service) View(ctx context.Context, offerID, masterID int64) (Offer, Order, error) {
	if err := checkOffer(Sent, Viewed); err != nil {
		return Offer{}, Order{}, err
	}
	f, ok, err := s.deps.Repo.View(ctx, offerID, masterID)
	if err != nil {
		return Offer{}, Order{}, err
	}
	if !ok {
		f, err = s.refusal(ctx, offerID, masterID)
		if !errors.Is(err, ErrOfferClosed) || f.State != Viewed || !s.deps.Clock.Now().Before(f.ExpiresAt) {
			return f, Order{}, err
		}
	} else {
		m, _ := s.deps.Repo.Master(ctx, masterID)
		s.m.offers.WithLabelValues(string(Viewed)).Inc()
		s.event(ctx, Event{Kind: EventOfferViewed, OrderID: f.OrderID, OfferID: f.ID, MasterID: masterID, Master: known(m)})
	}
	o, err := s.deps.Repo.Order(ctx, f.OrderID)
	return f, o, err
}

// refusal explains why a press changed nothing.
func (s *Service) refusal(ctx context.Context, offerID, masterID int64) (Offer, error) {
	f, err := s.deps.Repo.Offer(ctx, offerID)
	if err != nil {
		return Offer{}, err // domain.ErrNotFound included
	}
	if f.MasterID != masterID {
		return Offer{}, ErrForbidden
	}
	return f, fmt.Errorf("offer %d is %s: %w", f.ID, f.State, ErrOfferClosed)
}

// event logs e as JSON and queues it for the live log. A live log the
// outbox cannot take is not a reason to fail the step it reports.
func (s *Service) event(ctx context.Context, e Event) {
	if e.At.IsZero() {
		e.At = s.deps.Clock.Now()
	}
	s.log.Info("dispatch_event", "event", string(e.Kind), "order", e.OrderID, "offer", e.OfferID, "master", e.MasterID)
	if s.deps.Notifier == nil {
		return
	}
	s.enqueue(ctx, "live log "+string(e.Kind), s.deps.Notifier.Event(e))
}

func (s *Service) tell(ctx context.Context, n Note) {
	if s.deps.Notifier == nil {
		return
	}
	s.enqueue(ctx, "note "+string(n.Kind), s.deps.Notifier.Note(n))
}

// closeOffer queues the edit of an ended offer's message. The edit names
// the message by its key, so it finds it even when the offer was still
// waiting in the outbox as it ended (rows of one chat go out in order).
func (s *Service) closeOffer(ctx context.Context, m Master, o Order, f Offer) {
	if s.deps.Notifier == nil {
		return
	}
	s.enqueue(ctx, "close offer", s.deps.Notifier.Closed(m, o, f))
}

func (s *Service) enqueue(ctx context.Context, what string, msgs []domain.Message) {
	if len(msgs) == 0 {
		return
	}
	if err := s.deps.Repo.Enqueue(context.WithoutCancel(ctx), msgs...); err != nil {
		s.log.Warn("queue message", "what", what, "err", err)
	}
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
