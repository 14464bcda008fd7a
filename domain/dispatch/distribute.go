package dispatch

import (
	"context"
	"slices"
	"sync"
	"time"

	"switchboard/domain"
)

// MaxDistribute bounds the orders one distribution pass looks at; the rest
// wait for the next pass.
const MaxDistribute = 1000

// Wake asks Run for a distribution pass over every searching order,
// unassignable ones included: a master registered, resumed or was
// unblocked, and may be the candidate they lack. It never blocks.
func (s *Service) Wake() { signal(s.wakeAll) }

// freed asks Run for a pass over the parked orders (StepFacts.Parked): a
// master's offer ended, and they may be the master a parked order's round
// waits for.
func (s *Service) freed() { signal(s.wakeFree) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// gate is the calendar now: which cities take offers.
func (s *Service) gate() Gate { return s.cfg.Calendar.At(s.deps.CalendarClock.Now()) }

// Distribute is the DISTRIBUTION_INTERVAL job: every SEARCHING order with
// no open offer gets its next candidate, if any.
func (s *Service) Distribute(ctx context.Context) error {
	return s.distribute(ctx, PassAll)
}

func (s *Service) distribute(ctx context.Context, pass Pass) error {
	ids, err := s.deps.Orders.Searching(ctx, MaxDistribute, pass, s.cfg.Claimer, s.gate())
	if err != nil {
		return err
	}
	all := pass == PassAll
	if !all {
		// An owed order whose step this replica has queued or is taking
		// (an expiry's follow-up behind a backlog longer than the recheck
		// window) is left to that step: it locks the order after this
		// query read it, so it sees at least what a step taken here would,
		// and if it fails the order is still owed at the next recheck.
		// Stepped here as well, the order's second step found it held
		// (busy) or settled (still unassignable), work that added to the
		// backlog it came from.
		ids = s.pending.without(ids)
	}
	workers(s.cfg.Workers, ids, func(id int64) {
		done := s.pending.add(id)
		defer done()
		if all {
			s.distributeOrder(ctx, id)
		} else {
			s.distributeOwed(ctx, id)
		}
	})
	return ctx.Err()
}

// pendingSteps counts the distribution steps this replica has queued or
// is taking, per order.
type pendingSteps struct {
	mu sync.Mutex
	n  map[int64]int
}

// add counts a step of the order until the returned func is called.
func (p *pendingSteps) add(ids ...int64) (done func()) {
	p.mu.Lock()
	for _, id := range ids {
		p.n[id]++
	}
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, id := range ids {
			if p.n[id]--; p.n[id] <= 0 {
				delete(p.n, id)
			}
		}
	}
}

// without is ids less the orders with a step counted.
func (p *pendingSteps) without(ids []int64) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.DeleteFunc(ids, func(id int64) bool { return p.n[id] > 0 })
}

// distributeOrder offers one order to its next candidate; the offer's
// message and live-log line commit with the offer.
func (s *Service) distributeOrder(ctx context.Context, orderID int64) {
	s.step(ctx, orderID, s.deps.Orders.NextOffer)
}

// distributeOwed is distributeOrder for an order taken up because it was
// marked owed a step: a step that finds another has settled it since
// writes nothing (Orders.NextOwedOffer).
func (s *Service) distributeOwed(ctx context.Context, orderID int64) {
	s.step(ctx, orderID, s.deps.Orders.NextOwedOffer)
}

// step runs one distribution step through next (NextOffer or
// NextOwedOffer).
func (s *Service) step(ctx context.Context, orderID int64,
	next func(context.Context, int64, time.Duration, Gate, domain.Render[Changed]) (Offer, Order, Outcome, error)) {
	st := s.newStory()
	var f Offer
	var outcome Outcome
	var err error
	// A panic (the renderer on this order's offer, say) is this step's
	// failure: its transaction rolled back, the order is still owed a step
	// and the other orders' steps go on.
	if perr := s.m.panics.Contain(s.log, "dispatch_step", orderID, func() {
		f, _, outcome, err = next(ctx, orderID, s.cfg.OfferSLA, s.gate(), st.tell(func(c Changed) {
			if len(c.Offers) == 0 {
				st.event(Event{Kind: EventUnassignable, OrderID: c.Order.ID, Round: c.Order.Round})
				return
			}
			f := c.Offers[0]
			m, _ := masterOf(c, f.MasterID)
			st.offer(m, c.Order, f)
			st.event(Event{Kind: EventOfferSent, OrderID: c.Order.ID, OfferID: f.ID, MasterID: f.MasterID, Master: known(m), Round: f.Round})
		}))
	}); perr != nil {
		err = perr
	}
	if err != nil {
		if ctx.Err() == nil {
			// The step rolled back and left the order owed a step, as
			// the change that made it owe one left it: the next recheck
			// of owed orders, on any replica, takes it again.
			s.log.Error("distribute order", "order", orderID, "err", err, "retry_in", OwedRecheck)
		}
		return
	}
	switch outcome {
	case Unassignable:
		st.logged()
	case Offered:
		st.logged()
		s.m.offers.WithLabelValues(string(Sent)).Inc()
		// This replica knows of the deadline now; the others hear of it
		// through the offers trigger's NOTIFY.
		s.timer.arm(f.ExpiresAt)
	}
}

