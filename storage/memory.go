package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/memory"
)

// The memory chat's repository (memory.Repository).
var _ memory.Repository = (*Store)(nil)

const runColumns = `r.id, r.user_id, r.chat_id, r.message_id, r.user_query, r.status, r.analysis_result,
COALESCE(r.draft_context, ''), COALESCE(r.final_context_payload, ''), COALESCE(r.final_answer, ''),
COALESCE(r.error_message, ''), r.attempts, r.delivered_at, r.archived_at, r.created_at,
(SELECT CASE WHEN u.language <> '' THEN u.language WHEN u.telegram_language <> '' THEN u.telegram_language ELSE 'en' END
 FROM users u WHERE u.id = r.user_id)`

func scanRun(row pgx.Row) (memory.Run, error) {
	var r memory.Run
	var analysis []byte
	var delivered, archived *time.Time
	var lang *string
	if err := row.Scan(&r.ID, &r.UserID, &r.ChatID, &r.MessageID, &r.Query, &r.Status, &analysis,
		&r.DraftContext, &r.FinalContext, &r.FinalAnswer, &r.ErrorMessage, &r.Attempts, &delivered, &archived,
		&r.CreatedAt, &lang); err != nil {
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
	if lang != nil {
		r.Lang = *lang
	}
	return r, nil
}

// scanRunOK maps "no row" to ok=false: a conditional update that found
// the run elsewhere.
func scanRunOK(row pgx.Row, what string) (memory.Run, bool, error) {
	r, err := scanRun(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Run{}, false, nil
	}
	if err != nil {
		return memory.Run{}, false, fmt.Errorf("%s: %w", what, err)
	}
	return r, true, nil
}

// SubmitRun is intake: the NEW run and archivist signal 1 (the query in
// raw_logs) in one transaction. ahead counts the user's earlier runs not
// yet archived or failed.
func (s *Store) SubmitRun(ctx context.Context, userID, chatID int64, messageID int, query string) (memory.Run, int, error) {
	// One statement, so one round trip and one commit per message.
	row := s.pool.QueryRow(ctx, `
WITH r AS (
    INSERT INTO pipeline_runs (user_id, chat_id, message_id, user_query) VALUES ($1, $2, $3, $4)
    RETURNING *
), logged AS (
    INSERT INTO raw_logs (user_id, log_type, log_data)
    SELECT $1, 'query', jsonb_build_object('text', $4::text, 'run_id', r.id) FROM r
)
SELECT `+runColumns+`,
       (SELECT count(*) FROM pipeline_runs p
        WHERE p.user_id = $1 AND p.status <> 'FAILED' AND p.archived_at IS NULL AND p.id < r.id)
FROM r`, userID, chatID, messageID, query)
	var r memory.Run
	var ahead int
	var analysis []byte
	var delivered, archived *time.Time
	var lang *string
	if err := row.Scan(&r.ID, &r.UserID, &r.ChatID, &r.MessageID, &r.Query, &r.Status, &analysis,
		&r.DraftContext, &r.FinalContext, &r.FinalAnswer, &r.ErrorMessage, &r.Attempts, &delivered, &archived,
		&r.CreatedAt, &lang, &ahead); err != nil {
		return memory.Run{}, 0, fmt.Errorf("submit run: %w", err)
	}
	r.Lang = "en"
	if lang != nil {
		r.Lang = *lang
	}
	return r, ahead, nil
}

// PipelineRun returns one run or domain.ErrNotFound.
func (s *Store) PipelineRun(ctx context.Context, id int64) (memory.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runColumns+` FROM pipeline_runs r WHERE r.id = $1`, id))
	if err != nil {
		return r, fmt.Errorf("run %d: %w", id, interpretError(err))
	}
	return r, nil
}

// CaptureRun starts a stage: from → to with a lease, in one statement. A
// NEW run is captured only when every earlier run of its user is archived
// or failed, which keeps one user's runs in order.
func (s *Store) CaptureRun(ctx context.Context, id int64, from, to memory.Status, lease time.Duration) (memory.Run, bool, error) {
	return scanRunOK(s.pool.QueryRow(ctx, `
UPDATE pipeline_runs r SET status = $3, claimed_until = now() + $4 * interval '1 millisecond', updated_at = now()
WHERE r.id = $1 AND r.status = $2
  AND ($2 <> 'NEW' OR NOT EXISTS (
      SELECT 1 FROM pipeline_runs p
      WHERE p.user_id = r.user_id AND p.id < r.id AND p.status <> 'FAILED' AND p.archived_at IS NULL))
RETURNING `+runColumns, id, from, to, lease.Milliseconds()), "capture run")
}

