package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/memory"
)

// PipelineRuns is the memory chat's runs aggregate (pipeline_runs): a
// message's way from intake through the pipeline's stages to its answer
// and its archive, the reaper's sweep, and the closing of incognito runs
// (memory_export.go).
type PipelineRuns struct{ *db }

// PipelineRuns is the store of the memory chat's runs.
func (s *Store) PipelineRuns() *PipelineRuns { return &PipelineRuns{s.db} }

var _ memory.Runs = (*PipelineRuns)(nil)

const runColumns = `r.id, r.user_id, r.chat_id, r.message_id, r.user_query, r.status, r.analysis_result,
COALESCE(r.draft_context, ''), COALESCE(r.final_context_payload, ''), COALESCE(r.final_answer, ''),
COALESCE(r.error_message, ''), r.placeholder, r.attempts, r.delivered_at, r.archived_at, r.created_at,
r.incognito, r.stop_requested_at IS NOT NULL,
` + runReaderSQL

// runReaderSQL is what the run's user reads in, in one look at their row:
// language, chosen zone and master city (NULL for no user row).
const runReaderSQL = `(SELECT ARRAY[
    CASE WHEN u.language <> '' THEN u.language WHEN u.telegram_language <> '' THEN u.telegram_language ELSE 'en' END,
    COALESCE(u.time_zone, ''), COALESCE((SELECT m.city FROM masters m WHERE m.user_id = u.id), '')]
 FROM users u WHERE u.id = r.user_id)`

// scanRun scans runColumns, then extra: the columns a query adds after them.
func scanRun(row pgx.Row, extra ...any) (memory.PipelineRun, error) {
	var r memory.PipelineRun
	var analysis []byte
	var delivered, archived *time.Time
	var reader []string
	if err := row.Scan(append([]any{&r.ID, &r.UserID, &r.ChatID, &r.MessageID, &r.Query, &r.Status, &analysis,
		&r.DraftContext, &r.FinalContext, &r.FinalAnswer, &r.ErrorMessage, &r.Placeholder, &r.Attempts, &delivered, &archived,
		&r.CreatedAt, &r.Incognito, &r.Stopped, &reader}, extra...)...); err != nil {
		return r, err
	}
	if len(analysis) > 0 {
		r.Analysis = &memory.Analysis{}
		if err := json.Unmarshal(analysis, r.Analysis); err != nil {
			return r, fmt.Errorf("run %d analysis: %w", r.ID, err)
		}
	}
	if delivered != nil {
		r.DeliveredAt = *delivered
	}
	if archived != nil {
		r.ArchivedAt = *archived
	}
	r.Lang = "en"
	if len(reader) == 3 {
		r.Lang, r.TimeZone, r.MasterCity = reader[0], reader[1], reader[2]
	}
	return r, nil
}

// scanRunOK maps "no row" to ok=false: a conditional update that found
// the run elsewhere.
func scanRunOK(row pgx.Row, what string) (memory.PipelineRun, bool, error) {
	r, err := scanRun(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.PipelineRun{}, false, nil
	}
	if err != nil {
		return memory.PipelineRun{}, false, fmt.Errorf("%s: %w", what, err)
	}
	return r, true, nil
}

