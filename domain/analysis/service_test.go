package analysis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

type world struct {
	ctx   context.Context
	store *storage.Store
	llm   *llmtest.Server
	llmc  *llm.Client
	chat  *adminChat
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{ctx: context.Background(), store: storagetest.New(t), llm: llmtest.New(), chat: &adminChat{}}
	t.Cleanup(w.llm.Close)
	var err error
	w.llmc, err = llm.New(llm.Config{Provider: llm.ProviderOllama, URL: w.llm.URL(), Model: "cheap", EmbedModel: "embed",
		Timeout: 5 * time.Second, MaxConcurrency: 4},
		llm.WithBreaker(1000, time.Second), llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(w.llmc.Close)
	return w
}

// service builds a service over repo (the store, or a faulty wrapper of
// it) and serves it until the test ends.
func (w *world) service(t *testing.T, repo analysis.Repository) *analysis.Service {
	t.Helper()
	s, err := analysis.NewService(analysis.Config{}, analysis.Deps{
		Repo: repo, LLM: llm.AnalysisPort{Client: w.llmc, Invalid: analysis.ErrInvalidAnswer}, Notifier: w.chat, Publisher: w.store,
		Log: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan struct{})
	go func() { s.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	// Serve must have begun before Start is called.
	require.Eventually(t, func() bool {
		_, err := s.Start(w.ctx, -1, false)
		return !strings.Contains(fmt.Sprint(err), "not running")
	}, 5*time.Second, time.Millisecond)
	return s
}

// talk stores n messages in chat, one a minute ending now.
func (w *world) talk(t *testing.T, s *analysis.Service, chat int64, texts ...string) {
	t.Helper()
	now := time.Now().Add(-time.Duration(len(texts)) * time.Minute)
	for i, text := range texts {
		require.NoError(t, s.Record(w.ctx, analysis.Message{ChatID: chat, MessageID: int64(i + 1), AuthorID: 7, Author: "Ann",
			Text: text, Date: now.Add(time.Duration(i) * time.Minute)}))
	}
}

func (w *world) waitState(t *testing.T, s *analysis.Service, id int64, want analysis.State) analysis.Run {
	t.Helper()
	var r analysis.Run
	require.Eventually(t, func() bool {
		var err error
		r, err = s.Run(w.ctx, id)
		require.NoError(t, err)
		return r.State == want
	}, 10*time.Second, 5*time.Millisecond, "run %d to %s", id, want)
	return r
}

// adminChatID is the admin chat the fake notifier renders for.
const adminChatID = -900

// adminChat renders the workflow's messages as plain rows (the text names
// the event, the proposal's title) and records the proposals it rendered.
type adminChat struct {
	mu        sync.Mutex
	proposals []analysis.Proposal
}

func (a *adminChat) Event(e analysis.Event) []domain.Message {
	if e.Kind == analysis.EventProgress {
		return nil
	}
	return []domain.Message{{ChatID: adminChatID, Kind: domain.KindRunEvent, Ref: e.Run.ID, Text: string(e.Kind)}}
}

func (a *adminChat) Progress(r analysis.Run, first bool) []domain.Message {
	m := domain.Message{ChatID: adminChatID, Kind: domain.KindProgress, Ref: r.ID, Key: fmt.Sprintf("progress:%d", r.ID),
		Text: fmt.Sprintf("%d/%d", r.BatchesDone, r.Batches)}
	if !first {
		m.Edit, m.IfGone = true, domain.IfGoneSend
	}
	return []domain.Message{m}
}

func (a *adminChat) Proposal(_ analysis.Run, p analysis.Proposal) []domain.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.proposals = append(a.proposals, p)
	return []domain.Message{{ChatID: adminChatID, Kind: domain.KindProposal, Ref: p.ID, Text: p.Title,
		Buttons: [][]domain.Button{{{Text: "Approve", Data: fmt.Sprintf("pa:%d", p.ID)}}}}}
}

func (a *adminChat) posted() []analysis.Proposal {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]analysis.Proposal(nil), a.proposals...)
}

// row is an outbox row as the tests compare it.
type row struct {
	Kind string
	Ref  int64
	Text string
	Edit bool
}

