package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/memory"
)

// Memories is the long-term memory aggregate: the summaries (lsm_storage)
// and the questions the bot asks about them (memory_requests), and the
// user's privacy settings (memory_settings: /export and /incognito,
// memory_export.go). Every statement names the user, so an id of another
// user's memory, or of none, touches nothing.
type Memories struct{ *db }

// Memories is the store of the users' long-term memories.
func (s *Store) Memories() *Memories { return &Memories{s.db} }

var _ memory.Memories = (*Memories)(nil)

const summaryColumns = `id, time_bucket_start, time_bucket_end, tags, summary, source_run_ids, created_at`

// versionColumns are summaryColumns with the version fields: when the
// memory stopped being true, what replaced it, and what it replaced.
const versionColumns = summaryColumns + `, invalid_at, COALESCE(superseded_by, 0),
    ARRAY(SELECT p.id FROM lsm_storage p WHERE p.superseded_by = lsm_storage.id ORDER BY p.id)`

func collectSummaries(rows pgx.Rows, err error) ([]memory.Summary, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Summary, error) {
		var m memory.Summary
		err := row.Scan(&m.ID, &m.BucketStart, &m.BucketEnd, &m.Tags, &m.Summary, &m.SourceRunIDs, &m.CreatedAt)
		return m, err
	})
}

func collectVersions(rows pgx.Rows, err error) ([]memory.Summary, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Summary, error) {
		var m memory.Summary
		var invalid *time.Time
		err := row.Scan(&m.ID, &m.BucketStart, &m.BucketEnd, &m.Tags, &m.Summary, &m.SourceRunIDs, &m.CreatedAt,
			&invalid, &m.SupersededBy, &m.Supersedes)
		if invalid != nil {
			m.InvalidAt = *invalid
		}
		return m, err
	})
}

// Summaries lists a user's current memories, newest first.
func (s *Memories) Summaries(ctx context.Context, userID int64, limit int) ([]memory.Summary, error) {
	out, err := collectSummaries(s.pool.Query(ctx, `SELECT `+summaryColumns+`
FROM lsm_storage WHERE user_id = $1 AND invalid_at IS NULL ORDER BY id DESC LIMIT $2`, userID, limit))
	if err != nil {
		return nil, fmt.Errorf("summaries of user %d: %w", userID, err)
	}
	return out, nil
}

// Page is a page of the user's current memories, newest first, and
// how many current ones they have.
func (s *Memories) Page(ctx context.Context, userID int64, offset, limit int) ([]memory.Summary, int, error) {
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM lsm_storage WHERE user_id = $1 AND invalid_at IS NULL`,
		userID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("memories of user %d: %w", userID, err)
	}
	out, err := collectVersions(s.pool.Query(ctx, `SELECT `+versionColumns+`
FROM lsm_storage WHERE user_id = $1 AND invalid_at IS NULL ORDER BY id DESC OFFSET $2 LIMIT $3`, userID, offset, limit))
	if err != nil {
		return nil, 0, fmt.Errorf("memories of user %d: %w", userID, err)
	}
	return out, total, nil
}

// Versions lists the user's memories, current and superseded, newest
// first.
func (s *Memories) Versions(ctx context.Context, userID int64, limit int) ([]memory.Summary, error) {
	out, err := collectVersions(s.pool.Query(ctx, `SELECT `+versionColumns+`
FROM lsm_storage WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit))
	if err != nil {
		return nil, fmt.Errorf("memory versions of user %d: %w", userID, err)
	}
	return out, nil
}

// chainOf is a recursive CTE, "chain", of the version chains the user's
// memories $2 (an array) belong to: up superseded_by to each current
// version, then down to every version it replaced, directly or not.
const chainOf = `WITH RECURSIVE up AS (
    SELECT id, superseded_by FROM lsm_storage WHERE user_id = $1 AND id = ANY ($2::bigint[])
    UNION
    SELECT m.id, m.superseded_by FROM lsm_storage m JOIN up ON m.id = up.superseded_by
), chain AS (
    SELECT id FROM up WHERE superseded_by IS NULL
    UNION
    SELECT m.id FROM lsm_storage m JOIN chain ON m.superseded_by = chain.id
)`

