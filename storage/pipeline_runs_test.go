package storage_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
)

// mfx is a memory-chat fixture: a database with two users and a listener
// on pipeline_events.
type mfx struct {
	*testBundle
	events chan map[string]any
	// msgs numbers the messages submit sends: each is a run of its own
	// (a message is captured once).
	msgs int
}

func newMemory(t *testing.T) *mfx {
	t.Helper()
	f := &mfx{testBundle: setup(t), events: make(chan map[string]any, 100)}
	f.users(domain.User{FirstName: "U"}, 1, 2)
	ctx, cancel := context.WithCancel(f.ctx)
	connected := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.st.Listen(ctx, []string{memory.Channel}, func() { connected <- struct{}{} }, func(_, p string) {
			var ev map[string]any
			if json.Unmarshal([]byte(p), &ev) == nil {
				f.events <- ev
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	<-connected
	return f
}

// next returns the next notification's status and held flag.
func (f *mfx) next() (string, bool) {
	f.t.Helper()
	select {
	case ev := <-f.events:
		held, _ := ev["held"].(bool)
		return ev["status"].(string), held
	case <-time.After(5 * time.Second):
		f.t.Fatal("no notification")
		return "", false
	}
}

func (f *mfx) submit(user int64, text string) memory.PipelineRun {
	f.t.Helper()
	f.msgs++
	r, _, err := f.st.PipelineRuns().Submit(f.ctx, user, user, f.msgs, text)
	require.NoError(f.t, err)
	return r
}

// analyze captures a NEW run for its first stage, as a worker would.
func (f *mfx) analyze(r memory.PipelineRun) {
	f.t.Helper()
	_, _, ok, err := f.st.PipelineRuns().Capture(f.ctx, r.ID, memory.New, memory.Analyzing, time.Minute, "", memory.RecallSize{})
	require.NoError(f.t, err)
	require.True(f.t, ok)
}

func (f *mfx) status(id int64) (memory.Status, bool) {
	f.t.Helper()
	var st memory.Status
	var held bool
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx,
		`SELECT status, COALESCE(claimed_until > now(), false) FROM pipeline_runs WHERE id = $1`, id).Scan(&st, &held))
	return st, held
}

// A step that goes straight on commits the result and the next capture
// together: both status changes are notified, held, in order; a step that
// names the wrong status changes nothing.
func TestStepRunAdvancesAndCapturesInOneCommit(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r := f.submit(1, "hello")
	st, held := f.next()
	require.Equal(t, "NEW", st)
	require.False(t, held, "a new run is for anyone to capture")

	f.analyze(r)
	st, held = f.next()
	require.Equal(t, "ANALYZING", st)
	require.True(t, held)

	needs := true
	ok, err := f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Analyzing, To: memory.Analyzed,
		Change: memory.Change{Analysis: &memory.Analysis{NeedsContext: &needs}}, Then: memory.Assembling, Hold: time.Minute})
	require.NoError(t, err)
	require.True(t, ok)
	for _, want := range []string{"ANALYZED", "ASSEMBLING"} {
		st, held = f.next()
		require.Equal(t, want, st)
		require.True(t, held, want)
	}
	got, held := f.status(r.ID)
	require.Equal(t, memory.Assembling, got)
	require.True(t, held)
	run, err := f.st.PipelineRuns().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.NotNil(t, run.Analysis)
	require.True(t, *run.Analysis.NeedsContext)

	// Wrong "from": nothing moves, nothing is notified.
	ok, err = f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Analyzing, To: memory.Analyzed, Then: memory.Assembling, Hold: time.Minute})
	require.NoError(t, err)
	require.False(t, ok)
	got, _ = f.status(r.ID)
	require.Equal(t, memory.Assembling, got)

	// Handing a stage back releases the run: the notification is not held.
	ok, err = f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Assembling, To: memory.Analyzed})
	require.NoError(t, err)
	require.True(t, ok)
	st, held = f.next()
	require.Equal(t, "ANALYZED", st)
	require.False(t, held)

	// Completing logs the answer and keeps the finishing claim.
	_, _, ok, err = f.st.PipelineRuns().Capture(f.ctx, r.ID, memory.Analyzed, memory.Assembling, time.Minute, "", memory.RecallSize{})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Assembling, To: memory.Ready,
		Change: memory.Change{FinalContext: "ctx"}, Then: memory.Responding, Hold: time.Minute})
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Responding, To: memory.Completed,
		Change: memory.Change{FinalAnswer: "the answer"}, Hold: time.Minute})
	require.NoError(t, err)
	require.True(t, ok)
	got, held = f.status(r.ID)
	require.Equal(t, memory.Completed, got)
	require.True(t, held, "the worker that completed it delivers it")
	var answers int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx,
		`SELECT count(*) FROM raw_logs WHERE log_type = 'answer' AND log_data->>'text' = 'the answer'`).Scan(&answers))
	require.Equal(t, 1, answers)
	_, ok, err = f.st.PipelineRuns().ClaimFinished(f.ctx, r.ID, time.Minute, "")
	require.NoError(t, err)
	require.False(t, ok, "nobody else claims it while the claim holds")
}

