package analysis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/domaintest"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

type world struct {
	ctx context.Context
	// reg is the first service's registry.
	reg   *prometheus.Registry
	store *storage.Store
	llm   *llmtest.Server
	llmc  *llm.Client
	port  *embedLog // the services' LLM port
	chat  *adminChat
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{ctx: context.Background(), store: storagetest.New(t), llm: llmtest.New(), chat: &adminChat{}}
	t.Cleanup(w.llm.Close)
	w.llmc = domaintest.LLM(t, w.llm, llm.Config{EmbedModel: "embed", MaxConcurrency: 4}, llm.WithBreaker(1000, time.Second))
	w.port = &embedLog{LLM: llm.AnalysisPort{Client: w.llmc}}
	return w
}

// service builds a service over runs and chats (the store's, or faulty
// wrappers of them) and serves it until the test ends.
func (w *world) service(t *testing.T, runs analysis.Runs, chats analysis.Chats) *analysis.Service {
	t.Helper()
	reg := prometheus.NewRegistry()
	if w.reg == nil {
		w.reg = reg
	}
	s, err := analysis.NewService(analysis.Config{}, analysis.Deps{
		Runs: runs, Chats: chats, LLM: w.port, Notifier: w.chat, Publisher: w.store.Runs(),
		Log: slog.New(slog.DiscardHandler), Registerer: reg,
	})
	require.NoError(t, err)
	domaintest.Run(t, w.ctx, s.Serve)
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
		require.NoError(t, s.Record(w.ctx, analysis.GroupMessage{ChatID: chat, MessageID: int64(i + 1), AuthorID: 7, Author: "Ann",
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

// startUntil starts the run id and waits for it to reach want.
func (w *world) startUntil(t *testing.T, s *analysis.Service, id int64, want analysis.State) analysis.Run {
	t.Helper()
	_, err := s.Start(w.ctx, id, false)
	require.NoError(t, err)
	return w.waitState(t, s, id, want)
}

// adminChatID is the admin chat the fake notifier renders for.
const adminChatID = -900

// adminChat renders the workflow's messages as plain rows and records the
// boards it rendered. An event's text names it. The board is one row per
// write, a send without a key, so that the outbox folds no write into
// another and each shows: its text is domaintest.BoardText's, after "posted " for the
// first.
type adminChat struct {
	mu     sync.Mutex
	boards []boardCall
	// zone is the admin chat's (nil: UTC), set before the service starts.
	zone *time.Location
}

// AdminZone is the zone the test set, else UTC.
func (a *adminChat) AdminZone() *time.Location {
	if a.zone == nil {
		return time.UTC
	}
	return a.zone
}

// boardCall is one Board call.
type boardCall struct {
	rv    analysis.Review
	first bool
}

func (a *adminChat) Event(e analysis.Event) []domain.Message {
	if e.Kind == analysis.EventProgress || e.Kind == analysis.EventProposalsCreated {
		return nil // the board shows them
	}
	return []domain.Message{{ChatID: adminChatID, Kind: domain.KindRunEvent, Ref: e.Run.ID, Text: string(e.Kind)}}
}

func (a *adminChat) Board(rv analysis.Review, first bool) []domain.Message {
	a.mu.Lock()
	a.boards = append(a.boards, boardCall{rv, first})
	a.mu.Unlock()
	text := domaintest.BoardText(rv)
	if first {
		text = "posted " + text
	}
	return []domain.Message{{ChatID: adminChatID, Kind: domain.KindProgress, Ref: rv.Run.ID, Text: text, Buttons: domaintest.BoardButtons(rv)}}
}

// calls are the Board calls so far.
func (a *adminChat) calls() []boardCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]boardCall(nil), a.boards...)
}

// posted are the proposals the boards showed, each once, by ordinal.
func (a *adminChat) posted() []analysis.Proposal {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []analysis.Proposal
	for _, b := range a.boards {
		for _, p := range b.rv.Proposals {
			if !slices.ContainsFunc(out, func(q analysis.Proposal) bool { return q.ID == p.ID }) {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b analysis.Proposal) int { return a.Ordinal - b.Ordinal })
	return out
}

// embedLog is the LLM port with its Embed calls recorded.
type embedLog struct {
	analysis.LLM
	mu    sync.Mutex
	calls [][]string
	// panicOn makes JSON panic for a prompt holding it, as a bug on an
	// odd answer would.
	panicOn string
}

func (e *embedLog) JSON(ctx context.Context, system, prompt string, out any) error {
	if e.panicOn != "" && strings.Contains(prompt, e.panicOn) {
		panic("a bug on the answer about " + e.panicOn)
	}
	return e.LLM.JSON(ctx, system, prompt, out)
}

func (e *embedLog) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	e.calls = append(e.calls, append([]string(nil), texts...))
	e.mu.Unlock()
	return e.LLM.Embed(ctx, texts)
}

// embeds are the Embed calls so far, each its texts.
func (e *embedLog) embeds() [][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([][]string(nil), e.calls...)
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

// board is the text of the run's board as last written ("" if none was).
func (w *world) board(t *testing.T, runID int64) string {
	t.Helper()
	var text string
	err := w.store.Pool().QueryRow(w.ctx, `SELECT body->>'text' FROM outbox
WHERE chat_id = $1 AND kind = 'progress' AND ref = $2 ORDER BY id DESC LIMIT 1`, adminChatID, runID).Scan(&text)
	if errors.Is(err, pgx.ErrNoRows) {
		return ""
	}
	require.NoError(t, err)
	return text
}

// saved lists the run's stored proposals on its board's first page as
// the board lists them.
func (w *world) saved(t *testing.T, runID int64) string {
	t.Helper()
	rows, err := w.store.Pool().Query(w.ctx, `SELECT ordinal, title, decision FROM analysis_proposals
WHERE run_id = $1 AND ordinal <= $2 ORDER BY ordinal`, runID, analysis.ReviewPageSize)
	require.NoError(t, err)
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (analysis.Proposal, error) {
		var p analysis.Proposal
		return p, r.Scan(&p.Ordinal, &p.Title, &p.Decision)
	})
	require.NoError(t, err)
	return domaintest.ProposalList(ps)
}

// listed is the list part of a board's text.
func listed(board string) string {
	_, rest, ok := strings.Cut(board, "[")
	if !ok {
		return ""
	}
	list, _, _ := strings.Cut(rest, "]")
	return list
}

var idRx = regexp.MustCompile(`\[id=(\d+) `)

// oneTaskPerMessage scripts the LLM to propose one task per message that
// mentions "task", citing it.
// setupTasks is a world whose LLM proposes one task per "task:" message,
// and a service over its store.
func setupTasks(t *testing.T) (*world, *analysis.Service) {
	t.Helper()
	w := newWorld(t)
	oneTaskPerMessage(w)
	return w, w.service(t, w.store.Runs(), w.store.GroupChats())
}

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
	w, s := setupTasks(t)
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
	require.Equal(t, []int{1, 2, 3}, []int{posted[0].Ordinal, posted[1].Ordinal, posted[2].Ordinal})
	// Everything the admin chat is told, in the order it will go out: the
	// board posted with the window's counts, and its edit written with the
	// batch, listing the batch's proposals.
	list := "#1 Task from 1: task: deploy billing, #2 Task from 3: task: fix login, #3 Task from 4: task: write docs"
	require.Equal(t, []row{
		{domain.KindRunEvent, r.ID, "run_created", false},
		{domain.KindRunEvent, r.ID, "run_started", false},
		{domain.KindProgress, r.ID, "posted 0/1 p1/1 [] 0/0/0", false},
		{domain.KindProgress, r.ID, "1/1 p1/1 [" + list + "] 3/0/0", false},
		{domain.KindRunEvent, r.ID, "run_completed", false},
	}, w.outbox(t))
	require.Equal(t, w.saved(t, r.ID), listed(w.board(t, r.ID)), "each proposal is on the board written with it")
	require.Equal(t, []bool{true, false}, []bool{w.chat.calls()[0].first, w.chat.calls()[1].first})

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
	require.Len(t, w.outbox(t), 8, "each decision writes the board's edit with it")
	require.Equal(t, "1/1 p1/1 [#1+ Task from 1: task: deploy billing, #2+ Task from 3: task: fix login, #3- Task from 4: task: write docs] 0/2/1",
		w.board(t, r.ID))
	p, _, err := s.Decide(w.ctx, posted[2].ID, 1, true)
	require.ErrorIs(t, err, analysis.ErrDecided)
	require.Equal(t, analysis.Rejected, p.Decision, "a second press changes nothing")
	_, _, err = s.Decide(w.ctx, 1<<40, 1, true)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Len(t, w.outbox(t), 8, "refused presses write nothing")

	closed, err := s.Close(w.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, analysis.Closed, closed.State)
	require.Equal(t, &analysis.Metrics{ProposalsTotal: 3, ApprovalRate: 0.6667, RejectionRate: 0.3333}, closed.Metrics)
	require.Equal(t, []string{"run_created", "run_started", "run_completed", "run_closed"}, w.events(t))

	// A new run does not propose the same messages again.
	w.talk(t, s, -100) // nothing new
	r2, err := s.NewRun(w.ctx, 1, "24h")
	require.NoError(t, err)
	done2 := w.startUntil(t, s, r2.ID, analysis.Completed)
	require.Zero(t, done2.ProposalsTotal, "messages already proposed are left out")
	require.Equal(t, 1, done2.Messages, "only the one no proposal cited")
}