// Submit is intake: the NEW run and archivist signal 1 (the query in
// raw_logs) in one transaction. ahead counts the user's earlier runs not
// yet archived or failed. It returns once the message is durable.
//
// The transaction itself commits without waiting for the disk, and a
// shared flush (walFlusher) makes it durable afterwards. PostgreSQL
// serialises the commits of all transactions that NOTIFY with one
// database-wide lock, held until the commit is flushed to disk, so a
// notifying commit that waited for the disk made every other notifying
// commit wait too, and would be the pipeline's bottleneck. The run is on its way (the notification is out) before
// the flush. If only the flush fails, the run is in place but the caller
// hears of an error, and the user may send the message again: answering
// twice beats not answering.
//
// The run is incognito if the user's incognito is on now, and an
// incognito query is not logged: it must not reach later runs' memory.
func (s *PipelineRuns) Submit(ctx context.Context, userID, chatID int64, messageID int, query string) (memory.PipelineRun, int, error) {
	// ON CONFLICT names no index: pipeline_runs_message may be partial
	// (migrations/00034). A conflict is the message captured before; the
	// run is then read back (it committed before this statement began:
	// one update runs on one replica at a time).
	row := s.pool.QueryRow(ctx, `
WITH ins AS (
    INSERT INTO pipeline_runs (user_id, chat_id, message_id, user_query, incognito)
    SELECT $1, $2, $3, $4,
           COALESCE((SELECT m.incognito FROM memory_settings m WHERE m.user_id = $1), false)
    FROM `+asyncCommit+`
    ON CONFLICT DO NOTHING
    RETURNING *
), logged AS (
    INSERT INTO raw_logs (user_id, log_type, log_data)
    SELECT $1, 'query', jsonb_build_object('text', $4::text, 'run_id', ins.id) FROM ins WHERE NOT ins.incognito
), r AS (
    SELECT * FROM ins
    UNION ALL
    (SELECT p.* FROM pipeline_runs p WHERE p.chat_id = $2 AND p.message_id = $3 AND NOT EXISTS (SELECT 1 FROM ins)
     ORDER BY p.id LIMIT 1)
)
SELECT `+runColumns+`,
       (SELECT count(*) FROM pipeline_runs p
        WHERE p.user_id = $1 AND p.closed_at IS NULL AND p.status <> 'FAILED' AND p.delivered_at IS NULL
          AND p.id < r.id),
       EXISTS (SELECT 1 FROM ins)
FROM r`, userID, chatID, messageID, query)
	var ahead int
	var created bool
	r, err := scanRun(row, &ahead, &created)
	if err == nil {
		// Also for a run captured before: the first capture may have
		// died between its asynchronous commit and its flush.
		err = s.flush.flush(ctx)
	}
	if err != nil {
		return memory.PipelineRun{}, 0, fmt.Errorf("submit run: %w", err)
	}
	if !created {
		return r, ahead, fmt.Errorf("submit run: message %d of chat %d: %w", messageID, chatID, memory.ErrSubmitted)
	}
	return r, ahead, nil
}

