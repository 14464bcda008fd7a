package memory_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/domain/memory"
	"switchboard/internal/testkit"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// bundle is one test's world: a real database, the scripted LLM behind the
// real client, and a recorder in Telegram's place.
type bundle struct {
	ctx    context.Context
	store  *storage.Store
	llm    *llmtest.Server
	llmc   *llm.Client
	chat   *chat
	drafts memory.Drafts
	cfg    memory.Config
	svc    *memory.Service
	// reg is b.svc's registry.
	reg *prometheus.Registry
	// archivist is script's archivist rule.
	archivist *llmtest.Rule
}

type option func(*bundle)

func withConfig(c memory.Config) option { return func(b *bundle) { b.cfg = c } }

func withDrafts(d memory.Drafts) option { return func(b *bundle) { b.drafts = d } }

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	b := &bundle{
		ctx:   context.Background(),
		store: storagetest.New(t),
		llm:   testkit.Closing(t, llmtest.New()),
		chat:  &chat{},
		reg:   prometheus.NewRegistry(),
		cfg:   memory.Config{Workers: 4, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond, SweepInterval: time.Hour},
	}
	for _, o := range opts {
		o(b)
	}
	b.llmc = domaintest.LLM(t, b.llm, llm.Config{StrongModel: "strong", MaxConcurrency: 32}, llm.WithBreaker(1000, time.Second))
	b.svc = b.service(t)
	return b
}

// service builds another orchestrator over the same world, as a replica.
func (b *bundle) service(t *testing.T) *memory.Service {
	t.Helper()
	return b.serviceOver(t, b.store.PipelineRuns())
}

// serviceOver is service with runs in the store's place (a database that
// refuses some saves, say).
func (b *bundle) serviceOver(t *testing.T, runs memory.Runs) *memory.Service {
	t.Helper()
	reg := b.reg
	if b.svc != nil {
		reg = prometheus.NewRegistry()
	}
	svc, err := memory.NewService(b.cfg, memory.Deps{
		Runs: runs, Memories: b.store.Memories(), Prompts: b.store.Prompts(), Outbox: b.store.Outbox(), Users: b.store.Users(), LLM: b.llmc, Notifier: b.chat, Typist: b.chat, Drafts: b.drafts,
		Log: slog.New(slog.DiscardHandler), Registerer: reg,
	})
	require.NoError(t, err)
	return svc
}

// start runs svc's orchestrator until the test ends.
func (b *bundle) start(t *testing.T, svc *memory.Service) {
	t.Helper()
	domaintest.Run(t, b.ctx, func(ctx context.Context) { svc.Run(ctx, domaintest.Listen(b.store)) })
}

// Scripted answers, one rule per stage, matched by the seeded prompts.
func (b *bundle) script() {
	b.llm.On(llmtest.SystemContains("Decide whether answering needs that memory")).Named("analyzer").
		ReplyJSON(map[string]any{"needs_context": true, "context_type": "facts", "time_scope": "recent",
			"search_keywords": []string{"go"}, "context_found": true})
	b.llm.On(llmtest.SystemContains("You prepare the context")).Named("assembler").Reply("Notes: the user studies Go.")
	b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").
		ReplyFunc(func(r llmtest.Request) string { return "Answer to: " + lastLine(r.Prompt) })
	b.archivist = b.llm.On(llmtest.SystemContains("You summarise one exchange")).Named("archivist").
		ReplyFunc(func(r llmtest.Request) string {
			return fmt.Sprintf(`{"summary": "Summary of %s", "tags": ["go"]}`, strings.TrimSpace(between(r.Prompt, "## The user wrote\n", "\n")))
		})
}

// serve scripts every stage after the rules the test added itself (the
// first rule that matches answers), adds user 1 and starts the
// orchestrator: where the tests of one stage's fault or stream begin.
func (b *bundle) serve(t *testing.T) {
	t.Helper()
	b.script()
	b.user(t, 1)
	b.start(t, b.svc)
}

// exec runs a statement a test moves its rows with.
func (b *bundle) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	_, err := b.store.Pool().Exec(b.ctx, q, args...)
	require.NoError(t, err)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	out, _, _ := strings.Cut(rest, to)
	return out
}

// scripted is setup with the LLM answering every stage (script) and a
// user of each of ids: where most pipeline tests start.
func scripted(t *testing.T, ids ...int64) *bundle {
	t.Helper()
	b := setup(t)
	b.script()
	for _, id := range ids {
		b.user(t, id)
	}
	return b
}

func (b *bundle) user(t *testing.T, id int64) {
	t.Helper()
	_, err := b.store.Users().Upsert(b.ctx, domain.User{ID: id, FirstName: fmt.Sprint("U", id)})
	require.NoError(t, err)
}

// submit sends a private message as the bot would.
func (b *bundle) submit(t *testing.T, svc *memory.Service, userID int64, text string) memory.PipelineRun {
	t.Helper()
	b.chat.mu.Lock()
	b.chat.msgID++
	id := b.chat.msgID
	b.chat.mu.Unlock()
	r, _, err := svc.Submit(b.ctx, userID, userID, id, text)
	require.NoError(t, err)
	return r
}

// answered submits text from userID, the first message of the test, and
// returns it as submitted and as it stands once archived (or failed and
// told) within timeout.
func (b *bundle) answered(t *testing.T, userID int64, text string, timeout time.Duration) (submitted, got memory.PipelineRun) {
	t.Helper()
	submitted = b.submit(t, b.svc, userID, text)
	b.waitArchived(t, 1, timeout)
	return submitted, b.run(t, submitted.ID)
}

