package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"switchboard/domain"
)

// InboxChannel is notified when updates are stored: every replica's inbox
// workers wake on it (a hint; they also sweep on a timer).
const InboxChannel = "inbox"

// Inbox is the inbox aggregate: the updates Telegram gave us, each stored
// once, claimed by one worker at a time per chat and settled done, retried
// or failed (bot/intake.go and bot/ordered.go use it).
type Inbox struct{ *db }

// Inbox is the store of the inbox's updates.
func (s *Store) Inbox() *Inbox { return &Inbox{s.db} }

// Take stores updates in the inbox in one statement (so in one
// transaction) and notifies InboxChannel if any was new, with from (the
// storing replica's claimer name) as the payload: that replica has woken
// its own workers already, and its listener leaves the notification to
// the others (one claim per update fewer). An update already stored (the
// same update_id fetched again, or sent to two webhook replicas) is left as
// it is. The poller advances Telegram's offset, and a webhook answers, only
// after this returns nil.
func (in *Inbox) Take(ctx context.Context, from string, us []domain.InboxUpdate) error {
	if len(us) == 0 {
		return nil
	}
	ids := make([]int64, len(us))
	chats := make([]*int64, len(us))
	bodies := make([]string, len(us))
	refused := make([]*string, len(us))
	for i, u := range us {
		ids[i], bodies[i] = u.ID, string(u.Body)
		if u.HasChat {
			chats[i] = &us[i].Chat
		}
		if u.Refused != "" {
			refused[i] = &us[i].Refused
		}
	}
	// The data-modifying CTE runs whether or not the outer SELECT reads it,
	// and the NOTIFY is delivered at the statement's commit.
	_, err := in.pool.Exec(ctx, `
WITH ins AS (
    INSERT INTO inbox (update_id, chat_id, body, refused)
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::jsonb[], $4::text[])
    ON CONFLICT (update_id) DO NOTHING
    RETURNING 1)
SELECT pg_notify('`+InboxChannel+`', $5) WHERE EXISTS (SELECT 1 FROM ins)`, ids, chats, bodies, refused, from)
	if err != nil {
		return fmt.Errorf("store %d updates in the inbox: %w", len(us), err)
	}
	return nil
}