// Get returns one run or domain.ErrNotFound (for tests and tools;
// the pipeline learns a run by capturing it).
func (s *PipelineRuns) Get(ctx context.Context, id int64) (memory.PipelineRun, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM pipeline_runs r WHERE r.id = $1`, id))
	if err != nil {
		return r, fmt.Errorf("run %d: %w", id, interpretError(err))
	}
	return r, nil
}

// heldBy is the claimed_until a lease gives: NULL for none.
func heldBy(lease time.Duration) *int64 {
	if lease <= 0 {
		return nil
	}
	ms := lease.Milliseconds()
	return &ms
}

// Capture starts a stage: from → to with a lease, in one statement,
// committed asynchronously. A NEW run is captured only when every earlier
// run of its user is closed or failed, which keeps one user's runs in
// order. The recall is read by the same statement, as JSON arrays: the
// user's raw logs from before the run (not its own query, nor the messages
// the user sent after it, queued behind it) and their latest current
// summaries (none a later one superseded).
func (s *PipelineRuns) Capture(ctx context.Context, id int64, from, to memory.Status, lease time.Duration, claimer string, size memory.RecallSize) (memory.PipelineRun, memory.Recall, bool, error) {
	var rc memory.Recall
	var logs, sums []byte
	row := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE pipeline_runs r SET status = $3, claimed_until = now() + $4 * interval '1 millisecond', updated_at = now(),
        claimed_by = NULLIF($7, '')
    `+asyncFrom+`
    WHERE r.id = $1 AND r.status = $2
      AND ($2 <> 'NEW' OR NOT EXISTS (
          SELECT 1 FROM pipeline_runs p
          WHERE p.user_id = r.user_id AND p.id < r.id AND p.closed_at IS NULL AND p.status <> 'FAILED'))
    RETURNING r.*
)
SELECT `+runColumns+`,
    (SELECT COALESCE(json_agg(l ORDER BY l.id DESC), '[]') FROM (
        SELECT id, log_type AS type, COALESCE(log_data->>'text', '') AS text,
               COALESCE((log_data->>'run_id')::bigint, 0) AS run_id, created_at
        FROM raw_logs
        WHERE user_id = r.user_id AND COALESCE((log_data->>'run_id')::bigint, 0) < r.id
        ORDER BY id DESC LIMIT $5) l),
    (SELECT COALESCE(json_agg(m ORDER BY m.id DESC), '[]') FROM (
        SELECT `+summaryColumns+` FROM lsm_storage WHERE user_id = r.user_id AND invalid_at IS NULL
        ORDER BY id DESC LIMIT $6) m)
FROM r`, id, from, to, lease.Milliseconds(), size.Logs, size.Summaries, claimer)
	r, err := scanRun(row, &logs, &sums)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.PipelineRun{}, rc, false, nil
	}
	if err != nil {
		return memory.PipelineRun{}, rc, false, fmt.Errorf("capture run %d: %w", id, err)
	}
	if rc.Logs, err = decodeLogs(logs); err != nil {
		return r, memory.Recall{}, false, fmt.Errorf("capture run %d: %w", id, err)
	}
	js, err := decodeSummaries(sums)
	if err != nil {
		return r, memory.Recall{}, false, fmt.Errorf("capture run %d: %w", id, err)
	}
	for _, m := range js {
		rc.Summaries = append(rc.Summaries, m.summary())
	}
	rc.Read = size.Summaries > 0
	return r, rc, true, nil
}

// PipelineRuns.Step's statements. stepSet stores a stage's output ($4–$8, each
// left as it is when empty) with the new status $3 and lease $9.
const (
	stepSet = `status = $3, updated_at = now(),
        claimed_until = now() + $9 * interval '1 millisecond',
        analysis_result = COALESCE($4::jsonb, analysis_result),
        draft_context = COALESCE(NULLIF($5, ''), draft_context),
        final_context_payload = COALESCE(NULLIF($6, ''), final_context_payload),
        final_answer = COALESCE(NULLIF($7, ''), final_answer),
        error_message = COALESCE(NULLIF($8, ''), error_message)`
	// stepAdvance is a plain UPDATE: a CTE with an idle INSERT still pays
	// for opening raw_logs and its indexes on every call.
	stepAdvance = `UPDATE pipeline_runs SET ` + stepSet + ` ` + asyncFrom + ` WHERE id = $1 AND status = $2`
	// stepCapture takes the next stage ($2 → $3, lease $4) of a row this
	// transaction has just advanced, and no other.
	stepCapture = `
UPDATE pipeline_runs r SET status = $3, claimed_until = now() + $4 * interval '1 millisecond', updated_at = now()
WHERE r.id = $1 AND r.status = $2 AND r.xmin = pg_current_xact_id_if_assigned()::xid`
)

// The steps into a final status, which also queue what the user is told.
var (
	// stepCompleted also logs the answer to raw_logs and queues it: the
	// outbox rows ($10–$15, queueRows) and delivered_at, in the same
	// statement (memory.Step).
	stepCompleted = `
WITH r AS (
    UPDATE pipeline_runs SET ` + stepSet + `, delivered_at = now() ` + asyncFrom + `
    WHERE id = $1 AND status = $2 AND delivered_at IS NULL
    RETURNING pipeline_runs.id, pipeline_runs.user_id, pipeline_runs.final_answer
), logged AS (
    INSERT INTO raw_logs (user_id, log_type, log_data)
    SELECT user_id, 'answer', jsonb_build_object('text', final_answer, 'run_id', id) FROM r
), ` + queueRows(10, "r") + `
SELECT count(*) FROM r`
	// stepFailed queues the failure notice and closes the run: a failed run
	// is never archived, and the user is told by these rows.
	stepFailed = `
WITH r AS (
    UPDATE pipeline_runs SET ` + stepSet + `, delivered_at = now(), closed_at = now() ` + asyncFrom + `
    WHERE id = $1 AND status = $2 AND delivered_at IS NULL
    RETURNING pipeline_runs.id
), ` + queueRows(10, "r") + `
SELECT count(*) FROM r`
)

