package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/tasks"
	"switchboard/e2e/ghfake"
	"switchboard/storage"
	"switchboard/storage/storagetest"
	"switchboard/tracker/github"
)

const team = int64(-1001234567890)

// world is the pusher over a real database and the fake GitHub.
type world struct {
	t     *testing.T
	ctx   context.Context
	store *storage.Store
	gh    *ghfake.Server
	told  atomic.Int64
	// content and maxWait are the pusher's Config.Content and MaxWait.
	content []tasks.Window
	maxWait time.Duration
	// tracker wraps the GitHub client where a test makes it fail.
	tracker func(tasks.Tracker) tasks.Tracker
	// refused, when set, sees what the admins are told of a refusal.
	refused func(d tasks.Destination, gone bool, why string)
	// reg takes the pushers' metrics.
	reg *prometheus.Registry
}

func newWorld(t *testing.T, opts ...ghfake.Option) *world {
	t.Helper()
	w := &world{t: t, ctx: context.Background(), store: storagetest.New(t), gh: ghfake.New(t, opts...), reg: prometheus.NewRegistry()}
	w.gh.AddRepo("acme/app")
	w.gh.AddToken("ghp_test", "switchboard-bot", ghfake.Write("acme/app"))
	require.NoError(t, w.store.Tasks().SetDestination(w.ctx, tasks.Destination{ChatID: team, Kind: tasks.KindGitHub, Target: "acme/app"}, 7))
	return w
}

// approve saves n proposals from the team's messages in a completed run
// and approves them all: n pushes queued.
func (w *world) approve(n int) { w.approveIn(n, team) }

// approveIn is approve with the proposals from chats' messages in turn,
// so that their pushes go to each chat's destination.
func (w *world) approveIn(n int, chats ...int64) {
	w.t.Helper()
	w.approveEach(n, func(i int, id int64, chat int64) (analysis.Proposal, []analysis.GroupMessage) {
		return analysis.Proposal{Title: fmt.Sprintf("thing %d", id), Description: "from the chat", Priority: "high",
				Sources: []analysis.Ref{{ChatID: chat, MessageID: id}}},
			[]analysis.GroupMessage{{ChatID: chat, MessageID: id, AuthorID: 5, Author: "Ann", Text: fmt.Sprintf("please do thing %d", id), Date: time.Now()}}
	}, chats...)
}

// approveEach saves n proposals that each makes (the i-th, a message id
// of its own, its chat: chats in turn) with their source messages in a
// completed run, and approves them all.
func (w *world) approveEach(n int, each func(i int, id, chat int64) (analysis.Proposal, []analysis.GroupMessage), chats ...int64) {
	w.t.Helper()
	runs := w.store.Runs()
	r, _, err := runs.Create(w.ctx, analysis.Run{CreatedBy: 7, From: time.Now().Add(-time.Hour), To: time.Now(),
		Filters: analysis.Filters{Window: time.Hour}}, nil)
	require.NoError(w.t, err)
	_, ok, err := runs.Start(w.ctx, r.ID, false, time.Hour, nil)
	require.NoError(w.t, err)
	require.True(w.t, ok)
	ps := make([]analysis.Proposal, n)
	for i := range ps {
		var msgs []analysis.GroupMessage
		ps[i], msgs = each(i, int64(1000*r.ID)+int64(1000*i), chats[i%len(chats)])
		for _, m := range msgs {
			require.NoError(w.t, w.store.GroupChats().SaveMessage(w.ctx, m))
		}
	}
	_, _, err = runs.SaveProposalBatch(w.ctx, r.ID, 1, n, ps, nil)
	require.NoError(w.t, err)
	_, ok, err = runs.Complete(w.ctx, r.ID, nil)
	require.NoError(w.t, err)
	require.True(w.t, ok)
	_, ok, err = runs.AskApproveAllProposals(w.ctx, r.ID, nil)
	require.NoError(w.t, err)
	require.True(w.t, ok)
	approved, _, ok, err := runs.ApproveAllProposals(w.ctx, r.ID, 7, nil)
	require.NoError(w.t, err)
	require.True(w.t, ok)
	require.Len(w.t, approved, n)
}

