package memory_test

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/domain/memory"
	"switchboard/llm/llmtest"
)

// withoutIDs drops the rows' ids, for comparing what was queued.
func withoutIDs(rows []outboxRow) []outboxRow {
	out := slices.Clone(rows)
	for i := range out {
		out[i].ID = 0
	}
	return out
}

// sortedByRef orders rows by run, keeping each run's rows in queue order.
func sortedByRef(rows []outboxRow) []outboxRow {
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b outboxRow) int { return cmp.Compare(a.Ref, b.Ref) })
	return out
}

// The process document's table, written out apart from the code's.
func TestTransitionTable(t *testing.T) {
	t.Parallel()
	allowed := map[[2]memory.Status]bool{}
	for _, p := range [][2]memory.Status{
		{memory.New, memory.Analyzing}, {memory.Analyzing, memory.Analyzed}, {memory.Analyzed, memory.Assembling},
		{memory.Assembling, memory.Ready}, {memory.Ready, memory.Responding}, {memory.Responding, memory.Completed},
		// the reaper returns a stalled stage to the status before it
		{memory.Analyzing, memory.New}, {memory.Assembling, memory.Analyzed}, {memory.Responding, memory.Ready},
	} {
		allowed[p] = true
	}
	for _, s := range []memory.Status{memory.Analyzing, memory.Assembling, memory.Responding} {
		allowed[[2]memory.Status{s, memory.Failed}] = true
	}
	for _, from := range memory.Statuses {
		for _, to := range memory.Statuses {
			require.Equal(t, allowed[[2]memory.Status{from, to}], memory.CanTransition(from, to), "%s → %s", from, to)
		}
	}
	require.True(t, memory.Completed.Final())
	require.True(t, memory.Failed.Final())
}

