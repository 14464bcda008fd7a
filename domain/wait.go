package domain

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// RenewLease keeps a lease while its holder works: it calls renew every
// third of lease, on clock, until ctx ends or renew reports the lease lost
// (false). A failed renewal goes to failed and is tried again at the next
// tick: the lease may still have time left. It reports whether the lease
// was lost, which the holder may want to say.
func RenewLease(ctx context.Context, clock clockwork.Clock, lease time.Duration,
	renew func(context.Context) (bool, error), failed func(error)) (lost bool) {
	t := clock.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.Chan():
		}
		ok, err := renew(ctx)
		switch {
		case ctx.Err() != nil:
			return false
		case err != nil:
			failed(err)
		case !ok:
			return true
		}
	}
}

// Sleep waits d, or less when ctx ends first; it returns ctx's error then
// (and at once, for d not positive, when ctx has ended already).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
