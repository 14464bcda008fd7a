package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/domain/vacancy"
	"switchboard/storage"
)

// liveFixture is two replicas holding their liveness locks, each with an
// inbox update, an outbox row and a memory-chat stage (users 1 and 2's runs)
// claimed for ten minutes, beside an update claimed under a name without a
// liveness key (a claimer that cannot be told dead: its claim ends only with
// its lease).
type liveFixture struct {
	*testBundle
	a, b         *storage.Liveness
	runA, matchA int64
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
	require.NoError(t, f.st.Inbox().Take(f.ctx, "", []domain.InboxUpdate{upd(1, 101), upd(2, 102), upd(3, 103)}))
	require.NoError(t, f.st.Outbox().Enqueue(f.ctx,
		domain.Message{ChatID: 201, Kind: domain.KindReply, Text: "to a's chat"},
		domain.Message{ChatID: 202, Kind: domain.KindReply, Text: "to b's chat"}))
	for _, c := range []string{f.a.Claimer(), f.b.Claimer(), "legacy"} {
		got, err := f.st.Inbox().Claim(f.ctx, c, 1, 10*time.Minute)
		require.NoError(t, err)
		require.Len(t, got, 1, c)
	}
	for _, c := range []string{f.a.Claimer(), f.b.Claimer()} {
		got, err := f.st.Outbox().Claim(f.ctx, c, 1, 10*time.Minute)
		require.NoError(t, err)
		require.Len(t, got, 1, c)
	}
	var runs []int64
	for i, c := range []string{f.a.Claimer(), f.b.Claimer()} {
		user := int64(i + 1)
		f.users(domain.User{FirstName: "U"}, user)
		r, _, err := f.st.PipelineRuns().Submit(f.ctx, user, user, 1, "hello")
		require.NoError(t, err)
		_, _, ok, err := f.st.PipelineRuns().Capture(f.ctx, r.ID, memory.New, memory.Analyzing, 10*time.Minute, c, memory.RecallSize{})
		require.NoError(t, err)
		require.True(t, ok, c)
		runs = append(runs, r.ID)
	}
	f.runA = runs[0]
	// A's vacancy match (B's would be claimed by A's claim's order, so one).
	f.exec(`INSERT INTO vacancies (id, title, published_at) VALUES (1, 'Go developer', now())`)
	f.exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at) VALUES (1, 1, 'QUEUED', now())`)
	c, ok, err := f.st.Matches().Claim(f.ctx, vacancy.ClaimOptions{ClaimLease: 10 * time.Minute, DetailFresh: time.Hour, Claimer: f.a.Claimer()})
	require.NoError(t, err)
	require.True(t, ok)
	f.matchA = c.Match.ID
	// As a claim takes it when the vacancy's other matches wait on its
	// detail: while it holds, nobody claims a match of the vacancy.
	f.exec(`UPDATE vacancies SET detail_fetching_until = now() + interval '10 minutes' WHERE id = 1`)
	f.requireFree(t, free{}, "all claimed")
	return f
}

// free is what requireFree expects to find claimable.
type free struct{ updates, chats, runs, matches []int64 }

// requireFree requires the claimable updates, outbox chats and matches, and
// the runs the memory reaper returns, to be these (claiming them, for ten
// minutes, as "observer").
func (f liveFixture) requireFree(t *testing.T, want free, msg string) {
	t.Helper()
	var matches []int64
	if c, ok, err := f.st.Matches().Claim(f.ctx, vacancy.ClaimOptions{ClaimLease: 10 * time.Minute, DetailFresh: time.Hour, Claimer: "observer"}); ok {
		matches = append(matches, c.Match.ID)
	} else {
		require.NoError(t, err)
	}
	require.Equal(t, want.matches, matches, "vacancy matches: "+msg)
	returned, failed, err := f.st.PipelineRuns().Reap(f.ctx, 5)
	require.NoError(t, err)
	require.Empty(t, failed)
	var reaped []int64
	for _, r := range returned {
		require.Equal(t, memory.New, r.Status, "back to the status before its stage")
		reaped = append(reaped, r.ID)
	}
	require.Equal(t, want.runs, reaped, "memory runs: "+msg)
	us, err := f.st.Inbox().Claim(f.ctx, "observer", 10, 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, want.updates, ids(us), "inbox: "+msg)
	rows, err := f.st.Outbox().Claim(f.ctx, "observer", 10, 10*time.Minute)
	require.NoError(t, err)
	var got []int64
	for _, r := range rows {
		got = append(got, r.ChatID)
	}
	require.Equal(t, want.chats, got, "outbox: "+msg)
}

// deadOnes is what A claimed.
func (f liveFixture) deadOnes() free {
	return free{updates: []int64{1}, chats: []int64{201}, runs: []int64{f.runA}, matches: []int64{f.matchA}}
}

// killA sets the scene and kills A; B's sweep has seen its lock gone once,
// at t0.
func killA(t *testing.T) (f liveFixture, t0 time.Time) {
	t.Helper()
	f = setupLiveness(t)
	f.a.Die()
	t0 = time.Now()
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0))
	return f, t0
}

// A replica killed with claims open: its peer sees its lock gone and, once
// the grace has passed, gives its claims back (the update, the outbox row,
// the match and its vacancy's fetch lease; the stage's lease ended, the
// reapers woken), long before their ten-minute leases; the live peer's
// claims and the keyless one stay. The dead replica's own sweeps never give
// back its own claims.
func TestLivenessGivesBackADeadReplicasClaims(t *testing.T) {
	t.Parallel()
	f, t0 := killA(t)
	require.NoError(t, f.a.ReclaimAt(f.ctx, t0))
	require.NoError(t, f.a.ReclaimAt(f.ctx, t0.Add(time.Hour)))
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(storage.LiveGrace-time.Millisecond)))
	f.requireFree(t, free{}, "within the grace, and never by the dead one's own sweeps")

	// The memory reapers hear that a dead replica's stages are theirs now.
	reap := listening(t, f.st, memory.Channel)
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(storage.LiveGrace)))
	f.requireFree(t, f.deadOnes(), "the dead replica's claims are given back after the grace, no one else's")
	require.Equal(t, memory.Channel+` {"reap":true}`, notified(t, reap), "the reapers are woken")
}

// A replica whose lock connection broke and came back within the grace (a
// server restart, a network blink) keeps its claims: its peer's patience
// starts over.
func TestLivenessKeepsTheClaimsOfAReplicaThatCameBack(t *testing.T) {
	t.Parallel()
	f, t0 := killA(t)

	held, err := f.a.Hold(f.ctx)
	require.NoError(t, err)
	require.True(t, held, "the lock is taken again on a new connection")
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(storage.LiveGrace)))
	require.NoError(t, f.b.ReclaimAt(f.ctx, t0.Add(2*storage.LiveGrace)))
	f.requireFree(t, free{}, "a replica that is back keeps its claims")

	// Gone for good this time: the grace counts from the new sighting.
	f.a.Die()
	t1 := t0.Add(3 * storage.LiveGrace)
	require.NoError(t, f.b.ReclaimAt(f.ctx, t1))
	f.requireFree(t, free{}, "seen gone once")
	require.NoError(t, f.b.ReclaimAt(f.ctx, t1.Add(storage.LiveGrace)))
	f.requireFree(t, f.deadOnes(), "given back a grace after it went again")
}
