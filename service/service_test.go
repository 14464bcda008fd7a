package service

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every service runs until Cancel, not until the caller's context ends,
// and Wait returns once all have returned.
func TestGroupStopsOnlyOnCancelAndWaitsForAll(t *testing.T) {
	t.Parallel()
	var running atomic.Int32
	loop := Func(func(ctx context.Context) {
		running.Add(1)
		defer running.Add(-1)
		<-ctx.Done()
	})
	ctx, cancelCaller := context.WithCancel(context.Background())
	g := Start(ctx, loop, loop, loop)
	require.Eventually(t, func() bool { return running.Load() == 3 }, 5*time.Second, time.Millisecond)

	cancelCaller()
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.False(t, g.Wait(short), "the caller's end does not stop them")
	require.EqualValues(t, 3, running.Load())

	g.Cancel()
	require.True(t, g.Wait(context.Background()))
	require.Zero(t, running.Load())
}