// The capture of the next stage only takes the row its own transaction
// advanced: a run that is already past To is not captured by a step that
// failed to advance it.
func TestStepRunNeverCapturesWhatItDidNotAdvance(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r := f.submit(1, "hello")
	// Someone else's step left it in ANALYZED, released.
	f.exec(`UPDATE pipeline_runs SET status = 'ANALYZED' WHERE id = $1`, r.ID)
	ok, err := f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Analyzing, To: memory.Analyzed, Then: memory.Assembling, Hold: time.Minute})
	require.NoError(t, err)
	require.False(t, ok)
	got, held := f.status(r.ID)
	require.Equal(t, memory.Analyzed, got)
	require.False(t, held)
}

// The recall read with a capture is the user's own history from before the
// run: not the run's own query, not messages queued after it, not another
// user's.
func TestCaptureRecallsOnlyEarlierHistory(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	first := f.submit(1, "first question")
	f.exec(`UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'first answer', archived_at = now(), closed_at = now() WHERE id = $1`, first.ID)
	f.exec(`INSERT INTO raw_logs (user_id, log_type, log_data) VALUES (1, 'answer', jsonb_build_object('text', 'first answer', 'run_id', $1::bigint))`, first.ID)
	_, _, err := f.st.PipelineRuns().Archive(f.ctx, first.ID, nil) // already archived: no-op
	require.NoError(t, err)
	f.exec(`INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, summary) VALUES
(1, now(), now() + interval '7 days', 'mine'), (2, now(), now() + interval '7 days', 'theirs')`)
	f.submit(2, "other user's question")
	r := f.submit(1, "second question")
	f.submit(1, "third question, queued")
	// capture moves r from NEW to ANALYZING, reading its recall.
	capture := func() (memory.PipelineRun, memory.Recall, bool) {
		t.Helper()
		run, rc, ok, err := f.st.PipelineRuns().Capture(f.ctx, r.ID, memory.New, memory.Analyzing, time.Minute, "", memory.RecallSize{Logs: 10, Summaries: 20})
		require.NoError(t, err)
		return run, rc, ok
	}

	run, rc, ok := capture()
	require.True(t, ok)
	require.Equal(t, "second question", run.Query)
	var texts []string
	for _, l := range rc.Logs {
		texts = append(texts, l.Type+": "+l.Text)
	}
	require.Equal(t, []string{"answer: first answer", "query: first question"}, texts)
	require.Len(t, rc.Summaries, 1)
	require.Equal(t, "mine", rc.Summaries[0].Summary)
	require.False(t, rc.Summaries[0].CreatedAt.IsZero())
	require.True(t, rc.Summaries[0].BucketEnd.After(rc.Summaries[0].BucketStart))
	require.Equal(t, first.ID, rc.Logs[0].RunID)

	// A failed capture reads nothing it returns.
	_, rc, ok = capture()
	require.False(t, ok)
	require.Empty(t, rc.Logs)
}