// AdvanceRun moves a run from → to in one conditional UPDATE, storing the
// stage's output and releasing the lease. Completing also logs the answer
// to raw_logs in the same statement.
func (s *Store) AdvanceRun(ctx context.Context, id int64, from, to memory.Status, ch memory.Change) (memory.Run, bool, error) {
	var analysis []byte
	if ch.Analysis != nil {
		var err error
		if analysis, err = json.Marshal(ch.Analysis); err != nil {
			return memory.Run{}, false, fmt.Errorf("advance run %d: %w", id, err)
		}
	}
	return scanRunOK(s.pool.QueryRow(ctx, `
WITH r AS (
    UPDATE pipeline_runs SET status = $3, updated_at = now(), claimed_until = NULL,
        analysis_result = COALESCE($4::jsonb, analysis_result),
        draft_context = COALESCE(NULLIF($5, ''), draft_context),
        final_context_payload = COALESCE(NULLIF($6, ''), final_context_payload),
        final_answer = COALESCE(NULLIF($7, ''), final_answer),
        error_message = COALESCE(NULLIF($8, ''), error_message)
    WHERE id = $1 AND status = $2
    RETURNING *
), logged AS (
    INSERT INTO raw_logs (user_id, log_type, log_data)
    SELECT user_id, 'answer', jsonb_build_object('text', final_answer, 'run_id', id) FROM r WHERE $3 = 'COMPLETED'
)
SELECT `+runColumns+` FROM r`, id, from, to, analysis, ch.DraftContext, ch.FinalContext, ch.FinalAnswer, ch.ErrorMessage),
		"advance run")
}

// ClaimFinished claims a COMPLETED or FAILED run that still has to be
// delivered, or archived, so only one orchestrator does it.
func (s *Store) ClaimFinished(ctx context.Context, id int64, lease time.Duration) (memory.Run, bool, error) {
	return scanRunOK(s.pool.QueryRow(ctx, `
UPDATE pipeline_runs r SET claimed_until = now() + $2 * interval '1 millisecond'
WHERE r.id = $1 AND r.status IN ('COMPLETED', 'FAILED')
  AND (r.delivered_at IS NULL OR (r.status = 'COMPLETED' AND r.archived_at IS NULL))
  AND (r.claimed_until IS NULL OR r.claimed_until < now())
RETURNING `+runColumns, id, lease.Milliseconds()), "claim finished run")
}

// MarkDelivered records that the user got the answer or the failure notice.
func (s *Store) MarkDelivered(ctx context.Context, id int64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE pipeline_runs SET delivered_at = now() WHERE id = $1 AND delivered_at IS NULL`, id); err != nil {
		return fmt.Errorf("mark run %d delivered: %w", id, err)
	}
	return nil
}

// ArchiveRun is archivist signal 2: the summary (if any) into lsm_storage
// and archived_at, in one transaction; false if it was archived already.
func (s *Store) ArchiveRun(ctx context.Context, id int64, sum *memory.Summary) (bool, error) {
	archived := false
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var userID int64
		// Also releases the finishing claim: archiving is the run's last write.
		err := tx.QueryRow(ctx, `UPDATE pipeline_runs SET archived_at = now(), updated_at = now(), claimed_until = NULL
WHERE id = $1 AND status = 'COMPLETED' AND archived_at IS NULL RETURNING user_id`, id).Scan(&userID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		archived = true
		if sum == nil {
			return nil
		}
		tags := sum.Tags
		if tags == nil {
			tags = []string{}
		}
		_, err = tx.Exec(ctx, `INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary, source_run_ids)
VALUES ($1, $2, $3, $4, $5, $6)`, userID, sum.BucketStart, sum.BucketEnd, tags, sum.Summary, sum.SourceRunIDs)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("archive run %d: %w", id, err)
	}
	return archived, nil
}

// ReleaseRun drops a finished run's claim.
func (s *Store) ReleaseRun(ctx context.Context, id int64) error {
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

// OpenRuns lists runs with work left: not final, or final but not yet
// delivered or archived; oldest first.
func (s *Store) OpenRuns(ctx context.Context, limit int) ([]memory.Ref, error) {
	refs, err := scanRefs(s.pool.Query(ctx, `SELECT id, user_id, status FROM pipeline_runs
WHERE (archived_at IS NULL AND status <> 'FAILED') OR (status = 'FAILED' AND delivered_at IS NULL)
ORDER BY id LIMIT $1`, limit))
	if err != nil {
		return nil, fmt.Errorf("open runs: %w", err)
	}
	return refs, nil
}

// NextRun is the user's oldest NEW run.
func (s *Store) NextRun(ctx context.Context, userID int64) (memory.Ref, bool, error) {
	refs, err := scanRefs(s.pool.Query(ctx, `SELECT id, user_id, status FROM pipeline_runs