// One run through every stage: each stage's output stored, the answer
// delivered and logged, the exchange summarised into the ISO week.
func TestRunGoesThroughEveryStage(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1)
	b.start(t, b.svc)
	r, got := b.answered(t, 1, "How do I learn Go?", 10*time.Second)
	require.Equal(t, memory.Completed, got.Status)
	require.NotNil(t, got.Analysis)
	require.Equal(t, []string{"go"}, got.Analysis.SearchKeywords)
	require.Contains(t, got.DraftContext, "How do I learn Go?")
	require.Contains(t, got.DraftContext, "patient, practical mentor", "the mentor's role is in the draft")
	require.Contains(t, got.FinalContext, "Notes: the user studies Go.")
	require.Equal(t, "Answer to: How do I learn Go?", got.FinalAnswer)
	require.False(t, got.DeliveredAt.IsZero())
	require.Equal(t, []outboxRow{
		{Chat: 1, Ref: r.ID, Text: "answer: Answer to: How do I learn Go?", ReplyTo: r.MessageID},
		{Chat: 1, Ref: r.ID, Text: "(end)"},
	}, withoutIDs(b.queued(t)), "the answer is queued, its parts in order, the first a reply")

	var logs []string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT array_agg(log_type || ':' || (log_data->>'text') ORDER BY id) FROM raw_logs`).Scan(&logs))
	require.Equal(t, []string{"query:How do I learn Go?", "answer:Answer to: How do I learn Go?"}, logs)

	sums, err := b.svc.Memory(b.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, sums, 1)
	require.Equal(t, "Summary of How do I learn Go?", sums[0].Summary)
	require.Equal(t, []int64{r.ID}, sums[0].SourceRunIDs)
	require.Equal(t, time.Monday, sums[0].BucketStart.UTC().Weekday())
	require.Equal(t, 7*24*time.Hour, sums[0].BucketEnd.Sub(sums[0].BucketStart))
	require.False(t, r.CreatedAt.Before(sums[0].BucketStart))

	for _, rule := range []string{"analyzer", "assembler", "responder", "archivist"} {
		require.Equal(t, 1, b.llm.Calls(rule), rule)
	}
	resp := b.llm.RequestsFor("responder")[0]
	require.Equal(t, "strong", resp.Model, "the final responder uses the strong model")
	require.NotNil(t, resp.Temperature)
	require.InDelta(t, 0.7, *resp.Temperature, 1e-9)
	require.Equal(t, 2000, resp.MaxTokens)
}

// The answer is queued by the commit that completes the run: no outbox
// row while the responder works, and the rows, delivered_at and COMPLETED
// at once (one transaction: the rows' created_at is delivered_at). A slow
// archivist holds up neither; the archive follows.
func TestAnswerQueuedWithTheCompletedStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("slow responder").Latency(300 * time.Millisecond).
		Reply("a considered answer") // rules added first win
	b.script()
	b.archivist.Latency(time.Second)
	b.user(t, 1)
	b.start(t, b.svc)
	r := b.submit(t, b.svc, 1, "take your time")

	require.Eventually(t, func() bool { return b.run(t, r.ID).Status == memory.Responding }, 10*time.Second, 5*time.Millisecond)
	require.Empty(t, b.queued(t), "nothing is queued before the answer is stored")
	require.True(t, b.run(t, r.ID).DeliveredAt.IsZero())

	require.Eventually(t, func() bool { return b.run(t, r.ID).Status == memory.Completed }, 10*time.Second, 5*time.Millisecond)
	got := b.run(t, r.ID)
	require.False(t, got.DeliveredAt.IsZero(), "COMPLETED and queued in one commit")
	require.True(t, got.ArchivedAt.IsZero(), "queued while the archivist still works")
	var created []time.Time
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT array_agg(created_at ORDER BY id) FROM outbox WHERE ref = $1`, r.ID).Scan(&created))
	require.Len(t, created, 2)
	for _, c := range created {
		require.True(t, c.Equal(got.DeliveredAt), "the rows were written by the transaction that set delivered_at")
	}
	require.Equal(t, "answer: a considered answer", b.queued(t)[0].Text)

	b.waitArchived(t, 1, 10*time.Second)
	archived := b.run(t, r.ID)
	require.True(t, archived.DeliveredAt.Equal(got.DeliveredAt))
	require.True(t, archived.ArchivedAt.After(got.DeliveredAt))
	require.Len(t, b.queued(t), 2, "archiving queues nothing more")
	sums, err := b.svc.Memory(b.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, sums, 1)
}

// FAILED from each stage, per the error table; the user is told and what
// they wrote stays in raw_logs.
func TestFailuresPerStage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(b *bundle)
		stage string
		calls map[string]int
	}{
		{"analyzer invalid JSON twice", func(b *bundle) {
			b.llm.On(llmtest.SystemContains("Decide whether")).Named("analyzer").Replies(`{"context_type": "x"}`, `not json`)
		}, "analyzer", map[string]int{"analyzer": 2}},
		{"assembler error", func(b *bundle) {
			b.llm.On(llmtest.SystemContains("You prepare the context")).Named("assembler").Fault(llmtest.ServerError())
		}, "assembler", map[string]int{"analyzer": 1, "assembler": 1}},
		{"responder rate limited three times", func(b *bundle) {
			b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").Fault(llmtest.RateLimit(0))
		}, "responder", map[string]int{"responder": 3}},
		{"responder hangs past its timeout three times", func(b *bundle) {
			b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").Fault(llmtest.Hang())
		}, "responder", map[string]int{"responder": 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
				SweepInterval: time.Hour, ResponderTimeout: 200 * time.Millisecond}))
			tc.setup(b)
			b.serve(t) // rules added first win
			r, got := b.answered(t, 1, "Will this work?", 15*time.Second)
			require.Equal(t, memory.Failed, got.Status)
			require.True(t, strings.HasPrefix(got.ErrorMessage, tc.stage+":"), got.ErrorMessage)
			require.Len(t, b.chat.failures(), 1, "the notice is rendered once")
			require.Equal(t, []outboxRow{{Chat: 1, Ref: r.ID, Text: "failed", ReplyTo: r.MessageID}}, withoutIDs(b.queued(t)),
				"the user is told, once, in reply to their message")
			require.False(t, got.DeliveredAt.IsZero())
			for rule, n := range tc.calls {
				require.Equal(t, n, b.llm.Calls(rule), rule)
			}
			var queries int
			require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM raw_logs WHERE log_type = 'query'`).Scan(&queries))
			require.Equal(t, 1, queries, "what they wrote is kept")
		})
	}
}

// The reaper returns a stage whose orchestrator died to the status before
// it, at most three times; the fourth stall fails the run.
func TestReaperReturnsThenFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, 1)
	ids := map[memory.Status]int64{}
	for _, st := range []memory.Status{memory.Analyzing, memory.Assembling, memory.Responding} {
		r := b.submit(t, b.svc, 1, "stalled in "+string(st))
		b.exec(t, `UPDATE pipeline_runs SET status = $2, claimed_until = now() - interval '1 second',