// outbox lists the outbox rows in the order of delivery.
func (w *world) outbox(t *testing.T) []row {
	t.Helper()
	rows, err := w.store.Pool().Query(w.ctx, `SELECT kind, ref, body->>'text', edit FROM outbox ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.Kind, &x.Ref, &x.Text, &x.Edit)
	})
	require.NoError(t, err)
	return out
}

// events are the run events written to the outbox, by their text.
func (w *world) events(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, r := range w.outbox(t) {
		if r.Kind == domain.KindRunEvent {
			out = append(out, r.Text)
		}
	}
	return out
}

// unqueued counts the proposals that have no outbox row of their own.
func (w *world) unqueued(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM analysis_proposals p
WHERE NOT EXISTS (SELECT 1 FROM outbox o WHERE o.kind = 'proposal' AND o.ref = p.id AND o.chat_id = $1)`, adminChatID).Scan(&n))
	return n
}

var idRx = regexp.MustCompile(`\[id=(\d+) `)

// oneTaskPerMessage scripts the LLM to propose one task per message that
// mentions "task", citing it.
func oneTaskPerMessage(w *world) *llmtest.Rule {
	return w.llm.On(llmtest.SystemContains("propose the tasks")).Named("proposals").ReplyFunc(func(r llmtest.Request) string {
		var ps []string
		for _, line := range strings.Split(r.Prompt, "\n") {
			m := idRx.FindStringSubmatch(line)
			if m == nil || !strings.Contains(line, "task") {
				continue
			}
			_, text, _ := strings.Cut(line, ": ")
			ps = append(ps, fmt.Sprintf(`{"title":"Task from %s: %s","description":"d","priority":"medium","assignee":"","deadline":"","source_message_ids":[%s]}`, m[1], text, m[1]))
		}
		return `{"proposals":[` + strings.Join(ps, ",") + `]}`
	})
}

// The whole story: a run over a chat's messages completes with one
// proposal per task, decisions move the counters, close stores the rate.
func TestRunLifecycle(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	oneTaskPerMessage(w)
	s := w.service(t, w.store)
	w.talk(t, s, -100, "task: deploy billing", "hello", "task: fix login", "task: write docs")

	r, err := s.NewRun(w.ctx, 1, "24h")
	require.NoError(t, err)
	require.Equal(t, analysis.Pending, r.State)
	require.Equal(t, []row{{domain.KindRunEvent, r.ID, "run_created", false}}, w.outbox(t), "written with the run")
	_, err = s.NewRun(w.ctx, 1, "7d")
	var ue *analysis.UnclosedError
	require.True(t, errors.As(err, &ue))
	require.Equal(t, []int64{r.ID}, ue.IDs, "the original's 409 names the run in the way")
	_, err = s.Close(w.ctx, r.ID)
	require.ErrorIs(t, err, analysis.ErrState, "a pending run cannot close")
	require.Len(t, w.outbox(t), 1, "refusals write nothing")

	started, err := s.Start(w.ctx, r.ID, false)
	require.NoError(t, err)
	require.False(t, started.StartedAt.IsZero())
	_, err = s.Start(w.ctx, r.ID, false)
	require.ErrorIs(t, err, analysis.ErrState)

	done := w.waitState(t, s, r.ID, analysis.Completed)
	require.Equal(t, 4, done.Messages)
	require.Equal(t, 3, done.ProposalsTotal)
	require.Equal(t, 3, done.ProposalsPending)
	require.Equal(t, 1, done.Batches)
	require.Equal(t, 1, done.BatchesDone)
	require.False(t, done.CompletedAt.IsZero())
	posted := w.chat.posted()
	require.Len(t, posted, 3)
	// Everything the admin chat is told, in the order it will go out:
	// each proposal's message was written with the proposal.
	require.Equal(t, []row{
		{domain.KindRunEvent, r.ID, "run_created", false},
		{domain.KindRunEvent, r.ID, "run_started", false},
		{domain.KindProgress, r.ID, "0/1", false},
		{domain.KindRunEvent, r.ID, "proposals_created", false},
		{domain.KindProposal, posted[0].ID, "Task from 1: task: deploy billing", false},
		{domain.KindProposal, posted[1].ID, "Task from 3: task: fix login", false},
		{domain.KindProposal, posted[2].ID, "Task from 4: task: write docs", false},
		{domain.KindProgress, r.ID, "1/1", true},
		{domain.KindRunEvent, r.ID, "run_completed", false},
	}, w.outbox(t))
	require.Zero(t, w.unqueued(t))

	_, err = s.Close(w.ctx, r.ID)
	var pe *analysis.PendingError
	require.True(t, errors.As(err, &pe))
	require.Equal(t, 3, pe.Pending, "the original's 400 says how many")

	_, _, err = s.Decide(w.ctx, posted[0].ID, 1, true)
	require.NoError(t, err)
	_, _, err = s.Decide(w.ctx, posted[1].ID, 1, true)
	require.NoError(t, err)
	_, run, err := s.Decide(w.ctx, posted[2].ID, 1, false)
	require.NoError(t, err)
	require.Equal(t, [3]int{2, 1, 0}, [3]int{run.ProposalsApproved, run.ProposalsRejected, run.ProposalsPending})
	p, _, err := s.Decide(w.ctx, posted[2].ID, 1, true)
	require.ErrorIs(t, err, analysis.ErrDecided)
	require.Equal(t, analysis.Rejected, p.Decision, "a second press changes nothing")
	_, _, err = s.Decide(w.ctx, 1<<40, 1, true)
	require.ErrorIs(t, err, domain.ErrNotFound)

	require.Len(t, w.outbox(t), 9, "decisions write nothing: the pressed message is edited in place")

	closed, err := s.Close(w.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, analysis.Closed, closed.State)
	require.Equal(t, &analysis.Metrics{ProposalsTotal: 3, ApprovalRate: 0.6667, RejectionRate: 0.3333}, closed.Metrics)
	require.Equal(t, []string{"run_created", "run_started", "proposals_created", "run_completed", "run_closed"}, w.events(t))

	// A new run does not propose the same messages again.
	w.talk(t, s, -100) // nothing new
	r2, err := s.NewRun(w.ctx, 1, "24h")
	require.NoError(t, err)
	_, err = s.Start(w.ctx, r2.ID, false)
	require.NoError(t, err)
	done2 := w.waitState(t, s, r2.ID, analysis.Completed)
	require.Zero(t, done2.ProposalsTotal, "messages already proposed are left out")
	require.Equal(t, 1, done2.Messages, "only the one no proposal cited")
}

