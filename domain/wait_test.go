package domain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// A lease is renewed every third of its length; a failed renewal is
// reported and tried again at the next tick, a lost lease ends the loop
// and says so, and so does nothing but the context's end.
func TestRenewLease(t *testing.T) {
	t.Parallel()
	ctx, clock := t.Context(), clockwork.NewFakeClock()
	answers := make(chan error) // nil: renewed; errLost: lost; else failed
	errLost := errors.New("lost")
	var failed []error
	lost := make(chan bool, 1)
	go func() {
		lost <- domain.RenewLease(ctx, clock, 3*time.Minute, func(context.Context) (bool, error) {
			switch err := <-answers; err {
			case errLost:
				return false, nil
			default:
				return err == nil, err
			}
		}, func(err error) { failed = append(failed, err) })
	}()
	down := errors.New("database down")
	for _, answer := range []error{nil, down, nil, errLost} {
		require.NoError(t, clock.BlockUntilContext(ctx, 1))
		clock.Advance(time.Minute)
		answers <- answer
	}
	require.True(t, <-lost, "the lease was lost")
	require.Equal(t, []error{down}, failed, "the failed renewal, and nothing else")

	stop, cancel := context.WithCancel(ctx)
	go func() {
		lost <- domain.RenewLease(stop, clock, 3*time.Minute, func(context.Context) (bool, error) { return true, nil },
			func(err error) { t.Errorf("failed: %v", err) })
	}()
	require.NoError(t, clock.BlockUntilContext(ctx, 1))
	cancel()
	require.False(t, <-lost, "ended by its context")
}

// Sleep sleeps its time unless the context ends first, and says which.
func TestSleep(t *testing.T) {
	t.Parallel()
	start := time.Now()
	require.NoError(t, domain.Sleep(t.Context(), 20*time.Millisecond))
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
	require.NoError(t, domain.Sleep(t.Context(), 0))

	ended, cancel := context.WithCancel(t.Context())
	cancel()
	require.ErrorIs(t, domain.Sleep(ended, time.Hour), context.Canceled)
	require.ErrorIs(t, domain.Sleep(ended, 0), context.Canceled)
}
