package redisgate

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Down after a failure, probing only when the backoff falls due (1 s, then
// doubling to Max), up at the first answer; each switch logged once.
func TestGateProbesWithBackoffAndLogsEachSwitchOnce(t *testing.T) {
	var logs bytes.Buffer
	var redisErr error = errors.New("connection refused")
	probes := 0
	g := New("test limiter", func(context.Context) error { probes++; return redisErr }, slog.New(slog.NewTextHandler(&logs, nil)))
	g.Max = 4 * time.Second
	now := time.Unix(1000, 0)
	g.now = func() time.Time { return now }
	ctx := context.Background()

	require.False(t, g.Down(ctx))
	g.Fail(ctx, redisErr)
	g.Fail(ctx, redisErr)
	require.True(t, g.Down(ctx))
	require.Zero(t, probes, "not before the first second")
	for _, step := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		now = now.Add(step - time.Millisecond)
		before := probes
		require.True(t, g.Down(ctx))
		require.Equal(t, before, probes, "not before %s", step)
		now = now.Add(time.Millisecond)
		require.True(t, g.Down(ctx))
		require.Equal(t, before+1, probes, "probed at %s", step)
	}
	redisErr = nil
	now = now.Add(4 * time.Second)
	require.False(t, g.Down(ctx))
	require.False(t, g.Down(ctx))
	g.Fail(context.Background(), nil)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	g.Fail(cancelled, errors.New("context canceled"))
	require.False(t, g.IsDown(), "a nil error or the caller's cancel is not Redis's failure")
	require.Equal(t, 2, g.Switches())
	require.Equal(t, 1, strings.Count(logs.String(), "redis unavailable"))
	require.Equal(t, 1, strings.Count(logs.String(), "redis answers again"))
}
