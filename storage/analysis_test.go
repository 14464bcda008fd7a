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
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// afx is an analysis fixture over one test database.
type afx struct {
	t   testing.TB
	ctx context.Context
	st  *storage.Store
}

func newAnalysis(t *testing.T) *afx {
	return &afx{t: t, ctx: ctxT(t), st: storagetest.New(t)}
}

var winFrom = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

func (f *afx) exec(sql string, args ...any) int64 {
	f.t.Helper()
	tag, err := f.st.Pool().Exec(f.ctx, sql, args...)
	require.NoError(f.t, err)
	return tag.RowsAffected()
}

// create requires a new pending run.
func (f *afx) create() analysis.Run {
	f.t.Helper()
	r, blocked, err := f.st.CreateRun(f.ctx, analysis.Run{CreatedBy: 7, From: winFrom, To: winFrom.Add(24 * time.Hour),
		Filters: analysis.Filters{Window: 24 * time.Hour}}, nil)
	require.NoError(f.t, err)
	require.Empty(f.t, blocked)
	require.NotZero(f.t, r.ID)
	return r
}

// running requires a new run started with a one-hour lease.
func (f *afx) running() analysis.Run {
	f.t.Helper()
	r, ok, err := f.st.StartRun(f.ctx, f.create().ID, false, time.Hour, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return r
}

func (f *afx) complete(id int64) analysis.Run {
	f.t.Helper()
	r, ok, err := f.st.CompleteRun(f.ctx, id, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	return r
}

func (f *afx) closeRun(id int64) analysis.Run {
	f.t.Helper()
	r, ok, err := f.st.CloseRun(f.ctx, id, nil)
	require.NoError(f.t, err)
	require.True(f.t, ok)
	require.Equal(f.t, analysis.Closed, r.State)
	return r
}

func (f *afx) decide(id int64, d analysis.Decision) analysis.Run {
	f.t.Helper()
	p, r, ok, err := f.st.Decide(f.ctx, id, d, 7, nil)
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
	_, out, err := f.st.SaveBatch(f.ctx, runID, batch, 10, ps, nil)
	require.NoError(f.t, err)
	require.Len(f.t, out, n)
	return out
}

func (f *afx) message(chat, id int64, at time.Time, text string) {
	f.t.Helper()
	require.NoError(f.t, f.st.SaveMessage(f.ctx, analysis.GroupMessage{ChatID: chat, MessageID: id, AuthorID: 100 + id,
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

// boardText spells the board a render is given: progress, the page, the
// page's proposals by ordinal (+ approved, - rejected) and title, the
// counters (pending/approved/rejected) and "?" while it asks to approve
// all.
func boardText(rv analysis.Review) string {
	r := rv.Run
	var ps []string
	for _, p := range rv.Proposals {
		mark := ""
		switch p.Decision {
		case analysis.Approved:
			mark = "+"
		case analysis.Rejected:
			mark = "-"
		}
		ps = append(ps, fmt.Sprintf("#%d%s %s", p.Ordinal, mark, p.Title))
	}
	confirm := ""
	if r.ReviewConfirm {
		confirm = " ?"
	}
	return fmt.Sprintf("%d/%d p%d/%d [%s] %d/%d/%d%s", r.BatchesDone, r.Batches, rv.Page+1, rv.Pages(),
		strings.Join(ps, ", "), r.ProposalsPending, r.ProposalsApproved, r.ProposalsRejected, confirm)
}

// boardButtons are a page's decision buttons, one row per proposal,
// whose data name the proposal.
func boardButtons(rv analysis.Review) [][]domain.Button {
	var out [][]domain.Button
	for _, p := range rv.Proposals {
		out = append(out, []domain.Button{{Text: fmt.Sprintf("✅ %d", p.Ordinal), Data: fmt.Sprintf("pa:%d", p.ID)}})
	}
	return out
}

// boardMessage renders the run's board as the bot does: the message
// itself (first) or its edit.
func boardMessage(first bool) domain.Render[analysis.Review] {
	return func(rv analysis.Review) []domain.Message {
		m := domain.Message{ChatID: adminChat, Kind: domain.KindProgress, Ref: rv.Run.ID, Key: progressKey(rv.Run.ID),
			Text: boardText(rv), Buttons: boardButtons(rv)}
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
	return []domain.Message{{ChatID: adminChat, Kind: domain.KindProgress, Ref: rv.Run.ID, Text: boardText(rv),
		Buttons: boardButtons(rv)}}
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
	out := []int{}
	for _, p := range ps {
		out = append(out, p.Ordinal)
	}
	return out
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
		rows, err := f.st.ClaimOutbox(f.ctx, 100, time.Minute)
		require.NoError(f.t, err)
		if len(rows) == 0 {
			return n
		}
		for _, r := range rows {
			id := 0
			if !r.Edit {
				id, first = first, first+1
			}
			ok, err := f.st.OutboxDelivered(f.ctx, r.ID, r.Token, id)
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
	r, blocked, err := f.st.CreateRun(f.ctx, analysis.Run{CreatedBy: 42, Filters: filters, From: winFrom, To: winFrom.Add(filters.Window)}, nil)
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
	got, err := f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// Nothing but start leaves pending.
	x, ok, err := f.st.CompleteRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Pending)
	x, ok, err = f.st.FailRun(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	requireRefused(t, x, ok, err, analysis.Pending)
	x, ok, err = f.st.CloseRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Pending)
	renewed, err := f.st.RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed)
	_, err = f.st.SetProgress(f.ctx, r.ID, 1, 1, 1, nil)
	require.ErrorIs(t, err, analysis.ErrState)
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 1, 1, []analysis.Proposal{proposal("a")}, nil)
	require.ErrorIs(t, err, analysis.ErrState)

	// pending → running
	r, ok, err = f.st.StartRun(f.ctx, r.ID, true, time.Minute, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, analysis.Running, r.State)
	require.True(t, r.RAG)
	require.WithinDuration(t, time.Now(), r.StartedAt, time.Minute)
	require.InDelta(t, time.Minute.Seconds(), f.claimedUntilIn(r.ID).Seconds(), 5)
	x, ok, err = f.st.StartRun(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Running)
	require.True(t, x.RAG, "a refused start changes nothing")
	x, ok, err = f.st.CloseRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Running)

	renewed, err = f.st.RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.True(t, renewed)
	require.InDelta(t, time.Hour.Seconds(), f.claimedUntilIn(r.ID).Seconds(), 5)

	r, err = f.st.SetProgress(f.ctx, r.ID, 100, 40, 2, progressMessage(true))
	require.NoError(t, err)
	require.Equal(t, [3]int{100, 40, 2}, [3]int{r.Messages, r.Filtered, r.Batches})
	require.Zero(t, r.ProgressMessageID, "not delivered yet")
	// Its delivery records the progress message on the run.
	require.Equal(t, 1, f.deliver(555))
	r, err = f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 555, r.ProgressMessageID)

	ps := f.batch(r.ID, 1, 2)

	// running → completed; the lease is released.
	r = f.complete(r.ID)
	require.Equal(t, analysis.Completed, r.State)
	require.False(t, r.CompletedAt.IsZero())
	require.Equal(t, 1, int(f.exec(`SELECT 1 FROM analysis_runs WHERE id = $1 AND claimed_until IS NULL`, r.ID)))
	x, ok, err = f.st.CompleteRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	x, ok, err = f.st.FailRun(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	x, ok, err = f.st.StartRun(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	renewed, err = f.st.RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed)
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 2, 1, []analysis.Proposal{proposal("late")}, nil)
	require.ErrorIs(t, err, analysis.ErrState)

	// completed → closed only when nothing is pending.
	x, ok, err = f.st.CloseRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	require.Equal(t, 2, x.ProposalsPending)
	f.decide(ps[0].ID, analysis.Approved)
	x, ok, err = f.st.CloseRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Completed)
	f.decide(ps[1].ID, analysis.Rejected)
	r = f.closeRun(r.ID)
	require.False(t, r.ClosedAt.IsZero())
	require.Equal(t, &analysis.Metrics{ProposalsTotal: 2, ApprovalRate: 0.5, RejectionRate: 0.5}, r.Metrics)
	x, ok, err = f.st.CloseRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Closed)
	x, ok, err = f.st.StartRun(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Closed)
	got, err = f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, r, got)

	// Unknown runs.
	_, err = f.st.Run(f.ctx, 999)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.StartRun(f.ctx, 999, false, time.Minute, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.CompleteRun(f.ctx, 999, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.FailRun(f.ctx, 999, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.CloseRun(f.ctx, 999, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = f.st.SetProgress(f.ctx, 999, 1, 1, 1, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.SaveBatch(f.ctx, 999, 1, 1, nil, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	renewed, err = f.st.RenewLease(f.ctx, 999, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed)
}

func TestAnalysisFailRun(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	e := analysis.ErrorLog{Step: "proposals", Batch: 3, Error: "llm: breaker open"}
	r, ok, err := f.st.FailRun(f.ctx, r.ID, e, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, analysis.Failed, r.State)
	require.False(t, r.FailedAt.IsZero())
	require.Equal(t, &e, r.ErrorLog)

	x, ok, err := f.st.FailRun(f.ctx, r.ID, analysis.ErrorLog{Step: "again", Error: "again"}, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	require.Equal(t, &e, x.ErrorLog, "the first error stays")
	x, ok, err = f.st.CompleteRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	x, ok, err = f.st.CloseRun(f.ctx, r.ID, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	x, ok, err = f.st.StartRun(f.ctx, r.ID, false, time.Minute, nil)
	requireRefused(t, x, ok, err, analysis.Failed)
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 1, 1, []analysis.Proposal{proposal("a")}, nil)
	require.ErrorIs(t, err, analysis.ErrState)
	_, err = f.st.SetProgress(f.ctx, r.ID, 1, 1, 1, nil)
	require.ErrorIs(t, err, analysis.ErrState)

	// A failed run is closed for the one-unclosed rule.
	f.create()
}

func TestAnalysisCloseMetrics(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	// No proposals: rates are 0, not a division by zero.
	r := f.running()
	f.batch(r.ID, 1, 0)
	f.complete(r.ID)
	r = f.closeRun(r.ID)
	require.Equal(t, &analysis.Metrics{}, r.Metrics)

	r = f.running()
	ps := f.batch(r.ID, 1, 3)
	f.complete(r.ID)
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
		r, blocked, err := f.st.CreateRun(f.ctx, analysis.Run{CreatedBy: 1, From: winFrom, To: winFrom.Add(time.Hour)}, nil)
		require.NoError(t, err)
		return r, blocked
	}
	a := f.create()
	for _, step := range []func(){
		func() {},
		func() { _, _, _ = f.st.StartRun(f.ctx, a.ID, false, time.Hour, nil) },
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
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			r, blocked, err := f.st.CreateRun(f.ctx, analysis.Run{CreatedBy: int64(i), From: winFrom, To: winFrom.Add(time.Hour)}, nil)
			results[i] = result{r, blocked, err}
		})
	}
	close(start)
	wg.Wait()
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
	next, blocked, err := f.st.CreateRun(f.ctx, analysis.Run{CreatedBy: 1, From: winFrom, To: winFrom.Add(time.Hour)}, nil)
	require.NoError(t, err)
	require.Empty(t, blocked)
	require.Equal(t, created[0].ID+1, next.ID)
}

// Twenty presses on one proposal's buttons at once: one decision, exact
// counters, one board written.
func TestAnalysisDecideConcurrent(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	ps := f.batch(r.ID, 1, 2)
	var b boards
	const n = 20
	type result struct {
		p   analysis.Proposal
		r   analysis.Run
		ok  bool
		err error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			d := analysis.Approved
			if i%2 == 1 {
				d = analysis.Rejected
			}
			p, r, ok, err := f.st.Decide(f.ctx, ps[0].ID, d, int64(1000+i), b.render)
			results[i] = result{p, r, ok, err}
		})
	}
	close(start)
	wg.Wait()
	var winner *result
	for i := range results {
		res := &results[i]
		require.NoError(t, res.err)
		require.Equal(t, ps[0].ID, res.p.ID)
		require.Equal(t, r.ID, res.r.ID)
		if res.ok {
			require.Nil(t, winner, "two presses decided")
			winner = res
		}
	}
	require.NotNil(t, winner)
	require.Equal(t, 1, winner.r.ProposalsApproved+winner.r.ProposalsRejected)
	for _, res := range results {
		require.Equal(t, winner.p.Decision, res.p.Decision)
		require.Equal(t, winner.p.DecidedBy, res.p.DecidedBy)
	}
	got, err := f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 2, got.ProposalsTotal)
	require.Equal(t, 1, got.ProposalsPending)
	require.Equal(t, 1, got.ProposalsApproved+got.ProposalsRejected)
	if winner.p.Decision == analysis.Approved {
		require.Equal(t, 1, got.ProposalsApproved)
	} else {
		require.Equal(t, 1, got.ProposalsRejected)
	}
	require.False(t, winner.p.DecidedAt.IsZero())
	require.Equal(t, 1, b.calls(), "only the decision writes the board")
	require.Len(t, f.outbox(), 1)
	require.Equal(t, winner.r, b.last(t).Run, "the board shows the run the decision left")

	// The other proposal is untouched; unknown proposals and bad
	// decisions are refused.
	p, _, ok, err := f.st.Decide(f.ctx, ps[1].ID, analysis.Rejected, 9, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(9), p.DecidedBy)
	_, _, _, err = f.st.Decide(f.ctx, 999, analysis.Approved, 9, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, _, err = f.st.Decide(f.ctx, ps[1].ID, analysis.Undecided, 9, b.render)
	require.Error(t, err)
	require.Equal(t, 1, b.calls(), "refusals render no board")
	require.Len(t, f.outbox(), 1)
}

func TestAnalysisSaveBatch(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	in := []analysis.Proposal{
		{Title: "Fix login", Description: "users cannot log in", Priority: "high", Assignee: "@ann", Deadline: "2025-03-05",
			Sources: []analysis.Ref{{ChatID: 2, MessageID: 9}, {ChatID: 1, MessageID: 5}, {ChatID: 2, MessageID: 9}}},
		{Title: "Update docs", Priority: "low"},
	}
	run, out, err := f.st.SaveBatch(f.ctx, r.ID, 1, 30, in, nil)
	require.NoError(t, err)
	require.Equal(t, [4]int{2, 2, 1, 30}, [4]int{run.ProposalsTotal, run.ProposalsPending, run.BatchesDone, run.Processed})
	require.Len(t, out, 2)
	require.Less(t, out[0].ID, out[1].ID)
	for i, p := range out {
		require.NotZero(t, p.ID)
		require.Equal(t, r.ID, p.RunID)
		require.Equal(t, 1, p.Batch)
		require.Equal(t, i+1, p.Ordinal)
		require.Equal(t, analysis.Undecided, p.Decision)
		require.Equal(t, in[i].Title, p.Title)
		require.Equal(t, in[i].Description, p.Description)
		require.Equal(t, in[i].Priority, p.Priority)
		require.Equal(t, in[i].Assignee, p.Assignee)
		require.Equal(t, in[i].Deadline, p.Deadline)
		require.False(t, p.CreatedAt.IsZero())
	}
	require.Equal(t, []analysis.Ref{{ChatID: 1, MessageID: 5}, {ChatID: 2, MessageID: 9}}, out[0].Sources, "sorted, without duplicates")
	require.Empty(t, out[1].Sources)

	// A batch without proposals still counts.
	run, out2, err := f.st.SaveBatch(f.ctx, r.ID, 2, 12, nil, nil)
	require.NoError(t, err)
	require.Empty(t, out2)
	require.Equal(t, [4]int{2, 2, 2, 42}, [4]int{run.ProposalsTotal, run.ProposalsPending, run.BatchesDone, run.Processed})

	// A proposal the schema refuses rolls the whole batch back.
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 3, 5, []analysis.Proposal{proposal("fine"), {Title: "bad", Priority: "urgent"}}, nil)
	require.Error(t, err)
	got, err := f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, run, got)
	require.Equal(t, 2, int(f.exec(`SELECT 1 FROM analysis_proposals`)))

	// The stored proposal, as a refused Decide returns it, with the message
	// its delivery recorded.
	require.NoError(t, f.st.EnqueueMessages(f.ctx, domain.Message{ChatID: adminChat, Kind: domain.KindProposal, Ref: out[0].ID, Text: "p"}))
	require.Equal(t, 1, f.deliver(321))
	f.decide(out[0].ID, analysis.Approved)
	p, _, ok, err := f.st.Decide(f.ctx, out[0].ID, analysis.Rejected, 8, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, analysis.Approved, p.Decision)
	require.Equal(t, int64(7), p.DecidedBy)
	require.Equal(t, 321, p.MessageID)
	require.Equal(t, out[0].Sources, p.Sources)
	require.Equal(t, out[0].Title, p.Title)
}