// With rag the prompt carries the most similar approved proposal of an
// earlier run.
func TestRAGGivesSimilarApprovedProposals(t *testing.T) {
	t.Parallel()
	w, s := setupTasks(t)
	w.talk(t, s, -100, "task: migrate the billing database to PostgreSQL 16", "task: order pizza for the team")
	r, err := s.NewRun(w.ctx, 1, "")
	require.NoError(t, err)
	w.startUntil(t, s, r.ID, analysis.Completed)
	for _, p := range w.chat.posted() {
		_, _, err := s.Decide(w.ctx, p.ID, 1, true)
		require.NoError(t, err)
	}
	_, err = s.Close(w.ctx, r.ID)
	require.NoError(t, err)

	require.NoError(t, s.Record(w.ctx, analysis.GroupMessage{ChatID: -100, MessageID: 50, Author: "Bob",
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

// The model reads a run's messages on the admin chat's clock, the zone
// named, not in UTC: what the admins are shown of the run is in that zone
// too.
func TestRunPromptIsInTheAdminChatsZone(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	oneTaskPerMessage(w)
	tbilisi, err := time.LoadLocation("Asia/Tbilisi")
	require.NoError(t, err)
	w.chat.zone = tbilisi
	s := w.service(t, w.store.Runs(), w.store.GroupChats())
	said := time.Now().Add(-time.Hour).Truncate(time.Minute)
	require.NoError(t, s.Record(w.ctx, analysis.GroupMessage{ChatID: -100, MessageID: 1, AuthorID: 7, Author: "Ann",
		Text: "task: ship the release", Date: said}))
	r, err := s.NewRun(w.ctx, 1, "24h")
	require.NoError(t, err)
	w.startUntil(t, s, r.ID, analysis.Completed)

	prompt := w.llm.RequestsFor("proposals")[0].Prompt
	require.Contains(t, prompt, "Every time below is local to Asia/Tbilisi, with its offset from UTC", prompt)
	require.Contains(t, prompt, "[id=1 "+said.In(tbilisi).Format("2006-01-02 15:04 Mon")+" +04:00] Ann: task: ship the release\n", prompt)
}

// faultyRuns and faultyChats wrap the real stores and fail one method, to
// fail the executor at each of its steps.
type (
	faultyRuns struct {
		analysis.Runs
		fail string
	}
	faultyChats struct {
		analysis.Chats
		fail string
	}
)

var errInjected = errors.New("injected failure")

func (f faultyChats) Window(ctx context.Context, runID int64, from, to time.Time, chatID int64) ([]analysis.GroupMessage, error) {
	if f.fail == "fetch" {
		return nil, errInjected
	}
	return f.Chats.Window(ctx, runID, from, to, chatID)
}

func (f faultyRuns) SetProgress(ctx context.Context, id int64, messages, filtered, batches int, render domain.Render[analysis.Review]) (analysis.Run, error) {
	if f.fail == "batch" {
		return analysis.Run{}, errInjected
	}
	return f.Runs.SetProgress(ctx, id, messages, filtered, batches, render)
}

func (f faultyRuns) SaveProposalBatch(ctx context.Context, runID int64, batch, messages int, ps []analysis.Proposal, render domain.Render[analysis.Review]) (analysis.Run, []analysis.Proposal, error) {
	if f.fail == "save" && batch == 2 {
		return analysis.Run{}, nil, errInjected
	}
	if f.fail == "outbox" && batch == 2 {
		// Writing the batch's board fails (here: a message the outbox
		// refuses), so the transaction saves nothing of the batch.
		return f.Runs.SaveProposalBatch(ctx, runID, batch, messages, ps, func(rv analysis.Review) []domain.Message {
			return append(render(rv), domain.Message{Kind: domain.KindRunEvent, Text: "no chat"})
		})
	}
	return f.Runs.SaveProposalBatch(ctx, runID, batch, messages, ps, render)
}

func (f faultyRuns) Complete(ctx context.Context, id int64, render domain.Render[analysis.Review]) (analysis.Run, bool, error) {
	if f.fail == "complete" {
		return analysis.Run{}, false, errInjected
	}
	return f.Runs.Complete(ctx, id, render)
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
			s := w.service(t, faultyRuns{Runs: w.store.Runs(), fail: step}, faultyChats{Chats: w.store.GroupChats(), fail: step})
			// Two batches: a gap of an hour splits them.
			require.NoError(t, s.Record(w.ctx, analysis.GroupMessage{ChatID: -5, MessageID: 1, Author: "A", Text: "task one", Date: time.Now().Add(-2 * time.Hour)}))
			require.NoError(t, s.Record(w.ctx, analysis.GroupMessage{ChatID: -5, MessageID: 2, Author: "A", Text: "task two", Date: time.Now().Add(-time.Minute)}))
			r, err := s.NewRun(w.ctx, 1, "")
			require.NoError(t, err)
			failed := w.startUntil(t, s, r.ID, analysis.Failed)
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
			// The board last written lists each saved proposal, and none
			// more.
			require.Equal(t, w.saved(t, r.ID), listed(w.board(t, r.ID)))
			if step == "save" || step == "outbox" {
				require.Equal(t, "#1 Task from 1: task one", listed(w.board(t, r.ID)))
			}
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
	w, s := setupTasks(t)
	r, err := s.NewRun(w.ctx, 1, "")
	require.NoError(t, err)
	// The run as a killed process left it: running, its lease expired.
	_, err = w.store.Pool().Exec(w.ctx, `UPDATE analysis_runs SET state = 'running', started_at = now(), claimed_until = now() - interval '1 second' WHERE id = $1`, r.ID)
	require.NoError(t, err)
	s2 := w.service(t, w.store.Runs(), w.store.GroupChats()) // a replica starting: it reaps at once
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

// completedRun runs a run over n task messages of a fresh chat to
// completion: n proposals, "Task from i: task i" with ordinal i.
func (w *world) completedRun(t *testing.T, s *analysis.Service, n int) (analysis.Run, []analysis.Proposal) {
	t.Helper()
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("task %d", i+1)
	}
	w.talk(t, s, -100, texts...)
	r, err := s.NewRun(w.ctx, 1, "24h")
	require.NoError(t, err)
	r = w.startUntil(t, s, r.ID, analysis.Completed)
	require.Equal(t, n, r.ProposalsTotal)
	rows, err := w.store.Pool().Query(w.ctx, `SELECT id, ordinal, title, description FROM analysis_proposals
WHERE run_id = $1 ORDER BY ordinal`, r.ID)
	require.NoError(t, err)
	ps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (analysis.Proposal, error) {
		p := analysis.Proposal{RunID: r.ID}
		return p, row.Scan(&p.ID, &p.Ordinal, &p.Title, &p.Description)
	})
	require.NoError(t, err)
	for i, p := range ps {
		require.Equal(t, i+1, p.Ordinal)
		require.Equal(t, fmt.Sprintf("Task from %d: task %d", i+1, i+1), p.Title)
	}
	return r, ps
}

// Decide and TurnPage show on the board: each renders it through the
// notifier's Board (an edit) and writes it with its change.
func TestReviewBoard(t *testing.T) {
	t.Parallel()
	w, s := setupTasks(t)
	r, ps := w.completedRun(t, s, 10)
	calls := w.chat.calls()
	require.True(t, calls[0].first, "the board is posted with the window's counts")
	last := calls[len(calls)-1]
	require.False(t, last.first)
	require.Equal(t, 0, last.rv.Page)
	require.Equal(t, 2, last.rv.Pages())
	require.Len(t, last.rv.Proposals, analysis.ReviewPageSize, "the first page")
	require.Equal(t, ps[0].ID, last.rv.Proposals[0].ID)
	rows := len(w.outbox(t))

	// each requires the action to render one board edit, on page, and
	// write it.
	each := func(page int, ords ...int) analysis.Review {
		t.Helper()
		got := w.chat.calls()
		require.Len(t, got, len(calls)+1, "one Board call")
		calls = got
		c := got[len(got)-1]
		require.False(t, c.first, "an edit")
		require.Equal(t, page, c.rv.Page)
		var have []int
		for _, p := range c.rv.Proposals {
			have = append(have, p.Ordinal)
		}
		require.Equal(t, ords, have)
		rows++
		require.Len(t, w.outbox(t), rows)
		require.Equal(t, domaintest.BoardText(c.rv), w.board(t, r.ID), "written")
		return c.rv
	}

	run, err := s.TurnPage(w.ctx, r.ID, 1)
	require.NoError(t, err)
	require.Equal(t, 1, run.ReviewPage)
	each(1, 9, 10)
	require.Equal(t, "1/1 p2/2 [#9 Task from 9: task 9, #10 Task from 10: task 10] 10/0/0", w.board(t, r.ID))

	_, run, err = s.Decide(w.ctx, ps[9].ID, 1, false)
	require.NoError(t, err)
	require.Equal(t, 1, run.ProposalsRejected)
	each(1, 9, 10)
	require.Equal(t, "1/1 p2/2 [#9 Task from 9: task 9, #10- Task from 10: task 10] 9/0/1", w.board(t, r.ID))

	run, err = s.TurnPage(w.ctx, r.ID, -3)
	require.NoError(t, err)
	require.Zero(t, run.ReviewPage)
	each(0, 1, 2, 3, 4, 5, 6, 7, 8)
	_, _, err = s.Decide(w.ctx, ps[0].ID, 1, true)
	require.NoError(t, err)
	rv := each(0, 1, 2, 3, 4, 5, 6, 7, 8)
	require.Equal(t, analysis.Approved, rv.Proposals[0].Decision)
	run, err = s.TurnPage(w.ctx, r.ID, 7)
	require.NoError(t, err)
	require.Equal(t, 1, run.ReviewPage, "clamped to the last page")
	each(1, 9, 10)

	// Refusals render nothing.
	_, _, err = s.Decide(w.ctx, ps[0].ID, 1, false)
	require.ErrorIs(t, err, analysis.ErrDecided)
	_, err = s.TurnPage(w.ctx, 1<<40, 0)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Len(t, w.chat.calls(), len(calls))
	require.Len(t, w.outbox(t), rows)
}

// "Approve all remaining": asked, then confirmed, it approves the
// proposals still pending, in one transaction with the board, and embeds
// them in one Embed call; a proposal decided before keeps its decision.
func TestApproveAllEmbedsTheApproved(t *testing.T) {
	t.Parallel()
	w, s := setupTasks(t)
	r, ps := w.completedRun(t, s, 5)
	text := func(p analysis.Proposal) string { return p.Title + "\n" + p.Description }
	embedded := func() []int64 {
		t.Helper()
		rows, err := w.store.Pool().Query(w.ctx, `SELECT e.proposal_id FROM analysis_embeddings e
JOIN analysis_proposals p ON p.id = e.proposal_id WHERE p.run_id = $1 ORDER BY p.ordinal`, r.ID)
		require.NoError(t, err)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		return ids
	}

	_, _, err := s.Decide(w.ctx, ps[1].ID, 1, false)
	require.NoError(t, err)
	_, _, err = s.Decide(w.ctx, ps[3].ID, 1, true)
	require.NoError(t, err)
	require.Equal(t, [][]string{{text(ps[3])}}, w.port.embeds(), "an approval is embedded")
	require.Equal(t, []int64{ps[3].ID}, embedded())

	// Not asked: nothing to confirm or cancel.
	outbox, boards := len(w.outbox(t)), len(w.chat.calls())
	_, got, err := s.ApproveAll(w.ctx, r.ID, 5)
	require.ErrorIs(t, err, analysis.ErrState)
	require.Equal(t, 3, got.ProposalsPending, "with the run as it is")
	_, err = s.CancelApproveAll(w.ctx, r.ID)
	require.ErrorIs(t, err, analysis.ErrState)
	require.Len(t, w.outbox(t), outbox)
	require.Len(t, w.chat.calls(), boards)
	require.Len(t, w.port.embeds(), 1)

	asked, err := s.AskApproveAll(w.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, asked.ReviewConfirm)
	require.True(t, strings.HasSuffix(w.board(t, r.ID), " 3/1/1 ?"), "the board asks: %q", w.board(t, r.ID))
	_, err = s.AskApproveAll(w.ctx, r.ID)
	require.ErrorIs(t, err, analysis.ErrState, "asking already")
	require.Len(t, w.outbox(t), outbox+1)

	approved, run, err := s.ApproveAll(w.ctx, r.ID, 5)
	require.NoError(t, err)
	var ords []int
	for _, p := range approved {
		ords = append(ords, p.Ordinal)
		require.Equal(t, analysis.Approved, p.Decision)
		require.Equal(t, int64(5), p.DecidedBy)
	}
	require.Equal(t, []int{1, 3, 5}, ords)
	require.Equal(t, [4]int{0, 4, 1, 0}, [4]int{run.ProposalsPending, run.ProposalsApproved, run.ProposalsRejected, btoi(run.ReviewConfirm)})
	require.Equal(t, "1/1 p1/1 [#1+ Task from 1: task 1, #2- Task from 2: task 2, #3+ Task from 3: task 3, #4+ Task from 4: task 4, #5+ Task from 5: task 5] 0/4/1",
		w.board(t, r.ID))
	require.Len(t, w.outbox(t), outbox+2, "one board written with it")
	// One Embed call for the three, their embeddings stored.
	require.Equal(t, [][]string{{text(ps[3])}, {text(ps[0]), text(ps[2]), text(ps[4])}}, w.port.embeds())
	require.Equal(t, []int64{ps[0].ID, ps[2].ID, ps[3].ID, ps[4].ID}, embedded(), "the approved, not the rejected")
	var v []float32
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT embedding FROM analysis_embeddings WHERE proposal_id = $1`, ps[2].ID).Scan(&v))
	require.Equal(t, llmtest.Embedding(text(ps[2]), llmtest.DefaultEmbeddingDim), v, "each proposal its own vector")

	// Confirmed twice: the second finds no question, changes and embeds
	// nothing.
	_, again, err := s.ApproveAll(w.ctx, r.ID, 6)
	require.ErrorIs(t, err, analysis.ErrState)
	require.Equal(t, run, again)
	require.Len(t, w.port.embeds(), 2)
	require.Len(t, w.outbox(t), outbox+2)
	_, err = s.AskApproveAll(w.ctx, r.ID)
	require.ErrorIs(t, err, analysis.ErrState, "nothing pending")

	closed, err := s.Close(w.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, &analysis.Metrics{ProposalsTotal: 5, ApprovalRate: 0.8, RejectionRate: 0.2}, closed.Metrics)
}

// The approvals stand when embedding them fails.
func TestApproveAllEmbedFailure(t *testing.T) {
	t.Parallel()
	w, s := setupTasks(t)
	r, ps := w.completedRun(t, s, 2)
	w.llm.On(llmtest.Embed()).Fault(llmtest.ServerError())
	_, err := s.AskApproveAll(w.ctx, r.ID)
	require.NoError(t, err)
	approved, run, err := s.ApproveAll(w.ctx, r.ID, 5)
	require.NoError(t, err)
	require.Len(t, approved, len(ps))
	require.Zero(t, run.ProposalsPending)
	require.Len(t, w.port.embeds(), 1, "tried once")
	require.Zero(t, count(t, w, `SELECT count(*) FROM analysis_embeddings`))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
