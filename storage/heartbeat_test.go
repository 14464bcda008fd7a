package storage_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A replica beats at start and every interval until stopped; the live
// replicas are those seen within three beats.
func TestHeartbeatsRunAndLiveWithinThreeBeats(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st := f.ctx, f.st
	beats := st.Heartbeats("a", "v1", time.Minute, slog.New(slog.DiscardHandler))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { beats.Run(runCtx); close(done) }()
	require.Eventually(t, func() bool {
		n, err := beats.LiveCount(ctx)
		return err == nil && n == 1
	}, 10*time.Second, 10*time.Millisecond, "beats at start")
	stop()
	<-done

	// b missed two beats and is still live; c missed three and is gone.
	require.NoError(t, st.Heartbeat(ctx, "b", "v1", time.Now()))
	require.NoError(t, st.Heartbeat(ctx, "c", "v1", time.Now()))
	f.exec(`UPDATE replicas SET seen_at = now() - CASE instance
    WHEN 'b' THEN interval '2 minutes 50 seconds' ELSE interval '3 minutes 10 seconds' END WHERE instance IN ('b', 'c')`)
	live, err := beats.Live(ctx)
	require.NoError(t, err)
	var names []string
	for _, r := range live {
		names = append(names, r.Instance)
	}
	require.Equal(t, []string{"a", "b"}, names)
	require.Equal(t, "v1", live[0].Version)
	n, err := beats.LiveCount(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}