analysis_result = '{"needs_context": false}', final_context_payload = 'ctx' WHERE id = $1`, r.ID, st)
		ids[st] = r.ID
	}
	fresh := b.submit(t, b.svc, 1, "held by a live orchestrator")
	b.exec(t, `UPDATE pipeline_runs SET status = 'ANALYZING', claimed_until = now() + interval '1 hour' WHERE id = $1`, fresh.ID)

	n, err := b.svc.Reap(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, memory.New, b.run(t, ids[memory.Analyzing]).Status)
	require.Equal(t, memory.Analyzed, b.run(t, ids[memory.Assembling]).Status)
	require.Equal(t, memory.Ready, b.run(t, ids[memory.Responding]).Status)
	require.Equal(t, memory.Analyzing, b.run(t, fresh.ID).Status, "a live lease is left alone")

	id := ids[memory.Responding]
	for i := 2; i <= 4; i++ {
		b.exec(t, `UPDATE pipeline_runs SET status = 'RESPONDING', claimed_until = now() - interval '1 second' WHERE id = $1`, id)
		_, err = b.svc.Reap(b.ctx)
		require.NoError(t, err)
	}
	got := b.run(t, id)
	require.Equal(t, memory.Failed, got.Status)
	require.Equal(t, 3, got.Attempts)
	require.Contains(t, got.ErrorMessage, "reaper")
}

// An orchestrator killed mid-stage (its claim left behind) is finished by
// another after the reaper returns the run.
func TestReaperFinishesADeadOrchestratorsRun(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1)
	r := b.submit(t, b.svc, 1, "Who finishes me?")
	_, _, ok, err := b.store.PipelineRuns().Capture(b.ctx, r.ID, memory.New, memory.Analyzing, 300*time.Millisecond, "", memory.RecallSize{})
	require.NoError(t, err)
	require.True(t, ok)

	other := b.service(t)
	b.start(t, other)
	require.Eventually(t, func() bool {
		_, err := other.Reap(b.ctx)
		require.NoError(t, err)
		return b.run(t, r.ID).Status != memory.Analyzing
	}, 5*time.Second, 50*time.Millisecond)
	b.waitArchived(t, 1, 10*time.Second)
	got := b.run(t, r.ID)
	require.Equal(t, memory.Completed, got.Status)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, 1, b.llm.Calls("analyzer"))
}

// Memory is per user: B's summaries and logs never reach A's prompts.
func TestUsersNeverSeeEachOthersMemory(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1, 2)
	b.start(t, b.svc)
	b.submit(t, b.svc, 2, "My secret project is Zanzibar")
	b.waitArchived(t, 1, 10*time.Second)
	b.submit(t, b.svc, 1, "What do you know about me?")
	b.submit(t, b.svc, 1, "And now?")
	b.waitArchived(t, 3, 10*time.Second)

	for _, rule := range []string{"analyzer", "assembler", "responder", "archivist"} {
		for _, req := range b.llm.RequestsFor(rule) {
			if strings.Contains(req.Prompt, "What do you know") || strings.Contains(req.Prompt, "And now?") {
				require.NotContains(t, req.Prompt, "Zanzibar", "%s prompt of user 1 leaked user 2's memory", rule)
			}
		}
	}
	// User 1's second run does see user 1's own first exchange.
	last := b.prompts("responder")[2]
	require.Contains(t, last, "Summary of What do you know about me?")
}

// One user's messages are answered in order, each started only after the
// previous was archived; another user is not held up meanwhile.
func TestOneUsersRunsGoInOrder(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1, 2)
	b.llm.SetLatency(15 * time.Millisecond)
	var ahead []int
	for i := range 5 {
		_, n, err := b.svc.Submit(b.ctx, 1, 1, 100+i, fmt.Sprintf("message %d", i))
		require.NoError(t, err)
		ahead = append(ahead, n)
	}
	require.Equal(t, 0, ahead[0])
	require.Equal(t, 4, ahead[4], "the fifth waits behind four")
	// Started once all five are in: on a busy machine the first could
	// otherwise be archived before the fifth is taken in, and fewer wait.
	b.start(t, b.svc)
	other := b.submit(t, b.svc, 2, "an unrelated question")
	b.waitArchived(t, 6, 20*time.Second)

	var order []string
	for _, a := range b.answers(t) {
		if a.Chat == 1 {
			order = append(order, strings.TrimPrefix(a.Text, "answer: Answer to: "))
		}
	}
	require.Equal(t, []string{"message 0", "message 1", "message 2", "message 3", "message 4"}, order,
		"queued, so delivered, in order")

	// Every analyzer call for message k+1 came after the archivist call for message k.
	reqs := b.llm.Requests()
	pos := func(rule, text string) int {
		for i, r := range reqs {
			if r.Rule == rule && strings.Contains(r.Prompt, text) {
				return i
			}
		}
		return -1
	}
	for k := range 4 {
		require.Greater(t, pos("analyzer", fmt.Sprintf("message %d", k+1)), pos("archivist", fmt.Sprintf("message %d", k)), "message %d", k+1)
	}
	// Each draft's history holds the exchanges before its message and none
	// of the messages queued behind it.
	drafts := b.prompts("assembler")
	require.Len(t, drafts, 6)
	for _, d := range drafts {
		if !strings.Contains(d, "## The user's new message\nmessage ") {
			continue
		}
		k := int(between(d, "## The user's new message\nmessage ", "\n")[0] - '0')
		for j := range 5 {
			line := fmt.Sprintf("User: message %d\n", j)
			require.Equal(t, j < k, strings.Contains(d, line), "draft of message %d, history line %q", k, line)
		}
	}
	// User 2 did not wait for user 1's queue.
	var otherDone, lastOfOne time.Time
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT archived_at FROM pipeline_runs WHERE id = $1`, other.ID).Scan(&otherDone))
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT max(archived_at) FROM pipeline_runs WHERE user_id = 1`).Scan(&lastOfOne))
	require.True(t, otherDone.Before(lastOfOne))
}

// Every model is given times on the user's clock, naming the zone, not in
// UTC: "what did I say yesterday evening" from Tbilisi is read against
// Tbilisi's evening. The message's own time, the recent messages' and the
// days memories were kept are all local; a memory kept at 00:30 there is
// of that day, not of the UTC day before.
func TestPromptsAreInTheUsersZone(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1)
	require.NoError(t, b.store.Users().SetTimeZone(b.ctx, 1, "Asia/Tbilisi"))
	tbilisi, err := time.LoadLocation("Asia/Tbilisi")
	require.NoError(t, err)
	b.start(t, b.svc)
	b.answered(t, 1, "I moved the meeting to Friday", 10*time.Second)
	// Monday 15:40 UTC is 19:40 in Tbilisi; 20:30 UTC is already Tuesday there.
	b.exec(t, `UPDATE raw_logs SET created_at = '2026-11-30T15:40:00Z' WHERE user_id = 1`)
	b.exec(t, `UPDATE lsm_storage SET created_at = '2026-11-30T20:30:00Z' WHERE user_id = 1`)

	asked := b.submit(t, b.svc, 1, "What did I say yesterday evening?")
	b.waitArchived(t, 2, 10*time.Second)
	at := asked.CreatedAt.In(tbilisi).Format("2006-01-02 15:04 Mon") + " (+04:00, Asia/Tbilisi)"
	when := "## When\nThe user wrote at " + at + ", their local time; every date and time here is in their zone.\n"
	prompt := func(rule string) string {
		t.Helper()
		for _, p := range b.prompts(rule) {
			if strings.Contains(p, "yesterday evening") {
				return p
			}
		}
		t.Fatalf("no %s prompt of the second message", rule)
		return ""
	}
	for _, rule := range []string{"analyzer", "assembler", "responder", "archivist"} {
		require.Contains(t, prompt(rule), when, rule)
	}
	require.Contains(t, prompt("analyzer"), "- [go] 2026-12-01: Summary of I moved the meeting to Friday\n")
	draft := prompt("assembler")
	require.Contains(t, draft, "[2026-11-30 19:40 Mon +04:00] User: I moved the meeting to Friday\n", draft)
	require.Contains(t, draft, "[2026-11-30 19:40 Mon +04:00] Mentor: Answer to: I moved the meeting to Friday\n", draft)
	require.Contains(t, prompt("responder"), "- [go] 2026-12-01: Summary of I moved the meeting to Friday\n")
	require.True(t, strings.HasSuffix(prompt("responder"), "## The user's message\nWhat did I say yesterday evening?\n"),
		"the message is still the prompt's end")
	for _, rule := range []string{"analyzer", "assembler", "responder", "archivist"} {
		require.NotContains(t, prompt(rule), "2026-11-30:", "%s: a UTC day", rule)
	}
}

// A finished run whose step queued nothing (FAILED by the reaper; or
// COMPLETED by a version that sent answers itself) is queued by finish,
// exactly once however many orchestrators sweep it, and archived after.
func TestFinishQueuesWhatTheStepDidNot(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1, 2)
	old := b.submit(t, b.svc, 1, "answered by an older version")
	b.exec(t, `UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'legacy answer' WHERE id = $1`, old.ID)
	stalled := b.submit(t, b.svc, 2, "stalled for good")
	b.exec(t, `UPDATE pipeline_runs SET status = 'RESPONDING', attempts = 3,
