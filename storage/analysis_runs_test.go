package storage_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/domaintest"
	"switchboard/internal/testkit"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// afx is an analysis fixture over one test database.
type afx struct{ *testBundle }

func newAnalysis(t *testing.T) *afx { return &afx{setup(t)} }

var winFrom = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// create requires a new pending run.
func (f *afx) create() analysis.Run {
	f.t.Helper()
	r, blocked, err := f.st.Runs().Create(f.ctx, analysis.Run{CreatedBy: 7, From: winFrom, To: winFrom.Add(24 * time.Hour),
		Filters: analysis.Filters{Window: 24 * time.Hour}}, nil)
	require.NoError(f.t, err)
	require.Empty(f.t, blocked)
	require.NotZero(f.t, r.ID)
	return r
}

// took requires a run's transition that took, and returns the run.
func (f *afx) took(r analysis.Run, ok bool, err error) analysis.Run {
	f.t.Helper()
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return r
}

// running requires a new run started with a one-hour lease.
func (f *afx) running() analysis.Run {
	f.t.Helper()
	return f.took(f.st.Runs().Start(f.ctx, f.create().ID, false, time.Hour, nil))
}

func (f *afx) complete(id int64) analysis.Run {
	f.t.Helper()
	return f.took(f.st.Runs().Complete(f.ctx, id, nil))
}

// inReview requires a run that saved one batch of n proposals and
// completed: where the tests of reviewing and closing a run start.
func (f *afx) inReview(n int) (analysis.Run, []analysis.Proposal) {
	f.t.Helper()
	r := f.running()
	ps := f.batch(r.ID, 1, n)
	return f.complete(r.ID), ps
}

func (f *afx) closeRun(id int64) analysis.Run {
	f.t.Helper()
	r := f.took(f.st.Runs().Close(f.ctx, id, nil))
	require.Equal(f.t, analysis.Closed, r.State)
	return r
}

func (f *afx) decide(id int64, d analysis.Decision) analysis.Run {
	f.t.Helper()
	p, r, ok, err := f.st.Runs().DecideProposal(f.ctx, id, d, 7, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	require.Equal(f.t, d, p.Decision)
	return r
}

func ref(chat, message int64) analysis.Ref { return analysis.Ref{ChatID: chat, MessageID: message} }

func proposal(title string, sources ...analysis.Ref) analysis.Proposal {
	return analysis.Proposal{Title: title, Description: "do " + title, Priority: "medium", Sources: sources}
}

// batch saves n proposals as the run's next batch.
func (f *afx) batch(runID int64, batch, n int) []analysis.Proposal {
	f.t.Helper()
	ps := make([]analysis.Proposal, n)
	for i := range ps {
		ps[i] = proposal(fmt.Sprintf("task %d.%d", batch, i+1))
	}
	_, out, err := f.st.Runs().SaveProposalBatch(f.ctx, runID, batch, 10, ps, nil)
	require.NoError(f.t, err)
	require.Len(f.t, out, n)
	return out
}

func (f *afx) message(chat, id int64, at time.Time, text string) {
	f.t.Helper()
	require.NoError(f.t, f.st.GroupChats().SaveMessage(f.ctx, analysis.GroupMessage{ChatID: chat, MessageID: id, AuthorID: 100 + id,
		Author: fmt.Sprintf("user%d", id), Text: text, Date: at}))
}

func (f *afx) claimedUntilIn(id int64) time.Duration {
	f.t.Helper()
	var secs float64
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx,
		`SELECT extract(epoch FROM claimed_until - now()) FROM analysis_runs WHERE id = $1`, id).Scan(&secs))
	return time.Duration(secs * float64(time.Second))
}

// adminChat is the chat the tests' renders write to.
const adminChat = -777

// event renders a run event as one row naming it, the run and its state.
func event(kind string) domain.Render[analysis.Review] {
	return func(rv analysis.Review) []domain.Message {
		r := rv.Run
		return []domain.Message{{ChatID: adminChat, Kind: domain.KindRunEvent, Ref: r.ID, Text: fmt.Sprintf("%s %s", kind, r.State)}}
	}
}

func progressKey(id int64) string { return fmt.Sprintf("progress:%d", id) }