func (b *bundle) waitArchived(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		var done int
		_ = b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM pipeline_runs WHERE archived_at IS NOT NULL OR (status = 'FAILED' AND delivered_at IS NOT NULL)`).Scan(&done)
		return done == n
	}, timeout, 10*time.Millisecond)
}

func (b *bundle) run(t *testing.T, id int64) memory.PipelineRun {
	t.Helper()
	r, err := b.store.PipelineRuns().Get(b.ctx, id)
	require.NoError(t, err)
	return r
}

func (b *bundle) statuses(t *testing.T) map[memory.Status]int {
	t.Helper()
	return domaintest.Counts[memory.Status](t, b.ctx, b.store.Pool(), `SELECT status, count(*) FROM pipeline_runs GROUP BY status`)
}

// prompts returns what the named rule received, in order.
func (b *bundle) prompts(rule string) []string {
	var out []string
	for _, r := range b.llm.RequestsFor(rule) {
		out = append(out, r.Prompt)
	}
	return out
}

// chat stands in for the bot's renderer: it records what the pipeline
// asked it to render. What the user is told is what the outbox holds
// (queued), which the tests read from the database.
type chat struct {
	mu       sync.Mutex
	msgID    int
	rendered []memory.PipelineRun
	failed   []memory.PipelineRun
	typing   int
	// panicOn makes Answer panic for the run of that query, as a
	// renderer's bug on one answer would.
	panicOn string
}

func (c *chat) Typing(context.Context, int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.typing++
	return nil
}

func (c *chat) Answer(r memory.PipelineRun) []domain.Message {
	domaintest.Record(&c.mu, &c.rendered, r)
	if c.panicOn != "" && r.Query == c.panicOn {
		panic("a renderer's bug on the answer to " + r.Query)
	}
	return replacing(r, []domain.Message{
		{ChatID: r.ChatID, Kind: domain.KindMemoryAnswer, Ref: r.ID, Text: "answer: " + r.FinalAnswer, ReplyTo: r.MessageID},
		{ChatID: r.ChatID, Kind: domain.KindMemoryAnswer, Ref: r.ID, Text: "(end)"},
	})
}

// replacing makes the first message the placeholder's edit, as the bot's
// renderer does for a run whose answer streamed into one.
func replacing(r memory.PipelineRun, msgs []domain.Message) []domain.Message {
	if r.Placeholder {
		msgs[0].Key, msgs[0].Edit, msgs[0].IfGone = fmt.Sprint("answer:", r.ID), true, domain.IfGoneSend
	}
	return msgs
}

func (c *chat) Failed(r memory.PipelineRun) []domain.Message {
	domaintest.Record(&c.mu, &c.failed, r)
	return replacing(r, []domain.Message{{ChatID: r.ChatID, Kind: domain.KindMemoryAnswer, Ref: r.ID, Text: "failed", ReplyTo: r.MessageID}})
}

func (c *chat) Waiting(r memory.PipelineRun) []domain.Message {
	return []domain.Message{{ChatID: r.ChatID, Kind: domain.KindMemoryNote, Ref: r.ID, Text: "waiting", ReplyTo: r.MessageID}}
}

func (c *chat) Partial(r memory.PipelineRun, text string, first bool) []domain.Message {
	m := domain.Message{ChatID: r.ChatID, Kind: domain.KindMemoryDraft, Ref: r.ID, Key: fmt.Sprint("answer:", r.ID), Text: "so far: " + text}
	if first {
		m.ReplyTo = r.MessageID
	} else {
		m.Edit = true
	}
	return []domain.Message{m}
}

// Zone is the zone the user chose, else UTC: the bot's fallbacks (a
// master's city, the language) are its own tests'.
func (c *chat) Zone(u domain.User) *time.Location {
	if loc, err := time.LoadLocation(u.TimeZone); err == nil && u.TimeZone != "" {
		return loc
	}
	return time.UTC
}

func (c *chat) failures() []memory.PipelineRun {
	return domaintest.Recorded(&c.mu, &c.failed)
}

// outboxRow is one queued message of the memory chat.
type outboxRow struct {
	ID      int64
	Chat    int64
	Ref     int64
	Text    string
	ReplyTo int
}

// queued lists the memory chat's outbox rows in the order they are
// delivered (id).
func (b *bundle) queued(t *testing.T) []outboxRow {
	t.Helper()
	return domaintest.Rows[outboxRow](t, b.ctx, b.store.Pool(), `SELECT id, chat_id, ref, body->>'text', COALESCE((body->>'reply_to')::int, 0)
FROM outbox WHERE kind = 'memory_answer' ORDER BY id`)
}

// notes are the memory chat's queued notes (the queue's, the model's
// wait), in delivery order.
func (b *bundle) notes(t *testing.T) []outboxRow {
	t.Helper()
	return domaintest.Rows[outboxRow](t, b.ctx, b.store.Pool(), `SELECT id, chat_id, ref, body->>'text', COALESCE((body->>'reply_to')::int, 0)
FROM outbox WHERE kind = 'memory_note' ORDER BY id`)
}

// answers are the queued answers' first parts, in delivery order.
func (b *bundle) answers(t *testing.T) []outboxRow {
	t.Helper()
	var out []outboxRow
	for _, r := range b.queued(t) {
		if strings.HasPrefix(r.Text, "answer: ") {
			out = append(out, r)
		}
	}
	return out
}