claimed_until = now() - interval '1 second', final_context_payload = 'ctx' WHERE id = $1`, stalled.ID)

	svcs := []*memory.Service{b.svc, b.service(t), b.service(t)}
	for _, s := range svcs {
		b.start(t, s)
	}
	n, err := b.svc.Reap(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, func() bool {
		for _, s := range svcs {
			s.Sweep(b.ctx)
		}
		return !b.run(t, old.ID).ArchivedAt.IsZero() && !b.run(t, stalled.ID).DeliveredAt.IsZero()
	}, 10*time.Second, 20*time.Millisecond, "legacy %+v\nstalled %+v", b.run(t, old.ID), b.run(t, stalled.ID))
	for _, s := range svcs {
		s.Sweep(b.ctx) // nothing is left to queue
	}
	require.Equal(t, []outboxRow{
		{Chat: 1, Ref: old.ID, Text: "answer: legacy answer", ReplyTo: old.MessageID},
		{Chat: 1, Ref: old.ID, Text: "(end)"},
		{Chat: 2, Ref: stalled.ID, Text: "failed", ReplyTo: stalled.MessageID},
	}, sortedByRef(withoutIDs(b.queued(t))))
	require.Equal(t, memory.Failed, b.run(t, stalled.ID).Status)
	require.Contains(t, b.run(t, stalled.ID).ErrorMessage, "reaper")
}

// "Typing" is renewed before the answer only when the one sent at intake
// has run out: not for a run answered within seconds of the message, but
// for one that waited (here: written 10 s ago).
func TestTypingRenewedOnlyForOldRuns(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1)
	old := b.submit(t, b.svc, 1, "written a while ago")
	b.exec(t, `UPDATE pipeline_runs SET created_at = now() - interval '10 seconds' WHERE id = $1`, old.ID)
	b.start(t, b.svc)
	b.waitArchived(t, 1, 10*time.Second)
	b.chat.mu.Lock()
	require.Equal(t, 1, b.chat.typing)
	b.chat.mu.Unlock()

	fresh := b.submit(t, b.svc, 1, "written just now")
	b.waitArchived(t, 2, 10*time.Second)
	var took time.Duration
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT extract(epoch FROM archived_at - created_at) * interval '1 second' FROM pipeline_runs WHERE id = $1`, fresh.ID).Scan(&took))
	if took >= 4*time.Second {
		t.Skipf("the machine took %s over a zero-latency run; the rule under test needs it under 4 s", took)
	}
	b.chat.mu.Lock()
	require.Equal(t, 1, b.chat.typing, "the intake's typing still shows")
	b.chat.mu.Unlock()
}