// Step moves a run out of a stage (memory.Step). The advance and the
// optional capture of the next stage are two UPDATEs sent together, one
// implicit transaction and one commit; the capture only takes a row this
// very transaction has just advanced (its xmin), so it never captures a run
// somebody else moved in between. Nothing is read back: the worker knows
// what it wrote.
func (s *PipelineRuns) Step(ctx context.Context, id int64, st memory.Step) (bool, error) {
	var analysis []byte
	if st.Change.Analysis != nil {
		var err error
		if analysis, err = json.Marshal(st.Change.Analysis); err != nil {
			return false, fmt.Errorf("step run %d: %w", id, err)
		}
	}
	args := []any{id, st.From, st.To, analysis, st.Change.DraftContext, st.Change.FinalContext,
		st.Change.FinalAnswer, st.Change.ErrorMessage, heldBy(st.Hold)}
	if st.To.Final() {
		q := stepCompleted
		if st.To == memory.Failed {
			q = stepFailed
		}
		// One statement: the run is known only by its id and the status
		// it moves to; the caller rendered the rest (domain.Fixed).
		rows, err := queueArgs(st.Tell.Of(memory.PipelineRun{ID: id, Status: st.To}))
		if err != nil {
			return false, fmt.Errorf("step run %d %s → %s: %w", id, st.From, st.To, err)
		}
		var n int
		if err := s.pool.QueryRow(ctx, q, append(args, rows...)...).Scan(&n); err != nil {
			return false, fmt.Errorf("step run %d %s → %s: %w", id, st.From, st.To, err)
		}
		return n == 1, nil
	}
	if st.Then == "" {
		tag, err := s.pool.Exec(ctx, stepAdvance, args...)
		if err != nil {
			return false, fmt.Errorf("step run %d %s → %s: %w", id, st.From, st.To, err)
		}
		return tag.RowsAffected() == 1, nil
	}
	b := &pgx.Batch{}
	b.Queue(stepAdvance, args...)
	b.Queue(stepCapture, id, st.To, st.Then, heldBy(st.Hold))
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	adv, err := br.Exec()
	if err != nil {
		return false, fmt.Errorf("step run %d %s → %s: %w", id, st.From, st.To, err)
	}
	n := adv.RowsAffected()
	tag, err := br.Exec()
	if err != nil {
		return false, fmt.Errorf("step run %d: capture for %s: %w", id, st.Then, err)
	}
	if err := br.Close(); err != nil {
		return false, fmt.Errorf("step run %d: %w", id, err)
	}
	if n == 1 && tag.RowsAffected() != 1 {
		return false, fmt.Errorf("step run %d: advanced to %s but not captured for %s", id, st.To, st.Then)
	}
	return n == 1, nil
}

