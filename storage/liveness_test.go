package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/storage"
)

// liveFixture is two replicas holding their liveness locks, each with an
// inbox update and an outbox row claimed for ten minutes, beside an update
// claimed under a name without a liveness key (a claimer that cannot be
// told dead: its claim ends only with its lease).
type liveFixture struct {
	*testBundle
	a, b *storage.Liveness
}

func setupLiveness(t *testing.T) liveFixture {
	t.Helper()
	f := liveFixture{testBundle: setup(t)}
	f.a, f.b = f.st.Liveness("replica-a"), f.st.Liveness("replica-b")
	require.NotEqual(t, f.a.Claimer(), f.b.Claimer())
	for _, l := range []*storage.Liveness{f.a, f.b} {
		held, err := l.Hold(f.ctx)
		require.NoError(t, err)
		require.True(t, held, l.Claimer())
		t.Cleanup(l.Die)
	}
	require.NoError(t, f.st.TakeUpdates(f.ctx, []domain.InboxUpdate{upd(1, 101), upd(2, 102), upd(3, 103)}))
	require.NoError(t, f.st.EnqueueMessages(f.ctx,
		domain.Message{ChatID: 201, Kind: domain.KindReply, Text: "to a's chat"},
		domain.Message{ChatID: 202, Kind: domain.KindReply, Text: "to b's chat"}))
	for _, c := range []string{f.a.Claimer(), f.b.Claimer(), "legacy"} {
		got, err := f.st.ClaimUpdates(f.ctx, c, 1, 10*time.Minute)
		require.NoError(t, err)
		require.Len(t, got, 1, c)
	}
	for _, c := range []string{f.a.Claimer(), f.b.Claimer()} {
		got, err := f.st.ClaimOutbox(f.ctx, c, 1, 10*time.Minute)
		require.NoError(t, err)
		require.Len(t, got, 1, c)
	}
	f.requireFree(t, nil, nil, "all claimed")
	return f
}

// requireFree requires the claimable updates and outbox chats to be these
// (claiming them, for ten minutes, as "observer").
func (f liveFixture) requireFree(t *testing.T, updates, chats []int64, msg string) {
	t.Helper()
	us, err := f.st.ClaimUpdates(f.ctx, "observer", 10, 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, updates, ids(us), "inbox: "+msg)
	rows, err := f.st.ClaimOutbox(f.ctx, "observer", 10, 10*time.Minute)
	require.NoError(t, err)
	var got []int64
	for _, r := range rows {
		got = append(got, r.ChatID)
	}
	require.Equal(t, chats, got, "outbox: "+msg)
}

// A replica killed with claims open: its peer sees its lock gone and, once
// the grace has passed, gives its update and its row back, long before
// their ten-minute leases; the live peer's claims and the keyless one stay.
// The dead replica's own sweeps never give back its own claims.
func TestLivenessGivesBackADeadReplicasClaims(t *testing.T) {
	t.Parallel()
	f := setupLiveness(t)
	f.a.Die()
	t0 := time.Now()

	require.NoError(t, f.a.ReclaimAt(f.ctx, t0))
	require.NoError(t, f.a.ReclaimAt(f.ctx, t0.Add(time.Hour)))
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0))
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(storage.LiveGrace-time.Millisecond)))
	f.requireFree(t, nil, nil, "within the grace, and never by the dead one's own sweeps")

	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(storage.LiveGrace)))
	f.requireFree(t, []int64{1}, []int64{201}, "the dead replica's claims are given back after the grace, no one else's")
}

// A replica whose lock connection broke and came back within the grace (a
// server restart, a network blink) keeps its claims: its peer's patience
// starts over.
func TestLivenessKeepsTheClaimsOfAReplicaThatCameBack(t *testing.T) {
	t.Parallel()
	f := setupLiveness(t)
	f.a.Die()
	t0 := time.Now()
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0))

	held, err := f.a.Hold(f.ctx)
	require.NoError(t, err)
	require.True(t, held, "the lock is taken again on a new connection")
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(storage.LiveGrace)))
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(2*storage.LiveGrace)))
	f.requireFree(t, nil, nil, "a replica that is back keeps its claims")

	// Gone for good this time: the grace counts from the new sighting.
	f.a.Die()
	t1 := t0.Add(3 * storage.LiveGrace)
	require.NoError(t, f.b.ReclaimAt(f.ctx, t1))
	f.requireFree(t, nil, nil, "seen gone once")
	require.NoError(t, f.b.ReclaimAt(f.ctx, t1.Add(storage.LiveGrace)))
	f.requireFree(t, []int64{1}, []int64{201}, "given back a grace after it went again")
}
