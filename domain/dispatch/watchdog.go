package dispatch

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchboard/domain"
)

// OffersChannel is where the offers trigger announces each new offer's
// expires_at (Unix milliseconds), so every replica's timer knows of it.
const OffersChannel = "dispatch_offers"

// OwedRecheck is how often a replica looks at the orders owed a
// distribution step without being asked (a read of the SEARCHING orders
// and their open offers: StepFacts.Owed). It is the guarantee behind every
// wake-up: an order is owed a step from the moment it is left without an
// offer, as part of the change that left it so, so whatever step was
// skipped, lost or rolled back, some replica takes it within this interval
// (two for an order whose offer ended within the last one: storage's
// owedOrders leaves it to the replica that ended it meanwhile).
const OwedRecheck = time.Second

// FollowUpHeld bounds how long the owed-orders recheck of other replicas
// leaves an expired offer's order to the live replica that expired it. A
// sweep's follow-ups can queue for seconds behind each other (the dispatch
// bench expires 1 000 offers a second); rechecked by every replica after
// OwedRecheck, most of them were stepped twice, the second step finding
// the order settled, work that slowed the sweeps they follow. The replica
// retries its own failed steps at its next recheck; a dead replica's are
// taken at once (its liveness lock is gone).
const FollowUpHeld = 30 * time.Second

// minSweepGap keeps the timer from spinning when the database's clock is a
// little behind ours and an offer we think due is not yet due there.
const minSweepGap = 10 * time.Millisecond

// Expire is the expired-offers watchdog, the seed's statement: every SENT
// or VIEWED offer past expires_at becomes EXPIRED; each is logged, its
// message edited, its order offered on at once. It runs on every
// WATCHDOG_INTERVAL tick and returns when the follow-up is done; the
// timer in Run uses sweep and followUp directly.
func (s *Service) Expire(ctx context.Context) (int, error) {
	expired, err := s.sweep(ctx)
	if err != nil {
		return 0, err
	}
	s.followUp(ctx, expired)
	return len(expired), nil
}

// sweep runs the watchdog statement and logs what it expired.
func (s *Service) sweep(ctx context.Context) ([]Offer, error) {
	if err := checkOffer(Sent, Expired); err != nil {
		return nil, err
	}
	start := s.deps.Clock.Now()
	// Each expiry's closing edit and live-log line commit with it.
	st := s.newStory()
	expired, err := s.deps.Orders.ExpireOffers(ctx, s.cfg.Claimer, st.tell(func(c Changed) {
		for _, f := range c.Offers {
			// One statement expires every offer due: a panic rendering one
			// offer's edit must not hold back the expiry of all of them.
			st.contain("dispatch_expiry", f.ID, func() {
				m, _ := masterOf(c, f.MasterID)
				st.closed(m, orderOf(c, f.OrderID), f)
				st.event(Event{Kind: EventOfferExpired, OrderID: f.OrderID, OfferID: f.ID, MasterID: f.MasterID, Master: known(m), Round: f.Round})
			})
		}
	}))
	s.m.sweep.Observe(s.deps.Clock.Since(start).Seconds())
	if err != nil {
		// A database outage: the next tick or timer tries again, and the
		// statement then catches up on everything that fell due.
		return nil, err
	}
	if len(expired) == 0 {
		return nil, nil
	}
	s.log.Info("expired_offers", "count", len(expired))
	now := s.deps.Clock.Now()
	st.logged()
	for _, f := range expired {
		s.log.Info("offer_expired", "oid", f.ID, "order", f.OrderID, "master", f.MasterID)
		s.m.offers.WithLabelValues(string(Expired)).Inc()
		s.m.lag.Observe(sinceDeadline(now, f.ExpiresAt).Seconds())
	}
	return expired, nil
}

// followUp does each ended offer's follow-up (expired by a sweep, or
// withdrawn by a master's block), at most Config.Workers at once across
// all sweeps of this replica, then asks for one distribution pass: the
// freed masters may be what other orders wait for.
func (s *Service) followUp(ctx context.Context, expired []Offer) {
	if len(expired) == 0 {
		return
	}
	// Each order counts as pending from now, while it waits for a slot,
	// so the owed-orders recheck leaves it to this follow-up.
	dones := make([]func(), len(expired))
	for i, f := range expired {
		dones[i] = s.pending.add(f.OrderID)
	}
	var wg sync.WaitGroup
	for i, f := range expired {
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			for _, done := range dones[i:] {
				done()
			}
			return
		}
		wg.Add(1)
		go func() {
			defer func() { <-s.slots; dones[i](); wg.Done() }()
			s.afterExpiry(ctx, f)
		}()
	}
	wg.Wait()
	s.freed()
}

