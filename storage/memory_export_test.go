package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
)

func ptr[T any](v T) *T { return &v }

// /incognito changes the state once per command message: the same message
// handled again reads the state the first handling left; toggling and
// setting name the state they leave, and setting what is already set says
// nothing changed.
func TestSetMemoryIncognitoOncePerCommand(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	set := func(msg int, to *bool) memory.Incognito {
		t.Helper()
		st, err := f.st.Memories().SetIncognito(f.ctx, 1, msg, to)
		require.NoError(t, err)
		return st
	}
	require.Equal(t, memory.Incognito{On: true, Changed: true}, set(10, nil), "a first toggle turns it on")
	require.Equal(t, memory.Incognito{On: true}, set(10, nil), "the same command again changes nothing")
	require.Equal(t, memory.Incognito{On: false, Changed: true}, set(11, nil))
	require.Equal(t, memory.Incognito{On: false}, set(12, ptr(false)), "already off")
	require.Equal(t, memory.Incognito{On: true, Changed: true}, set(13, ptr(true)))
	require.Equal(t, memory.Incognito{On: true}, set(14, ptr(true)), "already on")
	require.Equal(t, 0, f.count(`SELECT count(*) FROM memory_settings WHERE user_id = 2`), "another user's is untouched")
}

// An incognito run is marked at intake (and only while incognito is on),
// logs no query, and is closed with its texts and raw logs erased once its
// answer is queued; its outbox rows keep no text once delivered. Closing
// it twice does nothing; a FAILED one keeps only its stage's name.
func TestIncognitoRunLeavesNoTrace(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	before := f.submit(1, "remembered before")
	_, err := f.st.Memories().SetIncognito(f.ctx, 1, 10, ptr(true))
	require.NoError(t, err)
	r := f.submit(1, "secret-incognito-query")
	failing := f.submit(1, "secret-incognito-failing")
	require.False(t, before.Incognito)
	require.True(t, r.Incognito)
	got, err := f.st.PipelineRuns().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, got.Incognito)
	require.Equal(t, 0, f.count(`SELECT count(*) FROM raw_logs WHERE log_data->>'text' LIKE 'secret%'`), "no query logged")
	_, err = f.st.Memories().SetIncognito(f.ctx, 1, 11, ptr(false))
	require.NoError(t, err)
	got, err = f.st.PipelineRuns().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, got.Incognito, "turning it off does not change a run taken in")
	after := f.submit(1, "remembered after")
	require.False(t, after.Incognito)

	// The earlier run is done; the incognito one completes: its answer is
	// logged by the step and queued, ephemeral.
	f.exec(`UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'a', delivered_at = now(), archived_at = now(), closed_at = now()
WHERE id = $1`, before.ID)
	f.exec(`UPDATE pipeline_runs SET status = 'RESPONDING', analysis_result = '{"needs_context": true}',
draft_context = 'secret draft', final_context_payload = 'secret context', claimed_until = now() + interval '1 minute' WHERE id = $1`, r.ID)
	answer := answerOf(r, "secret-incognito-answer")
	answer[0].Ephemeral = true
	ok, err := f.st.PipelineRuns().Step(f.ctx, r.ID, memory.Step{From: memory.Responding, To: memory.Completed, Hold: time.Minute,
		Change: memory.Change{FinalAnswer: "secret-incognito-answer"}, Tell: domain.Fixed[memory.PipelineRun](answer...)})
	require.NoError(t, err)
	require.True(t, ok)
	e, err := f.st.Memories().Export(f.ctx, 1, time.Now().Add(time.Hour), memory.ExportTextBudget)
	require.NoError(t, err)
	for _, l := range e.Conversation {
		require.NotContains(t, l.Text, "secret", "an export never shows an incognito exchange")
	}

	next, ok, err := f.st.PipelineRuns().ArchiveIncognito(f.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, memory.Ref{ID: failing.ID, UserID: 1, Status: memory.New}, next)
	_, held := f.status(r.ID)
	require.False(t, held, "released")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM pipeline_runs WHERE id = $1 AND user_query = '' AND final_answer = ''