// History is the version chain of one of the user's memories, newest
// first; empty if there is no such memory of theirs.
func (s *Memories) History(ctx context.Context, userID, id int64) ([]memory.Summary, error) {
	out, err := collectVersions(s.pool.Query(ctx, chainOf+`
SELECT `+versionColumns+` FROM lsm_storage WHERE user_id = $1 AND id IN (SELECT id FROM chain)
ORDER BY created_at DESC, id DESC`, userID, []int64{id}))
	if err != nil {
		return nil, fmt.Errorf("history of memory %d: %w", id, err)
	}
	return out, nil
}

// Delete deletes the version chains of the user's memories ids
// and every copy of their text, in one transaction (deleteMemoryChains).
func (s *Memories) Delete(ctx context.Context, userID int64, ids []int64) (memory.Erased, error) {
	var e memory.Erased
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		e, err = deleteMemoryChains(ctx, tx, userID, ids)
		return err
	})
	if err != nil {
		return memory.Erased{}, fmt.Errorf("delete memories of user %d: %w", userID, err)
	}
	return e, nil
}

// deleteMemoryChains erases memories for good. What goes (memory.Erased,
// and the bot's confirmation to the user, say the same):
//
//   - lsm_storage: every version of each memory's chain.
//   - pipeline_runs: the runs the versions were summarised from (their
//     source_run_ids: the user's message, the contexts, the answer).
//   - raw_logs: those runs' query and answer.
//   - outbox: the rows that carried those runs' answers and queue notes.
//   - Copies: the chain's texts and those runs' queries and answers (at
//     least minCopy characters, as written and HTML-escaped) are replaced by
//     deletedCopy in the user's other runs' draft and final contexts (the
//     summaries and recent messages they quoted) and in the outbox rows of
//     their chat (/memory's pages, this very confirmation).
//
// What stays: the user's other exchanges, which may speak of the same
// thing in their own words, and the messages in the Telegram chat itself,
// which are the user's.
func deleteMemoryChains(ctx context.Context, tx pgx.Tx, userID int64, ids []int64) (memory.Erased, error) {
	var e memory.Erased
	if len(ids) == 0 {
		return e, nil
	}
	type version struct {
		summary string
		runs    []int64
	}
	var texts []string
	var runs []int64
	var v version
	rows, err := tx.Query(ctx, chainOf+`
DELETE FROM lsm_storage m USING chain WHERE m.id = chain.id AND m.user_id = $1
RETURNING m.summary, m.source_run_ids`, userID, ids)
	if err != nil {
		return e, fmt.Errorf("memories: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&v.summary, &v.runs}, func() error {
		e.Memories++
		texts = append(texts, v.summary)
		runs = append(runs, v.runs...)
		return nil
	}); err != nil {
		return e, fmt.Errorf("memories: %w", err)
	}
	if e.Memories == 0 {
		return e, nil
	}
	var query, answer string
	rows, err = tx.Query(ctx, `DELETE FROM pipeline_runs WHERE user_id = $1 AND id = ANY ($2::bigint[]) AND closed_at IS NOT NULL
RETURNING user_query, COALESCE(final_answer, '')`, userID, runs)
	if err != nil {
		return e, fmt.Errorf("source runs: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&query, &answer}, func() error {
		e.Runs++
		texts = append(texts, query, answer)
		return nil
	}); err != nil {
		return e, fmt.Errorf("source runs: %w", err)
	}
	var logged string
	rows, err = tx.Query(ctx, `DELETE FROM raw_logs WHERE user_id = $1 AND (log_data->>'run_id')::bigint = ANY ($2::bigint[])
RETURNING COALESCE(log_data->>'text', '')`, userID, runs)
	if err != nil {
		return e, fmt.Errorf("raw logs of source runs: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&logged}, func() error {
		e.Logs++
		texts = append(texts, logged)
		return nil
	}); err != nil {
		return e, fmt.Errorf("raw logs of source runs: %w", err)
	}
	// A private chat's id is its user's; an answer that streamed into a
	// placeholder left its versions as memory_draft rows.
	tag, err := tx.Exec(ctx, `DELETE FROM outbox WHERE chat_id = $1 AND kind IN ('memory_answer', 'memory_note', 'memory_draft')
  AND ref = ANY ($2::bigint[])`, userID, runs)
	if err != nil {
		return e, fmt.Errorf("answers of source runs: %w", err)
	}
	e.Messages = int(tag.RowsAffected())
	c := newCopies(texts)
	if len(c.texts) == 0 {
		return e, nil
	}
	if err := scrubRunContexts(ctx, tx, userID, c); err != nil {
		return e, err
	}
	return e, scrubOutbox(ctx, tx, `chat_id = $1`, userID, c)
}

