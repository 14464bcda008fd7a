package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/memory"
)

// The memory chat's privacy: /export and /incognito (Memories), and the
// closing of incognito runs (PipelineRuns). memory_settings holds a user's
// incognito and their last export's request, and /forget deletes it.

// notIncognitoLog keeps a raw_logs row (aliased l) only if no incognito
// run wrote it: an incognito run's answer is logged with its step and
// erased when the run is closed, and nothing may show it in between.
const notIncognitoLog = `NOT EXISTS (SELECT 1 FROM pipeline_runs p
    WHERE p.id = (l.log_data->>'run_id')::bigint AND p.incognito)`

// requestExportSQL records an export's request and queues its rows ($4–$12,
// queueRows) in one statement, only when the user has something to
// export, this command ($2) was not handled already and the last export
// is at least $3 µs old. The outer SELECT reads the snapshot from before
// the statement: what the last request was.
var requestExportSQL = `
WITH has AS (
    SELECT EXISTS (SELECT 1 FROM lsm_storage WHERE user_id = $1)
        OR EXISTS (SELECT 1 FROM raw_logs l WHERE l.user_id = $1 AND ` + notIncognitoLog + `) AS found
), s AS (
    INSERT INTO memory_settings (user_id, exported_at, export_message_id)
    SELECT $1, now(), $2 FROM has WHERE has.found
    ON CONFLICT (user_id) DO UPDATE SET exported_at = now(), export_message_id = $2, updated_at = now()
    WHERE memory_settings.export_message_id IS DISTINCT FROM $2
      AND (memory_settings.exported_at IS NULL
           OR memory_settings.exported_at <= now() - $3 * interval '1 microsecond')
    RETURNING user_id
), ` + queueRows(4, "s") + `
SELECT (SELECT found FROM has), (SELECT count(*) FROM s),
       (SELECT m.export_message_id FROM memory_settings m WHERE m.user_id = $1),
       COALESCE((SELECT extract(epoch FROM m.exported_at + $3 * interval '1 microsecond' - now())
                 FROM memory_settings m WHERE m.user_id = $1), 0)`

// RequestExport queues an export's rows (tell) with the record of its
// request, or says why not (memory.Memories).
func (s *Memories) RequestExport(ctx context.Context, userID int64, messageID int, every time.Duration, tell []domain.Message) (memory.ExportRequest, error) {
	rows, err := queueArgs(tell)
	if err != nil {
		return memory.ExportRequest{}, fmt.Errorf("request export of user %d: %w", userID, err)
	}
	var (
		has     bool
		queued  int
		lastMsg *int
		left    float64
	)
	args := append([]any{userID, messageID, micros(every)}, rows...)
	if err := s.pool.QueryRow(ctx, requestExportSQL, args...).Scan(&has, &queued, &lastMsg, &left); err != nil {
		return memory.ExportRequest{}, fmt.Errorf("request export of user %d: %w", userID, err)
	}
	switch {
	case queued == 1:
		return memory.ExportRequest{Queued: true}, nil
	case lastMsg != nil && *lastMsg == messageID:
		return memory.ExportRequest{Repeated: true}, nil
	case !has:
		return memory.ExportRequest{Empty: true}, nil
	}
	wait := time.Duration(math.Ceil(left)) * time.Second
	return memory.ExportRequest{RetryIn: max(wait, time.Second)}, nil
}

