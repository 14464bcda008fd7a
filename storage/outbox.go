package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
)

// outboxBody is a row's body column: what a Bot API call needs beyond the chat.
type outboxBody struct {
	Text    string            `json:"text"`
	Buttons [][]domain.Button `json:"buttons,omitempty"`
	ReplyTo int               `json:"reply_to,omitempty"`
	IfGone  string            `json:"if_gone,omitempty"`
}

// EnqueueMessages writes messages to the outbox on their own (a state
// change with nothing to write alongside, or a test).
func (s *Store) EnqueueMessages(ctx context.Context, msgs ...domain.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	sql, args, err := insertMessagesSQL(msgs)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("enqueue %d messages: %w", len(msgs), err)
	}
	return nil
}

// enqueueTx writes messages in the caller's transaction, so they exist
// exactly when the state change that causes them commits.
func enqueueTx(ctx context.Context, tx pgx.Tx, msgs []domain.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	sql, args, err := insertMessagesSQL(msgs)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("enqueue %d messages: %w", len(msgs), err)
	}
	return nil
}

// insertOutboxSQL inserts rows from parallel arrays; WITH ORDINALITY keeps
// the caller's order in the ids, which is the order of delivery.
const insertOutboxSQL = `
INSERT INTO outbox (chat_id, kind, ref, msg_key, edit, body)
SELECT chat_id, kind, ref, msg_key, edit, body
FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::bool[], $6::jsonb[])
     WITH ORDINALITY AS m(chat_id, kind, ref, msg_key, edit, body, n)
ORDER BY n`

func insertMessagesSQL(msgs []domain.Message) (string, []any, error) {
	chats := make([]int64, len(msgs))
	kinds := make([]string, len(msgs))
	refs := make([]int64, len(msgs))
	keys := make([]string, len(msgs))
	edits := make([]bool, len(msgs))
	bodies := make([]string, len(msgs))
	for i, m := range msgs {
		if m.ChatID == 0 || m.Kind == "" || (m.Edit && m.Key == "") {
			return "", nil, fmt.Errorf("enqueue message %d: chat, kind and (for an edit) key are required", i)
		}
		b, err := json.Marshal(outboxBody{Text: m.Text, Buttons: m.Buttons, ReplyTo: m.ReplyTo, IfGone: m.IfGone})
		if err != nil {
			return "", nil, fmt.Errorf("enqueue message %d: %w", i, err)
		}
		chats[i], kinds[i], refs[i], keys[i], edits[i], bodies[i] = m.ChatID, m.Kind, m.Ref, m.Key, m.Edit, string(b)
	}
	return insertOutboxSQL, []any{chats, kinds, refs, keys, edits, bodies}, nil
}

// ClaimOutbox claims up to n rows that are due, at most one per chat and
// only the oldest pending row of its chat, so rows of one chat go out in
// the order they were written even across replicas: the next row of a chat
// becomes claimable only once the one before it is done. A claim lasts
// lease; a sender that dies leaves its rows to be claimed again after it.
func (s *Store) ClaimOutbox(ctx context.Context, n int, lease time.Duration) ([]domain.Queued, error) {
	const q = `
WITH heads AS (
    SELECT DISTINCT ON (chat_id) id FROM outbox WHERE state = 'pending' ORDER BY chat_id, id
), due AS (
    SELECT o.id FROM outbox o JOIN heads h ON h.id = o.id
    WHERE o.state = 'pending' AND o.not_before <= now()
      AND (o.claimed_until IS NULL OR o.claimed_until < now())
    ORDER BY o.not_before, o.id
    LIMIT $1
    FOR UPDATE OF o SKIP LOCKED
)
UPDATE outbox o SET claimed_until = now() + $2 * interval '1 microsecond',
    claim_token = gen_random_uuid(), attempts = o.attempts + 1
FROM due WHERE o.id = due.id
RETURNING o.id, o.chat_id, o.kind, o.ref, o.msg_key, o.edit, o.body, o.attempts, o.claim_token::text, o.created_at,
    COALESCE((SELECT t.message_id FROM outbox t
              WHERE o.edit AND t.chat_id = o.chat_id AND t.msg_key = o.msg_key AND t.msg_key <> ''
                AND t.message_id IS NOT NULL
              ORDER BY t.id DESC LIMIT 1), 0),
    EXISTS (SELECT 1 FROM unreachable_chats u WHERE u.chat_id = o.chat_id),
    o.edit AND EXISTS (SELECT 1 FROM outbox n
              WHERE n.chat_id = o.chat_id AND n.state = 'pending' AND n.edit AND n.msg_key = o.msg_key AND n.id > o.id)`
	rows, err := s.pool.Query(ctx, q, n, micros(lease))
	if err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	defer rows.Close()
	var out []domain.Queued
	for rows.Next() {
		var r domain.Queued
		var raw []byte
		var target int64
		if err := rows.Scan(&r.ID, &r.ChatID, &r.Kind, &r.Ref, &r.Key, &r.Edit, &raw, &r.Attempts, &r.Token,
			&r.CreatedAt, &target, &r.Unreachable, &r.Superseded); err != nil {
			return nil, fmt.Errorf("claim outbox: %w", err)
		}
		var b outboxBody
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("claim outbox: row %d body: %w", r.ID, err)
		}
		r.Text, r.Buttons, r.ReplyTo, r.IfGone = b.Text, b.Buttons, b.ReplyTo, b.IfGone
		r.Target = int(target)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim outbox: %w", err)
	}
	return out, nil
}