// Archiving stores the summary, releases the run and names the user's next
// NEW run; a second archive does nothing.
func TestArchiveRunNamesTheNextRun(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r := f.submit(1, "one")
	second := f.submit(1, "two")
	f.submit(2, "someone else")
	f.exec(`UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'a',
claimed_until = now() + interval '1 minute' WHERE id = $1`, r.ID)
	week := time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	sum := &memory.Summary{BucketStart: week, BucketEnd: week.AddDate(0, 0, 7),
		Tags: []string{"go"}, Summary: "asked one", SourceRunIDs: []int64{r.ID}}
	_, ok, err := f.st.PipelineRuns().Archive(f.ctx, r.ID, sum)
	require.NoError(t, err)
	require.False(t, ok, "not archived before its answer is queued")
	ok, err = f.st.PipelineRuns().MarkDelivered(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	next, ok, err := f.st.PipelineRuns().Archive(f.ctx, r.ID, sum)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, memory.Ref{ID: second.ID, UserID: 1, Status: memory.New}, next)
	_, held := f.status(r.ID)
	require.False(t, held)
	sums, err := f.st.Memories().Summaries(f.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, sums, 1)
	require.Equal(t, "asked one", sums[0].Summary)
	require.Equal(t, []string{"go"}, sums[0].Tags)
	require.Equal(t, []int64{r.ID}, sums[0].SourceRunIDs)
	require.True(t, sums[0].BucketStart.Equal(week))

	_, ok, err = f.st.PipelineRuns().Archive(f.ctx, r.ID, &memory.Summary{BucketStart: week, BucketEnd: week.AddDate(0, 0, 7), Summary: "again"})
	require.NoError(t, err)
	require.False(t, ok)
	sums, err = f.st.Memories().Summaries(f.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, sums, 1, "a second archive stores nothing")

	// Without a summary (the archivist failed) and with no next run.
	f.exec(`UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'b', delivered_at = now() WHERE id = $1`, second.ID)
	next, ok, err = f.st.PipelineRuns().Archive(f.ctx, second.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, next.ID)
	sums, err = f.st.Memories().Summaries(f.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, sums, 1)
}

// pipeline_events carries inserts and status changes, nothing else: not
// the delivery mark (nor the outbox rows), not the archive. A run's whole life gives exactly its seven events, in order,
// and the next event is the next run's insert.
func TestPipelineNotifiesInsertsAndStatusChangesOnly(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r := f.submit(1, "hello")
	f.analyze(r)
	needs := true
	for _, st := range []memory.Step{
		{From: memory.Analyzing, To: memory.Analyzed, Change: memory.Change{Analysis: &memory.Analysis{NeedsContext: &needs}}, Then: memory.Assembling},
		{From: memory.Assembling, To: memory.Ready, Change: memory.Change{FinalContext: "ctx"}, Then: memory.Responding},
		{From: memory.Responding, To: memory.Completed, Change: memory.Change{FinalAnswer: "the answer"}},
	} {
		st.Hold = time.Minute
		ok, err := f.st.PipelineRuns().Step(f.ctx, r.ID, st)
		require.NoError(t, err)
		require.True(t, ok, "%s → %s", st.From, st.To)
	}
	ok, err := f.st.PipelineRuns().MarkDelivered(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.False(t, ok, "the COMPLETED step queued the answer already")
	_, ok, err = f.st.PipelineRuns().Archive(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	next := f.submit(2, "next")

	type event struct {
		id        int64
		status    string
		operation string
	}
	var got []event
	for range 8 {
		select {
		case ev := <-f.events:
			id, _ := ev["id"].(float64)
			st, _ := ev["status"].(string)
			op, _ := ev["operation"].(string)
			got = append(got, event{int64(id), st, op})
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d notifications: %v", len(got), got)
		}
	}
	want := []event{{r.ID, "NEW", "INSERT"}}
	for _, st := range []string{"ANALYZING", "ANALYZED", "ASSEMBLING", "READY", "RESPONDING", "COMPLETED"} {
		want = append(want, event{r.ID, st, "UPDATE"})
	}
	want = append(want, event{next.ID, "NEW", "INSERT"})
	require.Equal(t, want, got)
}

// Intake is all or nothing: a failed one stores neither the run nor its
// log, and the submissions after it go through.
func TestSubmitRunFailsWhole(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	_, _, err := f.st.PipelineRuns().Submit(f.ctx, 404, 404, 1, "from nobody") // no such user
	require.Error(t, err)
	var runs, logs int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM pipeline_runs), (SELECT count(*) FROM raw_logs)`).Scan(&runs, &logs))
	require.Zero(t, runs)
	require.Zero(t, logs)

	for i := range 3 {
		r, ahead, err := f.st.PipelineRuns().Submit(f.ctx, 1, 1, i+1, "question")
		require.NoError(t, err)
		require.Equal(t, i, ahead)
		require.Equal(t, memory.New, r.Status)
	}
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM pipeline_runs), (SELECT count(*) FROM raw_logs)`).Scan(&runs, &logs))
	require.Equal(t, 3, runs)
	require.Equal(t, 3, logs)

	// A run whose answer is on its way (delivered_at; the archivist has not
	// closed it yet) is no longer ahead of anything: the user has, or is
	// about to have, its answer.
	_, err = f.st.Pool().Exec(f.ctx, `UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'a', delivered_at = now()
WHERE id = (SELECT min(id) FROM pipeline_runs)`)
	require.NoError(t, err)
	_, ahead, err := f.st.PipelineRuns().Submit(f.ctx, 1, 1, 4, "question")
	require.NoError(t, err)
	require.Equal(t, 2, ahead, "the two runs not yet answered")
}

