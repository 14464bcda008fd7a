package redisgate

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A failed shared call sends the gate down and leaves the call to the
// in-process pacer; a call cut short by its own context does not.
func TestFallbackSharedUntilRedisFails(t *testing.T) {
	g := New("test", func(context.Context) error { return errors.New("down") }, nil)
	f := NewFallback(g, func(share int) int { return share }, nil)
	ctx := context.Background()

	done, err := f.Shared(ctx, func() error { return nil })
	require.True(t, done)
	require.NoError(t, err)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	done, err = f.Shared(cancelled, func() error { return context.Canceled })
	require.True(t, done, "the caller's own end is an answer")
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, g.IsDown())

	done, _ = f.Shared(ctx, func() error { return errors.New("connection refused") })
	require.False(t, done)
	require.True(t, g.IsDown())
	calls := 0
	done, _ = f.Shared(ctx, func() error { calls++; return nil })
	require.False(t, done, "while down the shared budget is not asked")
	require.Zero(t, calls)
}

// The in-process pacer is built for the live replicas, DefaultShare while
// they cannot be counted, and kept while a minute old.
func TestFallbackLocalShare(t *testing.T) {
	g := New("test", func(context.Context) error { return nil }, nil)
	builds := 0
	build := func(share int) int { builds++; return share }
	ctx := context.Background()

	require.Equal(t, DefaultShare, NewFallback(g, build, nil).Local(ctx))
	require.Equal(t, DefaultShare, NewFallback(g, build, func(context.Context) (int, error) { return 0, errors.New("db down") }).Local(ctx))

	n := 3
	f := NewFallback(g, build, func(context.Context) (int, error) { return n, nil })
	builds = 0
	require.Equal(t, 3, f.Local(ctx))
	n = 5
	require.Equal(t, 3, f.Local(ctx), "rebuilt only when a minute old")
	require.Equal(t, 1, builds)
}