AND analysis_result IS NULL AND draft_context IS NULL AND final_context_payload IS NULL
AND archived_at IS NOT NULL AND closed_at IS NOT NULL`, r.ID))
	require.Equal(t, 0, f.count(`SELECT count(*) FROM raw_logs WHERE (log_data->>'run_id')::bigint = $1`, r.ID))
	require.Equal(t, 0, f.count(`SELECT count(*) FROM lsm_storage`))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM raw_logs WHERE user_id = 1`), "the other runs' queries stay")
	_, ok, err = f.st.PipelineRuns().ArchiveIncognito(f.ctx, r.ID)
	require.NoError(t, err)
	require.False(t, ok, "closed once")

	// Its answer's row keeps no text once delivered.
	rows, err := f.st.Outbox().Claim(f.ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.True(t, rows[0].Ephemeral)
	require.Equal(t, "secret-incognito-answer", rows[0].Text, "sent as written")
	ok, err = f.st.Outbox().Delivered(f.ctx, rows[0], 77)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 0, f.count(`SELECT count(*) FROM outbox WHERE body::text LIKE '%secret%'`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox WHERE state = 'sent' AND message_id = 77`))

	// A failed incognito run keeps its stage's name, not the model's words.
	f.exec(`UPDATE pipeline_runs SET status = 'ANALYZING', claimed_until = now() + interval '1 minute' WHERE id = $1`, failing.ID)
	ok, err = f.st.PipelineRuns().Step(f.ctx, failing.ID, memory.Step{From: memory.Analyzing, To: memory.Failed, Hold: time.Minute,
		Change: memory.Change{ErrorMessage: "analyzer: invalid answer: secret-incognito-failing"}})
	require.NoError(t, err)
	require.True(t, ok)
	next, ok, err = f.st.PipelineRuns().ArchiveIncognito(f.ctx, failing.ID)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, memory.Ref{ID: after.ID, UserID: 1, Status: memory.New}, next)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM pipeline_runs WHERE id = $1 AND user_query = '' AND error_message = 'analyzer'
AND archived_at IS NULL AND status = 'FAILED'`, failing.ID))
	require.Equal(t, 0, f.count(`SELECT count(*) FROM pipeline_runs WHERE user_query LIKE 'secret%' OR error_message LIKE '%secret%'`))

	// A run that is not incognito is not closed this way.
	f.exec(`UPDATE pipeline_runs SET status = 'COMPLETED', final_answer = 'b', delivered_at = now() WHERE id = $1`, after.ID)
	_, ok, err = f.st.PipelineRuns().ArchiveIncognito(f.ctx, after.ID)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, "remembered after", f.queryText(`SELECT user_query FROM pipeline_runs WHERE id = $1`, after.ID))
}

// queryText runs a query of one text.
func (f *mfx) queryText(sql string, args ...any) string {
	f.t.Helper()
	var s string
	require.NoError(f.t, f.st.Pool().QueryRow(f.ctx, sql, args...).Scan(&s))
	return s
}

// exportRows are an export's two rows as the bot renders them.
func exportRows(user int64, msg int) []domain.Message {
	return []domain.Message{
		{ChatID: user, Kind: domain.KindMemoryExport, Ref: user, ReplyTo: msg, Text: "md", Document: "markdown"},
		{ChatID: user, Kind: domain.KindMemoryExport, Ref: user, Text: "json", Document: "json"},
	}
}

// An export is queued, with its request's record, only when there is
// something to export (an incognito exchange is not), once per command,
// and at most once per interval.
func TestRequestMemoryExport(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	request := func(msg int) memory.ExportRequest {
		t.Helper()
		req, err := f.st.Memories().RequestExport(f.ctx, 1, msg, time.Minute, exportRows(1, msg))
		require.NoError(t, err)
		return req
	}
	exports := func() int { return f.count(`SELECT count(*) FROM outbox WHERE kind = 'memory_export'`) }

	require.Equal(t, memory.ExportRequest{Empty: true}, request(1))
	// An incognito run's answer, logged by its step until the run is
	// closed, is not something to export.
	_, err := f.st.Memories().SetIncognito(f.ctx, 1, 2, ptr(true))
	require.NoError(t, err)
	secret := f.submit(1, "incognito question")
	f.exec(`INSERT INTO raw_logs (user_id, log_type, log_data) VALUES (1, 'answer', jsonb_build_object('text', 'x', 'run_id', $1::bigint))`, secret.ID)
	require.Equal(t, memory.ExportRequest{Empty: true}, request(3))
	require.Zero(t, exports())

	_, err = f.st.Memories().SetIncognito(f.ctx, 1, 4, ptr(false))
	require.NoError(t, err)
	f.submit(1, "a question to remember")
	require.Equal(t, memory.ExportRequest{Queued: true}, request(5))
	require.Equal(t, 2, exports())
	var body string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT body::text FROM outbox WHERE kind = 'memory_export' ORDER BY id LIMIT 1`).Scan(&body))
	require.JSONEq(t, `{"text": "md", "reply_to": 5, "document": "markdown"}`, body, "the row names what to send, nothing of the user's")

	require.Equal(t, memory.ExportRequest{Repeated: true}, request(5), "the same command handled again")
	req := request(6)
	require.Positive(t, req.RetryIn)
	require.LessOrEqual(t, req.RetryIn, time.Minute)
	require.Equal(t, 2, exports())
	require.Equal(t, 0, f.count(`SELECT count(*) FROM memory_settings WHERE user_id = 2`))

	f.exec(`UPDATE memory_settings SET exported_at = now() - interval '61 seconds' WHERE user_id = 1`)
	require.Equal(t, memory.ExportRequest{Queued: true}, request(7))
	require.Equal(t, 4, exports())
}

// An export reads what was written up to its request, oldest first:
// memories with the time they were superseded, if they were, and the
// conversation without incognito exchanges; a user gone has none.
func TestMemoryExportReadsUpToItsRequest(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	week := time.Date(2026, 11, 16, 0, 0, 0, 0, time.UTC)
	f.exec(`INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary, source_run_ids, created_at)