func TestAnalysisWindowMessages(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	at := func(min int) time.Time { return winFrom.Add(time.Duration(min) * time.Minute) }
	f.message(1, 1, at(-1), "before the window")
	f.message(1, 2, at(0), "first, on the boundary")
	f.message(2, 1, at(5), "chat 2 at 5")
	f.message(1, 3, at(5), "chat 1 at 5")
	f.message(1, 4, at(10), "cited by run A")
	f.message(2, 2, at(20), "cited by run B")
	f.message(1, 5, at(60), "at the end: outside")
	to := at(60)
	refs := func(ms []analysis.GroupMessage) []analysis.Ref {
		out := []analysis.Ref{}
		for _, m := range ms {
			out = append(out, analysis.Ref{ChatID: m.ChatID, MessageID: m.MessageID})
		}
		return out
	}

	a := f.running()
	all, err := f.st.WindowMessages(f.ctx, a.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(1, 2), ref(1, 3), ref(2, 1), ref(1, 4), ref(2, 2)}, refs(all))
	require.Equal(t, analysis.GroupMessage{ChatID: 1, MessageID: 2, AuthorID: 102, Author: "user2", Text: "first, on the boundary",
		Date: at(0)}, all[0])

	_, ps, err := f.st.SaveBatch(f.ctx, a.ID, 1, 2, []analysis.Proposal{proposal("a", analysis.Ref{ChatID: 1, MessageID: 4})}, nil)
	require.NoError(t, err)
	// Run A still sees the message its own proposal cites.
	got, err := f.st.WindowMessages(f.ctx, a.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, refs(all), refs(got))
	f.complete(a.ID)
	f.decide(ps[0].ID, analysis.Approved)
	f.closeRun(a.ID)

	b := f.running()
	got, err = f.st.WindowMessages(f.ctx, b.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(1, 2), ref(1, 3), ref(2, 1), ref(2, 2)}, refs(got), "run A's citation left out")
	got, err = f.st.WindowMessages(f.ctx, b.ID, winFrom, to, 2)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(2, 1), ref(2, 2)}, refs(got), "one chat")
	_, _, err = f.st.SaveBatch(f.ctx, b.ID, 1, 1, []analysis.Proposal{proposal("b", analysis.Ref{ChatID: 2, MessageID: 2})}, nil)
	require.NoError(t, err)
	got, err = f.st.WindowMessages(f.ctx, a.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(1, 2), ref(1, 3), ref(2, 1), ref(1, 4)}, refs(got), "run B's citation left out of A's window")
	got, err = f.st.WindowMessages(f.ctx, b.ID, at(100), at(200), 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

// A benchmark pushes 10 000 messages through a run in ≤ 10 s: reading the
// window must stay a small part of that.
func TestAnalysisWindowMessages10k(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	f.exec(`INSERT INTO group_messages (chat_id, message_id, author_id, author, text, date)
SELECT i % 5, i, i % 50, 'user', 'message number ' || i, $1::timestamptz + i * interval '1 second'
FROM generate_series(1, 12000) AS i`, winFrom)
	f.exec(`ANALYZE group_messages`)
	r := f.running()
	// An earlier run's proposals cite 1 000 of them.
	f.exec(`INSERT INTO analysis_runs (id, state, created_by, window_from, window_to, error_log)
VALUES (1000, 'failed', 1, $1, $1, '{}')`, winFrom)
	f.exec(`INSERT INTO analysis_proposals (id, run_id, ordinal, batch, title, priority) VALUES (1000, 1000, 1, 1, 'old', 'low')`)
	f.exec(`INSERT INTO analysis_proposal_sources (proposal_id, run_id, chat_id, message_id)
SELECT 1000, 1000, i % 5, i FROM generate_series(1, 10000, 10) AS i`)
	start := time.Now()
	got, err := f.st.WindowMessages(f.ctx, r.ID, winFrom, winFrom.Add(10000*time.Second+time.Millisecond), 0)
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, got, 9000)
	for i := 1; i < len(got); i++ {
		require.True(t, got[i-1].Date.Before(got[i].Date))
	}
	require.Less(t, took, 2*time.Second)
	t.Logf("10 000-message window read in %v", took)
}