// deliveredSQL marks a row sent and, in the same statement, records the
// message where its workflow needs it: a vacancy card makes its match
// SENT_TO_USER (only from ANALYZED: a match decided meanwhile stays as it
// is), an offer, a proposal and a progress message get their message id.
const deliveredSQL = `
WITH done AS (
    UPDATE outbox SET state = 'sent', done_at = now(), message_id = NULLIF($3, 0),
        claimed_until = NULL, last_error = ''
    WHERE id = $1 AND claim_token = $2::uuid AND state = 'pending'
    RETURNING kind, ref, chat_id, message_id, edit
), match AS (
    UPDATE vacancy_matches m SET status = 'SENT_TO_USER', chat_id = done.chat_id, message_id = done.message_id,
        sent_at = now(), updated_at = now(), claimed_until = NULL, claim_token = NULL
    FROM done WHERE done.kind = 'vacancy' AND NOT done.edit AND m.id = done.ref AND m.status = 'ANALYZED'
      AND done.message_id IS NOT NULL
), offer AS (
    UPDATE offers f SET chat_id = done.chat_id, message_id = done.message_id
    FROM done WHERE done.kind = 'offer' AND NOT done.edit AND f.id = done.ref AND done.message_id IS NOT NULL
), proposal AS (
    UPDATE analysis_proposals p SET message_id = done.message_id
    FROM done WHERE done.kind = 'proposal' AND NOT done.edit AND p.id = done.ref AND done.message_id IS NOT NULL
), progress AS (
    UPDATE analysis_runs r SET progress_message_id = done.message_id
    FROM done WHERE done.kind = 'progress' AND r.id = done.ref AND done.message_id IS NOT NULL
      AND r.progress_message_id IS DISTINCT FROM done.message_id
)
SELECT count(*) FROM done`

// OutboxDelivered marks a claimed row sent with the message id Telegram
// returned (0 for an edit); false if the claim was lost meanwhile.
func (s *Store) OutboxDelivered(ctx context.Context, id int64, token string, messageID int) (bool, error) {
	var n int
	if err := s.pool.QueryRow(ctx, deliveredSQL, id, token, messageID).Scan(&n); err != nil {
		return false, fmt.Errorf("mark outbox row %d delivered: %w", id, err)
	}
	return n == 1, nil
}

// OutboxRetry returns a claimed row to the queue, due again after after;
// why is kept for /status and the logs. tried false (the row was only
// paced) takes back the attempt its claim counted.
func (s *Store) OutboxRetry(ctx context.Context, id int64, token string, after time.Duration, why string, tried bool) error {
	_, err := s.pool.Exec(ctx, `
UPDATE outbox SET claimed_until = NULL, claim_token = NULL,
    not_before = now() + $3 * interval '1 microsecond',
    last_error = CASE WHEN $5 THEN left($4, 500) ELSE last_error END,
    attempts = CASE WHEN $5 THEN attempts ELSE attempts - 1 END
WHERE id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token, micros(after), why, tried)
	if err != nil {
		return fmt.Errorf("retry outbox row %d: %w", id, err)
	}
	return nil
}

// OutboxEnd ends a claimed row without delivery: state is "dropped" (the
// recipient is unreachable, an edit lost its message) or "failed" (Telegram
// refused the request itself: a bug). False if the claim was lost.
func (s *Store) OutboxEnd(ctx context.Context, id int64, token, state, why string) (bool, error) {
	if state != "dropped" && state != "failed" {
		return false, fmt.Errorf("end outbox row %d: bad state %q", id, state)
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE outbox SET state = $3, done_at = now(), claimed_until = NULL, last_error = left($4, 500)
WHERE id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token, state, why)
	if err != nil {
		return false, fmt.Errorf("end outbox row %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// MarkUnreachable records that Telegram refuses chatID for good and drops
// every pending row of it (the caller's claimed one included), returning
// them so whatever waits on them can move on.
func (s *Store) MarkUnreachable(ctx context.Context, chatID int64, reason string) ([]domain.Dropped, error) {
	const q = `
WITH dropped AS (
    UPDATE outbox SET state = 'dropped', done_at = now(), claimed_until = NULL, last_error = left($2, 500)
    WHERE chat_id = $1 AND state = 'pending'
    RETURNING id, kind, ref
), mark AS (
    INSERT INTO unreachable_chats (chat_id, reason, dropped)
    VALUES ($1, left($2, 200), (SELECT count(*) FROM dropped))
    ON CONFLICT (chat_id) DO UPDATE SET dropped = unreachable_chats.dropped + EXCLUDED.dropped
)
SELECT id, kind, ref FROM dropped ORDER BY id`
	rows, err := s.pool.Query(ctx, q, chatID, reason)
	if err != nil {
		return nil, fmt.Errorf("mark chat %d unreachable: %w", chatID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.Dropped, error) {
		var d domain.Dropped
		return d, r.Scan(&d.ID, &d.Kind, &d.Ref)
	})
	if err != nil {
		return nil, fmt.Errorf("mark chat %d unreachable: %w", chatID, err)
	}
	return out, nil
}

// ClearUnreachable forgets the mark of chats that wrote to the bot again.
func (s *Store) ClearUnreachable(ctx context.Context, chatIDs ...int64) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM unreachable_chats WHERE chat_id = ANY($1)`, chatIDs); err != nil {
		return fmt.Errorf("clear unreachable chats: %w", err)
	}
	return nil
}