// A user's memory that would not fit the model's window with the
// assembler's prompt and an answer is trimmed by the workflow (the oldest
// summaries first), and the trimming logged; one that fits goes whole.
func TestContextTrimmedToTheModelsWindow(t *testing.T) {
	t.Parallel()
	long := func(i int) string { return fmt.Sprintf("question %d %s", i, strings.Repeat("lorem ipsum ", 120)) }
	// history runs three long exchanges through svc and then a short one,
	// whose run it returns.
	history := func(b *bundle, svc *memory.Service) memory.PipelineRun {
		b.script()
		b.user(t, 1)
		b.start(t, svc)
		for i := range 3 {
			b.submit(t, svc, 1, long(i))
			b.waitArchived(t, i+1, 10*time.Second)
		}
		r := b.submit(t, svc, 1, "What did I ask?")
		b.waitArchived(t, 4, 10*time.Second)
		return b.run(t, r.ID)
	}

	whole := setup(t)
	r := history(whole, whole.svc)
	for i := range 3 {
		require.Contains(t, r.DraftContext, fmt.Sprintf("Summary of question %d", i), "a window of 0 (unknown) trims nothing")
	}

	var logs strings.Builder
	var mu sync.Mutex
	cfg := memory.Config{Workers: 4, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond, SweepInterval: time.Hour}
	b := setup(t, withConfig(cfg))
	asm, err := b.svc.Prompt(b.ctx, "assembler")
	require.NoError(t, err)
	// Room for the query, the mentor's role, the recent messages and about
	// one summary: 2000 tokens of answer and the prompt besides.
	budget := memory.Tokens(r.DraftContext) - 2*memory.Tokens(long(0))
	cfg.Window = budget + 2000 + memory.Tokens(asm.Template) + 64
	svc, err := memory.NewService(cfg, memory.Deps{
		Runs: b.store.PipelineRuns(), Memories: b.store.Memories(), Prompts: b.store.Prompts(), Outbox: b.store.Outbox(), Users: b.store.Users(), LLM: b.llmc, Notifier: b.chat, Typist: b.chat,
		Log:        slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil)),
		Registerer: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	trimmed := history(b, svc)
	require.LessOrEqual(t, memory.Tokens(trimmed.DraftContext), budget, "the draft fits the window")
	require.Contains(t, trimmed.DraftContext, "What did I ask?")
	require.NotContains(t, trimmed.DraftContext, "Summary of question 0", "the oldest summary went first")
	require.Less(t, len(trimmed.DraftContext), len(r.DraftContext))
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, logs.String(), "memory context trimmed to fit the model's window")
	require.Equal(t, trimmed.DraftContext, b.prompts("assembler")[3], "what fits is sent as built")
}