func TestAnalysisFailInterrupted(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	failed, err := f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)

	// A live lease is left alone; an expired one fails the run once.
	r := f.running()
	failed, err = f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	r, ok, err := f.st.StartRun(f.ctx, r.ID, false, time.Hour, nil)
	requireRefused(t, r, ok, err, analysis.Running)
	f.exec(`UPDATE analysis_runs SET claimed_until = now() - interval '1 second' WHERE id = $1`, r.ID)
	failed, err = f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, r.ID, failed[0].ID)
	require.Equal(t, analysis.Failed, failed[0].State)
	require.False(t, failed[0].FailedAt.IsZero())
	require.Equal(t, &analysis.ErrorLog{Step: "interrupted", Error: "the executor stopped (process killed or restarted)"}, failed[0].ErrorLog)
	failed, err = f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	renewed, err := f.st.RenewLease(f.ctx, r.ID, time.Hour)
	require.NoError(t, err)
	require.False(t, renewed, "the interrupted executor cannot come back")

	// A lease that runs out by itself.
	r, ok, err = f.st.StartRun(f.ctx, f.create().ID, false, 50*time.Millisecond, nil)
	require.NoError(t, err)
	require.True(t, ok)
	failed, err = f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	time.Sleep(100 * time.Millisecond)
	failed, err = f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, r.ID, failed[0].ID)

	// Runs in other states are never touched, whatever their claimed_until.
	c := f.running()
	f.complete(c.ID)
	f.exec(`UPDATE analysis_runs SET claimed_until = now() - interval '1 hour' WHERE id = $1`, c.ID)
	failed, err = f.st.FailInterrupted(f.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, failed)
	got, err := f.st.Run(f.ctx, c.ID)
	require.NoError(t, err)
	require.Equal(t, analysis.Completed, got.State)
}