// memoryExportSQL reads a user's memories and conversation up to $2, each
// as a JSON array, oldest first, and how many messages it left out: the
// conversation is its newest messages whose texts add up to at most $3
// bytes (the window sums them in the database, so the rest is never sent
// here). A memory superseded after $2 was current when the export was
// asked for, and reads so.
const memoryExportSQL = `
SELECT
    (SELECT COALESCE(json_agg(m ORDER BY m.id), '[]') FROM (
        SELECT l.id, l.time_bucket_start, l.time_bucket_end, l.tags, l.summary, l.source_run_ids, l.created_at,
               CASE WHEN l.invalid_at <= $2 THEN l.invalid_at END AS invalid_at,
               CASE WHEN l.invalid_at <= $2 THEN l.superseded_by END AS superseded_by
        FROM lsm_storage l WHERE l.user_id = $1 AND l.created_at <= $2) m),
    c.conversation, c.total - c.read
FROM (SELECT COALESCE(json_agg(json_build_object('type', w.type, 'text', w.text, 'run_id', w.run_id,
    'created_at', w.created_at) ORDER BY w.id) FILTER (WHERE w.upto <= $3), '[]') AS conversation,
    count(*) FILTER (WHERE w.upto <= $3) AS read, count(*) AS total
    FROM (
        SELECT l.id, l.log_type AS type, COALESCE(l.log_data->>'text', '') AS text,
               COALESCE((l.log_data->>'run_id')::bigint, 0) AS run_id, l.created_at,
               sum(octet_length(COALESCE(l.log_data->>'text', ''))) OVER (ORDER BY l.id DESC) AS upto
        FROM raw_logs l WHERE l.user_id = $1 AND l.created_at <= $2 AND ` + notIncognitoLog + `) w) c`

// Export reads what an export asked for at asOf holds: the user, and
// their memories and conversation written by then, in one statement so the
// two agree (memory.Memories). A user gone since (/forget) has an
// empty export.
func (s *Memories) Export(ctx context.Context, userID int64, asOf time.Time, textBudget int) (memory.Export, error) {
	out := memory.Export{AsOf: asOf}
	u, err := (&Users{s.db}).Get(ctx, userID)
	if errors.Is(err, domain.ErrNotFound) {
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("export of user %d: %w", userID, err)
	}
	out.User = u
	var mems, logs []byte
	if err := s.pool.QueryRow(ctx, memoryExportSQL, userID, asOf, textBudget).Scan(&mems, &logs, &out.Omitted); err != nil {
		return out, fmt.Errorf("export of user %d: %w", userID, err)
	}
	jm, err := decodeSummaries(mems)
	if err != nil {
		return out, fmt.Errorf("export of user %d: %w", userID, err)
	}
	if out.Conversation, err = decodeLogs(logs); err != nil {
		return out, fmt.Errorf("export of user %d: %w", userID, err)
	}
	for _, m := range jm {
		e := memory.ExportedMemory{Memory: m.summary()}
		if m.InvalidAt != nil {
			e.SupersededAt = *m.InvalidAt
		}
		if m.SupersededBy != nil {
			e.SupersededBy = *m.SupersededBy
		}
		out.Memories = append(out.Memories, e)
	}
	return out, nil
}

// summaryJSON is an lsm_storage row as json_agg writes it
// (summaryColumns), with the time it stopped being true and what replaced
// it where a statement reads them.
type summaryJSON struct {
	ID           int64      `json:"id"`
	BucketStart  time.Time  `json:"time_bucket_start"`
	BucketEnd    time.Time  `json:"time_bucket_end"`
	Tags         []string   `json:"tags"`
	Summary      string     `json:"summary"`
	SourceRunIDs []int64    `json:"source_run_ids"`
	CreatedAt    time.Time  `json:"created_at"`
	InvalidAt    *time.Time `json:"invalid_at"`
	SupersededBy *int64     `json:"superseded_by"`
}

func (m summaryJSON) summary() memory.Summary {
	return memory.Summary{ID: m.ID, BucketStart: m.BucketStart, BucketEnd: m.BucketEnd,
		Tags: m.Tags, Summary: m.Summary, SourceRunIDs: m.SourceRunIDs, CreatedAt: m.CreatedAt}
}

// decodeSummaries reads a json_agg of summaryJSON rows.
func decodeSummaries(data []byte) ([]summaryJSON, error) {
	var out []summaryJSON
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("summaries: %w", err)
	}
	return out, nil
}

// decodeLogs reads a json_agg of raw_logs rows as type, text, run_id and
// created_at.
func decodeLogs(data []byte) ([]memory.LogEntry, error) {
	var rows []struct {
		Type      string    `json:"type"`
		Text      string    `json:"text"`
		RunID     int64     `json:"run_id"`
		CreatedAt time.Time `json:"created_at"`
	}
	if err := json.Unmarshal(data, &rows); err != nil {
		return nil, fmt.Errorf("raw logs: %w", err)
	}
	var out []memory.LogEntry
	for _, l := range rows {
		out = append(out, memory.LogEntry{Type: l.Type, Text: l.Text, RunID: l.RunID, CreatedAt: l.CreatedAt})
	}
	return out, nil
}