// Unreachable reports whether a chat is marked unreachable.
func (s *Store) Unreachable(ctx context.Context, chatID int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM unreachable_chats WHERE chat_id = $1)`, chatID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("unreachable chat %d: %w", chatID, err)
	}
	return ok, nil
}

// RecordThrottle notes a 429 Telegram answered, for /status's count over
// the last hour across replicas.
func (s *Store) RecordThrottle(ctx context.Context, chatID int64, retryAfter time.Duration) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO outbox_throttles (chat_id, retry_after_ms) VALUES ($1, $2)`,
		chatID, retryAfter.Milliseconds())
	if err != nil {
		return fmt.Errorf("record throttle: %w", err)
	}
	return nil
}

// OutboxStats is the delivery's state as /status shows it.
type OutboxStats struct {
	Pending     int64
	OldestAge   time.Duration // of the oldest pending row; 0 when none
	Failed      int64         // rows Telegram refused as bad requests, all time
	Dropped     int64         // rows dropped (unreachable recipients, lost edits), all time
	Throttled   int64         // 429 answers in the last hour
	Unreachable int64         // chats marked unreachable
}

// OutboxStats reads the backlog and the counters /status shows.
func (s *Store) OutboxStats(ctx context.Context) (OutboxStats, error) {
	var st OutboxStats
	var oldest float64
	err := s.pool.QueryRow(ctx, `
SELECT
    (SELECT count(*) FROM outbox WHERE state = 'pending'),
    COALESCE((SELECT extract(epoch FROM now() - min(created_at)) FROM outbox WHERE state = 'pending'), 0),
    (SELECT count(*) FROM outbox WHERE state = 'failed'),
    (SELECT count(*) FROM outbox WHERE state = 'dropped'),
    (SELECT count(*) FROM outbox_throttles WHERE at > now() - interval '1 hour'),
    (SELECT count(*) FROM unreachable_chats)`).Scan(&st.Pending, &oldest, &st.Failed, &st.Dropped, &st.Throttled, &st.Unreachable)
	if err != nil {
		return OutboxStats{}, fmt.Errorf("outbox stats: %w", err)
	}
	st.OldestAge = time.Duration(oldest * float64(time.Second))
	return st, nil
}

// PruneOutbox deletes rows done longer than keep ago, in batches of batch
// rows so no statement holds many locks, and throttle records older than a
// day; the rows deleted. A delivered send whose key a pending edit still
// needs is kept.
func (s *Store) PruneOutbox(ctx context.Context, keep time.Duration, batch int) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, `
DELETE FROM outbox WHERE id IN (
    SELECT o.id FROM outbox o
    WHERE o.state <> 'pending' AND o.done_at < now() - $1 * interval '1 microsecond'
      AND NOT (o.msg_key <> '' AND EXISTS (SELECT 1 FROM outbox e
               WHERE e.state = 'pending' AND e.edit AND e.chat_id = o.chat_id AND e.msg_key = o.msg_key))
    ORDER BY o.done_at LIMIT $2)`, micros(keep), batch)
		if err != nil {
			return total, fmt.Errorf("prune outbox: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(batch) || ctx.Err() != nil {
			break
		}
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM outbox_throttles WHERE at < now() - interval '1 day'`); err != nil {
		return total, fmt.Errorf("prune throttles: %w", err)
	}
	return total, nil
}