// progressMessage renders the progress message (first) or its edit.
func progressMessage(first bool) domain.Render[analysis.Review] {
	return func(rv analysis.Review) []domain.Message {
		r := rv.Run
		m := domain.Message{ChatID: adminChat, Kind: domain.KindProgress, Ref: r.ID, Key: progressKey(r.ID),
			Text: fmt.Sprintf("%d/%d", r.BatchesDone, r.Batches)}
		if !first {
			m.Edit, m.IfGone = true, domain.IfGoneSend
		}
		return []domain.Message{m}
	}
}

// boardMessage renders the run's board as the bot does: the message
// itself (first) or its edit.
func boardMessage(first bool) domain.Render[analysis.Review] {
	return func(rv analysis.Review) []domain.Message {
		m := domain.Message{ChatID: adminChat, Kind: domain.KindProgress, Ref: rv.Run.ID, Key: progressKey(rv.Run.ID),
			Text: domaintest.BoardText(rv), Buttons: domaintest.BoardButtons(rv)}
		if !first {
			m.Edit, m.IfGone = true, domain.IfGoneSend
		}
		return []domain.Message{m}
	}
}

// boards renders every board write as a row of its own (a send without a
// key, so that the outbox folds no write into another and each write shows)
// and records the reviews it was given.
type boards struct {
	mu      sync.Mutex
	reviews []analysis.Review
}

func (b *boards) render(rv analysis.Review) []domain.Message {
	b.mu.Lock()
	b.reviews = append(b.reviews, rv)
	b.mu.Unlock()
	return []domain.Message{{ChatID: adminChat, Kind: domain.KindProgress, Ref: rv.Run.ID, Text: domaintest.BoardText(rv),
		Buttons: domaintest.BoardButtons(rv)}}
}

// calls is how many boards were rendered.
func (b *boards) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.reviews)
}

// last is the last board rendered.
func (b *boards) last(t testing.TB) analysis.Review {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	require.NotEmpty(t, b.reviews, "no board rendered")
	return b.reviews[len(b.reviews)-1]
}

// ordinals are the proposals' ordinals, in order.
func ordinals(ps []analysis.Proposal) []int {
	return testkit.Map(ps, func(p analysis.Proposal) int { return p.Ordinal })
}

// outboxRow is an outbox row as the tests compare it.
type outboxRow struct {
	Kind string
	Ref  int64
	Text string
	Edit bool
	Data string // the buttons' callback data, space-separated
}

// outbox lists the outbox rows in the order of delivery.
func (f *afx) outbox() []outboxRow {
	f.t.Helper()
	rows, err := f.st.Pool().Query(f.ctx, `SELECT kind, ref, body->>'text', edit,
    COALESCE((SELECT string_agg(b.v->>'data', ' ' ORDER BY r.i, b.j)
              FROM jsonb_array_elements(body->'buttons') WITH ORDINALITY r (v, i),
                   jsonb_array_elements(r.v) WITH ORDINALITY b (v, j)), '')
FROM outbox ORDER BY id`)
	require.NoError(f.t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (outboxRow, error) {
		var x outboxRow
		return x, r.Scan(&x.Kind, &x.Ref, &x.Text, &x.Edit, &x.Data)
	})
	require.NoError(f.t, err)
	return out
}

// deliver delivers every pending outbox row as a sender would, each send
// getting the next message id from first on; the rows delivered.
func (f *afx) deliver(first int) int {
	f.t.Helper()
	n := 0
	for {
		rows, err := f.st.Outbox().Claim(f.ctx, "", 100, time.Minute)
		require.NoError(f.t, err)
		if len(rows) == 0 {
			return n
		}
		for _, r := range rows {
			id := 0
			if !r.Edit {
				id, first = first, first+1
			}
			ok, err := f.st.Outbox().Delivered(f.ctx, r, id)
			require.NoError(f.t, err)
			require.True(f.t, ok)
			n++
		}
	}
}

func requireRefused(t testing.TB, r analysis.Run, ok bool, err error, state analysis.State) {
	t.Helper()
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, state, r.State, "the run as it is")
}

