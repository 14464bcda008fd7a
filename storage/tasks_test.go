package storage_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/tasks"
	"switchboard/tracker/github"
	"switchboard/tracker/webhook"
)

// Approving a proposal whose group has a destination queues its push in
// the approval's transaction, once; a rejected one, or one from a group
// without a destination, queues nothing. A claim holds the push for its
// lease and reads the task as its tracker receives it (sources with their
// links, the assignee's mapped login); a deferred push waits; a pause of
// its kind holds it on every replica; a push is recorded once, by its own
// claim only.
func TestApprovedProposalsQueueTheirPushOnce(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const team, other = int64(-1001234567890), int64(-555)
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	f.message(team, 41, at, "Bob, please fix the login page")
	f.message(other, 7, at, "someone should water the plants")
	require.NoError(f.t, f.st.GroupChats().Track(f.ctx, team, "Team", true))
	store := f.st.Tasks()
	require.NoError(t, store.SetDestination(f.ctx, tasks.Destination{ChatID: team, Kind: tasks.KindGitHub, Target: "acme/app"}, 7))
	bob, err := f.st.Users().Upsert(f.ctx, domain.User{ID: 501, Username: "BobDev", FirstName: "Bob"})
	require.NoError(t, err)
	require.NoError(t, store.SetLogin(f.ctx, bob.ID, "bob-gh"))

	r := f.running()
	fix := proposal("fix login", ref(team, 41))
	fix.Assignee = "@bobdev"
	_, ps, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 10, []analysis.Proposal{fix, proposal("water plants", ref(other, 7)),
		proposal("rejected one", ref(team, 41))}, nil)
	require.NoError(t, err)
	f.complete(r.ID)
	f.decide(ps[0].ID, analysis.Approved)
	f.decide(ps[1].ID, analysis.Approved)
	f.decide(ps[2].ID, analysis.Rejected)
	var n int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT count(*) FROM task_pushes`).Scan(&n))
	require.Equal(t, 1, n, "only the approved proposal of a group with a destination")

	p, ok, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, tasks.Destination{ChatID: team, Kind: tasks.KindGitHub, Target: "acme/app"}, p.Destination)
	require.Equal(t, "fix login", p.Task.Title)
	require.Equal(t, "bob-gh", p.Task.Assignee, "the mention maps to the member's login, any case")
	require.Equal(t, "@bobdev", p.Task.Mention)
	require.Equal(t, int64(7), p.Task.ApprovedBy)
	require.Len(t, p.Task.Sources, 1)
	require.Equal(t, "https://t.me/c/1234567890/41", p.Task.Sources[0].Link)
	require.Equal(t, "Bob, please fix the login page", p.Task.Sources[0].Text)
	require.Equal(t, "Team", p.Task.Sources[0].ChatTitle)
	_, ok, err = store.Claim(f.ctx, "replica-2", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "held by its claim")

	require.NoError(t, store.Defer(f.ctx, p, time.Now().Add(-time.Second), "a passing failure"))
	require.NoError(t, store.Pause(f.ctx, tasks.KindGitHub, time.Now().Add(time.Hour), "secondary rate limit"))
	_, ok, err = store.Claim(f.ctx, "replica-2", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "its kind is paused")
	_, err = f.st.Pool().Exec(f.ctx, `UPDATE task_pauses SET until = now() - interval '1 second'`)
	require.NoError(t, err)

	again, ok, err := store.Claim(f.ctx, "replica-2", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	recorded, err := store.Pushed(f.ctx, p, tasks.Filed{Number: 1})
	require.NoError(t, err)
	require.False(t, recorded, "a claim that ran out records nothing")
	recorded, err = store.Pushed(f.ctx, again, tasks.Filed{Number: 12, URL: "https://github.com/acme/app/issues/12", State: "open"})
	require.NoError(t, err)
	require.True(t, recorded)
	recent, err := store.Recent(f.ctx, 30*24*time.Hour, 10)
	require.NoError(t, err)
	require.Len(t, recent, 1)
	require.Equal(t, "pushed", recent[0].State)
	require.Equal(t, 12, recent[0].Number)
	_, ok, err = store.Claim(f.ctx, "replica-2", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "pushed once")

	// Forgetting Bob erases his login.
	_, err = f.st.Users().Forget(f.ctx, bob.ID, bob.CreatedAt)
	require.NoError(t, err)
	login, err := store.Login(f.ctx, bob.ID)
	require.NoError(t, err)
	require.Empty(t, login)
}

// A member forgotten while a push citing them waits loses their GitHub
// login, and their cited message leaves the task before it goes: no
// quote, author or link in the body or the webhook's JSON, even
// after an edit in Telegram wrote a text into the erased message again.
// The other member's source stays.
func TestAForgottenMembersMessageLeavesAQueuedPush(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const team = int64(-1001234567892)
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	require.NoError(t, f.st.GroupChats().Track(f.ctx, team, "Team", true))
	store := f.st.Tasks()
	require.NoError(t, store.SetDestination(f.ctx, tasks.Destination{ChatID: team, Kind: tasks.KindGitHub, Target: "acme/app"}, 7))
	alice, err := f.st.Users().Upsert(f.ctx, domain.User{ID: 601, Username: "AliceDev", FirstName: "Alice"})
	require.NoError(t, err)
	bob, err := f.st.Users().Upsert(f.ctx, domain.User{ID: 602, Username: "BobDev", FirstName: "Bob"})
	require.NoError(t, err)
	require.NoError(t, store.SetLogin(f.ctx, bob.ID, "bob-gh"))
	const aliceSays, bobSays = "the login page is broken since Monday", "the session cookie expires too early"
	for _, m := range []analysis.GroupMessage{
		{ChatID: team, MessageID: 51, AuthorID: alice.ID, Author: "Alice", Text: aliceSays, Date: at},
		{ChatID: team, MessageID: 52, AuthorID: bob.ID, Author: "Bob", Text: bobSays, Date: at.Add(time.Minute)},
	} {
		require.NoError(t, f.st.GroupChats().SaveMessage(f.ctx, m))
	}
	r := f.running()
	_, ps, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 10, []analysis.Proposal{proposal("fix login", ref(team, 51), ref(team, 52))}, nil)
	require.NoError(t, err)
	f.complete(r.ID)
	f.decide(ps[0].ID, analysis.Approved)

	_, err = f.st.Users().Forget(f.ctx, bob.ID, bob.CreatedAt)
	require.NoError(t, err)
	login, err := store.Login(f.ctx, bob.ID)
	require.NoError(t, err)
	require.Empty(t, login)
	edited, err := f.st.GroupChats().EditMessage(f.ctx, team, 52, "edited: the session cookie really expires too early")
	require.NoError(t, err)
	require.True(t, edited, "the erased row is there to edit")

	p, ok, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []tasks.Source{{ChatID: team, ChatTitle: "Team", MessageID: 51, Link: "https://t.me/c/1234567892/51",
		Author: "Alice", Text: aliceSays, At: p.Task.Sources[0].At}}, p.Task.Sources)
	require.True(t, p.Task.Sources[0].At.Equal(at))
	payload, err := json.Marshal(webhook.NewPayload(p.Task))
	require.NoError(t, err)
	for name, out := range map[string]string{"the issue's body": github.Body(p.Task, false), "the webhook's JSON": string(payload)} {
		require.Contains(t, out, aliceSays, name)
		require.Contains(t, out, "Alice", name)
		for _, bobs := range []string{"Bob", "bob-gh", "cookie", "/52"} {
			require.NotContains(t, out, bobs, name)
		}
	}
}

// A destination that waits for the run's close gets nothing as proposals
// are approved, and every approved one of the run when it is closed, in
// the close's transaction.
func TestPushesWaitForTheRunsCloseWhereTheDestinationSaysSo(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const team = int64(-1001234567891)
	f.message(team, 1, time.Now(), "please do one")
	f.message(team, 2, time.Now(), "please do two")
	store := f.st.Tasks()
	require.NoError(t, store.SetDestination(f.ctx, tasks.Destination{ChatID: team, Kind: tasks.KindWebhook,
		Target: "https://example.com/hook", OnClose: true}, 7))
	ds, err := store.Destinations(f.ctx)
	require.NoError(t, err)
	require.True(t, ds[team].OnClose)
	r := f.running()
	_, ps, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 10, []analysis.Proposal{proposal("one", ref(team, 1)),
		proposal("two", ref(team, 2))}, nil)
	require.NoError(t, err)
	f.complete(r.ID)
	f.decide(ps[0].ID, analysis.Approved)
	f.decide(ps[1].ID, analysis.Rejected)
	count := func() int {
		var n int
		require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT count(*) FROM task_pushes`).Scan(&n))
		return n
	}
	require.Zero(t, count(), "nothing goes before the close")
	f.closeRun(r.ID)
	require.Equal(t, 1, count(), "the approved one goes with the close")
	p, ok, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "one", p.Task.Title)
}