// afterExpiry offers the order to the next candidate (its closing edit and
// live-log line were written with the expiry or withdrawal, which left the
// order owed a step).
func (s *Service) afterExpiry(ctx context.Context, f Offer) {
	s.distributeOwed(ctx, f.OrderID)
}

// Run keeps this replica's expiry timer and serves Wake until ctx ends. The
// timer is armed at the earliest expires_at known: the database's after
// every (re)connect of the listener and after every sweep, and each new
// offer's from NOTIFY. Distribution passes run beside the timer, so a long
// pass never delays an expiry.
func (s *Service) Run(ctx context.Context, listen domain.Listen) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if listen != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			listen(ctx, OffersChannel, func() { s.rearm(ctx) }, func(payload string) {
				ms, err := strconv.ParseInt(payload, 10, 64)
				if err != nil {
					s.log.Warn("bad offers notification", "payload", payload)
					return
				}
				s.timer.arm(time.UnixMilli(ms))
			})
		}()
	} else {
		s.rearm(ctx)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.distributor(ctx)
	}()
	defer s.timer.stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.timer.fired:
			expired, err := s.sweep(ctx)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("expire offers", "err", err)
				}
				// The offers are still due: try again soon rather than at
				// the next NOTIFY or WATCHDOG_INTERVAL tick, but not at
				// once (a server refusing connections is not helped by
				// a hundred attempts a second).
				s.timer.arm(s.deps.Clock.Now().Add(sweepRetry))
				continue
			}
			// Re-armed before the follow-up, which runs beside the timer:
			// offers falling due meanwhile are swept on time.
			s.rearm(ctx)
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.followUp(ctx, expired)
			}()
		}
	}
}

// distributor runs the passes Wake and freed ask for, one at a time;
// requests made during a pass coalesce into one more. Every OwedRecheck
// it also looks at every owed order on its own: that is what makes a lost
// wake-up, a skipped or a failed step cost at most a second. The pass
// after an offer ends reads only the parked orders, through an index:
// it comes after every sweep, and reading every owed order (each
// searching order and its open offer) that often took the database's
// time from the sweeps it follows.
func (s *Service) distributor(ctx context.Context) {
	t := s.deps.Clock.NewTicker(OwedRecheck)
	defer t.Stop()
	for {
		var pass Pass
		select {
		case <-ctx.Done():
			return
		case <-s.wakeAll:
			pass = PassAll
		case <-s.wakeFree:
			pass = PassParked
		case <-t.Chan():
			pass = PassOwed
		}
		if err := s.distribute(ctx, pass); err != nil && ctx.Err() == nil {
			s.log.Error("distribute", "err", err, "retry_in", sweepRetry)
			if pass == PassAll {
				// A pass over every searching order that failed is not
				// redone by the owed-orders recheck: ask for it again.
				s.deps.Clock.AfterFunc(sweepRetry, s.Wake)
			}
		}
	}
}

// sweepRetry is how soon the timer tries again after a sweep or a read of
// the next deadline failed.
const sweepRetry = time.Second

// rearm sets the timer to the database's earliest open deadline.
func (s *Service) rearm(ctx context.Context) {
	next, ok, err := s.deps.Orders.NextOfferExpiry(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("next offer expiry", "err", err)
		}
		// Unarmed, the timer would wait for the next offer's NOTIFY or
		// the WATCHDOG_INTERVAL tick (a minute) while offers fall due:
		// a bench run whose connections the server refused for a moment
		// ("too many clients") expired nothing for a minute.
		s.timer.arm(s.deps.Clock.Now().Add(sweepRetry))
		return
	}
	if ok {
		s.timer.arm(next)
	}
}

// expiryTimer fires once at the earliest deadline it was armed with.
type expiryTimer struct {
	clock clockwork.Clock
	fired chan struct{}
	mu    sync.Mutex
	at    time.Time // zero: not armed
	t     clockwork.Timer
	last  time.Time // when it last fired
}

func (e *expiryTimer) init(c clockwork.Clock) {
	e.clock = c
	e.fired = make(chan struct{}, 1)
}

// arm makes the timer fire at deadline unless it is armed earlier already.
func (e *expiryTimer) arm(deadline time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if floor := e.last.Add(minSweepGap); deadline.Before(floor) {
		deadline = floor
	}
	if !e.at.IsZero() && !deadline.Before(e.at) {
		return
	}
	if e.t != nil {
		e.t.Stop()
	}
	e.at = deadline
	e.t = e.clock.AfterFunc(deadline.Sub(e.clock.Now()), func() {
		e.mu.Lock()
		e.at = time.Time{}
		e.last = e.clock.Now()
		e.mu.Unlock()
		select {
		case e.fired <- struct{}{}:
		default:
		}
	})
}

func (e *expiryTimer) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.t != nil {
		e.t.Stop()
	}
	e.at = time.Time{}
}
