package domain_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// Drain takes work until none is claimable and stops at the first error.
func TestWorkersDrain(t *testing.T) {
	t.Parallel()
	left := atomic.Int32{}
	left.Store(3)
	w := &domain.Workers{Name: "test", Next: func(context.Context) (bool, error) {
		return left.Add(-1) >= 0, nil
	}, Sweep: time.Hour}
	n, err := w.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, n)

	broken := errors.New("database down")
	w = &domain.Workers{Name: "test", Next: func(context.Context) (bool, error) { return false, broken }}
	_, err = w.Drain(context.Background())
	require.ErrorIs(t, err, broken)
}

// An idle loop sleeps for its Sweep (an hour here) unless woken: a Wake
// makes it take the work at once, and a failing Next is retried.
func TestWorkersWakeAndRetry(t *testing.T) {
	t.Parallel()
	var queued, done, failures atomic.Int32
	failures.Store(1)
	w := &domain.Workers{Name: "test", Sweep: time.Hour, Next: func(context.Context) (bool, error) {
		if failures.Add(-1) >= 0 {
			return false, errors.New("database down")
		}
		if queued.Load() > done.Load() {
			done.Add(1)
			return true, nil
		}
		return false, nil
	}}
	stop := run(t, w)

	queued.Add(3)
	w.Wake()
	require.Eventually(t, func() bool { return done.Load() == 3 }, 30*time.Second, 5*time.Millisecond,
		"woken, past the first claim's failure (retried after a second), every item taken")
	stop()
}

// run starts w's loop with one worker. stop, also called when the test
// ends, ends it and fails the test if Run does not return.
func run(t *testing.T, w *domain.Workers) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { w.Run(ctx, 1); close(stopped) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-stopped:
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
