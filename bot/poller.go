package bot

import (
	"context"
	"log/slog"
	"time"

	tele "gopkg.in/telebot.v3"
)

// Lease is a renewable, exclusive claim shared by replicas (Redis in
// production). Only the holder polls Telegram: two pollers would steal each
// other's updates with 409 Conflict.
type Lease interface {
	// Acquire claims the lease if it is free; false means another holds it.
	Acquire(ctx context.Context) (bool, error)
	// Renew extends the lease; false means it was lost (expired and taken).
	Renew(ctx context.Context) (bool, error)
	// Release gives it up early so a peer can take over at once.
	Release(ctx context.Context) error
	// TTL is how long a claim lives unrenewed.
	TTL() time.Duration
}

// leasedPoller long-polls only while it holds the lease. A replica that dies
// stops renewing; a peer takes over within TTL plus its retry interval.
type leasedPoller struct {
	inner *tele.LongPoller
	lease Lease
	log   *slog.Logger
}

func (p *leasedPoller) Poll(b *tele.Bot, dest chan tele.Update, stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()

	ttl := p.lease.TTL()
	waiting := false
	for {
		ok, err := p.lease.Acquire(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.log.Warn("polling lease unavailable", "err", err)
		}
		if !ok {
			if !waiting && err == nil {
				p.log.Info("polling lease held by another replica: standing by")
			}
			waiting = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(ttl / 3):
				continue
			}
		}
		waiting = false
		p.log.Info("polling lease acquired: this replica reads Telegram updates")
		lost := p.pollWhileHeld(ctx, b, dest, ttl)
		if !lost {
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := p.lease.Release(rctx); err != nil {
				p.log.Warn("release polling lease", "err", err)
			}
			rcancel()
			return
		}
		p.log.Warn("polling lease lost: stopped reading updates")
	}
}

// pollWhileHeld runs the long poller and renews the lease; it returns true
// when the lease was lost and false when the bot is stopping.
func (p *leasedPoller) pollWhileHeld(ctx context.Context, b *tele.Bot, dest chan tele.Update, ttl time.Duration) bool {
	innerStop := make(chan struct{})
	done := make(chan struct{})
	go func() { p.inner.Poll(b, dest, innerStop); close(done) }()
	defer func() { close(innerStop); <-done }()

	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			ok, err := p.lease.Renew(ctx)
			if ctx.Err() != nil {
				return false
			}
			if err != nil {
				// Redis may be briefly away while we still hold the key; keep
				// polling until the claim could have expired, then assume a
				// peer took over rather than risk two pollers.
				p.log.Warn("renew polling lease", "err", err)
				if time.Since(renewed) >= ttl {
					return true
				}
				continue
			}
			if !ok {
				return true
			}
			renewed = time.Now()
		}
	}
}