// lockedWriter serialises a log handler's writes into a builder.
type lockedWriter struct {
	mu *sync.Mutex
	sb *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sb.Write(p)
}

// A model the provider does not have: the run waits (handed back, not
// FAILED, no answer), its user told once that it waits however many times
// it is handed back, and once the model is pulled it is answered.
func TestRunWaitsWhileTheModelIsMissing(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1)
	b.llm.ServeModels("something-else")
	runs := &waitCounter{Runs: b.store.PipelineRuns()}
	svc := b.serviceOver(t, runs)
	b.start(t, svc)
	r := b.submit(t, svc, 1, "Are you there?")
	require.Eventually(t, func() bool { return runs.waits.Load() >= 2 }, time.Minute, 50*time.Millisecond,
		"handed back twice, 5 s apart")
	got := b.run(t, r.ID)
	require.NotEqual(t, memory.Failed, got.Status, "a missing model is not the run's failure")
	require.Empty(t, b.queued(t), "no answer while the model is missing")
	told := []outboxRow{{Chat: 1, Ref: r.ID, Text: "waiting", ReplyTo: r.MessageID}}
	require.Equal(t, told, withoutIDs(b.notes(t)), "told once that it waits, in reply to the message")
	calls := len(b.llm.Requests())
	require.LessOrEqual(t, calls, int(runs.waits.Load())+1, "one probe a wait at most, no retry storm")

	b.llm.ServeModels("cheap", "strong")
	b.waitArchived(t, 1, 30*time.Second)
	require.Equal(t, memory.Completed, b.run(t, r.ID).Status)
	require.Equal(t, "Answer to: Are you there?", b.run(t, r.ID).FinalAnswer)
	require.Equal(t, told, withoutIDs(b.notes(t)), "and never again")
}