// GiveBack returns a run captured in from to the status before it, its
// claim lapsed, counting the return in attempts as Reap does: a stage
// whose result is refused however often it is saved ends FAILED after
// MaxReaps returns (the service's check) instead of being worked again
// for ever.
func (s *PipelineRuns) GiveBack(ctx context.Context, id int64, from memory.Status) (bool, error) {
	to, ok := memory.Before(from)
	if !ok {
		return false, fmt.Errorf("give run %d back: %s is no stage", id, from)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE pipeline_runs SET status = $3, attempts = attempts + 1, claimed_until = now(), updated_at = now()
WHERE id = $1 AND status = $2`, id, from, to)
	if err != nil {
		return false, fmt.Errorf("give run %d back from %s: %w", id, from, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ClaimFinished claims a COMPLETED or FAILED run that still has to be
// delivered, or archived, so only one orchestrator does it.
func (s *PipelineRuns) ClaimFinished(ctx context.Context, id int64, lease time.Duration, claimer string) (memory.PipelineRun, bool, error) {
	return scanRunOK(s.pool.QueryRow(ctx, `
UPDATE pipeline_runs r SET claimed_until = now() + $2 * interval '1 millisecond', claimed_by = NULLIF($3, '')
WHERE r.id = $1 AND r.status IN ('COMPLETED', 'FAILED')
  AND (r.delivered_at IS NULL OR (r.status = 'COMPLETED' AND r.archived_at IS NULL))
  AND (r.claimed_until IS NULL OR r.claimed_until < now())
RETURNING `+runColumns, id, lease.Milliseconds(), claimer), "claim finished run")
}

// markDelivered queues a finished run's messages ($2–$7) and records
// delivered_at in one statement, only while delivered_at is NULL: of two
// callers, one queues them. A FAILED run is closed by it.
var markDelivered = `
WITH d AS (
    UPDATE pipeline_runs SET delivered_at = now(), updated_at = now(),
        closed_at = CASE WHEN status = 'FAILED' THEN now() ELSE closed_at END
    ` + asyncFrom + `
    WHERE id = $1 AND status IN ('COMPLETED', 'FAILED') AND delivered_at IS NULL
    RETURNING pipeline_runs.id
), ` + queueRows(2, "d") + `
SELECT count(*) FROM d`

// MarkDelivered queues what the user is told of a finished run whose step
// did not (memory.Runs), committed asynchronously as memory.Step
// explains; false if it was queued already.
func (s *PipelineRuns) MarkDelivered(ctx context.Context, id int64, tell domain.Render[memory.PipelineRun]) (bool, error) {
	return s.changeRunAndQueue(ctx, markDelivered, id, tell.Of(memory.PipelineRun{ID: id}), "mark run %d delivered")
}

// changeRunAndQueue runs q, a statement that changes run id ($1) and, only
// if it did, queues msgs (queueRows' arrays, $2–$10), more following from
// $11; true if it changed the run. what names it in errors, with the run's
// id.
func (s *PipelineRuns) changeRunAndQueue(ctx context.Context, q string, id int64, msgs []domain.Message, what string, more ...any) (bool, error) {
	rows, err := queueArgs(msgs)
	if err != nil {
		return false, fmt.Errorf(what+": %w", id, err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, q, append(append([]any{id}, rows...), more...)...).Scan(&n); err != nil {
		return false, fmt.Errorf(what+": %w", id, err)
	}
	return n == 1, nil
}

// Archive is archivist signal 2: the summary (if any) into lsm_storage
// and archived_at in one statement, which also releases the finishing
// claim (archiving is the run's last write) and finds the user's next NEW
// run, so that the worker can start it without another round trip. Only a
// run whose answer is queued (delivered_at) is archived: the next run's
// answer is then queued after it. The same statement supersedes the
// memories the summary replaces (sum.Supersedes), only those of the run's
// user that are still current.
func (s *PipelineRuns) Archive(ctx context.Context, id int64, sum *memory.Summary) (memory.Ref, bool, error) {
	var bucketStart, bucketEnd *time.Time
	var text *string
	tags, sources, replaced := []string{}, []int64{}, []int64{}
	if sum != nil {
		bucketStart, bucketEnd, text = &sum.BucketStart, &sum.BucketEnd, &sum.Summary
		if sum.Tags != nil {
			tags = sum.Tags
		}
		if sum.SourceRunIDs != nil {
			sources = sum.SourceRunIDs
		}
		if sum.Supersedes != nil {
			replaced = sum.Supersedes
		}
	}
	return scanNextRun(s.pool.QueryRow(ctx, `
WITH a AS (
    UPDATE pipeline_runs SET archived_at = now(), closed_at = now(), updated_at = now(), claimed_until = NULL
    `+asyncFrom+`
    WHERE id = $1 AND status = 'COMPLETED' AND archived_at IS NULL AND delivered_at IS NOT NULL
    RETURNING user_id
), summary AS (
    INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary, source_run_ids)
    SELECT a.user_id, $2, $3, $4, $5, $6 FROM a WHERE $5::text IS NOT NULL
    RETURNING id, user_id
), superseded AS (
    UPDATE lsm_storage m SET invalid_at = now(), superseded_by = summary.id
    FROM summary
    WHERE m.user_id = summary.user_id AND m.id = ANY ($7::bigint[]) AND m.invalid_at IS NULL AND m.id <> summary.id
)
`+nextRunSQL("a"), id, bucketStart, bucketEnd, tags, text, sources, replaced), fmt.Sprintf("archive run %d", id))
}

// queueMessages writes outbox rows ($1–$6) on their own, committed
// asynchronously.
var queueMessages = `WITH ` + queueRows(1, asyncCommit) + ` SELECT 1`

// queuePlaceholder marks a RESPONDING run as having its placeholder and
// queues it, in one statement; committed without waiting for the disk like
// the rest of the stage's writes: a placeholder lost in a crash takes its
// mark with it, so the answer is then sent anew rather than as an edit of
// nothing.
var queuePlaceholder = `
WITH p AS (
    UPDATE pipeline_runs SET placeholder = true, updated_at = now()
    ` + asyncFrom + `
    WHERE id = $1 AND status = 'RESPONDING' AND NOT placeholder
    RETURNING pipeline_runs.id
), ` + queueRows(2, "p") + `
SELECT count(*) FROM p`

// tellWaiting marks a run as having told its user that it waits for the
// model and queues the notice, in one statement; committed without waiting
// for the disk like the rest of a stage's writes: a notice lost in a crash
// takes its mark with it, so the next wait tells again.
var tellWaiting = `
WITH w AS (
    UPDATE pipeline_runs SET wait_told = true, updated_at = now()
    ` + asyncFrom + `
    WHERE id = $1 AND status = $11 AND NOT wait_told
    RETURNING pipeline_runs.id
), ` + queueRows(2, "w") + `
SELECT count(*) FROM w`

// TellWaiting queues the notice that a run waits for the model, once
// (memory.Runs); false if it was told already or has left status.
func (s *PipelineRuns) TellWaiting(ctx context.Context, id int64, status memory.Status, msgs []domain.Message) (bool, error) {
	return s.changeRunAndQueue(ctx, tellWaiting, id, msgs, "tell run %d waits for the LLM", status)
}

// QueuePlaceholder queues the placeholder of a streamed answer
// (memory.Runs); false if the run has one already or left RESPONDING.
func (s *PipelineRuns) QueuePlaceholder(ctx context.Context, id int64, msgs []domain.Message) (bool, error) {
	return s.changeRunAndQueue(ctx, queuePlaceholder, id, msgs, "queue the placeholder of run %d")
}

// Release drops a finished run's claim.
func (s *PipelineRuns) Release(ctx context.Context, id int64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE pipeline_runs SET claimed_until = NULL
WHERE id = $1 AND status IN ('COMPLETED', 'FAILED')`, id); err != nil {
		return fmt.Errorf("release run %d: %w", id, err)
	}
	return nil
}

