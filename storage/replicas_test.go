package storage_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHeartbeatAndReplicas(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st := f.ctx, f.st

	list, err := st.Replicas(ctx, time.Minute)
	require.NoError(t, err)
	require.Empty(t, list)

	startA := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	startB := startA.Add(time.Hour)
	require.NoError(t, st.Heartbeat(ctx, "a", "v1", startA))
	require.NoError(t, st.Heartbeat(ctx, "b", "v1", startB))
	// b was last seen ten minutes ago; a beats again, restarted on v2.
	f.exec(`UPDATE replicas SET seen_at = now() - interval '10 minutes' WHERE instance = 'b'`)
	f.exec(`UPDATE replicas SET seen_at = now() - interval '1 minute' WHERE instance = 'a'`)
	restarted := startA.Add(2 * time.Hour)
	var before time.Time
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT now()`).Scan(&before))
	require.NoError(t, st.Heartbeat(ctx, "a", "v2", restarted))

	list, err = st.Replicas(ctx, 5*time.Minute)
	require.NoError(t, err)
	require.Len(t, list, 1, "b is gone")
	a := list[0]
	require.Equal(t, "a", a.Instance)
	require.Equal(t, "v2", a.Version)
	require.Equal(t, restarted, a.StartedAt)
	require.False(t, a.SeenAt.Before(before), "seen_at is the database's now()")

	list, err = st.Replicas(ctx, time.Hour)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "a", list[0].Instance, "newest first")
	require.Equal(t, "b", list[1].Instance)
	require.Equal(t, "v1", list[1].Version)
	require.Equal(t, startB, list[1].StartedAt)
	require.Equal(t, 10*time.Minute, a.SeenAt.Sub(list[1].SeenAt).Round(time.Minute))

	var rows int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM replicas`).Scan(&rows))
	require.Equal(t, 2, rows, "one row per instance")
}

// A replica beats at start and every interval until stopped; the live
// replicas are those seen within three beats.
func TestHeartbeatsRunAndLiveWithinThreeBeats(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st := f.ctx, f.st
	beats := st.Heartbeats("a", "v1", time.Minute, slog.New(slog.DiscardHandler))
	t.Cleanup(beats.Close)

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