// waitCounter counts the waits of runs for the model: each asks to tell
// its user (Runs.TellWaiting).
type waitCounter struct {
	memory.Runs
	waits atomic.Int32
}

func (w *waitCounter) TellWaiting(ctx context.Context, id int64, status memory.Status, msgs []domain.Message) (bool, error) {
	w.waits.Add(1)
	return w.Runs.TellWaiting(ctx, id, status, msgs)
}

// drafts records the drafts shown, as Telegram would; refuse makes it
// answer as a server without sendMessageDraft.
type drafts struct {
	mu     sync.Mutex
	shown  []string
	runs   map[int64]bool
	refuse bool
}

func (d *drafts) Draft(_ context.Context, r memory.PipelineRun, text string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refuse {
		return fmt.Errorf("telegram: 404 Not Found: %w", memory.ErrDraftsRefused)
	}
	if d.runs == nil {
		d.runs = map[int64]bool{}
	}
	d.runs[r.ID] = true
	d.shown = append(d.shown, text)
	return nil
}

func (d *drafts) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.shown...)
}

// slowAnswer is twenty words the scripted responder streams one at a time.
var slowAnswer = strings.TrimSpace(strings.Repeat("word ", 19) + "end.")

// streaming is a world whose responder writes slowAnswer a word every
// chunk, shown every 30 ms.
func streaming(t *testing.T, d *drafts, chunk time.Duration) *bundle {
	t.Helper()
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, StreamEvery: 30 * time.Millisecond}), withDrafts(d))
	// The first rule that matches answers: this one before script's.
	b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").Reply(slowAnswer).ChunkDelay(chunk)
	b.serve(t)
	return b
}