// service is a pusher over store (the world's, or one that fails where a
// test says), with a lease of lease.
func (w *world) service(store interface {
	tasks.Store
	tasks.SyncStore
}, lease time.Duration) *tasks.Service {
	w.t.Helper()
	gh, err := github.New(github.Config{URL: w.gh.URL(), Token: "ghp_test"})
	require.NoError(w.t, err)
	var tr tasks.Tracker = gh
	if w.tracker != nil {
		tr = w.tracker(gh)
	}
	return tasks.NewService(tasks.Config{Lease: lease, Claimer: "test", Content: w.content, MaxWait: w.maxWait, Registerer: w.reg}, store,
		map[string]tasks.Tracker{tasks.KindGitHub: tr},
		notices{w}, render{w}, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// pushed counts the pushes recorded as filed.
func (w *world) pushed() int {
	w.t.Helper()
	var n int
	require.NoError(w.t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM task_pushes WHERE state = 'pushed'`).Scan(&n))
	return n
}

// until runs push until every one of n pushes is recorded, bounded by
// what no healthy pusher takes.
func (w *world) until(s *tasks.Service, n int) {
	w.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for w.pushed() < n {
		require.True(w.t, time.Now().Before(deadline), "%d of %d pushed", w.pushed(), n)
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		require.NoError(w.t, s.Push(ctx))
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
}

// filedOnce asserts the repository holds n issues, one per task.
func (w *world) filedOnce(n int) {
	w.t.Helper()
	seen := map[string]int{}
	for _, i := range w.gh.Issues("acme/app") {
		seen[i.Title]++
	}
	require.Len(w.t, seen, n)
	for title, k := range seen {
		require.Equal(w.t, 1, k, "%q filed %d times", title, k)
	}
}

type notices struct{ w *world }

func (n notices) Once(context.Context, string, []domain.Message) error { n.w.told.Add(1); return nil }
func (notices) End(context.Context, string, []domain.Message) error    { return nil }

type render struct{ w *world }

func (r render) TrackerRefused(d tasks.Destination, gone bool, why string) []domain.Message {
	if r.w.refused != nil {
		r.w.refused(d, gone, why)
	}
	return nil
}
func (render) TrackerBack(tasks.Destination) []domain.Message           { return nil }
func (render) AssigneeDropped(tasks.Push, tasks.Filed) []domain.Message { return nil }
func (render) TaskRefused(p tasks.Push, why string) []domain.Message {
	return []domain.Message{{ChatID: -5001, Kind: domain.KindNote, Text: "refused " + p.Task.Title + ": " + why}}
}
func (render) TaskClosed(t tasks.Tracked) []domain.Message {
	return []domain.Message{{ChatID: -5001, Kind: domain.KindNote, Text: fmt.Sprintf("closed #%d", t.Number)}}
}

// GitHub's secondary limit trips for 20 s partway through a hundred
// approved tasks, the pusher driven as the scheduler drives it: every task
// is filed once, no request reaches GitHub before its Retry-After (so one
// refusal, not one a tick), the admins are told at most once, and the
// pushing resumes as soon as the limit is over. (GitHub's own Retry-After
// is usually a minute; the pusher reads whatever it says, and a shorter
// one keeps the test from idling a minute.)
func TestSecondaryLimitDuringAHundredPushes(t *testing.T) {
	t.Parallel()
	const (
		n     = 100
		limit = 20 * time.Second
		// slack is how late after the limit the first issue past it may
		// come: a tick or two and one push, far from another minute of
		// waiting. (The last comes when the seventy left are pushed, which
		// under a loaded CI's race detector took 20 s.)
		slack = 15 * time.Second
		tick  = 200 * time.Millisecond
	)
	w := newWorld(t, ghfake.WithLimits(ghfake.Limits{Core: 5000, Search: 30}))
	w.content = []tasks.Window{} // the fake's content limits are off, and so is the pace
	w.approve(n)
	trip := &tripping{Tasks: w.store.Tasks(), after: 30, trip: func() { w.gh.TripSecondaryLimit(limit) }}
	s := w.service(trip, time.Minute)
	// No healthy pusher comes near it: it bounds a hang, not the pace.
	deadline := time.Now().Add(5 * time.Minute)
	ctx, cancel := context.WithDeadline(w.ctx, deadline)
	defer cancel()
	for w.pushed() < n {
		require.True(t, time.Now().Before(deadline), "%d of %d pushed", w.pushed(), n)
		// The job runs until nothing is due, with no budget of its own
		// (jobs.Scheduler gives it none), then waits for the next tick.
		require.NoError(t, s.Push(ctx))
		time.Sleep(tick)
	}
	w.filedOnce(n)
	require.False(t, trip.at.IsZero(), "the limit never tripped")
	require.Empty(t, w.gh.EarlyRequests(), "a request before GitHub's Retry-After")
	var limited []ghfake.Request
	var resumed, lastFiled time.Time
	for _, r := range w.gh.Requests() {
		switch {
		case r.Status == 403 || r.Status == 429:
			limited = append(limited, r)
		case r.Method == "POST" && r.Path == "/repos/acme/app/issues" && r.Status == 201:
			if resumed.IsZero() && r.At.After(trip.at) {
				resumed = r.At
			}
			lastFiled = r.At
		}
	}
	require.Len(t, limited, 1, "one refusal, then the pushes waited")
	require.True(t, limited[0].At.After(trip.at), "refused before the limit tripped: %v", limited[0])
	ended := trip.at.Add(limit)
	t.Logf("the first issue past the limit filed %s after it ended, the last %s after",
		resumed.Sub(ended).Round(time.Millisecond), lastFiled.Sub(ended).Round(time.Millisecond))
	require.True(t, resumed.After(ended), "an issue filed at %s, before the limit ended at %s", resumed, ended)
	require.True(t, resumed.Before(ended.Add(slack)),
		"the first issue past the limit filed %s after it ended: the pusher waited far longer than Retry-After", resumed.Sub(ended))
	require.LessOrEqual(t, w.told.Load(), int64(1), "the admins told more than once")
}

// tripping is a store that calls trip once, when the after-th push is
// recorded: the limit trips between two pushes, whatever their pace.
type tripping struct {
	*storage.Tasks
	after int
	trip  func()
	done  int
	at    time.Time
}

func (s *tripping) Pushed(ctx context.Context, p tasks.Push, f tasks.Filed) (bool, error) {
	ok, err := s.Tasks.Pushed(ctx, p, f)
	if ok && err == nil {
		if s.done++; s.done == s.after {
			s.at = time.Now()
			s.trip()
		}
	}
	return ok, err
}

// crashing is a store whose replica dies at a step of a push: it claims,
// and then the step named in die fails once, as if the process were
// killed there (nothing after it happens; the claim stays until its
// lease runs out).
type crashing struct {
	*storage.Tasks
	die   string // "claim" (before the request) or "record" (after GitHub's answer)
	fired atomic.Bool
}

var errKilled = errors.New("killed")

func (c *crashing) Claim(ctx context.Context, claimer string, lease time.Duration) (tasks.Push, bool, error) {
	p, ok, err := c.Tasks.Claim(ctx, claimer, lease)
	if ok && c.die == "claim" && c.fired.CompareAndSwap(false, true) {
		return tasks.Push{}, false, errKilled // claimed; the request never goes
	}
	return p, ok, err
}

func (c *crashing) Pushed(ctx context.Context, p tasks.Push, f tasks.Filed) (bool, error) {
	if c.die == "record" && c.fired.CompareAndSwap(false, true) {
		return false, errKilled // GitHub filed it; our commit never happens
	}
	return c.Tasks.Pushed(ctx, p, f)
}

// A replica killed after claiming (before its request) or after GitHub's
// answer (before its commit) leaves the push claimed; once the claim's
// lease runs out another takes it and, finding the task filed by its
// marker where GitHub has it, records it: every task is filed once.
func TestAPushKilledAtEachStepIsFiledOnce(t *testing.T) {
	t.Parallel()
	for _, die := range []string{"claim", "record"} {
		t.Run(die, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			w.approve(3)
			const lease = time.Second
			dying := w.service(&crashing{Tasks: w.store.Tasks(), die: die}, lease)
			require.ErrorIs(t, dying.Push(w.ctx), errKilled)
			w.until(w.service(w.store.Tasks(), lease), 3)
			w.filedOnce(3)
		})
	}
}

// The sync reads each filed issue back with its ETag: an unchanged one is
// a 304; one closed on GitHub is told in the admin chat once, whichever
// replica reads it, and read no more.
func TestAClosedIssueIsToldOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.approve(2)
	s := w.service(w.store.Tasks(), time.Minute)
	w.until(s, 2)
	require.NoError(t, s.Sync(w.ctx))
	before := len(w.gh.Requests())
	require.NoError(t, s.Sync(w.ctx))
	for _, r := range w.gh.Requests()[before:] {
		require.Equal(t, 304, r.Status, "an unchanged issue read again: %s %s", r.Method, r.Path)
	}
	first := w.gh.Issues("acme/app")[0]
	w.gh.CloseIssue("acme/app", first.Number, "completed")
	other := w.service(w.store.Tasks(), time.Minute) // another replica
	require.NoError(t, s.Sync(w.ctx))
	require.NoError(t, other.Sync(w.ctx))
	var told int
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM outbox WHERE body->>'text' LIKE 'closed #%'`).Scan(&told))
	require.Equal(t, 1, told, "told once")
	var state string
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT issue_state FROM task_pushes WHERE number = $1`, first.Number).Scan(&state))
	require.Equal(t, "closed", state)
}

// GitHub's content limits shortened 600 times (10 creations in 100 ms, 25
// in 6 s) and the pusher paced to the same: 40 tasks and their priority
// label are filed without a refusal or a request early, each once, the
// 26th creation waiting (the kind paused, the wait longer than MaxWait)
// for the first to leave the "hour" and going no later than that by much.
// A label counted as nothing would have the 25th issue refused.
func TestPushesPacedToTheContentLimits(t *testing.T) {
	t.Parallel()
	const k = 600
	w := newWorld(t, ghfake.WithTimeScale(k), ghfake.WithLimits(ghfake.Limits{Core: 5000, Search: 30, ContentPerMinute: 10, ContentPerHour: 25}))
	w.content = []tasks.Window{{Limit: 10, Per: time.Minute / k}, {Limit: 25, Per: time.Hour / k}}
	w.maxWait = time.Second
	w.approve(40)
	w.until(w.service(w.store.Tasks(), time.Minute), 40)
	w.filedOnce(40)
	require.Empty(t, w.gh.EarlyRequests(), "a request before GitHub's Retry-After")
	var created []time.Time
	for _, r := range w.gh.Requests() {
		require.NotContains(t, []int{403, 429}, r.Status, "refused: %s", r)
		if r.Method == "POST" && r.Status == 201 {
			created = append(created, r.At)
		}
	}
	require.Len(t, created, 41, "40 issues and one label")
	// Unhurried: 10 at once, 10 more 100 ms later, 5 more at 200 ms, then
	// each 6 s after the one 25 before it: the 26th at 6 s, the 41st at
	// 6.1 s. The pause is bounded where it ends, at the 26th: the pushes
	// after it take what the machine gives them (a loaded CI's race
	// detector, 300 ms a push), and a pacer that waited a window too many
	// would resume at 12 s.
	require.GreaterOrEqual(t, created[40].Sub(created[0]), 6100*time.Millisecond)
	resumed := created[25].Sub(created[0])
	require.GreaterOrEqual(t, resumed, 6*time.Second)
	require.Less(t, resumed, 8500*time.Millisecond, "the pause lasted well past the window")
}

// badBytes is a tracker failing every filing with an error text holding
// what PostgreSQL refuses (a NUL, a byte that is not UTF-8), as a proxy's
// answer quoted by a future tracker might.
type badBytes struct{ tasks.Tracker }

func (badBytes) File(context.Context, string, tasks.Task) (tasks.Filed, error) {
	return tasks.Filed{}, errors.New("proxy said \x00\xff")
}

// One group's repository is archived: GitHub refuses its writes with a
// 403 that is neither a limit nor our token. Only that destination waits,
// the admins are told it is gone (not that our credentials are refused),
// and the other group's tasks are filed meanwhile.
func TestAnArchivedRepositoryHoldsOnlyItsOwnPushes(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const other = int64(-1009876543210)
	w.gh.AddRepo("acme/old", ghfake.Archived())
	w.gh.AddToken("ghp_test", "switchboard-bot", ghfake.Write("acme/app"), ghfake.Write("acme/old"))
	require.NoError(t, w.store.Tasks().SetDestination(w.ctx, tasks.Destination{ChatID: other, Kind: tasks.KindGitHub, Target: "acme/old"}, 7))
	w.approveIn(3, team, other) // two for acme/app, one for acme/old
	var refusals []bool
	w.refused = func(_ tasks.Destination, gone bool, _ string) { refusals = append(refusals, gone) }
	s := w.service(w.store.Tasks(), time.Minute)
	w.until(s, 2) // before the fix, the archived 403 held every GitHub push for Config.Refused
	require.Empty(t, w.gh.Issues("acme/old"))
	require.Equal(t, []bool{true}, refusals, "the admins are told the destination is gone, once")
	var scope string
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT scope FROM task_pauses`).Scan(&scope))
	require.Equal(t, "github:acme/old", scope)
}