// scrubRunContexts replaces the copies in the user's runs' draft and final
// contexts.
func scrubRunContexts(ctx context.Context, tx pgx.Tx, userID int64, c copies) error {
	return c.scrubRows(ctx, tx, userID, "run contexts quoting memories", "run",
		`SELECT id, COALESCE(draft_context, ''), COALESCE(final_context_payload, '') FROM pipeline_runs
WHERE user_id = $1 AND (draft_context LIKE ANY ($2) OR final_context_payload LIKE ANY ($2))
FOR UPDATE`,
		`UPDATE pipeline_runs SET draft_context = NULLIF($2, ''), final_context_payload = NULLIF($3, '')
WHERE id = $1`)
}

// AskCorrection records that the user's next text corrects their
// current memory id, replacing a correction waiting; expired requests of
// theirs go on the way.
func (s *Memories) AskCorrection(ctx context.Context, userID, id int64, ttl time.Duration) (memory.Summary, bool, error) {
	out, err := collectSummaries(s.pool.Query(ctx, `
WITH m AS (
    SELECT `+summaryColumns+` FROM lsm_storage WHERE id = $2 AND user_id = $1 AND invalid_at IS NULL
), expired AS (
    DELETE FROM memory_requests WHERE user_id = $1 AND kind <> 'correct' AND expires_at < now()
), asked AS (
    INSERT INTO memory_requests (user_id, kind, memory_ids, expires_at)
    SELECT $1, 'correct', ARRAY[m.id], now() + $3 * interval '1 millisecond' FROM m
    ON CONFLICT (user_id) WHERE kind = 'correct'
    DO UPDATE SET memory_ids = EXCLUDED.memory_ids, expires_at = EXCLUDED.expires_at, created_at = now()
)
SELECT `+summaryColumns+` FROM m`, userID, id, ttl.Milliseconds()))
	if err != nil {
		return memory.Summary{}, false, fmt.Errorf("ask correction of memory %d: %w", id, err)
	}
	if len(out) == 0 {
		return memory.Summary{}, false, nil
	}
	return out[0], true, nil
}

// CancelCorrection drops the user's correction of memory id.
func (s *Memories) CancelCorrection(ctx context.Context, userID, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM memory_requests
WHERE user_id = $1 AND kind = 'correct' AND memory_ids[1] = $2 AND expires_at > now()`, userID, id)
	if err != nil {
		return false, fmt.Errorf("cancel correction of memory %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CorrectionWaiting says whether the user has a correction waiting.
func (s *Memories) CorrectionWaiting(ctx context.Context, userID int64) (bool, error) {
	var waiting bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memory_requests
WHERE user_id = $1 AND kind = 'correct' AND expires_at > now())`, userID).Scan(&waiting); err != nil {
		return false, fmt.Errorf("correction of user %d: %w", userID, err)
	}
	return waiting, nil
}