func scanRefs(rows pgx.Rows, err error) ([]memory.Ref, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Ref, error) {
		var r memory.Ref
		err := row.Scan(&r.ID, &r.UserID, &r.Status)
		return r, err
	})
}

// Open lists runs with work left: not final, or final but not yet
// delivered or archived; oldest first.
func (s *PipelineRuns) Open(ctx context.Context, limit int) ([]memory.Ref, error) {
	refs, err := scanRefs(s.pool.Query(ctx, `SELECT id, user_id, status FROM pipeline_runs
WHERE closed_at IS NULL
ORDER BY id LIMIT $1`, limit))
	if err != nil {
		return nil, fmt.Errorf("open runs: %w", err)
	}
	return refs, nil
}

// Next is the user's oldest NEW run.
func (s *PipelineRuns) Next(ctx context.Context, userID int64) (memory.Ref, bool, error) {
	refs, err := scanRefs(s.pool.Query(ctx, `SELECT id, user_id, status FROM pipeline_runs
WHERE user_id = $1 AND closed_at IS NULL AND status = 'NEW' ORDER BY id LIMIT 1`, userID))
	if err != nil {
		return memory.Ref{}, false, fmt.Errorf("next run: %w", err)
	}
	if len(refs) == 0 {
		return memory.Ref{}, false, nil
	}
	return refs[0], true, nil
}