// Claim claims up to n updates for claimer, each the oldest pending
// update of its chat (nothing earlier of the chat is pending: a chat's
// updates are handled one at a time, in update_id order, across replicas),
// due (next_attempt_at) and not claimed by a live lease. A claim held past
// its lease (a dead or stalled replica) is taken over. Each claim counts as
// an attempt and gets a token the settling statements name.
func (in *Inbox) Claim(ctx context.Context, claimer string, n int, lease time.Duration) ([]domain.InboxUpdate, error) {
	rows, err := in.pool.Query(ctx, `
WITH c AS (
    SELECT i.update_id FROM inbox i
    WHERE i.state = 'pending' AND i.next_attempt_at <= now()
      AND (i.claimed_until IS NULL OR i.claimed_until < now())
      AND NOT EXISTS (SELECT 1 FROM inbox e
                      WHERE e.chat_id = i.chat_id AND e.state = 'pending' AND e.update_id < i.update_id)
    ORDER BY i.update_id
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
UPDATE inbox i SET claimed_by = $1, claim_token = gen_random_uuid(),
    claimed_until = now() + $3 * interval '1 millisecond', attempts = i.attempts + 1
FROM c WHERE i.update_id = c.update_id
RETURNING i.update_id, i.chat_id, i.body, i.attempts, i.claim_token::text, i.received_at, COALESCE(i.refused, '')`,
		claimer, n, lease.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("claim inbox updates: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.InboxUpdate, error) {
		var u domain.InboxUpdate
		var chat *int64
		if err := r.Scan(&u.ID, &chat, &u.Body, &u.Attempts, &u.Token, &u.ReceivedAt, &u.Refused); err != nil {
			return u, err
		}
		if chat != nil {
			u.Chat, u.HasChat = *chat, true
		}
		return u, nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim inbox updates: %w", err)
	}
	return out, nil
}

// Renew extends a claim still held by token; false: it was lost.
func (in *Inbox) Renew(ctx context.Context, id int64, token string, lease time.Duration) (bool, error) {
	return in.settle(ctx, "renew", `
UPDATE inbox SET claimed_until = now() + $3 * interval '1 millisecond'
WHERE update_id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token, lease.Milliseconds())
}

// An ended update keeps nothing of its sender (the body, the chat): what
// it said now lives where its handler put it, under that data's retention
// and /forget, and an inbox row kept a day for its update_id must not
// outlive either.

// Done marks a claimed update handled; false: the claim was lost
// (taken over after its lease) and the row is left to its new holder.
func (in *Inbox) Done(ctx context.Context, id int64, token string) (bool, error) {
	return in.settle(ctx, "done", `
UPDATE inbox SET state = 'done', done_at = now(), claimed_until = NULL, body = '{}', chat_id = NULL
WHERE update_id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token)
}

// Retry gives a claimed update back, due again after the backoff,
// keeping its place at the head of its chat. why is a handler's error,
// which may quote what the user or a service sent: cleaned, since a
// settle refused for it would hold the chat behind the update for good.
func (in *Inbox) Retry(ctx context.Context, id int64, token string, after time.Duration, why string) (bool, error) {
	return in.settle(ctx, "retry", `
UPDATE inbox SET claimed_by = NULL, claim_token = NULL, claimed_until = NULL,
    next_attempt_at = now() + $3 * interval '1 millisecond', last_error = $4
WHERE update_id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token, after.Milliseconds(), domain.CleanText(why))
}

// Failed ends a claimed update for good; its chat's next update
// becomes claimable.
func (in *Inbox) Failed(ctx context.Context, id int64, token, why string) (bool, error) {
	return in.settle(ctx, "fail", `
UPDATE inbox SET state = 'failed', done_at = now(), claimed_until = NULL, last_error = $3, body = '{}', chat_id = NULL
WHERE update_id = $1 AND claim_token = $2::uuid AND state = 'pending'`, id, token, domain.CleanText(why))
}

func (in *Inbox) settle(ctx context.Context, what, sql string, args ...any) (bool, error) {
	tag, err := in.pool.Exec(ctx, sql, args...)
	if err != nil {
		return false, fmt.Errorf("inbox %s update %v: %w", what, args[0], err)
	}
	return tag.RowsAffected() == 1, nil
}

// InboxStats is the inbox as /status and the tests see it.
type InboxStats struct {
	Pending, Done, Failed int64
	// OldestAge is how long the oldest pending update has waited (0: none).
	OldestAge time.Duration
	// FailedDay counts the updates failed in the last 24 hours.
	FailedDay int64
}

// Stats counts the inbox's rows by state (the ended ones are kept a
// day: the prune job's kind inbox).
func (in *Inbox) Stats(ctx context.Context) (InboxStats, error) {
	var st InboxStats
	var oldest float64
	err := in.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'done'),
       count(*) FILTER (WHERE state = 'failed'),
       COALESCE(extract(epoch FROM now() - min(received_at) FILTER (WHERE state = 'pending')), 0),
       count(*) FILTER (WHERE state = 'failed' AND done_at > now() - interval '1 day')
FROM inbox`).Scan(&st.Pending, &st.Done, &st.Failed, &oldest, &st.FailedDay)
	if err != nil {
		return st, fmt.Errorf("inbox stats: %w", err)
	}
	st.OldestAge = time.Duration(oldest * float64(time.Second))
	return st, nil
}

// AboutData reports whether err is PostgreSQL refusing what was written
// rather than failing to write it: a data exception (class 22: a character
// text or jsonb cannot hold, bytes that are not UTF-8, a malformed value), an
// integrity violation (class 23) or a program limit (class 54: a value too
// large, too deeply nested). The same write is refused however often it is
// tried, so a caller sets it aside instead of retrying it.
func AboutData(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

// Passing reports whether err is one that may go away by itself: the
// database unreachable or restarting, a connection lost, a deadline, a
// serialization failure or deadlock, a delivery not yet recorded
// (domain.ErrNotYetRecorded). An update that failed so is retried from the
// inbox; any other error is a bug or a refusal and is final.
func Passing(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	if errors.Is(err, domain.ErrNotYetRecorded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == "40001", code == "40P01": // serialization failure, deadlock
			return true
		case len(code) == 5 && code[:2] == "08": // connection exception
			return true
		case code == "57P01", code == "57P02", code == "57P03": // shutting down, crash, cannot connect now
			return true
		case code == "53300": // too many connections
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, net.ErrClosed)
}