func TestAnalysisSimilar(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	ids := func(ps []analysis.Proposal) []int64 {
		out := []int64{}
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	a := f.running()
	ps := f.batch(a.ID, 1, 6)
	f.complete(a.ID)
	vectors := [][]float32{
		{1, 0, 0},     // 0: approved, the closest
		{0.7, 0.7, 0}, // 1: approved
		{0, 0, 1},     // 2: approved, orthogonal
		{1, 0, 0},     // 3: rejected
		{1, 0},        // 4: approved, another dimension
		nil,           // 5: approved, no embedding
	}
	for i, p := range ps {
		d := analysis.Approved
		if i == 3 {
			d = analysis.Rejected
		}
		f.decide(p.ID, d)
		if vectors[i] != nil {
			require.NoError(t, f.st.SaveEmbedding(f.ctx, p.ID, vectors[i]))
		}
	}
	f.closeRun(a.ID)
	// Replacing an embedding.
	require.NoError(t, f.st.SaveEmbedding(f.ctx, ps[2].ID, []float32{0, 0.1, 1}))
	require.ErrorIs(t, f.st.SaveEmbedding(f.ctx, 999, []float32{1}), domain.ErrNotFound)

	b := f.running()
	own := f.batch(b.ID, 1, 1)
	f.decide(own[0].ID, analysis.Approved)
	require.NoError(t, f.st.SaveEmbedding(f.ctx, own[0].ID, []float32{1, 0.1, 0}))

	q := []float32{1, 0.1, 0}
	got, err := f.st.Similar(f.ctx, b.ID, q, 5)
	require.NoError(t, err)
	require.Equal(t, []int64{ps[0].ID, ps[1].ID, ps[2].ID}, ids(got), "approved, of other runs, same dimension, most similar first")
	require.Equal(t, ps[0].Title, got[0].Title)
	require.Equal(t, analysis.Approved, got[0].Decision)
	got, err = f.st.Similar(f.ctx, b.ID, q, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{ps[0].ID, ps[1].ID}, ids(got))
	got, err = f.st.Similar(f.ctx, b.ID, []float32{0, 0, 1}, 1)
	require.NoError(t, err)
	require.Equal(t, []int64{ps[2].ID}, ids(got))
	got, err = f.st.Similar(f.ctx, a.ID, q, 5)
	require.NoError(t, err)
	require.Equal(t, []int64{own[0].ID}, ids(got), "seen from run A, only B's")
	got, err = f.st.Similar(f.ctx, b.ID, []float32{0, 0, 0}, 5)
	require.NoError(t, err, "a zero vector has no direction, and no error")
	require.Len(t, got, 3)
	got, err = f.st.Similar(f.ctx, b.ID, q, 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestAnalysisMessagesAndChats(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	require.NoError(t, f.st.TrackChat(f.ctx, -1, "Alpha", true))
	require.NoError(t, f.st.TrackChat(f.ctx, -2, "Beta", false))
	f.message(-1, 1, winFrom, "one")
	f.message(-1, 2, winFrom.Add(time.Hour), "two")
	f.message(-1, 3, winFrom.Add(2*time.Hour), "three")
	f.message(-3, 1, winFrom.Add(3*time.Hour), "from a group not tracked yet")

	// The same message again is an edit; EditMessage too.
	f.message(-1, 2, winFrom.Add(time.Hour), "two, edited")
	edited, err := f.st.EditMessage(f.ctx, -1, 3, "three, edited")
	require.NoError(t, err)
	require.True(t, edited)
	edited, err = f.st.EditMessage(f.ctx, -1, 99, "unknown")
	require.NoError(t, err)
	require.False(t, edited)
	f.message(-1, 1, winFrom, "one") // unchanged: not an edit
	var texts []string
	rows, err := f.st.Pool().Query(f.ctx, `SELECT text || ' ' || (edited_at IS NOT NULL) FROM group_messages WHERE chat_id = -1 ORDER BY message_id`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		texts = append(texts, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"one false", "two, edited true", "three, edited true"}, texts)

	chats, err := f.st.Chats(f.ctx)
	require.NoError(t, err)
	require.Len(t, chats, 3)
	require.Equal(t, analysis.Chat{ID: -3, Title: "", Messages: 1, LastAt: winFrom.Add(3 * time.Hour), CanRead: true}, chats[0])
	require.Equal(t, analysis.Chat{ID: -1, Title: "Alpha", Messages: 3, LastAt: winFrom.Add(2 * time.Hour), CanRead: true}, chats[1])
	require.Equal(t, analysis.Chat{ID: -2, Title: "Beta", Messages: 0, CanRead: false}, chats[2])

	// Tracking the new group names it and keeps its messages.
	require.NoError(t, f.st.TrackChat(f.ctx, -3, "Gamma", false))
	chats, err = f.st.Chats(f.ctx)
	require.NoError(t, err)
	require.Equal(t, analysis.Chat{ID: -3, Title: "Gamma", Messages: 1, LastAt: winFrom.Add(3 * time.Hour), CanRead: false}, chats[0])
}

func TestAnalysisRunsNewestFirst(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var made []int64
	for range 3 {
		r := f.running()
		_, _, err := f.st.FailRun(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
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
	runs, total, err := f.st.Runs(f.ctx, 0, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Equal(t, []int64{made[2], made[1]}, ids(runs))
	require.Equal(t, analysis.Failed, runs[0].State)
	require.NotNil(t, runs[0].ErrorLog)
	runs, total, err = f.st.Runs(f.ctx, 2, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Equal(t, []int64{made[0]}, ids(runs))
	runs, total, err = f.st.Runs(f.ctx, 5, 2)
	require.NoError(t, err)
	require.Equal(t, 3, total)
	require.Empty(t, runs)
}

// Publish reaches a LISTEN connection on analysis_runs.
func TestAnalysisPublish(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	connected := make(chan struct{}, 1)
	got := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Listen(ctx, []string{storage.AnalysisChannel}, func() { connected <- struct{}{} },
			func(ch, payload string) { got <- ch + " " + payload })
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not connect")
	}
	payload := `{"event":"run_created","run":1,"state":"pending"}`
	require.NoError(t, st.Publish(ctx, payload))
	select {
	case n := <-got:
		require.Equal(t, "analysis_runs "+payload, n)
	case <-time.After(10 * time.Second):
		t.Fatal("no notification")
	}
	// Too large for NOTIFY: an error, not a lost event.
	err := st.Publish(ctx, strings.Repeat("x", 9000))
	require.Error(t, err)
	require.False(t, errors.Is(err, context.Canceled))
	cancel()
	<-done
}

// A batch's proposals and the board that lists them are written in one
// transaction: after SaveBatch the outbox holds the board's edit listing
// the batch's proposals in order, by ordinal, whose buttons name them; a
// batch that is not saved writes nothing, and a board the outbox refuses
// saves no proposal.
func TestAnalysisSaveBatchWritesItsMessages(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	require.Empty(t, f.outbox())
	_, err := f.st.SetProgress(f.ctx, r.ID, 30, 20, 2, boardMessage(true))
	require.NoError(t, err)
	board := outboxRow{Kind: domain.KindProgress, Ref: r.ID, Text: "0/2 p1/1 [] 0/0/0"}
	require.Equal(t, []outboxRow{board}, f.outbox())
	// The board is posted: its edits are rows of their own.
	require.Equal(t, 1, f.deliver(555))

	run, ps, err := f.st.SaveBatch(f.ctx, r.ID, 1, 9, []analysis.Proposal{proposal("a"), proposal("b"), proposal("c")}, boardMessage(false))
	require.NoError(t, err)
	require.Len(t, ps, 3)
	require.Equal(t, 3, run.ProposalsTotal)
	require.Equal(t, []int{1, 2, 3}, ordinals(ps))
	want := []outboxRow{board, {Kind: domain.KindProgress, Ref: r.ID, Text: "1/2 p1/1 [#1 a, #2 b, #3 c] 3/0/0", Edit: true,
		Data: fmt.Sprintf("pa:%d pa:%d pa:%d", ps[0].ID, ps[1].ID, ps[2].ID)}}
	require.Equal(t, want, f.outbox())

	// Refused by the schema: neither the proposals nor the board.
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 2, 5, []analysis.Proposal{proposal("fine"), {Title: "bad", Priority: "urgent"}}, boardMessage(false))
	require.Error(t, err)
	// A board the outbox refuses (no chat): no proposal either.
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 2, 5, []analysis.Proposal{proposal("d")},
		func(rv analysis.Review) []domain.Message {
			return append(boardMessage(false)(rv), domain.Message{Kind: domain.KindRunEvent, Text: "no chat"})
		})
	require.Error(t, err)
	got, err := f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, run, got, "the counters are as batch 1 left them")
	require.Equal(t, 3, int(f.exec(`SELECT 1 FROM analysis_proposals`)))
	require.Equal(t, want, f.outbox())

	// The run no longer running: nothing is saved or written.
	f.complete(r.ID)
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 2, 1, []analysis.Proposal{proposal("late")}, boardMessage(false))
	require.ErrorIs(t, err, analysis.ErrState)
	require.Equal(t, want, f.outbox())
	require.Equal(t, 3, int(f.exec(`SELECT 1 FROM analysis_proposals`)))
}

// Each state change writes its event with it, as the run it left; a
// refused change writes nothing.
func TestAnalysisRunEventsAreWrittenWithTheirChange(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	win := analysis.Run{CreatedBy: 7, From: winFrom, To: winFrom.Add(time.Hour)}
	r, _, err := f.st.CreateRun(f.ctx, win, event("run_created"))
	require.NoError(t, err)
	_, blocked, err := f.st.CreateRun(f.ctx, win, event("refused"))
	require.NoError(t, err)
	require.Equal(t, []int64{r.ID}, blocked)
	x, ok, err := f.st.CloseRun(f.ctx, r.ID, event("refused"))
	requireRefused(t, x, ok, err, analysis.Pending)
	_, ok, err = f.st.StartRun(f.ctx, r.ID, false, time.Hour, event("run_started"))
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.StartRun(f.ctx, r.ID, false, time.Hour, event("refused"))
	require.NoError(t, err)
	require.False(t, ok)
	_, err = f.st.SetProgress(f.ctx, r.ID, 3, 2, 1, progressMessage(true))
	require.NoError(t, err)
	ps := f.batch(r.ID, 1, 1)
	_, ok, err = f.st.CompleteRun(f.ctx, r.ID, event("run_completed"))
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.FailRun(f.ctx, r.ID, analysis.ErrorLog{Step: "x", Error: "y"}, event("refused"))
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = f.st.CloseRun(f.ctx, r.ID, event("refused"))
	require.NoError(t, err)
	require.False(t, ok, "a proposal is pending")
	f.decide(ps[0].ID, analysis.Approved)
	_, ok, err = f.st.CloseRun(f.ctx, r.ID, event("run_closed"))
	require.NoError(t, err)
	require.True(t, ok)

	// Failures: the executor's and the reaper's.
	a := f.running()
	_, ok, err = f.st.FailRun(f.ctx, a.ID, analysis.ErrorLog{Step: "x", Error: "y"}, event("run_failed"))
	require.NoError(t, err)
	require.True(t, ok)
	b := f.running()
	failed, err := f.st.FailInterrupted(f.ctx, event("refused"))
	require.NoError(t, err)
	require.Empty(t, failed)
	f.exec(`UPDATE analysis_runs SET claimed_until = now() - interval '1 second' WHERE id = $1`, b.ID)
	failed, err = f.st.FailInterrupted(f.ctx, event("interrupted"))
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
	r, err := f.st.Run(f.ctx, runID)
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

// Ordinals number a run's proposals 1, 2, … in the order made, across
// batches, each once; a batch rolled back leaves no gap; every run counts
// from 1.
func TestAnalysisProposalOrdinals(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	require.Equal(t, []int{1, 2, 3}, ordinals(f.batch(r.ID, 1, 3)))
	require.Empty(t, f.batch(r.ID, 2, 0), "an empty batch numbers nothing")
	// A batch the schema refuses (its second proposal) is rolled back,
	// numbers and all.
	_, _, err := f.st.SaveBatch(f.ctx, r.ID, 3, 5, []analysis.Proposal{proposal("fine"), {Title: "bad", Priority: "urgent"}}, nil)
	require.Error(t, err)
	// So is one whose board the outbox refuses.
	_, _, err = f.st.SaveBatch(f.ctx, r.ID, 3, 5, []analysis.Proposal{proposal("fine")},
		func(analysis.Review) []domain.Message {
			return []domain.Message{{Kind: domain.KindRunEvent, Text: "no chat"}}
		})
	require.Error(t, err)
	require.Equal(t, []int{4, 5}, ordinals(f.batch(r.ID, 3, 2)), "numbered on after the rolled-back batches")
	require.Equal(t, []int{6, 7, 8, 9}, ordinals(f.batch(r.ID, 4, 4)))

	stored := f.proposalsOf(r.ID)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, ordinals(stored), "in the order made (by id), each once")
	require.Equal(t, "task 3.1", stored[3].Title)
	got, err := f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 9, got.ProposalsTotal)

	// Decide returns the proposal with its ordinal.
	f.complete(r.ID)
	p, _, ok, err := f.st.Decide(f.ctx, stored[4].ID, analysis.Rejected, 7, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 5, p.Ordinal)
	for _, p := range stored {
		if p.ID != stored[4].ID {
			f.decide(p.ID, analysis.Approved)
		}
	}
	f.closeRun(r.ID)

	// The next run counts from 1 again.
	b := f.running()
	require.Equal(t, []int{1, 2}, ordinals(f.batch(b.ID, 1, 2)))
	// The schema keeps an ordinal unique within its run.
	_, err = f.st.Pool().Exec(f.ctx, `INSERT INTO analysis_proposals (run_id, ordinal, batch, title, priority)
VALUES ($1, 2, 9, 'twin', 'low')`, b.ID)
	require.Error(t, err)
	_, err = f.st.Pool().Exec(f.ctx, `INSERT INTO analysis_proposals (run_id, ordinal, batch, title, priority)
VALUES ($1, 0, 9, 'zero', 'low')`, b.ID)
	require.Error(t, err)
}

// The board render is given is the page its run is on, with that page's
// proposals by ordinal; TurnPage moves it, clamped to the pages.
func TestAnalysisBoardPages(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	r := f.running()
	_, err := f.st.SetProgress(f.ctx, r.ID, 40, 30, 3, b.render)
	require.NoError(t, err)
	rv := b.last(t)
	require.Equal(t, 0, rv.Page)
	require.Empty(t, rv.Proposals)
	require.Equal(t, 1, rv.Pages())

	// 20 proposals in batches of 6, 9 and 5; the first cites messages.
	total := 0
	for n, size := range []int{6, 9, 5} {
		ps := make([]analysis.Proposal, size)
		for i := range ps {
			ps[i] = proposal(fmt.Sprintf("task %d", total+i+1))
		}
		if n == 0 {
			ps[0].Sources = []analysis.Ref{ref(-5, 2), ref(-5, 1)}
		}
		run, _, err := f.st.SaveBatch(f.ctx, r.ID, n+1, 10, ps, b.render)
		require.NoError(t, err)
		total += size
		rv := b.last(t)
		require.Equal(t, run, rv.Run, "the board of the run the batch left")
		require.Equal(t, 0, rv.Page, "the board stays on its page")
		want := []int{}
		for i := 1; i <= min(total, analysis.ReviewPageSize); i++ {
			want = append(want, i)
		}
		require.Equal(t, want, ordinals(rv.Proposals))
	}
	require.Equal(t, 3, b.last(t).Pages())
	first := b.last(t).Proposals[0]
	require.Equal(t, "task 1", first.Title)
	require.Equal(t, []analysis.Ref{ref(-5, 1), ref(-5, 2)}, first.Sources, "the board's proposals have their sources")
	require.Equal(t, analysis.Undecided, first.Decision)

	turn := func(page, want int, ords ...int) analysis.Run {
		t.Helper()
		calls := b.calls()
		run, err := f.st.TurnPage(f.ctx, r.ID, page, b.render)
		require.NoError(t, err)
		require.Equal(t, want, run.ReviewPage, "page %d", page)
		require.Equal(t, calls+1, b.calls(), "TurnPage writes the board")
		rv := b.last(t)
		require.Equal(t, want, rv.Page)
		require.Equal(t, run, rv.Run)
		require.Equal(t, ords, ordinals(rv.Proposals), "page %d", page)
		for _, p := range rv.Proposals {
			require.Equal(t, fmt.Sprintf("task %d", p.Ordinal), p.Title)
			require.Equal(t, r.ID, p.RunID)
		}
		stored, err := f.st.Run(f.ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, want, stored.ReviewPage, "the page is the run's")
		return run
	}
	turn(2, 2, 17, 18, 19, 20)
	turn(1, 1, 9, 10, 11, 12, 13, 14, 15, 16)
	turn(99, 2, 17, 18, 19, 20)
	turn(-1, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	turn(3, 2, 17, 18, 19, 20)

	// Other changes write the board on the page it is on.
	f.complete(r.ID)
	all := f.proposalsOf(r.ID)
	_, _, ok, err := f.st.Decide(f.ctx, all[0].ID, analysis.Approved, 7, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, b.last(t).Page)
	require.Equal(t, []int{17, 18, 19, 20}, ordinals(b.last(t).Proposals))
	_, _, ok, err = f.st.Decide(f.ctx, all[18].ID, analysis.Rejected, 7, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "3/3 p3/3 [#17 task 17, #18 task 18, #19- task 19, #20 task 20] 18/1/1", boardText(b.last(t)))

	// Every write above is in the outbox, in order.
	rows := f.outbox()
	require.Len(t, rows, b.calls())
	for i, rv := range b.reviews {
		require.Equal(t, boardText(rv), rows[i].Text)
	}

	// An unknown run: ErrNotFound, nothing written.
	calls := b.calls()
	_, err = f.st.TurnPage(f.ctx, 999, 1, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Equal(t, calls, b.calls())
	require.Len(t, f.outbox(), calls)

	// A run without proposals has one page.
	for _, p := range all[1:] {
		if p.ID != all[18].ID {
			f.decide(p.ID, analysis.Approved)
		}
	}
	f.closeRun(r.ID)
	e := f.running()
	run, err := f.st.TurnPage(f.ctx, e.ID, 3, b.render)
	require.NoError(t, err)
	require.Zero(t, run.ReviewPage)
	require.Zero(t, b.last(t).Page)
	require.Empty(t, b.last(t).Proposals)
}

// Decide writes the board in its transaction: the board shows the
// decision, a board the outbox refuses undoes it, and a second decision of
// the proposal (refused) writes nothing.
func TestAnalysisDecideWritesTheBoard(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	r := f.running()
	ps := f.batch(r.ID, 1, 3)
	f.complete(r.ID)
	require.Empty(t, f.outbox())

	p, run, ok, err := f.st.Decide(f.ctx, ps[1].ID, analysis.Approved, 7, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, p.Ordinal)
	require.Equal(t, run, b.last(t).Run)
	want := []outboxRow{{Kind: domain.KindProgress, Ref: r.ID, Text: "1/0 p1/1 [#1 task 1.1, #2+ task 1.2, #3 task 1.3] 2/1/0",
		Data: fmt.Sprintf("pa:%d pa:%d pa:%d", ps[0].ID, ps[1].ID, ps[2].ID)}}
	require.Equal(t, want, f.outbox())

	// The same proposal again, either way: refused, nothing rendered or
	// written.
	for _, d := range []analysis.Decision{analysis.Rejected, analysis.Approved} {
		p, run2, ok, err := f.st.Decide(f.ctx, ps[1].ID, d, 8, b.render)
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, analysis.Approved, p.Decision)
		require.Equal(t, int64(7), p.DecidedBy)
		require.Equal(t, run.ProposalsApproved, run2.ProposalsApproved)
		require.Equal(t, 1, b.calls())
		require.Equal(t, want, f.outbox())
	}

	// The board cannot be written: the decision is undone with it.
	_, _, _, err = f.st.Decide(f.ctx, ps[0].ID, analysis.Rejected, 7, func(rv analysis.Review) []domain.Message {
		return append(b.render(rv), domain.Message{Kind: domain.KindRunEvent, Text: "no chat"})
	})
	require.Error(t, err)
	require.Equal(t, want, f.outbox())
	got := f.requireCounters(r.ID)
	require.Equal(t, 2, got.ProposalsPending)
	require.Equal(t, analysis.Undecided, f.proposalsOf(r.ID)[0].Decision)
	// And it can be decided after.
	f.decide(ps[0].ID, analysis.Rejected)
	f.requireCounters(r.ID)
}

// AskApproveAll asks only on a completed run with proposals pending, once;
// CancelApproveAll withdraws the question. Each writes the board; a
// refusal writes nothing.
func TestAnalysisAskApproveAll(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	refused := func(r analysis.Run, ok bool, err error, state analysis.State) {
		t.Helper()
		calls := b.calls()
		requireRefused(t, r, ok, err, state)
		require.Equal(t, calls, b.calls(), "a refusal renders nothing")
		require.Len(t, f.outbox(), calls, "a refusal writes nothing")
	}

	// Not completed yet.
	r := f.running()
	ps := f.batch(r.ID, 1, 3)
	x, ok, err := f.st.AskApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Running)
	require.False(t, x.ReviewConfirm)
	x, ok, err = f.st.CancelApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Running)

	f.complete(r.ID)
	x, ok, err = f.st.CancelApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	asked, ok, err := f.st.AskApproveAll(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, asked.ReviewConfirm)
	require.Equal(t, 3, asked.ProposalsPending)
	require.Equal(t, asked, b.last(t).Run)
	require.Equal(t, "1/0 p1/1 [#1 task 1.1, #2 task 1.2, #3 task 1.3] 3/0/0 ?", f.outbox()[0].Text)
	got, err := f.st.Run(f.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, got.ReviewConfirm)

	// Asking already.
	x, ok, err = f.st.AskApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	require.True(t, x.ReviewConfirm)

	// Withdrawn; then it can be asked again.
	cancelled, ok, err := f.st.CancelApproveAll(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, cancelled.ReviewConfirm)
	require.Equal(t, 2, b.calls())
	require.Equal(t, "1/0 p1/1 [#1 task 1.1, #2 task 1.2, #3 task 1.3] 3/0/0", f.outbox()[1].Text)
	x, ok, err = f.st.CancelApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	_, ok, err = f.st.AskApproveAll(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.CancelApproveAll(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)

	// Nothing pending.
	for _, p := range ps {
		f.decide(p.ID, analysis.Rejected)
	}
	x, ok, err = f.st.AskApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	require.Zero(t, x.ProposalsPending)
	require.False(t, x.ReviewConfirm)
	f.closeRun(r.ID)
	x, ok, err = f.st.AskApproveAll(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Closed)

	// No proposals at all.
	e := f.running()
	f.batch(e.ID, 1, 0)
	f.complete(e.ID)
	x, ok, err = f.st.AskApproveAll(f.ctx, e.ID, b.render)
	refused(x, ok, err, analysis.Completed)

	// A failed run.
	f.closeRun(e.ID)
	fr := f.running()
	f.batch(fr.ID, 1, 2)
	_, ok, err = f.st.FailRun(f.ctx, fr.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	x, ok, err = f.st.AskApproveAll(f.ctx, fr.ID, b.render)
	refused(x, ok, err, analysis.Failed)

	// Unknown runs.
	_, _, err = f.st.AskApproveAll(f.ctx, 999, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.CancelApproveAll(f.ctx, 999, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// ApproveAll approves exactly the proposals pending, only once the board
// asks, with the counters and the board in one transaction; a second
// confirm finds nothing to do.
func TestAnalysisApproveAll(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	r := f.running()
	ps := f.batch(r.ID, 1, 6)
	f.decide(ps[4].ID, analysis.Approved) // decided while the run is running

	// Not completed: refused even if the question were set.
	f.exec(`UPDATE analysis_runs SET review_confirm = true WHERE id = $1`, r.ID)
	approved, x, ok, err := f.st.ApproveAll(f.ctx, r.ID, 99, b.render)
	requireRefused(t, x, ok, err, analysis.Running)
	require.Empty(t, approved)
	f.exec(`UPDATE analysis_runs SET review_confirm = false WHERE id = $1`, r.ID)

	f.complete(r.ID)
	f.decide(ps[1].ID, analysis.Rejected)
	before := f.requireCounters(r.ID)
	require.Equal(t, [3]int{4, 1, 1}, [3]int{before.ProposalsPending, before.ProposalsApproved, before.ProposalsRejected})

	// Without the question: refused, nothing changed or written.
	approved, x, ok, err = f.st.ApproveAll(f.ctx, r.ID, 99, b.render)
	requireRefused(t, x, ok, err, analysis.Completed)
	require.Empty(t, approved)
	require.Equal(t, before, x)
	require.Zero(t, b.calls())
	require.Empty(t, f.outbox())
	require.Equal(t, before, f.requireCounters(r.ID))

	_, ok, err = f.st.AskApproveAll(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	approved, run, ok, err := f.st.ApproveAll(f.ctx, r.ID, 99, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int{1, 3, 4, 6}, ordinals(approved), "the pending ones, by ordinal")
	for _, p := range approved {
		require.Equal(t, analysis.Approved, p.Decision)
		require.Equal(t, int64(99), p.DecidedBy)
		require.False(t, p.DecidedAt.IsZero())
		require.Equal(t, r.ID, p.RunID)
		require.Equal(t, fmt.Sprintf("task 1.%d", p.Ordinal), p.Title)
	}
	require.Equal(t, [4]int{6, 0, 5, 1}, [4]int{run.ProposalsTotal, run.ProposalsPending, run.ProposalsApproved, run.ProposalsRejected})
	require.False(t, run.ReviewConfirm, "the question is answered")
	require.Equal(t, run, f.requireCounters(r.ID))
	stored := f.proposalsOf(r.ID)
	require.Equal(t, analysis.Rejected, stored[1].Decision, "rejected before: stays rejected")
	require.Equal(t, int64(7), stored[1].DecidedBy)
	require.Equal(t, int64(7), stored[4].DecidedBy, "approved before: by its own admin")
	for _, i := range []int{0, 2, 3, 5} {
		require.Equal(t, int64(99), stored[i].DecidedBy)
	}
	// The board, written once with it.
	require.Equal(t, 1, b.calls())
	require.Equal(t, run, b.last(t).Run)
	require.Equal(t, []outboxRow{{Kind: domain.KindProgress, Ref: r.ID,
		Text: "1/0 p1/1 [#1+ task 1.1, #2- task 1.2, #3+ task 1.3, #4+ task 1.4, #5+ task 1.5, #6+ task 1.6] 0/5/1",
		Data: fmt.Sprintf("pa:%d pa:%d pa:%d pa:%d pa:%d pa:%d", ps[0].ID, ps[1].ID, ps[2].ID, ps[3].ID, ps[4].ID, ps[5].ID)}}, f.outbox())

	// A second confirm: the board no longer asks; nothing changes.
	approved, x, ok, err = f.st.ApproveAll(f.ctx, r.ID, 98, b.render)
	requireRefused(t, x, ok, err, analysis.Completed)
	require.Empty(t, approved)
	require.Equal(t, run, x)
	require.Equal(t, stored, f.proposalsOf(r.ID))
	require.Equal(t, 1, b.calls())
	require.Len(t, f.outbox(), 1)
	// Nor can the question come back: nothing is pending.
	_, ok, err = f.st.AskApproveAll(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.False(t, ok)

	f.closeRun(r.ID)
	approved, x, ok, err = f.st.ApproveAll(f.ctx, r.ID, 98, nil)
	requireRefused(t, x, ok, err, analysis.Closed)
	require.Empty(t, approved)
	_, _, _, err = f.st.ApproveAll(f.ctx, 999, 98, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// A board the outbox refuses undoes the approvals.
	c := f.running()
	cps := f.batch(c.ID, 1, 3)
	f.complete(c.ID)
	_, ok, err = f.st.AskApproveAll(f.ctx, c.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, _, err = f.st.ApproveAll(f.ctx, c.ID, 99, func(analysis.Review) []domain.Message {
		return []domain.Message{{Kind: domain.KindRunEvent, Text: "no chat"}}
	})
	require.Error(t, err)
	got := f.requireCounters(c.ID)
	require.Equal(t, 3, got.ProposalsPending)
	require.True(t, got.ReviewConfirm, "still asking")
	approved, _, ok, err = f.st.ApproveAll(f.ctx, c.ID, 99, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, approved, len(cps))
}

// Presses on a run's proposals racing its "approve all" confirmation:
// neither deadlocks nor counts twice, whoever wins. The counters always
// equal the proposals' decisions, each proposal is decided by exactly one
// of them, and every change that happened wrote one board.
func TestAnalysisDecideApproveAllConcurrent(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const rounds = 25
	const size = 6
	decidedFirst, approvedFirst := 0, 0
	for round := range rounds {
		var b boards
		r := f.running()
		ps := f.batch(r.ID, 1, size)
		f.complete(r.ID)
		_, ok, err := f.st.AskApproveAll(f.ctx, r.ID, nil)
		require.NoError(t, err)
		require.True(t, ok)

		type press struct {
			p   analysis.Proposal
			ok  bool
			err error
		}
		// Presses on three proposals (one twice), against one confirm.
		targets := []int{round % size, (round + 2) % size, (round + 4) % size, round % size}
		presses := make([]press, len(targets))
		var approved []analysis.Proposal
		var approveOK bool
		var approveErr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, k := range targets {
			wg.Go(func() {
				<-start
				d := analysis.Rejected
				if i%2 == 1 {
					d = analysis.Approved
				}
				p, _, ok, err := f.st.Decide(f.ctx, ps[k].ID, d, int64(10+i), b.render)
				presses[i] = press{p, ok, err}
			})
		}
		wg.Go(func() {
			<-start
			approved, _, approveOK, approveErr = f.st.ApproveAll(f.ctx, r.ID, 99, b.render)
		})
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Decide and ApproveAll are stuck", round)
		}

		require.NoError(t, approveErr, "round %d", round)
		require.True(t, approveOK, "round %d: the confirm found the question", round)
		byApprove := map[int64]bool{}
		for _, p := range approved {
			byApprove[p.ID] = true
		}
		changes := 1
		byPress := map[int64]int{}
		for i, pr := range presses {
			require.NoError(t, pr.err, "round %d press %d", round, i)
			if pr.ok {
				changes++
				byPress[pr.p.ID]++
				require.False(t, byApprove[pr.p.ID], "round %d: proposal %d decided by a press and approved by the confirm", round, pr.p.ID)
			}
		}
		stored := f.proposalsOf(r.ID)
		for _, p := range stored {
			require.NotEqual(t, analysis.Undecided, p.Decision, "round %d: the confirm leaves nothing pending", round)
			if byApprove[p.ID] {
				require.Equal(t, int64(99), p.DecidedBy)
				require.Equal(t, analysis.Approved, p.Decision)
				require.Zero(t, byPress[p.ID])
			} else {
				require.Equal(t, 1, byPress[p.ID], "round %d: proposal %d decided once, by a press", round, p.ID)
				require.NotEqual(t, int64(99), p.DecidedBy)
			}
		}
		got := f.requireCounters(r.ID)
		require.False(t, got.ReviewConfirm)
		require.Equal(t, changes, b.calls(), "round %d: one board per change", round)
		if len(approved) == size {
			approvedFirst++
		} else {
			decidedFirst++
		}
		f.closeRun(r.ID)
	}
	t.Logf("confirm first in %d rounds, a press first in %d", approvedFirst, decidedFirst)
}