// A failure whose text the database refuses still defers the push, its
// reason stored cleaned, rather than failing the deferral at every claim.
func TestAFailureWithUnstorableTextIsDeferred(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.tracker = func(gh tasks.Tracker) tasks.Tracker { return badBytes{gh} }
	w.approve(1)
	s := w.service(w.store.Tasks(), time.Minute)
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.Push(ctx))
	var state, why string
	var claimed bool
	require.NoError(t, w.store.Pool().QueryRow(w.ctx,
		`SELECT state, last_error, claim_token IS NOT NULL FROM task_pushes`).Scan(&state, &why, &claimed))
	require.Equal(t, "pending", state)
	require.False(t, claimed, "deferred, not left claimed")
	require.Equal(t, "proxy said \uFFFD\uFFFD", why)
}

// One group's repository refuses its task's issue with a 422 about
// neither the assignee nor anything cut to fit (the label it names): the
// push is set aside after that one try, with GitHub's words, the admins
// told once whichever replica runs the job again, and the other group's
// task is filed meanwhile. An admin's retry, once GitHub takes it, files
// it once; a second retry finds nothing to send.
func TestATaskTheTrackerRefusesIsSetAsideUntilRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const other = int64(-1009876543210)
	w.gh.AddRepo("acme/strict")
	w.gh.AddToken("ghp_test", "switchboard-bot", ghfake.Write("acme/app"), ghfake.Write("acme/strict"))
	w.gh.RefuseIssues("acme/strict", ghfake.FieldError{Resource: "Label", Code: "invalid", Field: "name", Value: "priority: high"})
	require.NoError(t, w.store.Tasks().SetDestination(w.ctx, tasks.Destination{ChatID: other, Kind: tasks.KindGitHub, Target: "acme/strict"}, 7))
	w.approveIn(2, team, other)
	s, again := w.service(w.store.Tasks(), time.Minute), w.service(w.store.Tasks(), time.Minute)
	w.until(s, 1)
	for range 3 { // later ticks, on this replica and another
		require.NoError(t, s.Push(w.ctx))
		require.NoError(t, again.Push(w.ctx))
	}
	posts := 0
	for _, r := range w.gh.Requests() {
		if r.Method == "POST" && r.Path == "/repos/acme/strict/issues" {
			posts++
		}
	}
	require.Equal(t, 1, posts, "one try, not retried")
	var state, why string
	var proposal int64
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT state, last_error, proposal_id FROM task_pushes WHERE target = 'acme/strict'`).
		Scan(&state, &why, &proposal))
	require.Equal(t, "refused", state)
	require.Contains(t, why, "422")
	require.Contains(t, why, "Validation Failed: Label name invalid (priority: high)", "GitHub's words, its errors' too")
	told := func() (n int) {
		require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM outbox WHERE body->>'text' LIKE 'refused %'`).Scan(&n))
		return n
	}
	require.Equal(t, 1, told(), "the admins told once")
	_, due, err := w.store.Tasks().Due(w.ctx)
	require.NoError(t, err)
	require.False(t, due, "nothing waits to be pushed")

	w.gh.RefuseIssues("acme/strict")
	_, err = w.store.Tasks().Retry(w.ctx, proposal, 7)
	require.NoError(t, err)
	_, err = w.store.Tasks().Retry(w.ctx, proposal, 7)
	require.ErrorIs(t, err, domain.ErrNotFound, "sent again already")
	w.until(s, 2)
	require.Len(t, w.gh.Issues("acme/strict"), 1)
	require.Equal(t, 1, told())
}