// With rag the prompt carries the most similar approved proposal of an
// earlier run.
func TestRAGGivesSimilarApprovedProposals(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	oneTaskPerMessage(w)
	s := w.service(t, w.store)
	w.talk(t, s, -100, "task: migrate the billing database to PostgreSQL 16", "task: order pizza for the team")
	r, err := s.NewRun(w.ctx, 1, "")
	require.NoError(t, err)
	_, err = s.Start(w.ctx, r.ID, false)
	require.NoError(t, err)
	w.waitState(t, s, r.ID, analysis.Completed)
	for _, p := range w.chat.posted() {
		_, _, err := s.Decide(w.ctx, p.ID, 1, true)
		require.NoError(t, err)
	}
	_, err = s.Close(w.ctx, r.ID)
	require.NoError(t, err)

	require.NoError(t, s.Record(w.ctx, analysis.Message{ChatID: -100, MessageID: 50, Author: "Bob",
		Text: "task: migrate the billing database to PostgreSQL 17", Date: time.Now()}))
	r2, err := s.NewRun(w.ctx, 1, "")
	require.NoError(t, err)
	_, err = s.Start(w.ctx, r2.ID, true)
	require.NoError(t, err)
	w.waitState(t, s, r2.ID, analysis.Completed)
	reqs := w.llm.Requests()
	last := reqs[len(reqs)-1].Prompt
	require.Contains(t, last, "Already approved")
	first := strings.Index(last, "- Task from")
	require.GreaterOrEqual(t, first, 0)
	require.True(t, strings.HasPrefix(last[first:], "- Task from 1: "), "the billing task is the most similar: %q", last)
}

// faulty wraps the real store and fails one method, to fail the executor
// at each of its steps.
type faulty struct {
	*storage.Store
	fail string
}

var errInjected = errors.New("injected failure")

func (f faulty) WindowMessages(ctx context.Context, runID int64, from, to time.Time, chatID int64) ([]analysis.Message, error) {
	if f.fail == "fetch" {
		return nil, errInjected
	}
	return f.Store.WindowMessages(ctx, runID, from, to, chatID)
}

func (f faulty) SetProgress(ctx context.Context, id int64, messages, filtered, batches int, render analysis.Render) (analysis.Run, error) {
	if f.fail == "batch" {
		return analysis.Run{}, errInjected
	}
	return f.Store.SetProgress(ctx, id, messages, filtered, batches, render)
}