// TakeCorrection consumes the user's correction, if one is waiting,
// and saves fix (its text and bucket) as the new current version of the
// memory, with that memory's tags, superseding it: one statement. The
// memory is locked and checked current, so a correction racing the
// archivist (or a deletion) supersedes nothing twice.
//
// The new version names messageID, the private message it came from
// (0: none): the same message again finds the version it saved, returned
// as saved, and consumes nothing.
func (s *Memories) TakeCorrection(ctx context.Context, userID int64, messageID int, fix memory.Summary) (memory.Correction, error) {
	var taken, live bool
	var saved *int64
	var created *time.Time
	var tags []string
	var summary *string
	err := s.pool.QueryRow(ctx, `
WITH done AS (
    SELECT id, tags, created_at, summary FROM lsm_storage
    WHERE user_id = $1 AND source_message_id = NULLIF($5, 0)
), req AS (
    DELETE FROM memory_requests WHERE user_id = $1 AND kind = 'correct' AND NOT EXISTS (SELECT 1 FROM done)
    RETURNING memory_ids[1] AS memory_id, expires_at > now() AS live
), old AS (
    SELECT m.id, m.tags FROM lsm_storage m JOIN req ON m.id = req.memory_id AND req.live
    WHERE m.user_id = $1 AND m.invalid_at IS NULL
    FOR UPDATE OF m
), fixed AS (
    INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary, source_message_id)
    SELECT $1, $2, $3, old.tags, $4, NULLIF($5, 0) FROM old
    RETURNING id, tags, created_at, summary
), superseded AS (
    UPDATE lsm_storage m SET invalid_at = now(), superseded_by = fixed.id
    FROM fixed, old WHERE m.id = old.id
), out AS (
    SELECT * FROM fixed UNION ALL SELECT * FROM done
)
SELECT EXISTS (SELECT 1 FROM req) OR EXISTS (SELECT 1 FROM done),
       COALESCE((SELECT live FROM req), EXISTS (SELECT 1 FROM done)),
       (SELECT id FROM out), (SELECT tags FROM out), (SELECT created_at FROM out), (SELECT summary FROM out)`,
		userID, fix.BucketStart, fix.BucketEnd, fix.Summary, messageID).Scan(&taken, &live, &saved, &tags, &created, &summary)
	if err != nil {
		return memory.Correction{}, fmt.Errorf("take correction of user %d: %w", userID, err)
	}
	switch {
	case !taken:
		return memory.Correction{Outcome: memory.CorrectionNone}, nil
	case !live:
		return memory.Correction{Outcome: memory.CorrectionExpired}, nil
	case saved == nil:
		return memory.Correction{Outcome: memory.CorrectionGone}, nil
	}
	fix.ID, fix.Tags, fix.CreatedAt, fix.Summary = *saved, tags, *created, *summary
	return memory.Correction{Outcome: memory.CorrectionSaved, New: fix}, nil
}

// AskForget records the memories a "forget what I told you" found,
// named by messageID, the private message that asked (0: none); expired
// requests of the user's go on the way. It returns the request and the
// ids it names: the message's own request if it made one before (its
// update handled again), as it was made, without recording another.
func (s *Memories) AskForget(ctx context.Context, userID int64, messageID int, ids []int64, ttl time.Duration) (int64, []int64, error) {
	var id int64
	var asked []int64
	err := s.pool.QueryRow(ctx, `
WITH expired AS (
    DELETE FROM memory_requests WHERE user_id = $1 AND kind = 'forget' AND expires_at < now()
), before AS (
    SELECT id, memory_ids FROM memory_requests
    WHERE user_id = $1 AND kind = 'forget' AND source_message_id = NULLIF($4, 0)
), made AS (
    INSERT INTO memory_requests (user_id, kind, memory_ids, expires_at, source_message_id)
    SELECT $1, 'forget', $2, now() + $3 * interval '1 millisecond', NULLIF($4, 0)
    WHERE NOT EXISTS (SELECT 1 FROM before)
    RETURNING id, memory_ids
)
SELECT id, memory_ids FROM made UNION ALL SELECT id, memory_ids FROM before`,
		userID, ids, ttl.Milliseconds(), messageID).Scan(&id, &asked)
	if err != nil {
		return 0, nil, fmt.Errorf("ask to forget memories of user %d: %w", userID, err)
	}
	return id, asked, nil
}

// Forget consumes the user's request and deletes its memories
// (deleteMemoryChains), in one transaction; false if the request is gone,
// expired or not theirs.
func (s *Memories) Forget(ctx context.Context, userID, requestID int64) (memory.Erased, bool, error) {
	var e memory.Erased
	var ok bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		e, ok = memory.Erased{}, false
		var ids []int64
		var live bool
		err := tx.QueryRow(ctx, `DELETE FROM memory_requests WHERE id = $2 AND user_id = $1 AND kind = 'forget'
RETURNING memory_ids, expires_at > now()`, userID, requestID).Scan(&ids, &live)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
			return nil // an expired request goes, unanswered
		}
		if err != nil {
			return fmt.Errorf("request: %w", err)
		}
		ok = true
		e, err = deleteMemoryChains(ctx, tx, userID, ids)
		return err
	})
	if err != nil {
		return memory.Erased{}, false, fmt.Errorf("forget memories of request %d: %w", requestID, err)
	}
	return e, ok, nil
}

// DropForgetRequest drops the user's request unanswered, expired or not.
func (s *Memories) DropForgetRequest(ctx context.Context, userID, requestID int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM memory_requests
WHERE id = $2 AND user_id = $1 AND kind = 'forget'`, userID, requestID)
	if err != nil {
		return false, fmt.Errorf("drop request %d: %w", requestID, err)
	}
	return tag.RowsAffected() == 1, nil
}