// Intake returns only once the message is on disk, although its
// notifying transaction commits without waiting: the pages it wrote, the
// run's and the raw log's, are flushed by the time PipelineRuns.Submit returns. (With
// the flush left out, the WAL writer flushes them some milliseconds later,
// and this fails.)
func TestSubmitRunReturnsDurable(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	if _, err := f.st.Pool().Exec(f.ctx, `CREATE EXTENSION IF NOT EXISTS pageinspect`); err != nil {
		t.Skipf("pageinspect unavailable (it needs a superuser): %v", err)
	}
	for i := range 20 {
		r, _, err := f.st.PipelineRuns().Submit(f.ctx, 1, 1, i+1, "question")
		require.NoError(t, err)
		var runOnDisk, logOnDisk bool
		require.NoError(t, f.st.Pool().QueryRow(f.ctx, `
SELECT (SELECT (page_header(get_raw_page('pipeline_runs', (ctid::text::point)[0]::int))).lsn <= pg_current_wal_flush_lsn()
        FROM pipeline_runs WHERE id = $1),
       (SELECT (page_header(get_raw_page('raw_logs', (ctid::text::point)[0]::int))).lsn <= pg_current_wal_flush_lsn()
        FROM raw_logs WHERE (log_data->>'run_id')::bigint = $1)`, r.ID).Scan(&runOnDisk, &logOnDisk))
		require.True(t, runOnDisk, "run %d not flushed when SubmitRun returned", r.ID)
		require.True(t, logOnDisk, "raw log of run %d not flushed when SubmitRun returned", r.ID)
	}
}

// queuedRow is one outbox row of the memory chat.
type queuedRow struct {
	Chat    int64
	Kind    string
	Ref     int64
	Text    string
	ReplyTo int
	Created time.Time
}

func (f *mfx) queued(ref int64) []queuedRow {
	f.t.Helper()
	rows, err := f.st.Pool().Query(f.ctx, `SELECT chat_id, kind, ref, body->>'text', COALESCE((body->>'reply_to')::int, 0), created_at
FROM outbox WHERE ref = $1 ORDER BY id`, ref)
	require.NoError(f.t, err)
	defer rows.Close()
	var out []queuedRow
	for rows.Next() {
		var r queuedRow
		require.NoError(f.t, rows.Scan(&r.Chat, &r.Kind, &r.Ref, &r.Text, &r.ReplyTo, &r.Created))
		out = append(out, r)
	}
	require.NoError(f.t, rows.Err())
	return out
}

// answerOf is a three-part answer as the bot renders it.
func answerOf(r memory.PipelineRun, texts ...string) []domain.Message {
	var out []domain.Message
	for i, text := range texts {
		m := domain.Message{ChatID: r.ChatID, Kind: domain.KindMemoryAnswer, Ref: r.ID, Text: text}
		if i == 0 {
			m.ReplyTo = r.MessageID
		}
		out = append(out, m)
	}
	return out
}

// delivered is a run's delivered_at and closed_at (zero for NULL).
func (f *mfx) delivered(id int64) (time.Time, time.Time) {
	f.t.Helper()
	var d, c *time.Time
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, `SELECT delivered_at, closed_at FROM pipeline_runs WHERE id = $1`, id).Scan(&d, &c))
	var dv, cv time.Time
	if d != nil {
		dv = *d
	}
	if c != nil {
		cv = *c
	}
	return dv, cv
}