// Undeliverable is told by the outbox that an offer's message was dropped
// because Telegram refuses its master for good (blocked the bot, deleted
// the account): the master is paused, the offer declined at once, and the
// order goes to the next candidate rather than waiting out the SLA.
func (s *Service) Undeliverable(ctx context.Context, offerID int64) {
	f, err := s.deps.Orders.Offer(ctx, offerID)
	if err != nil {
		s.log.Error("load undeliverable offer", "offer", offerID, "err", err)
		return
	}
	if !f.State.Open() {
		return
	}
	s.log.Warn("master unreachable, pausing", "master", f.MasterID, "offer", f.ID)
	if _, err := s.deps.Masters.SetActive(ctx, f.MasterID, false); err != nil {
		s.log.Error("pause unreachable master", "master", f.MasterID, "err", err)
	}
	st := s.newStory()
	_, ok, err := s.deps.Orders.DeclineOffer(ctx, f.ID, f.MasterID, st.offerEvents(f.MasterID, EventOfferUndelivered))
	if err != nil || !ok {
		if err != nil {
			s.log.Error("decline undelivered offer", "offer", f.ID, "err", err)
		}
		return
	}
	st.logged()
	s.m.offers.WithLabelValues(string(Declined)).Inc()
	s.distributeOrder(ctx, f.OrderID)
	s.freed()
}

// Commission is the COMMISSION_INTERVAL job: masters whose commission is
// past its deadline are blocked from distribution and told why. A blocked
// master takes no new work, so the offers they hold are withdrawn with
// the block, their messages edited to say why, and each order goes on to
// its next master as after an expiry. It returns when that is done.
func (s *Service) Commission(ctx context.Context) (int, error) {
	if err := checkOffer(Sent, Withdrawn); err != nil {
		return 0, err
	}
	st := s.newStory()
	debts, withdrawn, err := s.deps.Masters.BlockOverdue(ctx, st.tell(func(c Changed) {
		for _, d := range c.Debts {
			m, ok := masterOf(c, d.MasterID)
			if !ok {
				continue
			}
			st.event(Event{Kind: EventMasterBlocked, MasterID: m.UserID, Master: &m, Amount: d.Amount})
			st.note(Note{Kind: NoteBlocked, Master: m, Amount: d.Amount})
		}
		for _, f := range c.Offers {
			m, _ := masterOf(c, f.MasterID)
			st.closed(m, orderOf(c, f.OrderID), f)
			st.event(Event{Kind: EventOfferWithdrawn, OrderID: f.OrderID, OfferID: f.ID, MasterID: f.MasterID, Master: known(m), Blocked: true})
		}
	}))
	if err != nil {
		return 0, err
	}
	st.logged()
	s.m.blocked.Add(float64(len(debts)))
	s.m.offers.WithLabelValues(string(Withdrawn)).Add(float64(len(withdrawn)))
	s.followUp(ctx, withdrawn)
	return len(debts), nil
}

// Autoclose is the AUTOCLOSE_INTERVAL job: DONE orders older than
// AUTOCLOSE_AFTER become CLOSED.
func (s *Service) Autoclose(ctx context.Context) (int, error) {
	if err := checkOrder(Done, Closed); err != nil {
		return 0, err
	}
	st := s.newStory()
	ids, err := s.deps.Orders.Autoclose(ctx, s.cfg.AutocloseAfter, st.tell(func(c Changed) {
		for _, id := range c.Closed {
			st.event(Event{Kind: EventOrderClosed, OrderID: id})
		}
	}))
	if err != nil {
		return 0, err
	}
	st.logged()
	s.m.orders.WithLabelValues(string(Closed)).Add(float64(len(ids)))
	return len(ids), nil
}

// sinceDeadline is how late an expiry was handled, for the lag histogram.
func sinceDeadline(now, deadline time.Time) time.Duration {
	if d := now.Sub(deadline); d > 0 {
		return d
	}
	return 0
}