func (f faulty) SaveBatch(ctx context.Context, runID int64, batch, messages int, ps []analysis.Proposal, render analysis.RenderBatch) (analysis.Run, []analysis.Proposal, error) {
	if f.fail == "save" && batch == 2 {
		return analysis.Run{}, nil, errInjected
	}
	if f.fail == "outbox" && batch == 2 {
		// Writing the batch's messages fails (here: a message the outbox
		// refuses), so the transaction saves nothing of the batch.
		return f.Store.SaveBatch(ctx, runID, batch, messages, ps, func(r analysis.Run, saved []analysis.Proposal) []domain.Message {
			return append(render(r, saved), domain.Message{Kind: domain.KindRunEvent, Text: "no chat"})
		})
	}
	return f.Store.SaveBatch(ctx, runID, batch, messages, ps, render)
}

func (f faulty) CompleteRun(ctx context.Context, id int64, render analysis.Render) (analysis.Run, bool, error) {
	if f.fail == "complete" {
		return analysis.Run{}, false, errInjected
	}
	return f.Store.CompleteRun(ctx, id, render)
}

// Any step failing fails the run with error_log naming the step (and the
// batch), and a new run can then be opened.
func TestFailureAtEachStep(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"fetch", "batch", "proposals", "save", "outbox", "complete"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			rule := oneTaskPerMessage(w)
			if step == "proposals" {
				rule.Reply(`{"proposals": "not a list"}`) // invalid twice: retried once, then failed
			}
			s := w.service(t, faulty{Store: w.store, fail: step})
			// Two batches: a gap of an hour splits them.
			require.NoError(t, s.Record(w.ctx, analysis.Message{ChatID: -5, MessageID: 1, Author: "A", Text: "task one", Date: time.Now().Add(-2 * time.Hour)}))
			require.NoError(t, s.Record(w.ctx, analysis.Message{ChatID: -5, MessageID: 2, Author: "A", Text: "task two", Date: time.Now().Add(-time.Minute)}))
			r, err := s.NewRun(w.ctx, 1, "")
			require.NoError(t, err)
			_, err = s.Start(w.ctx, r.ID, false)
			require.NoError(t, err)
			failed := w.waitState(t, s, r.ID, analysis.Failed)
			require.NotNil(t, failed.ErrorLog)
			want := step
			if step == "outbox" {
				want = analysis.StepSave
			}
			require.Equal(t, want, failed.ErrorLog.Step)
			require.NotEmpty(t, failed.ErrorLog.Error)
			switch step {
			case "save", "outbox":
				require.Equal(t, 2, failed.ErrorLog.Batch)
				require.Equal(t, 1, failed.ProposalsTotal, "batch 1's proposals were saved atomically before")
				require.Equal(t, 1, count(t, w, `SELECT count(*) FROM analysis_proposals`), "batch 2 saved nothing")
			case "proposals":
				require.Equal(t, 1, failed.ErrorLog.Batch)
				require.Equal(t, 2, w.llm.Calls("proposals"), "invalid JSON retried once")
			}
			// Each saved proposal has its message queued, and none more.
			require.Zero(t, w.unqueued(t))
			require.Equal(t, count(t, w, `SELECT count(*) FROM analysis_proposals`),
				count(t, w, `SELECT count(*) FROM outbox WHERE kind = 'proposal'`))
			// The failure's event was written with it.
			require.Equal(t, "run_failed", w.events(t)[len(w.events(t))-1])
			_, err = s.NewRun(w.ctx, 1, "")
			require.NoError(t, err, "a failed run does not block a new one")
		})
	}
}

// A run whose executor died is failed as interrupted once its lease runs
// out, so a new run can be opened.
func TestInterruptedRunIsFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	oneTaskPerMessage(w)
	s := w.service(t, w.store)
	r, err := s.NewRun(w.ctx, 1, "")
	require.NoError(t, err)
	// The run as a killed process left it: running, its lease expired.
	_, err = w.store.Pool().Exec(w.ctx, `UPDATE analysis_runs SET state = 'running', started_at = now(), claimed_until = now() - interval '1 second' WHERE id = $1`, r.ID)
	require.NoError(t, err)
	s2 := w.service(t, w.store) // a replica starting: it reaps at once
	failed := w.waitState(t, s2, r.ID, analysis.Failed)
	require.Equal(t, "interrupted", failed.ErrorLog.Step)
	require.Equal(t, []string{"run_created", "run_failed"}, w.events(t), "the reaper writes the failure's event with it")
	_, err = s2.NewRun(w.ctx, 1, "")
	require.NoError(t, err)
}

func count(t *testing.T, w *world, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, query, args...).Scan(&n))
	return n
}