// SetIncognito sets a user's incognito ($3; NULL toggles it) once
// per command message ($2): the same command handled again changes
// nothing and reads the state the first handling left (memory.Memories).
func (s *Memories) SetIncognito(ctx context.Context, userID int64, messageID int, set *bool) (memory.Incognito, error) {
	var st memory.Incognito
	var before bool
	err := s.pool.QueryRow(ctx, `
WITH s AS (
    INSERT INTO memory_settings (user_id, incognito, incognito_message_id)
    VALUES ($1, COALESCE($3::boolean, true), $2)
    ON CONFLICT (user_id) DO UPDATE
        SET incognito = COALESCE($3::boolean, NOT memory_settings.incognito), incognito_message_id = $2, updated_at = now()
    WHERE memory_settings.incognito_message_id IS DISTINCT FROM $2
    RETURNING incognito
)
SELECT COALESCE((SELECT incognito FROM s), (SELECT m.incognito FROM memory_settings m WHERE m.user_id = $1), false),
       COALESCE((SELECT m.incognito FROM memory_settings m WHERE m.user_id = $1), false),
       EXISTS (SELECT 1 FROM s)`, userID, messageID, set).Scan(&st.On, &before, &st.Changed)
	if err != nil {
		return memory.Incognito{}, fmt.Errorf("set incognito of user %d: %w", userID, err)
	}
	st.Changed = st.Changed && st.On != before
	return st, nil
}

// ArchiveIncognito closes a finished incognito run whose answer
// (or failure notice) is queued: its texts erased (the failure keeps its
// stage's name), its raw logs deleted, archived if COMPLETED, the
// finishing claim released; and finds the user's next NEW run
// (memory.Runs). The outbox rows already hold what the user is
// told, and they keep no text once delivered (domain.Message.Ephemeral).
// It commits synchronously: an erasure a crash lost would not be retried
// for a FAILED run, which is closed already.
func (s *PipelineRuns) ArchiveIncognito(ctx context.Context, id int64) (memory.Ref, bool, error) {
	return scanNextRun(s.pool.QueryRow(ctx, `
WITH e AS (
    UPDATE pipeline_runs SET user_query = '', analysis_result = NULL, draft_context = NULL,
        final_context_payload = NULL, final_answer = CASE WHEN final_answer IS NULL THEN NULL ELSE '' END,
        error_message = split_part(error_message, ':', 1),
        archived_at = CASE WHEN status = 'COMPLETED' THEN now() ELSE archived_at END,
        closed_at = COALESCE(closed_at, now()), claimed_until = NULL, updated_at = now()
    WHERE id = $1 AND incognito AND status IN ('COMPLETED', 'FAILED') AND delivered_at IS NOT NULL
      AND (closed_at IS NULL OR user_query <> '')
    RETURNING id, user_id
), logs AS (
    DELETE FROM raw_logs l USING e WHERE l.user_id = e.user_id AND l.log_data->>'run_id' = e.id::text
)
`+nextRunSQL("e"), id), fmt.Sprintf("close incognito run %d", id))
}

// nextRunSQL ends a statement that closes a run: from the CTE named from
// (the closed run's one row, with its user_id) it selects the user and
// their oldest NEW run, which the worker that closed the run starts next.
func nextRunSQL(from string) string {
	return `SELECT ` + from + `.user_id, (SELECT p.id FROM pipeline_runs p
    WHERE p.user_id = ` + from + `.user_id AND p.closed_at IS NULL AND p.status = 'NEW' ORDER BY p.id LIMIT 1)
FROM ` + from
}

// scanNextRun reads nextRunSQL's row: the next run (ID 0 if none), and
// false when the statement closed nothing.
func scanNextRun(row pgx.Row, what string) (memory.Ref, bool, error) {
	var next memory.Ref
	var nextID *int64
	err := row.Scan(&next.UserID, &nextID)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Ref{}, false, nil
	}
	if err != nil {
		return memory.Ref{}, false, fmt.Errorf("%s: %w", what, err)
	}
	if nextID == nil {
		return memory.Ref{}, true, nil
	}
	next.ID, next.Status = *nextID, memory.New
	return next, true, nil
}