// A push records what it made in its tracker; Creations reads a kind's
// back, newest first, on the database's clock, and Due says how long until
// the next pending push may be claimed: its not_before, a pause of its
// kind and a claim held on it all count.
func TestPushCreationsAndDue(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const team = int64(-1001234567892)
	store := f.st.Tasks()
	require.NoError(t, store.SetDestination(f.ctx, tasks.Destination{ChatID: team, Kind: tasks.KindGitHub, Target: "acme/app"}, 7))
	_, ok, err := store.Due(f.ctx)
	require.NoError(t, err)
	require.False(t, ok, "nothing pending")

	r := f.running()
	var ps []analysis.Proposal
	for i := range 3 {
		f.message(team, int64(i+1), time.Now(), "please do it")
		ps = append(ps, proposal("task", ref(team, int64(i+1))))
	}
	_, saved, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 10, ps, nil)
	require.NoError(t, err)
	f.complete(r.ID)
	for _, p := range saved {
		f.decide(p.ID, analysis.Approved)
	}
	wait, ok, err := store.Due(f.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, wait, "due now")

	first, _, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	_, err = store.Pushed(f.ctx, first, tasks.Filed{Number: 1, Created: 2})
	require.NoError(t, err)
	second, _, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	_, err = store.Pushed(f.ctx, second, tasks.Filed{Number: 2, Created: 1})
	require.NoError(t, err)
	now, cs, err := store.Creations(f.ctx, tasks.KindGitHub, time.Hour, 10)
	require.NoError(t, err)
	require.Len(t, cs, 2)
	require.Equal(t, []int{1, 2}, []int{cs[0].N, cs[1].N}, "newest first")
	require.False(t, cs[0].At.After(now))
	_, cs, err = store.Creations(f.ctx, tasks.KindGitHub, time.Hour, 1)
	require.NoError(t, err)
	require.Len(t, cs, 1, "at most limit")
	_, cs, err = store.Creations(f.ctx, tasks.KindWebhook, time.Hour, 10)
	require.NoError(t, err)
	require.Empty(t, cs, "another kind's")

	third, _, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	wait, ok, err = store.Due(f.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.InDelta(t, time.Minute.Seconds(), wait.Seconds(), 2, "held by its claim")
	require.NoError(t, store.Defer(f.ctx, third, time.Now().Add(10*time.Second), "later"))
	wait, _, err = store.Due(f.ctx)
	require.NoError(t, err)
	require.InDelta(t, 10, wait.Seconds(), 2, "its not_before")
	require.NoError(t, store.Pause(f.ctx, tasks.KindGitHub, time.Now().Add(30*time.Second), "paced"))
	wait, _, err = store.Due(f.ctx)
	require.NoError(t, err)
	require.InDelta(t, 30, wait.Seconds(), 2, "its kind's pause")
}