// Reap returns runs held in a capturing status past their lease to the
// status before it, counting it in attempts; a run already returned
// maxReaps times is FAILED instead.
func (s *PipelineRuns) Reap(ctx context.Context, maxReaps int) ([]memory.Ref, []memory.Ref, error) {
	rows, err := s.pool.Query(ctx, `
WITH stalled AS (
    SELECT id FROM pipeline_runs
    WHERE closed_at IS NULL AND status IN ('ANALYZING', 'ASSEMBLING', 'RESPONDING') AND claimed_until < now()
    FOR UPDATE SKIP LOCKED
)
UPDATE pipeline_runs r SET
    status = CASE WHEN r.attempts >= $1 THEN 'FAILED'
                  WHEN r.status = 'ANALYZING' THEN 'NEW'
                  WHEN r.status = 'ASSEMBLING' THEN 'ANALYZED'
                  ELSE 'READY' END,
    attempts = CASE WHEN r.attempts >= $1 THEN r.attempts ELSE r.attempts + 1 END,
    error_message = CASE WHEN r.attempts >= $1
        THEN 'reaper: stalled in ' || r.status || ' after ' || r.attempts || ' returns' ELSE r.error_message END,
    claimed_until = NULL, updated_at = now()
FROM stalled WHERE r.id = stalled.id
RETURNING r.id, r.user_id, r.status`, maxReaps)
	refs, err := scanRefs(rows, err)
	if err != nil {
		return nil, nil, fmt.Errorf("reap runs: %w", err)
	}
	var returned, failed []memory.Ref
	for _, r := range refs {
		if r.Status == memory.Failed {
			failed = append(failed, r)
		} else {
			returned = append(returned, r)
		}
	}
	return returned, failed, nil
}

// Backlog counts runs waiting in NEW.
func (s *PipelineRuns) Backlog(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pipeline_runs WHERE closed_at IS NULL AND status = 'NEW'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("memory backlog: %w", err)
	}
	return n, nil
}

// RequestStop marks the user's run whose answer is being written as
// stopped by them (memory.Runs), and tells every replica on the pipeline's
// channel, in the same statement, so the one writing it cuts the model's
// call short. False when no such run is RESPONDING (done already, another
// user's, stopped before).
func (s *PipelineRuns) RequestStop(ctx context.Context, id, userID int64) (bool, error) {
	var n int
	err := s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE pipeline_runs SET stop_requested_at = now()
    WHERE id = $1 AND user_id = $2 AND status = 'RESPONDING' AND stop_requested_at IS NULL
    RETURNING id
)
SELECT count(*) FROM (SELECT pg_notify($3, json_build_object('id', id, 'stop', true)::text) FROM r) told`,
		id, userID, memory.Channel).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("stop run %d: %w", id, err)
	}
	return n > 0, nil
}