// A task longer than GitHub takes (a title of 300 characters, twenty
// source messages of 4000 each) is cut to fit rather than refused: the
// strict fake takes it at the first try, its title 256 characters ending
// in "…", its body within 65536 with the note that it was cut and the
// marker last, and nothing is set aside.
func TestAnOverlongTaskIsCutToFit(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.approveEach(1, func(_ int, id, chat int64) (analysis.Proposal, []analysis.GroupMessage) {
		p := analysis.Proposal{Title: strings.Repeat("я", 300), Description: strings.Repeat("long words ", 200), Priority: "high"}
		var msgs []analysis.GroupMessage
		for k := range int64(20) {
			msgs = append(msgs, analysis.GroupMessage{ChatID: chat, MessageID: id + k, AuthorID: 5, Author: "Ann",
				Text: strings.Repeat("ё", 4000), Date: time.Now()})
			p.Sources = append(p.Sources, analysis.Ref{ChatID: chat, MessageID: id + k})
		}
		return p, msgs
	}, team)
	w.until(w.service(w.store.Tasks(), time.Minute), 1)
	is := w.gh.Issues("acme/app")
	require.Len(t, is, 1)
	require.Equal(t, github.MaxTitle, utf8.RuneCountInString(is[0].Title))
	require.True(t, strings.HasSuffix(is[0].Title, "…"))
	require.LessOrEqual(t, utf8.RuneCountInString(is[0].Body), github.MaxBody)
	require.Greater(t, utf8.RuneCountInString(is[0].Body), github.MaxBody-200, "cut, not emptied")
	require.Contains(t, is[0].Body, "(clipped: the task is longer than GitHub allows)")
	require.True(t, strings.HasSuffix(is[0].Body, "<!-- switchboard-proposal-"+strconv.FormatInt(w.onlyProposal(), 10)+" -->\n"))
	for _, r := range w.gh.Requests() {
		require.NotEqual(t, 422, r.Status, "refused: %s", r)
	}
}

// onlyProposal is the id of the one proposal pushed.
func (w *world) onlyProposal() (id int64) {
	w.t.Helper()
	require.NoError(w.t, w.store.Pool().QueryRow(w.ctx, `SELECT proposal_id FROM task_pushes`).Scan(&id))
	return id
}