// PipelineRuns.MarkDelivered queues the answer's rows, in order, in the statement that
// records delivered_at (the rows' created_at is delivered_at: one
// transaction), and only once: a second call, or any of several at once,
// queues nothing. A FAILED run's notice closes it.
func TestMemoryMarkDeliveredQueuesTheAnswerOnce(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r, failed := f.submit(1, "one"), f.submit(2, "two")
	f.exec(`UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'x' WHERE id = $1`, r.ID)
	f.exec(`UPDATE pipeline_runs SET status = 'FAILED', error_message = 'reaper' WHERE id = $1`, failed.ID)
	require.Empty(t, f.queued(r.ID), "nothing queued before")

	msgs := answerOf(r, "part 1", "part 2", "part 3")
	ok, err := f.st.PipelineRuns().MarkDelivered(f.ctx, r.ID, domain.Fixed[memory.PipelineRun](msgs...))
	require.NoError(t, err)
	require.True(t, ok)
	delivered, closed := f.delivered(r.ID)
	require.False(t, delivered.IsZero())
	require.True(t, closed.IsZero(), "a completed run closes when it is archived")
	got := f.queued(r.ID)
	require.Len(t, got, 3)
	for i, q := range got {
		reply := 0
		if i == 0 {
			reply = r.MessageID
		}
		require.Equal(t, queuedRow{Chat: 1, Kind: "memory_answer", Ref: r.ID, Text: msgs[i].Text, ReplyTo: reply, Created: q.Created}, q)
		require.True(t, q.Created.Equal(delivered), "written by the transaction that set delivered_at")
	}

	// Again, and five at once: nothing more.
	var wg sync.WaitGroup
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := f.st.PipelineRuns().MarkDelivered(f.ctx, r.ID, domain.Fixed[memory.PipelineRun](msgs...))
			assert.NoError(t, err)
			assert.False(t, ok)
		}()
	}
	wg.Wait()
	require.Len(t, f.queued(r.ID), 3)
	again, _ := f.delivered(r.ID)
	require.True(t, again.Equal(delivered))

	// Several callers racing on a fresh run: exactly one queues.
	var won atomic.Int32
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := f.st.PipelineRuns().MarkDelivered(f.ctx, failed.ID, domain.Fixed[memory.PipelineRun](domain.Message{ChatID: 2, Kind: domain.KindMemoryAnswer, Ref: failed.ID, Text: "sorry", ReplyTo: failed.MessageID}))
			assert.NoError(t, err)
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, won.Load())
	notice := f.queued(failed.ID)
	require.Len(t, notice, 1)
	require.Equal(t, "sorry", notice[0].Text)
	delivered, closed = f.delivered(failed.ID)
	require.False(t, delivered.IsZero())
	require.True(t, closed.Equal(delivered), "a failed run is closed once its notice is queued")

	// A run still at work is not marked.
	busy := f.submit(1, "three")
	ok, err = f.st.PipelineRuns().MarkDelivered(f.ctx, busy.ID, domain.Fixed[memory.PipelineRun](answerOf(busy, "too early")...))
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, f.queued(busy.ID))
}

