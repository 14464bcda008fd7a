package domain

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Workers are one queue's worker loops on this replica, the one shape of
// every claim-and-process queue here (vacancy matches, cover letters,
// résumé drafts). Each loop takes work with Next until none is claimable,
// then waits for a Wake, the earliest lease expiry (work a dead replica
// left) or Sweep. A failing Next (the database down, say) is retried after
// a backoff doubling from one second to thirty. Nothing lives only here:
// the work is rows, and any replica's loops take it.
type Workers struct {
	// Name names the queue in logs.
	Name string
	// Next claims one item and processes it; worked is false when none
	// was claimable. Its error is an infrastructure error: the item's own
	// failures end in its row.
	Next func(ctx context.Context) (worked bool, err error)
	// Expiry, when set, is when the earliest live claim runs out.
	Expiry func(ctx context.Context) (time.Time, bool, error)
	// Hold, when set, is asked before each claim (idle false) and when
	// nothing was claimable (idle true): a positive wait is slept instead,
	// for a cause that makes claiming pointless (the model refusing us, HH
	// blocking us).
	Hold  func(idle bool) time.Duration
	Sweep time.Duration
	Clock clockwork.Clock
	Log   *slog.Logger
	// Panics contains a panic that got past Next's own handling of its
	// item (in the item's failure path, say): the loop goes on and the item
	// is left to its lease. Zero: contained, logged, not counted.
	Panics Panics

	once sync.Once
	wake chan struct{}
}

func (w *Workers) init() {
	w.once.Do(func() {
		w.wake = make(chan struct{}, 1)
		if w.Clock == nil {
			w.Clock = clockwork.NewRealClock()
		}
		if w.Log == nil {
			w.Log = slog.Default()
		}
	})
}

// Wake tells an idle loop there is work (written on this replica, or
// announced by another's NOTIFY).
func (w *Workers) Wake() {
	w.init()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run runs n loops and blocks until ctx ends and all of them return.
func (w *Workers) Run(ctx context.Context, n int) {
	w.init()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { w.loop(ctx, i) })
	}
	wg.Wait()
}

// Drain takes work on the caller's goroutine until none is claimable: a
// synchronous Run for tests and tools.
func (w *Workers) Drain(ctx context.Context) (int, error) {
	n := 0
	for ctx.Err() == nil {
		worked, err := w.Next(ctx)
		if err != nil || !worked {
			return n, err
		}
		n++
	}
	return n, ctx.Err()
}

func (w *Workers) loop(ctx context.Context, n int) {
	backoff := time.Second
	for ctx.Err() == nil {
		if d := w.hold(false); d > 0 {
			w.sleep(ctx, d)
			continue
		}
		var worked bool
		var err error
		panicked := w.Panics.Contain(w.Log, w.Name, nil, func() { worked, err = w.Next(ctx) })
		if err != nil || panicked != nil {
			if ctx.Err() != nil {
				return
			}
			if panicked == nil {
				// Nothing was claimed, so nothing is lost: wait and retry.
				w.Log.Error(w.Name, "worker", n, "err", err, "retry_in", backoff)
			}
			// Contain logged a panic; a claim that panics every time
			// must not spin, so it backs off as a failing one does.
			w.sleep(ctx, backoff)
			backoff = min(backoff*2, 30*time.Second)
			continue
		}
		backoff = time.Second
		if worked {
			// Pass the wake-up on so idle siblings join in on a backlog.
			w.Wake()
			continue
		}
		if d := w.hold(true); d > 0 {
			w.sleep(ctx, d)
			continue
		}
		w.idle(ctx)
	}
}

func (w *Workers) hold(idle bool) time.Duration {
	if w.Hold == nil {
		return 0
	}
	return w.Hold(idle)
}

// idle waits for a wake-up, the next lease expiry or the sweep interval.
func (w *Workers) idle(ctx context.Context) {
	wait := w.Sweep
	if w.Expiry != nil {
		if at, ok, err := w.Expiry(ctx); err == nil && ok {
			if d := at.Sub(w.Clock.Now()) + 50*time.Millisecond; d < wait {
				wait = max(d, 50*time.Millisecond)
			}
		}
	}
	t := w.Clock.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.wake:
	case <-t.Chan():
	}
}

func (w *Workers) sleep(ctx context.Context, d time.Duration) {
	t := w.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	}
}