func TestAnalysisRunLifecycle(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	filters := analysis.Filters{Window: 7 * 24 * time.Hour, ChatID: -100, Keywords: []string{"deploy", "bug"}, MinLen: 10, Mentions: true}
	r, blocked, err := f.st.Runs().Create(f.ctx, analysis.Run{CreatedBy: 42, Filters: filters, From: winFrom, To: winFrom.Add(filters.Window)}, nil)
	require.NoError(t, err)
	require.Empty(t, blocked)
	require.Equal(t, analysis.Pending, r.State)
	require.Equal(t, int64(42), r.CreatedBy)
	require.Equal(t, filters, r.Filters)
	require.True(t, r.From.Equal(winFrom))
	require.True(t, r.To.Equal(winFrom.Add(filters.Window)))
	require.False(t, r.CreatedAt.IsZero())
	require.True(t, r.StartedAt.IsZero())
	require.Nil(t, r.ErrorLog)
	require.Nil(t, r.Metrics)
	got, err := f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// Nothing but start leaves pending.
	x, ok, err := f.st.Runs().Complete(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Pending)
	x, ok, err = f.st.Runs().Fail(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	requireRefused(t, x, ok, err, analysis.Pending)
	x, ok, err = f.st.Runs().Close(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Pending)
	renewed, err := f.st.Runs().RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed)
	_, err = f.st.Runs().SetProgress(f.ctx, r.ID, 1, 1, 1, nil)
	require.ErrorIs(t, err, analysis.ErrState)
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 1, []analysis.Proposal{proposal("a")}, nil)
	require.ErrorIs(t, err, analysis.ErrState)

	// pending → running
	r, ok, err = f.st.Runs().Start(f.ctx, r.ID, true, time.Minute, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, analysis.Running, r.State)
	require.True(t, r.RAG)
	require.WithinDuration(t, time.Now(), r.StartedAt, time.Minute)
	require.InDelta(t, time.Minute.Seconds(), f.claimedUntilIn(r.ID).Seconds(), 5)
	x, ok, err = f.st.Runs().Start(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Running)
	require.True(t, x.RAG, "a refused start changes nothing")
	x, ok, err = f.st.Runs().Close(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Running)

	renewed, err = f.st.Runs().RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.True(t, renewed)
	require.InDelta(t, time.Hour.Seconds(), f.claimedUntilIn(r.ID).Seconds(), 5)

	r, err = f.st.Runs().SetProgress(f.ctx, r.ID, 100, 40, 2, progressMessage(true))
	require.NoError(t, err)
	require.Equal(t, [3]int{100, 40, 2}, [3]int{r.Messages, r.Filtered, r.Batches})
	require.Zero(t, r.ProgressMessageID, "not delivered yet")
	// Its delivery records the progress message on the run.
	require.Equal(t, 1, f.deliver(555))
	r, err = f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 555, r.ProgressMessageID)

	ps := f.batch(r.ID, 1, 2)

	// running → completed; the lease is released.
	r = f.complete(r.ID)
	require.Equal(t, analysis.Completed, r.State)
	require.False(t, r.CompletedAt.IsZero())
	require.Equal(t, 1, int(f.exec(`SELECT 1 FROM analysis_runs WHERE id = $1 AND claimed_until IS NULL`, r.ID)))
	x, ok, err = f.st.Runs().Complete(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	x, ok, err = f.st.Runs().Fail(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	x, ok, err = f.st.Runs().Start(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	renewed, err = f.st.Runs().RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed)
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 2, 1, []analysis.Proposal{proposal("late")}, nil)
	require.ErrorIs(t, err, analysis.ErrState)

	// completed → closed only when nothing is pending.
	x, ok, err = f.st.Runs().Close(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	require.Equal(t, 2, x.ProposalsPending)
	f.decide(ps[0].ID, analysis.Approved)
	x, ok, err = f.st.Runs().Close(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	f.decide(ps[1].ID, analysis.Rejected)
	r = f.closeRun(r.ID)
	require.False(t, r.ClosedAt.IsZero())
	require.Equal(t, &analysis.Metrics{ProposalsTotal: 2, ApprovalRate: 0.5, RejectionRate: 0.5}, r.Metrics)
	x, ok, err = f.st.Runs().Close(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Closed)
	x, ok, err = f.st.Runs().Start(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Closed)
	got, err = f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// Unknown runs.
	_, err = f.st.Runs().Get(f.ctx, 999)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Runs().Start(f.ctx, 999, false, time.Minute, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Runs().Complete(f.ctx, 999, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Runs().Fail(f.ctx, 999, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Runs().Close(f.ctx, 999, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = f.st.Runs().SetProgress(f.ctx, 999, 1, 1, 1, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, 999, 1, 1, nil, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	renewed, err = f.st.Runs().RenewLease(f.ctx, 999, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed)
}

func TestAnalysisFailRun(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	e := analysis.ErrorLog{Step: "proposals", Batch: 3, Error: "llm: breaker open"}
	r, ok, err := f.st.Runs().Fail(f.ctx, r.ID, e, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, analysis.Failed, r.State)
	require.False(t, r.FailedAt.IsZero())
	require.Equal(t, &e, r.ErrorLog)

	x, ok, err := f.st.Runs().Fail(f.ctx, r.ID, analysis.ErrorLog{Step: "again", Error: "again"}, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	require.Equal(t, &e, x.ErrorLog, "the first error stays")
	x, ok, err = f.st.Runs().Complete(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	x, ok, err = f.st.Runs().Close(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	x, ok, err = f.st.Runs().Start(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 1, []analysis.Proposal{proposal("a")}, nil)
	require.ErrorIs(t, err, analysis.ErrState)
	_, err = f.st.Runs().SetProgress(f.ctx, r.ID, 1, 1, 1, nil)
	require.ErrorIs(t, err, analysis.ErrState)

	// A failed run is closed for the one-unclosed rule.
	f.create()
}

func TestAnalysisCloseMetrics(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	// No proposals: rates are 0, not a division by zero.
	r, _ := f.inReview(0)
	r = f.closeRun(r.ID)
	require.Equal(t, &analysis.Metrics{}, r.Metrics)

	r, ps := f.inReview(3)
	f.decide(ps[0].ID, analysis.Approved)
	f.decide(ps[1].ID, analysis.Rejected)
	f.decide(ps[2].ID, analysis.Rejected)
	r = f.closeRun(r.ID)
	require.Equal(t, &analysis.Metrics{ProposalsTotal: 3, ApprovalRate: 0.3333, RejectionRate: 0.6667}, r.Metrics)
	require.Equal(t, [4]int{3, 0, 1, 2}, [4]int{r.ProposalsTotal, r.ProposalsPending, r.ProposalsApproved, r.ProposalsRejected})
}

func TestAnalysisOneUnclosedRun(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	try := func() (analysis.Run, []int64) {
		t.Helper()
		r, blocked, err := f.st.Runs().Create(f.ctx, analysis.Run{CreatedBy: 1, From: winFrom, To: winFrom.Add(time.Hour)}, nil)
		require.NoError(t, err)
		return r, blocked
	}
	a := f.create()
	for _, step := range []func(){
		func() {},
		func() { _, _, _ = f.st.Runs().Start(f.ctx, a.ID, false, time.Hour, nil) },
		func() { f.complete(a.ID) },
	} {
		step()
		r, blocked := try()
		require.Zero(t, r.ID, "no run created")
		require.Equal(t, []int64{a.ID}, blocked)
	}
	f.closeRun(a.ID)
	b, blocked := try()
	require.Empty(t, blocked)
	require.NotZero(t, b.ID)

	// reviewed blocks too (nothing enters it yet); cancelled does not.
	f.exec(`UPDATE analysis_runs SET state = 'reviewed' WHERE id = $1`, b.ID)
	_, blocked = try()
	require.Equal(t, []int64{b.ID}, blocked)
	f.exec(`UPDATE analysis_runs SET state = 'cancelled' WHERE id = $1`, b.ID)
	c, blocked := try()
	require.Empty(t, blocked)
	require.Equal(t, analysis.Pending, c.State)

	// The index's predicate is exactly analysis.Unclosed.
	var def string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx,
		`SELECT pg_get_indexdef('analysis_runs_one_unclosed'::regclass)`).Scan(&def))
	for _, s := range analysis.States {
		quoted := "'" + string(s) + "'"
		require.Equal(t, slices.Contains(analysis.Unclosed, s), strings.Contains(def, quoted), "%s in %s", s, def)
	}
}

// Twenty /run_new at once: exactly one run, the others are told its id
// and use up no run number.
func TestAnalysisCreateRunConcurrent(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const n = 20
	type result struct {
		run     analysis.Run
		blocked []int64
		err     error
	}
	results := raceAll(n, func(i int) result {
		r, blocked, err := f.st.Runs().Create(f.ctx, analysis.Run{CreatedBy: int64(i), From: winFrom, To: winFrom.Add(time.Hour)}, nil)
		return result{r, blocked, err}
	})
	var created []analysis.Run
	for _, r := range results {
		require.NoError(t, r.err)
		if r.run.ID != 0 {
			require.Empty(t, r.blocked)
			created = append(created, r.run)
		}
	}
	require.Len(t, created, 1)
	for _, r := range results {
		if r.run.ID == 0 {
			require.Equal(t, []int64{created[0].ID}, r.blocked)
		}
	}
	require.Equal(t, 1, int(f.exec(`SELECT id FROM analysis_runs`)))

	// The refusals took no number: once the run is out of the way, the
	// next one is numbered right after it.
	f.exec(`UPDATE analysis_runs SET state = 'failed', error_log = '{}' WHERE id = $1`, created[0].ID)
	next, blocked, err := f.st.Runs().Create(f.ctx, analysis.Run{CreatedBy: 1, From: winFrom, To: winFrom.Add(time.Hour)}, nil)
	require.NoError(t, err)
	require.Empty(t, blocked)
	require.Equal(t, created[0].ID+1, next.ID)
}

func TestAnalysisFailInterrupted(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	failed, err := f.st.Runs().FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)

	// A live lease is left alone; an expired one fails the run once.
	r := f.running()
	failed, err = f.st.Runs().FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	r, ok, err := f.st.Runs().Start(f.ctx, r.ID, false, time.Hour, nil)
	requireRefused(t, r, ok, err, analysis.Running)
	f.exec(`UPDATE analysis_runs SET claimed_until = now() - interval '1 second' WHERE id = $1`, r.ID)
	failed, err = f.st.Runs().FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, r.ID, failed[0].ID)
	require.Equal(t, analysis.Failed, failed[0].State)
	require.False(t, failed[0].FailedAt.IsZero())
	require.Equal(t, &analysis.ErrorLog{Step: "interrupted", Error: "the executor stopped (process killed or restarted)"}, failed[0].ErrorLog)
	failed, err = f.st.Runs().FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	renewed, err := f.st.Runs().RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed, "the interrupted executor cannot come back")

	// A lease that runs out by itself. Its length is read from the row
	// (both stamps are the statement's now()) rather than by racing a
	// sweep against the clock, which a busy machine loses.
	r, ok, err = f.st.Runs().Start(f.ctx, f.create().ID, false, 50*time.Millisecond, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM analysis_runs
		WHERE id = $1 AND claimed_until - updated_at = interval '50 milliseconds'`, r.ID))
	time.Sleep(100 * time.Millisecond)
	failed, err = f.st.Runs().FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, r.ID, failed[0].ID)

	// Runs in other states are never touched, whatever their claimed_until.
	c := f.running()
	f.complete(c.ID)
	f.exec(`UPDATE analysis_runs SET claimed_until = now() - interval '1 hour' WHERE id = $1`, c.ID)
	failed, err = f.st.Runs().FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	got, err := f.st.Runs().Get(f.ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, analysis.Completed, got.State)
}

func TestAnalysisRunsNewestFirst(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var made []int64
	for range 3 {
		r := f.running()
		_, _, err := f.st.Runs().Fail(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
		require.NoError(t, err)
		made = append(made, r.ID)
	}
	ids := func(rs []analysis.Run) []int64 {
		out := []int64{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	runs, total, err := f.st.Runs().List(f.ctx, 0, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Equal(t, []int64{made[2], made[1]}, ids(runs))
	require.Equal(t, analysis.Failed, runs[0].State)
	require.NotNil(t, runs[0].ErrorLog)
	runs, total, err = f.st.Runs().List(f.ctx, 2, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Equal(t, []int64{made[0]}, ids(runs))
	runs, total, err = f.st.Runs().List(f.ctx, 5, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Empty(t, runs)
}

// Publish reaches a LISTEN connection on analysis_runs.
func TestAnalysisPublish(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx := ctxT(t)
	got := listening(t, st, storage.AnalysisChannel)
	payload := `{"event":"run_created","run":1,"state":"pending"}`
	require.NoError(t, st.Runs().Publish(ctx, payload))
	require.Equal(t, "analysis_runs "+payload, notified(t, got))
	// Too large for NOTIFY: an error, not a lost event.
	err := st.Runs().Publish(ctx, strings.Repeat("x", 9000))
	require.Error(t, err)
	require.False(t, errors.Is(err, context.Canceled))
}

// Each state change writes its event with it, as the run it left; a
// refused change writes nothing.
func TestAnalysisRunEventsAreWrittenWithTheirChange(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	win := analysis.Run{CreatedBy: 7, From: winFrom, To: winFrom.Add(time.Hour)}
	r, _, err := f.st.Runs().Create(f.ctx, win, event("run_created"))
	require.NoError(t, err)
	_, blocked, err := f.st.Runs().Create(f.ctx, win, event("refused"))
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID}, blocked)
	x, ok, err := f.st.Runs().Close(f.ctx, r.ID, event("refused"))
	requireRefused(t, x, ok, err, analysis.Pending)
	_, ok, err = f.st.Runs().Start(f.ctx, r.ID, false, time.Hour, event("run_started"))
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.Runs().Start(f.ctx, r.ID, false, time.Hour, event("refused"))
	require.NoError(t, err)
	require.False(t, ok)
	_, err = f.st.Runs().SetProgress(f.ctx, r.ID, 3, 2, 1, progressMessage(true))
	require.NoError(t, err)
	ps := f.batch(r.ID, 1, 1)
	_, ok, err = f.st.Runs().Complete(f.ctx, r.ID, event("run_completed"))
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.Runs().Fail(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, event("refused"))
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = f.st.Runs().Close(f.ctx, r.ID, event("refused"))
	require.NoError(t, err)
	require.False(t, ok, "a proposal is pending")
	f.decide(ps[0].ID, analysis.Approved)
	_, ok, err = f.st.Runs().Close(f.ctx, r.ID, event("run_closed"))
	require.NoError(t, err)
	require.True(t, ok)

	// Failures: the executor's and the reaper's.
	a := f.running()
	_, ok, err = f.st.Runs().Fail(f.ctx, a.ID, analysis.ErrorLog{Step: "x", Error: "y"}, event("run_failed"))
	require.NoError(t, err)
	require.True(t, ok)
	b := f.running()
	failed, err := f.st.Runs().FailInterrupted(f.ctx, event("refused"))
	require.NoError(t, err)
	require.Empty(t, failed)
	f.exec(`UPDATE analysis_runs SET claimed_until = now() - interval '1 second' WHERE id = $1`, b.ID)
	failed, err = f.st.Runs().FailInterrupted(f.ctx, event("interrupted"))
	require.NoError(t, err)
	require.Len(t, failed, 1)

	require.Equal(t, []outboxRow{
		{Kind: domain.KindRunEvent, Ref: r.ID, Text: "run_created pending"},
		{Kind: domain.KindRunEvent, Ref: r.ID, Text: "run_started running"},
		{Kind: domain.KindProgress, Ref: r.ID, Text: "0/1"},
		{Kind: domain.KindRunEvent, Ref: r.ID, Text: "run_completed completed"},
		{Kind: domain.KindRunEvent, Ref: r.ID, Text: "run_closed closed"},
		{Kind: domain.KindRunEvent, Ref: a.ID, Text: "run_failed failed"},
		{Kind: domain.KindRunEvent, Ref: b.ID, Text: "interrupted failed"},
	}, f.outbox())
}

// proposalsOf reads a run's proposals from the table, by id.
func (f *afx) proposalsOf(runID int64) []analysis.Proposal {
	f.t.Helper()
	rows, err := f.st.Pool().Query(f.ctx, `SELECT id, ordinal, title, decision, COALESCE(decided_by, 0)
FROM analysis_proposals WHERE run_id = $1 ORDER BY id`, runID)
	require.NoError(f.t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (analysis.Proposal, error) {
		p := analysis.Proposal{RunID: runID}
		return p, r.Scan(&p.ID, &p.Ordinal, &p.Title, &p.Decision, &p.DecidedBy)
	})
	require.NoError(f.t, err)
	return out
}

// requireCounters requires the run's counters to be what its proposals'
// decisions say.
func (f *afx) requireCounters(runID int64) analysis.Run {
	f.t.Helper()
	r, err := f.st.Runs().Get(f.ctx, runID)
	require.NoError(f.t, err)
	n := map[analysis.Decision]int{}
	ps := f.proposalsOf(runID)
	for _, p := range ps {
		n[p.Decision]++
	}
	require.Equal(f.t, [4]int{len(ps), n[analysis.Undecided], n[analysis.Approved], n[analysis.Rejected]},
		[4]int{r.ProposalsTotal, r.ProposalsPending, r.ProposalsApproved, r.ProposalsRejected},
		"run %d: total, pending, approved, rejected", runID)
	return r
}
