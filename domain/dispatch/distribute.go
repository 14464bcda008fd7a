package dispatch

import (
	"context"
	"time"

	"switchboard/domain"
)

// MaxDistribute bounds the orders one distribution pass looks at; the rest
// wait for the next pass.
const MaxDistribute = 1000

// Wake asks Run for a distribution pass over every waiting order,
// unassignable ones included: a master registered, resumed or was
// unblocked, and may be the candidate they lack. It never blocks.
func (s *Service) Wake() { signal(s.wakeAll) }

// freed asks Run for a pass over the orders whose round waits for a busy
// master: a master's offer ended, and they may be that master.
func (s *Service) freed() { signal(s.wakeFree) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Distribute is the DISTRIBUTION_INTERVAL job: every SEARCHING order with
// no open offer gets its next candidate, if any.
func (s *Service) Distribute(ctx context.Context) error {
	return s.distribute(ctx, true)
}

func (s *Service) distribute(ctx context.Context, all bool) error {
	ids, err := s.deps.Repo.SearchingOrders(ctx, MaxDistribute, all)
	if err != nil {
		return err
	}
	workers(s.cfg.Workers, ids, func(id int64) { s.distributeOrder(ctx, id) })
	return ctx.Err()
}

// distributeOrder offers one order to its next candidate; the offer's
// message and live-log line commit with the offer.
func (s *Service) distributeOrder(ctx context.Context, orderID int64) {
	f, o, outcome, err := s.deps.Repo.OfferNext(ctx, orderID, s.cfg.OfferSLA, s.render)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("distribute order", "order", orderID, "err", err)
		}
		return
	}
	switch outcome {
	case Unassignable:
		s.event(ctx, Event{Kind: EventUnassignable, OrderID: orderID, Round: o.Round})
	case Offered:
		s.m.offers.WithLabelValues(string(Sent)).Inc()
		s.log.Info("dispatch_event", "event", string(EventOfferSent), "order", o.ID, "offer", f.ID, "master", f.MasterID)
		// This replica knows of the deadline now; the others hear of it
		// through the offers trigger's NOTIFY.
		s.timer.arm(f.ExpiresAt)
	}
}

// render is what commits with a new offer: its message and its line in
// the live log.
func (s *Service) render(m Master, o Order, f Offer) []domain.Message {
	if s.deps.Notifier == nil {
		return nil
	}
	e := Event{Kind: EventOfferSent, OrderID: o.ID, OfferID: f.ID, MasterID: m.UserID, Master: &m, Round: f.Round, At: s.deps.Clock.Now()}
	return append(s.deps.Notifier.Offer(m, o, f), s.deps.Notifier.Event(e)...)
}

// Undeliverable is told by the outbox that an offer's message was dropped
// because Telegram refuses its master for good (blocked the bot, deleted
// the account): the master is paused, the offer declined at once, and the
// order goes to the next candidate rather than waiting out the SLA.
func (s *Service) Undeliverable(ctx context.Context, offerID int64) {
	f, err := s.deps.Repo.Offer(ctx, offerID)
	if err != nil {
		s.log.Error("load undeliverable offer", "offer", offerID, "err", err)
		return
	}
	if !f.State.Open() {
		return
	}
	m, _ := s.deps.Repo.Master(ctx, f.MasterID)
	s.log.Warn("master unreachable, pausing", "master", f.MasterID, "offer", f.ID)
	s.event(ctx, Event{Kind: EventOfferUndelivered, OrderID: f.OrderID, OfferID: f.ID, MasterID: f.MasterID, Master: known(m)})
	if _, err := s.deps.Repo.SetActive(ctx, f.MasterID, false); err != nil {
		s.log.Error("pause unreachable master", "master", f.MasterID, "err", err)
	}
	if _, ok, err := s.deps.Repo.Decline(ctx, f.ID, f.MasterID); err != nil || !ok {
		if err != nil {
			s.log.Error("decline undelivered offer", "offer", f.ID, "err", err)
		}
		return
	}
	s.m.offers.WithLabelValues(string(Declined)).Inc()
	s.distributeOrder(ctx, f.OrderID)
	s.freed()
}

// Commission is the COMMISSION_INTERVAL job: masters whose commission is
// past its deadline are blocked from distribution and told why.
func (s *Service) Commission(ctx context.Context) (int, error) {
	debts, err := s.deps.Repo.BlockOverdue(ctx)
	if err != nil {
		return 0, err
	}
	for _, d := range debts {
		m, err := s.deps.Repo.Master(ctx, d.MasterID)
		if err != nil {
			s.log.Error("load blocked master", "master", d.MasterID, "err", err)
			continue
		}
		s.m.blocked.Inc()
		s.event(ctx, Event{Kind: EventMasterBlocked, MasterID: m.UserID, Master: &m, Amount: d.Amount})
		s.tell(ctx, Note{Kind: NoteBlocked, Master: m, Amount: d.Amount})
	}
	return len(debts), nil
}

// Autoclose is the AUTOCLOSE_INTERVAL job: DONE orders older than
// AUTOCLOSE_AFTER become CLOSED.
func (s *Service) Autoclose(ctx context.Context) (int, error) {
	if err := checkOrder(Done, Closed); err != nil {
		return 0, err
	}
	ids, err := s.deps.Repo.Autoclose(ctx, s.cfg.AutocloseAfter)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		s.m.orders.WithLabelValues(string(Closed)).Inc()
		s.event(ctx, Event{Kind: EventOrderClosed, OrderID: id})
	}
	return len(ids), nil
}

// sinceDeadline is how late an expiry was handled, for the lag histogram.
func sinceDeadline(now, deadline time.Time) time.Duration {
	if d := now.Sub(deadline); d > 0 {
		return d
	}
	return 0
}