// A refused push is set aside by its own claim only, once: the statement
// run again for the same claim, or by a claim that lost the push, changes
// nothing and writes no second notice (the claim's origin guards it too).
// Set aside, it is claimed no more; Retry makes it due again once, with
// its backoff counted afresh and the tracker's words cleared.
func TestARefusedPushIsSetAsideOnceAndRetriedOnce(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const team = int64(-1001234567890)
	f.message(team, 41, time.Now(), "please fix the login page")
	store := f.st.Tasks()
	require.NoError(t, store.SetDestination(f.ctx, tasks.Destination{ChatID: team, Kind: tasks.KindGitHub, Target: "acme/app"}, 7))
	r := f.running()
	_, ps, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 10, []analysis.Proposal{proposal("fix login", ref(team, 41))}, nil)
	require.NoError(t, err)
	f.complete(r.ID)
	f.decide(ps[0].ID, analysis.Approved)

	p, ok, err := store.Claim(f.ctx, "replica-1", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	note := func() []domain.Message {
		return []domain.Message{{ChatID: -5001, Kind: domain.KindNote, Text: "refused", Origin: "tasks:refused:" + p.Token + ":0"}}
	}
	set, err := store.Refuse(f.ctx, p, "422 Validation Failed", note())
	require.NoError(t, err)
	require.True(t, set)
	set, err = store.Refuse(f.ctx, p, "422 Validation Failed", note())
	require.NoError(t, err)
	require.False(t, set, "set aside already")
	var told int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT count(*) FROM outbox WHERE body->>'text' = 'refused'`).Scan(&told))
	require.Equal(t, 1, told)
	_, ok, err = store.Claim(f.ctx, "replica-2", time.Minute)
	require.NoError(t, err)
	require.False(t, ok, "a refused push is not claimed")
	recent, err := store.Recent(f.ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, "refused", recent[0].State)
	require.Equal(t, "422 Validation Failed", recent[0].LastError)

	runID, err := store.Retry(f.ctx, ps[0].ID, 7)
	require.NoError(t, err)
	require.Equal(t, r.ID, runID)
	_, err = store.Retry(f.ctx, ps[0].ID, 7)
	require.ErrorIs(t, err, domain.ErrNotFound)
	again, ok, err := store.Claim(f.ctx, "replica-2", time.Minute)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, again.Attempts, "counted afresh")
	set, err = store.Refuse(f.ctx, p, "stale claim", note())
	require.NoError(t, err)
	require.False(t, set, "the old claim no longer holds it")
	recent, err = store.Recent(f.ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, "pending", recent[0].State)
	require.Empty(t, recent[0].LastError)
}