WHERE user_id = $1 AND status = 'NEW' AND status <> 'FAILED' AND archived_at IS NULL ORDER BY id LIMIT 1`, userID))
	if err != nil {
		return memory.Ref{}, false, fmt.Errorf("next run: %w", err)
	}
	if len(refs) == 0 {
		return memory.Ref{}, false, nil
	}
	return refs[0], true, nil
}

// ReapRuns returns runs held in a capturing status past their lease to the
// status before it, counting it in attempts; a run already returned
// maxReaps times is FAILED instead.
func (s *Store) ReapRuns(ctx context.Context, maxReaps int) ([]memory.Ref, []memory.Ref, error) {
	rows, err := s.pool.Query(ctx, `
WITH stalled AS (
    SELECT id FROM pipeline_runs
    WHERE status IN ('ANALYZING', 'ASSEMBLING', 'RESPONDING') AND claimed_until < now()
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

// Summaries lists a user's long-term memory, newest first.
func (s *Store) Summaries(ctx context.Context, userID int64, limit int) ([]memory.Summary, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, time_bucket_start, time_bucket_end, tags, summary, source_run_ids, created_at
FROM lsm_storage WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("summaries of user %d: %w", userID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Summary, error) {
		var m memory.Summary
		err := row.Scan(&m.ID, &m.BucketStart, &m.BucketEnd, &m.Tags, &m.Summary, &m.SourceRunIDs, &m.CreatedAt)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("summaries of user %d: %w", userID, err)
	}
	return out, nil
}

// RecentLogs lists a user's raw logs, newest first.
func (s *Store) RecentLogs(ctx context.Context, userID int64, limit int) ([]memory.LogEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT log_type, COALESCE(log_data->>'text', ''),
COALESCE((log_data->>'run_id')::bigint, 0), created_at FROM raw_logs WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("raw logs of user %d: %w", userID, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.LogEntry, error) {
		var l memory.LogEntry
		err := row.Scan(&l.Type, &l.Text, &l.RunID, &l.CreatedAt)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("raw logs of user %d: %w", userID, err)
	}
	return out, nil
}

// ActivePrompt returns a role's active prompt or domain.ErrNotFound.
func (s *Store) ActivePrompt(ctx context.Context, role string) (memory.Prompt, error) {
	p := memory.Prompt{Role: role}
	err := s.pool.QueryRow(ctx, `SELECT prompt_template, version, is_active, updated_at FROM system_prompts
WHERE role_name = $1 AND is_active`, role).Scan(&p.Template, &p.Version, &p.Active, &p.UpdatedAt)
	if err != nil {
		return p, fmt.Errorf("prompt %s: %w", role, interpretError(err))
	}
	return p, nil
}

// ActivePrompts returns every role's active prompt template.
func (s *Store) ActivePrompts(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT role_name, prompt_template FROM system_prompts WHERE is_active`)
	if err != nil {
		return nil, fmt.Errorf("active prompts: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var role, tmpl string
		if err := rows.Scan(&role, &tmpl); err != nil {
			return nil, fmt.Errorf("active prompts: %w", err)
		}
		out[role] = tmpl
	}
	return out, rows.Err()
}

// SetPrompt stores a new active version of a role's prompt, keeping the
// old ones inactive.
func (s *Store) SetPrompt(ctx context.Context, role, template string) (memory.Prompt, error) {
	p := memory.Prompt{Role: role, Template: template, Active: true}
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		// Serializes concurrent /prompt of one role on the version number.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('prompt:' || $1, 0))`, role); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE system_prompts SET is_active = false WHERE role_name = $1 AND is_active`, role); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO system_prompts (role_name, prompt_template, version)
SELECT $1, $2, COALESCE(max(version), 0) + 1 FROM system_prompts WHERE role_name = $1
RETURNING version, updated_at`, role, template).Scan(&p.Version, &p.UpdatedAt)
	})
	if err != nil {
		return p, fmt.Errorf("set prompt %s: %w", role, err)
	}
	return p, nil
}

// Forget deletes a user's runs, raw logs and summaries.
func (s *Store) Forget(ctx context.Context, userID int64) (memory.Forgotten, error) {
	var f memory.Forgotten
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		for _, step := range []struct {
			q string
			n *int
		}{
			{`DELETE FROM pipeline_runs WHERE user_id = $1`, &f.Runs},
			{`DELETE FROM raw_logs WHERE user_id = $1`, &f.Logs},
			{`DELETE FROM lsm_storage WHERE user_id = $1`, &f.Summaries},
		} {
			tag, err := tx.Exec(ctx, step.q, userID)
			if err != nil {
				return err
			}
			*step.n = int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return f, fmt.Errorf("forget user %d: %w", userID, err)
	}
	return f, nil
}

// Backlog counts runs waiting in NEW.
func (s *Store) Backlog(ctx context.Context) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pipeline_runs WHERE status = 'NEW' AND archived_at IS NULL`).Scan(&n); err != nil {
		return 0, fmt.Errorf("memory backlog: %w", err)
	}
	return n, nil
}