VALUES (1, $1, $2, '{sport}', 'runs marathons', '{7}', now() - interval '2 hours'),
       (1, $1, $2, '{}', 'lives in Lviv', '{}', now() - interval '1 hour'),
       (2, $1, $2, '{}', 'someone else', '{}', now() - interval '1 hour')`, week, week.AddDate(0, 0, 7))
	q := f.submit(1, "first question")
	f.exec(`INSERT INTO raw_logs (user_id, log_type, log_data) VALUES (1, 'answer', jsonb_build_object('text', 'first answer', 'run_id', $1::bigint))`, q.ID)
	asOf := time.Now()
	f.exec(`UPDATE raw_logs SET created_at = $1::timestamptz - interval '1 minute'`, asOf)
	f.exec(`INSERT INTO raw_logs (user_id, log_type, log_data, created_at) VALUES (1, 'query', '{"text": "later"}', $1::timestamptz + interval '1 second')`, asOf)

	e, err := f.st.Memories().Export(f.ctx, 1, asOf, memory.ExportTextBudget)
	require.NoError(t, err)
	require.EqualValues(t, 1, e.User.ID)
	require.True(t, e.AsOf.Equal(asOf))
	require.Len(t, e.Memories, 2)
	require.Equal(t, "runs marathons", e.Memories[0].Memory.Summary)
	require.Equal(t, []string{"sport"}, e.Memories[0].Memory.Tags)
	require.Equal(t, []int64{7}, e.Memories[0].Memory.SourceRunIDs)
	require.True(t, e.Memories[0].Memory.BucketStart.Equal(week))
	require.True(t, e.Memories[0].SupersededAt.IsZero(), "current")
	require.Equal(t, "lives in Lviv", e.Memories[1].Memory.Summary)
	require.Len(t, e.Conversation, 2)
	require.Equal(t, memory.LogEntry{Type: "query", Text: "first question", RunID: q.ID, CreatedAt: e.Conversation[0].CreatedAt}, e.Conversation[0])
	require.Equal(t, "answer", e.Conversation[1].Type)
	require.Equal(t, "first answer", e.Conversation[1].Text)
	require.Zero(t, e.Omitted)
	require.False(t, e.Empty())

	// The conversation is read newest first while its texts fit the
	// budget; the older messages are counted, not read.
	for budget, want := range map[int][]string{
		len("first answer"):                             {"first answer"},
		len("first answer") + len("first question") - 1: {"first answer"},
		len("first answer") + len("first question"):     {"first question", "first answer"},
		0: nil,
	} {
		e, err := f.st.Memories().Export(f.ctx, 1, asOf, budget)
		require.NoError(t, err)
		var texts []string
		for _, l := range e.Conversation {
			texts = append(texts, l.Text)
		}
		require.Equal(t, want, texts, "budget %d", budget)
		require.Equal(t, 2-len(want), e.Omitted, "budget %d", budget)
		require.Len(t, e.Memories, 2, "memories are not bounded by it")
	}

	f.exec(`DELETE FROM users WHERE id = 1`)
	e, err = f.st.Memories().Export(f.ctx, 1, asOf, memory.ExportTextBudget)
	require.NoError(t, err)
	require.True(t, e.Empty())
}

// /forget takes incognito, the last export's record and an export still
// waiting to be sent (its rows in the outbox), and nothing of anyone else's.
func TestForgetErasesExportsAndIncognito(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	for _, user := range []int64{1, 2} {
		f.submit(user, "a question")
		_, err := f.st.Memories().SetIncognito(f.ctx, user, 1, ptr(true))
		require.NoError(t, err)
		req, err := f.st.Memories().RequestExport(f.ctx, user, 2, time.Minute, exportRows(user, 2))
		require.NoError(t, err)
		require.True(t, req.Queued)
	}
	u, err := f.st.Users().Get(f.ctx, 1)
	require.NoError(t, err)
	_, err = f.st.Users().Forget(f.ctx, 1, u.CreatedAt)
	require.NoError(t, err)
	require.Equal(t, 0, f.count(`SELECT count(*) FROM memory_settings WHERE user_id = 1`))
	require.Equal(t, 0, f.count(`SELECT count(*) FROM outbox WHERE chat_id = 1`))
	require.Equal(t, 1, f.count(`SELECT count(*) FROM memory_settings WHERE user_id = 2 AND incognito AND exported_at IS NOT NULL`))
	require.Equal(t, 2, f.count(`SELECT count(*) FROM outbox WHERE chat_id = 2 AND kind = 'memory_export'`))
	e, err := f.st.Memories().Export(f.ctx, 1, time.Now(), memory.ExportTextBudget)
	require.NoError(t, err)
	require.True(t, e.Empty(), "an export row sent after all finds nothing to send")
}