// A step into COMPLETED or FAILED queues what the user is told in its own
// statement, with delivered_at; the same step repeated (the run has moved
// on) queues nothing.
func TestMemoryFinalStepQueuesTheAnswer(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	for _, to := range []memory.Status{memory.Completed, memory.Failed} {
		r := f.submit(1, "question for "+string(to))
		f.exec(`UPDATE pipeline_runs SET status = 'RESPONDING', claimed_until = now() + interval '1 minute' WHERE id = $1`, r.ID)
		st := memory.Step{From: memory.Responding, To: to, Hold: time.Minute, Tell: domain.Fixed[memory.PipelineRun](answerOf(r, "first", "second")...)}
		if to == memory.Completed {
			st.Change.FinalAnswer = "first second"
		} else {
			st.Change.ErrorMessage = "responder: boom"
		}
		ok, err := f.st.PipelineRuns().Step(f.ctx, r.ID, st)
		require.NoError(t, err)
		require.True(t, ok)
		got := f.queued(r.ID)
		require.Len(t, got, 2, to)
		require.Equal(t, []string{"first", "second"}, []string{got[0].Text, got[1].Text})
		require.Equal(t, r.MessageID, got[0].ReplyTo)
		delivered, closed := f.delivered(r.ID)
		require.True(t, got[0].Created.Equal(delivered), "one transaction")
		require.Equal(t, to == memory.Failed, !closed.IsZero(), "only a failed run is closed by its step")
		status, held := f.status(r.ID)
		require.Equal(t, to, status)
		require.True(t, held, "the worker keeps it to finish it")

		ok, err = f.st.PipelineRuns().Step(f.ctx, r.ID, st)
		require.NoError(t, err)
		require.False(t, ok)
		require.Len(t, f.queued(r.ID), 2, "a repeated step queues nothing")
		ok, err = f.st.PipelineRuns().MarkDelivered(f.ctx, r.ID, st.Tell)
		require.NoError(t, err)
		require.False(t, ok, "nor does marking it delivered")
		require.Len(t, f.queued(r.ID), 2)
		if to == memory.Completed {
			_, ok, err = f.st.PipelineRuns().Archive(f.ctx, r.ID, nil)
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
}

// EnqueueAsync writes rows with no state change (intake's queue note),
// in order, all or nothing.
func TestMemoryQueueMessages(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r := f.submit(1, "one")
	require.NoError(t, f.st.Outbox().EnqueueAsync(f.ctx, nil))
	require.NoError(t, f.st.Outbox().EnqueueAsync(f.ctx, answerOf(r, "note 1", "note 2")))
	got := f.queued(r.ID)
	require.Len(t, got, 2)
	require.Equal(t, []string{"note 1", "note 2"}, []string{got[0].Text, got[1].Text})
	require.Equal(t, r.MessageID, got[0].ReplyTo)

	bad := answerOf(r, "note 3", "no chat")
	bad[1].ChatID = 0
	require.Error(t, f.st.Outbox().EnqueueAsync(f.ctx, bad))
	require.Len(t, f.queued(r.ID), 2, "nothing of a refused batch is written")
}

// A run waiting for the model tells its user once, from the stage it was
// captured in: again, from another replica or after it moved on, nothing.
func TestTellWaitingOncePerRun(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	r := f.submit(1, "are you there?")
	f.analyze(r)
	note := answerOf(r, "waiting")
	note[0].Kind = domain.KindMemoryNote
	runs := f.st.PipelineRuns()

	told, err := runs.TellWaiting(f.ctx, r.ID, memory.Responding, note)
	require.NoError(t, err)
	require.False(t, told, "not in that stage")
	require.Empty(t, f.queued(r.ID))

	told, err = runs.TellWaiting(f.ctx, r.ID, memory.Analyzing, note)
	require.NoError(t, err)
	require.True(t, told)
	told, err = runs.TellWaiting(f.ctx, r.ID, memory.Analyzing, note)
	require.NoError(t, err)
	require.False(t, told, "told already")
	got := f.queued(r.ID)
	require.Len(t, got, 1)
	require.Equal(t, queuedRow{Chat: 1, Kind: domain.KindMemoryNote, Ref: r.ID, Text: "waiting", ReplyTo: r.MessageID, Created: got[0].Created}, got[0])
}

// The same message submitted again (its update run a second time after a
// replica died before the done-mark) captures nothing new: the first run is
// returned with ErrSubmitted, and the query is logged once.
func TestSubmitIsKeyedByTheMessage(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	first, ahead, err := f.st.PipelineRuns().Submit(f.ctx, 1, 1, 7, "hello")
	require.NoError(t, err)
	require.Zero(t, ahead)
	again, _, err := f.st.PipelineRuns().Submit(f.ctx, 1, 1, 7, "hello")
	require.ErrorIs(t, err, memory.ErrSubmitted)
	require.Equal(t, first.ID, again.ID)
	other, ahead, err := f.st.PipelineRuns().Submit(f.ctx, 1, 1, 8, "hello")
	require.NoError(t, err, "another message of the chat is a run of its own")
	require.NotEqual(t, first.ID, other.ID)
	require.Equal(t, 1, ahead)
	var runs, logs int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM pipeline_runs WHERE message_id = 7),
       (SELECT count(*) FROM raw_logs WHERE (log_data->>'run_id')::bigint = $1)`, first.ID).Scan(&runs, &logs))
	require.Equal(t, 1, runs)
	require.Equal(t, 1, logs)
}

// /prompt with the active version's own text (the same command run again)
// makes no new version; another text does, and the first text again after
// it is a new version too.
func TestSetSystemPromptKeepsTheActiveText(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	first, err := f.st.Prompts().Set(f.ctx, "mentor", "Be brief.", domain.MessageRef{})
	require.NoError(t, err)
	again, err := f.st.Prompts().Set(f.ctx, "mentor", "Be brief.", domain.MessageRef{})
	require.NoError(t, err)
	require.Equal(t, first.Version, again.Version)
	other, err := f.st.Prompts().Set(f.ctx, "mentor", "Be kind.", domain.MessageRef{})
	require.NoError(t, err)
	require.Equal(t, first.Version+1, other.Version)
	back, err := f.st.Prompts().Set(f.ctx, "mentor", "Be brief.", domain.MessageRef{})
	require.NoError(t, err)
	require.Equal(t, first.Version+2, back.Version)
	var active int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT count(*) FROM system_prompts WHERE role_name = 'mentor' AND is_active`).Scan(&active))
	require.Equal(t, 1, active)
}

