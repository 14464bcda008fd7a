package dispatch

import (
	"context"
	"errors"
	"time"
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

// distributeOrder offers one order to its next candidate. A master Telegram
// will not deliver to is paused and the next one tried, so a stale
// registration cannot hold an order for a whole SLA.
func (s *Service) distributeOrder(ctx context.Context, orderID int64) {
	for attempt := 0; attempt < 10 && ctx.Err() == nil; attempt++ {
		f, o, outcome, err := s.deps.Repo.OfferNext(ctx, orderID, s.cfg.OfferSLA)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("distribute order", "order", orderID, "err", err)
			}
			return
		}
		switch outcome {
		case Unassignable:
			s.event(ctx, Event{Kind: EventUnassignable, OrderID: orderID, Round: o.Round})
			return
		case Offered:
		default:
			return
		}
		s.m.offers.WithLabelValues(string(Sent)).Inc()
		// This replica knows of the deadline now; the others hear of it
		// through the offers trigger's NOTIFY.
		s.timer.arm(f.ExpiresAt)
		if !s.send(ctx, o, f) {
			continue
		}
		return
	}
}

// send delivers a new offer; false if the master turned out unreachable and
// the order should go to the next candidate.
func (s *Service) send(ctx context.Context, o Order, f Offer) bool {
	m, err := s.deps.Repo.Master(ctx, f.MasterID)
	if err != nil {
		s.log.Error("load master for offer", "offer", f.ID, "master", f.MasterID, "err", err)
		return true // the watchdog expires it in time
	}
	s.event(ctx, Event{Kind: EventOfferSent, OrderID: o.ID, OfferID: f.ID, MasterID: m.UserID, Master: &m, Round: f.Round})
	if s.deps.Notifier == nil {
		return true
	}
	chatID, msgID, err := s.deps.Notifier.SendOffer(ctx, m, o, f)
	if errors.Is(err, ErrRecipientGone) {
		s.log.Warn("master unreachable, pausing", "master", m.UserID, "offer", f.ID, "err", err)
		s.event(ctx, Event{Kind: EventOfferUndelivered, OrderID: o.ID, OfferID: f.ID, MasterID: m.UserID, Master: &m})
		if _, err := s.deps.Repo.SetActive(ctx, m.UserID, false); err != nil {
			s.log.Error("pause unreachable master", "master", m.UserID, "err", err)
		}
		if _, _, err := s.deps.Repo.Decline(ctx, f.ID, m.UserID); err != nil {
			s.log.Error("decline undelivered offer", "offer", f.ID, "err", err)
			return true
		}
		return false
	}
	if err != nil {
		// Telegram is down: the offer stays SENT and the watchdog takes it
		// back after the SLA, as for a master who did not answer.
		s.log.Warn("send offer", "offer", f.ID, "master", m.UserID, "err", err)
		return true
	}
	after, err := s.deps.Repo.SetOfferMessage(ctx, f.ID, chatID, msgID)
	if err != nil {
		s.log.Error("record offer message", "offer", f.ID, "err", err)
		return true
	}
	if !after.State.Open() {
		// It ended (a short SLA, a slow Telegram) before its message was
		// recorded, so the sweep that ended it saw no message to edit:
		// edit it here. Updates of the row are serialised, so exactly one
		// of the two sees the message.
		s.closeOffer(ctx, m, o, after)
	}
	return true
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