func TestAnswerStreamsAsDraftsThenIsSentOnce(t *testing.T) {
	d := &drafts{}
	b := streaming(t, d, 10*time.Millisecond)
	_, got := b.answered(t, 1, "tell me", 20*time.Second)
	require.Equal(t, memory.Completed, got.Status)

	shown := d.all()
	require.GreaterOrEqual(t, len(shown), 2, "a 200 ms answer shown every 30 ms is shown several times: %q", shown)
	for i := 1; i < len(shown); i++ {
		assert.True(t, strings.HasPrefix(shown[i], shown[i-1]) && shown[i] != shown[i-1], "drafts grow: %q then %q", shown[i-1], shown[i])
	}
	assert.NotEqual(t, slowAnswer, shown[0], "the first draft came while the model wrote")
	assert.False(t, got.Placeholder)
	answers := b.answers(t)
	require.Len(t, answers, 1, "the final answer is sent once")
	assert.Equal(t, "answer: "+slowAnswer, answers[0].Text)
	assert.Equal(t, []int{0}, domaintest.Column[int](t, b.ctx, b.store.Pool(), `SELECT count(*)::int FROM outbox WHERE kind = 'memory_draft'`),
		"drafts never touch the outbox")
}

func TestAnswerStreamsIntoAPlaceholderWhereDraftsAreRefused(t *testing.T) {
	// A placeholder's edits go at most once a second: a 3 s answer.
	b := streaming(t, &drafts{refuse: true}, 150*time.Millisecond)
	_, got := b.answered(t, 1, "tell me", 20*time.Second)
	require.Equal(t, memory.Completed, got.Status)
	assert.True(t, got.Placeholder)

	type row struct {
		Key    string
		Edit   bool
		Text   string
		IfGone string
	}
	rows := domaintest.Rows[row](t, b.ctx, b.store.Pool(), `SELECT msg_key, edit, body->>'text', COALESCE(body->>'if_gone', '')
FROM outbox WHERE ref = $1 ORDER BY id`, got.ID)
	require.GreaterOrEqual(t, len(rows), 4, "placeholder, at least one edit, the answer in two parts: %+v", rows)
	key := fmt.Sprint("answer:", got.ID)
	assert.Equal(t, row{Key: key, Edit: false, Text: rows[0].Text}, rows[0], "the placeholder is sent first")
	assert.True(t, strings.HasPrefix(rows[0].Text, "so far: word"))
	for _, r := range rows[1 : len(rows)-2] {
		assert.True(t, r.Edit && r.Key == key && strings.HasPrefix(r.Text, "so far: "), "then edited: %+v", r)
	}
	last := rows[len(rows)-2] // then "(end)", the answer's second part
	assert.Equal(t, row{Key: key, Edit: true, Text: "answer: " + slowAnswer, IfGone: "send"}, last,
		"the answer replaces the placeholder, or is sent anew if it is gone")
	assert.Len(t, b.answers(t), 1, "one answer")
}

func TestFastAnswerIsNotStreamed(t *testing.T) {
	d := &drafts{}
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, StreamEvery: time.Hour}), withDrafts(d))
	b.serve(t)
	_, got := b.answered(t, 1, "quick", 20*time.Second)
	require.Equal(t, memory.Completed, got.Status)
	assert.Empty(t, d.all(), "an answer written within StreamEvery is only sent")
	assert.Len(t, b.answers(t), 1)
}

func TestFailureNoticeReplacesThePlaceholder(t *testing.T) {
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, StreamEvery: 30 * time.Millisecond, Attempts: 1}), withDrafts(&drafts{refuse: true}))
	b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").Reply(slowAnswer).
		ChunkDelay(10 * time.Millisecond).Fault(llmtest.StreamCut())
	b.serve(t)
	_, got := b.answered(t, 1, "tell me", 20*time.Second)
	require.Equal(t, memory.Failed, got.Status)
	assert.True(t, got.Placeholder, "half the answer was shown before the model broke off")
	var edit bool
	var ifGone, text string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT edit, COALESCE(body->>'if_gone', ''), body->>'text'
FROM outbox WHERE ref = $1 AND kind = 'memory_answer'`, got.ID).Scan(&edit, &ifGone, &text))
	assert.Equal(t, "failed", text)
	assert.True(t, edit, "the notice takes the half answer's place")
	assert.Equal(t, "send", ifGone)
}