// A /prompt message set again (its update handled again) returns the
// version it set and changes nothing, though another admin's newer set is
// active by then; so does one whose text was the active one already.
func TestSetSystemPromptOncePerMessage(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	set := func(text string, chat int64, msg int) memory.Prompt {
		p, err := f.st.Prompts().Set(f.ctx, "mentor", text, domain.MessageRef{Chat: chat, ID: msg})
		require.NoError(t, err)
		return p
	}
	active := func() string {
		var text string
		require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT prompt_template FROM system_prompts
WHERE role_name = 'mentor' AND is_active`).Scan(&text))
		return text
	}
	brief := set("Be brief.", 1, 10)
	require.True(t, brief.Active)
	kind := set("Be kind.", 2, 20)
	require.Equal(t, brief.Version+1, kind.Version)

	again := set("Be brief.", 1, 10)
	require.Equal(t, brief.Version, again.Version)
	require.Equal(t, "Be brief.", again.Template)
	require.False(t, again.Active, "set since by another")
	require.Equal(t, "Be kind.", active())

	// The active text sent anew makes no version, but is the message's
	// set all the same.
	same := set("Be kind.", 1, 11)
	require.Equal(t, kind.Version, same.Version)
	later := set("Be calm.", 2, 21)
	require.Equal(t, kind.Version+1, later.Version)
	same = set("Be kind.", 1, 11)
	require.Equal(t, kind.Version, same.Version)
	require.False(t, same.Active)
	require.Equal(t, "Be calm.", active())

	var versions, sets int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM system_prompts WHERE role_name = 'mentor'),
       (SELECT count(*) FROM system_prompt_sets)`).Scan(&versions, &sets))
	require.Equal(t, later.Version, versions)
	require.Equal(t, 4, sets)
}

// A stop is taken once, only for the user's run whose answer is being
// written, and told on the pipeline's channel; the run then completes
// even with no answer written, and reads back as stopped.
func TestRequestStopMarksTheAnswerBeingWritten(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	runs := f.st.PipelineRuns()
	r := f.submit(1, "tell me about Lviv")
	ok, err := runs.RequestStop(f.ctx, r.ID, 1)
	require.NoError(t, err)
	require.False(t, ok, "not being written yet")

	f.exec(`UPDATE pipeline_runs SET status = 'RESPONDING', claimed_until = now() + interval '1 minute' WHERE id = $1`, r.ID)
	ok, err = runs.RequestStop(f.ctx, r.ID, 2)
	require.NoError(t, err)
	require.False(t, ok, "another user's")
	// The submit's and the status change's notifications come first, the
	// latter maybe not yet at the listener: wait for it, not for an empty
	// channel, or the stop's expected next would be the status change.
	for told := false; !told; {
		select {
		case ev := <-f.events:
			told = ev["status"] == "RESPONDING"
		case <-time.After(5 * time.Second):
			t.Fatal("the status change was not told")
		}
	}
	ok, err = runs.RequestStop(f.ctx, r.ID, 1)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case ev := <-f.events:
		require.Equal(t, map[string]any{"id": float64(r.ID), "stop": true}, ev)
	case <-time.After(5 * time.Second):
		t.Fatal("the stop was not told")
	}
	ok, err = runs.RequestStop(f.ctx, r.ID, 1)
	require.NoError(t, err)
	require.False(t, ok, "stopped once")

	st := memory.Step{From: memory.Responding, To: memory.Completed, Hold: time.Minute, Change: memory.Change{Stopped: true}}
	ok, err = runs.Step(f.ctx, r.ID, st)
	require.NoError(t, err, "a stopped run completes with no answer written")
	require.True(t, ok)
	back, err := runs.Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, back.Stopped, "read back as stopped")
	require.Equal(t, memory.Completed, back.Status)
	require.Empty(t, back.FinalAnswer)
}
