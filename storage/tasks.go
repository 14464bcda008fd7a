package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/tasks"
)

// Tasks is the approved tasks' way out (domain/tasks): the groups'
// destinations, the pushes (written in an approval's transaction,
// enqueuePushes), the trackers' pauses and the members' GitHub logins.
type Tasks struct{ *db }

// Tasks is the store of the tasks' pushes.
func (s *Store) Tasks() *Tasks { return &Tasks{s.db} }

// SetDestination sets chat's destination; kind "" removes it (its tasks
// stay in the bot). Pushes already queued keep theirs.
func (s *Tasks) SetDestination(ctx context.Context, d tasks.Destination, by int64) error {
	var err error
	if d.Kind == "" {
		_, err = s.pool.Exec(ctx, `DELETE FROM task_destinations WHERE chat_id = $1`, d.ChatID)
	} else {
		_, err = s.pool.Exec(ctx, `
INSERT INTO task_destinations (chat_id, kind, target, push_on, set_by) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (chat_id) DO UPDATE SET kind = EXCLUDED.kind, target = EXCLUDED.target, push_on = EXCLUDED.push_on,
    set_by = EXCLUDED.set_by, set_at = now()`,
			d.ChatID, d.Kind, d.Target, d.PushOn(), by)
	}
	if err != nil {
		return fmt.Errorf("set the destination of chat %d: %w", d.ChatID, err)
	}
	return nil
}

// Destinations are every group's destination, by chat.
func (s *Tasks) Destinations(ctx context.Context) (map[int64]tasks.Destination, error) {
	rows, err := s.pool.Query(ctx, `SELECT chat_id, kind, target, push_on = 'close' FROM task_destinations`)
	if err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	out := map[int64]tasks.Destination{}
	var d tasks.Destination
	if _, err := pgx.ForEachRow(rows, []any{&d.ChatID, &d.Kind, &d.Target, &d.OnClose}, func() error {
		out[d.ChatID] = d
		return nil
	}); err != nil {
		return nil, fmt.Errorf("destinations: %w", err)
	}
	return out, nil
}

// enqueuePushes queues a push of each approved proposal of ids whose
// sources' groups have a destination that takes tasks as they are
// approved (the first such source's, by message), in the approval's
// transaction: the push exists exactly when the approval commits. A
// proposal queued already is left alone. A destination that waits for
// the run's close is queued by Close (pushesOnClose).
func enqueuePushes(ctx context.Context, tx pgx.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `
INSERT INTO task_pushes (proposal_id, chat_id, kind, target)
SELECT DISTINCT ON (s.proposal_id) s.proposal_id, d.chat_id, d.kind, d.target
FROM analysis_proposal_sources s
JOIN task_destinations d ON d.chat_id = s.chat_id AND d.push_on = 'approve'
JOIN analysis_proposals p ON p.id = s.proposal_id AND p.decision = 'approved'
WHERE s.proposal_id = ANY($1)
ORDER BY s.proposal_id, s.message_id
ON CONFLICT (proposal_id) DO NOTHING`, ids)
	if err != nil {
		return fmt.Errorf("queue the pushes of %d proposals: %w", len(ids), err)
	}
	return nil
}

// pushesOnClose is the CTE Close adds to its statement (the run it closed
// is r): a push of each approved proposal of the run whose group's
// destination waits for the close, in the close's transaction.
const pushesOnClose = `pushes AS (
    INSERT INTO task_pushes (proposal_id, chat_id, kind, target)
    SELECT DISTINCT ON (s.proposal_id) s.proposal_id, d.chat_id, d.kind, d.target
    FROM r
    JOIN analysis_proposals p ON p.run_id = r.id AND p.decision = 'approved'
    JOIN analysis_proposal_sources s ON s.proposal_id = p.id
    JOIN task_destinations d ON d.chat_id = s.chat_id AND d.push_on = 'close'
    ORDER BY s.proposal_id, s.message_id
    ON CONFLICT (proposal_id) DO NOTHING
)`

// Claim claims the oldest due push no pause holds, for lease: the task as
// its tracker receives it, its destination, and the claim's token; false
// when none is due.
func (s *Tasks) Claim(ctx context.Context, claimer string, lease time.Duration) (tasks.Push, bool, error) {
	var p tasks.Push
	var t tasks.Task
	var assignee string
	var decidedBy *int64
	var decidedAt *time.Time
	err := s.pool.QueryRow(ctx, `
WITH c AS (
    SELECT id FROM task_pushes tp
    WHERE state = 'pending' AND not_before <= now() AND (claimed_until IS NULL OR claimed_until < now())
      AND NOT EXISTS (SELECT 1 FROM task_pauses z WHERE (z.scope = tp.kind OR z.scope = tp.kind || ':' || tp.target) AND z.until > now())
    ORDER BY not_before, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
), u AS (
    UPDATE task_pushes tp SET claimed_until = now() + $1 * interval '1 microsecond', claim_token = gen_random_uuid(),
        claimed_by = NULLIF($2, ''), attempts = tp.attempts + 1
    FROM c WHERE tp.id = c.id
    RETURNING tp.id, tp.proposal_id, tp.chat_id, tp.kind, tp.target, tp.claim_token::text, tp.attempts, tp.file_anyway
)
SELECT u.id, u.proposal_id, u.chat_id, u.kind, u.target, u.claim_token, u.attempts, u.file_anyway,
       p.run_id, p.title, p.description, p.priority, p.assignee, p.deadline, p.decided_by, p.decided_at
FROM u JOIN analysis_proposals p ON p.id = u.proposal_id`, lease.Microseconds(), claimer).Scan(
		&p.ID, &t.ProposalID, &p.Destination.ChatID, &p.Destination.Kind, &p.Destination.Target, &p.Token, &p.Attempts, &p.FileAnyway,
		&t.RunID, &t.Title, &t.Description, &t.Priority, &assignee, &t.Deadline, &decidedBy, &decidedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return tasks.Push{}, false, nil
	}
	if err != nil {
		return tasks.Push{}, false, fmt.Errorf("claim a push: %w", err)
	}
	if decidedBy != nil {
		t.ApprovedBy = *decidedBy
	}
	if decidedAt != nil {
		t.ApprovedAt = *decidedAt
	}
	t.Mention = assignee
	if t.Assignee, err = s.loginOf(ctx, assignee); err != nil {
		return tasks.Push{}, false, err
	}
	if t.Sources, err = s.sources(ctx, t.ProposalID); err != nil {
		return tasks.Push{}, false, err
	}
	p.Task = t
	return p, true, nil
}

// loginOf is the GitHub login a proposal's assignee maps to: a mention of
// a member (@username, as Telegram spells it, any case) who set theirs;
// "" for none.
func (s *Tasks) loginOf(ctx context.Context, mention string) (string, error) {
	name, ok := strings.CutPrefix(strings.TrimSpace(mention), "@")
	if !ok || name == "" {
		return "", nil
	}
	var login string
	err := s.pool.QueryRow(ctx, `
SELECT g.login FROM github_logins g JOIN users u ON u.id = g.user_id
WHERE lower(u.username) = lower($1) LIMIT 1`, name).Scan(&login)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("the GitHub login of %q: %w", mention, err)
	}
	return login, nil
}

// sources are a proposal's source messages as they stand now. A message
// whose author /forget erased leaves the task altogether: its link would
// still lead to their words in Telegram, and a quote of nothing under
// nobody's name says only that someone was forgotten.
func (s *Tasks) sources(ctx context.Context, proposalID int64) ([]tasks.Source, error) {
	rows, err := s.pool.Query(ctx, `
SELECT s.chat_id, coalesce(c.title, ''), s.message_id, coalesce(m.author, ''), coalesce(m.text, ''), coalesce(m.date, 'epoch'::timestamptz)
FROM analysis_proposal_sources s
LEFT JOIN group_messages m ON m.chat_id = s.chat_id AND m.message_id = s.message_id
LEFT JOIN group_chats c ON c.id = s.chat_id
WHERE s.proposal_id = $1 AND `+erasedMessage+` IS NOT TRUE
ORDER BY s.chat_id, s.message_id`, proposalID)
	if err != nil {
		return nil, fmt.Errorf("sources of proposal %d: %w", proposalID, err)
	}
	var out []tasks.Source
	var src tasks.Source
	if _, err := pgx.ForEachRow(rows, []any{&src.ChatID, &src.ChatTitle, &src.MessageID, &src.Author, &src.Text, &src.At}, func() error {
		src.Link = tasks.MessageLink(src.ChatID, src.MessageID)
		out = append(out, src)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("sources of proposal %d: %w", proposalID, err)
	}
	return out, nil
}

// Pushed records a claimed push as filed, if the claim is still its:
// false when it is not (its lease ran out and another claim holds it).
func (s *Tasks) Pushed(ctx context.Context, p tasks.Push, f tasks.Filed) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE task_pushes SET state = 'pushed', pushed_at = now(), claimed_until = NULL, claim_token = NULL,
    number = NULLIF($3, 0), url = NULLIF($4, ''), issue_state = NULLIF($5, ''), assignee_dropped = $6, last_error = '',
    created = $7
WHERE id = $1 AND state = 'pending' AND claim_token = $2::uuid`, p.ID, p.Token, f.Number, f.URL, f.State, f.AssigneeDropped,
		max(f.Created, 0))
	if err != nil {
		return false, fmt.Errorf("record push %d: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Creations are the pushes of kind recorded within the last within that
// made content in their tracker (Filed.Created), newest first, at most
// limit of them, and the database's now they are counted back from: the
// pacer's arithmetic runs on the database's clock, which every replica
// shares.
func (s *Tasks) Creations(ctx context.Context, kind string, within time.Duration, limit int) (time.Time, []tasks.Creation, error) {
	var now time.Time
	var at []time.Time
	var n []int32
	err := s.pool.QueryRow(ctx, `
SELECT now(), coalesce(array_agg(pushed_at ORDER BY pushed_at DESC), '{}'), coalesce(array_agg(created::int ORDER BY pushed_at DESC), '{}')
FROM (
    SELECT pushed_at, created FROM task_pushes
    WHERE kind = $1 AND created > 0 AND pushed_at > now() - $2 * interval '1 microsecond'
    ORDER BY pushed_at DESC
    LIMIT $3
) c`, kind, within.Microseconds(), limit).Scan(&now, &at, &n)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("creations of %s: %w", kind, err)
	}
	out := make([]tasks.Creation, len(at))
	for i := range at {
		out[i] = tasks.Creation{At: at[i], N: int(n[i])}
	}
	return now, out, nil
}

// Due is how long until the next pending push may be claimed (its
// not_before, a pause of its kind or destination and a claim held on it
// all past); false when no push is pending.
func (s *Tasks) Due(ctx context.Context) (time.Duration, bool, error) {
	var micros *int64
	err := s.pool.QueryRow(ctx, `
SELECT (extract(epoch FROM min(greatest(tp.not_before, tp.claimed_until,
    (SELECT max(z.until) FROM task_pauses z WHERE z.scope = tp.kind OR z.scope = tp.kind || ':' || tp.target))) - now())
    * 1000000)::bigint
FROM task_pushes tp WHERE tp.state = 'pending'`).Scan(&micros)
	if err != nil {
		return 0, false, fmt.Errorf("next due push: %w", err)
	}
	if micros == nil {
		return 0, false, nil
	}
	return max(time.Duration(*micros)*time.Microsecond, 0), true, nil
}

// Defer gives a claimed push back, due again at notBefore, with why.
func (s *Tasks) Defer(ctx context.Context, p tasks.Push, notBefore time.Time, why string) error {
	if _, err := s.pool.Exec(ctx, `
UPDATE task_pushes SET claimed_until = NULL, claim_token = NULL, not_before = $3, last_error = left($4, 1000)
WHERE id = $1 AND state = 'pending' AND claim_token = $2::uuid`, p.ID, p.Token, notBefore, why); err != nil {
		return fmt.Errorf("defer push %d: %w", p.ID, err)
	}
	return nil
}

// Hold sets a claimed push aside, if the claim is still its, as looking
// like the open task like: it waits for an admin's Link or FileAnyway.
func (s *Tasks) Hold(ctx context.Context, p tasks.Push, like tasks.Open) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE task_pushes SET state = 'held', claimed_until = NULL, claim_token = NULL, last_error = '',
    like_number = $3, like_url = NULLIF($4, ''), like_title = left($5, 1000)
WHERE id = $1 AND state = 'pending' AND claim_token = $2::uuid`, p.ID, p.Token, like.Number, like.URL, like.Title)
	if err != nil {
		return false, fmt.Errorf("hold push %d: %w", p.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Refuse sets a claimed push aside, if the claim is still its, as its
// tracker refused it (why, the tracker's words), and writes tell (the
// admins' notice) in the same transaction: false, nothing written, when
// the claim is no longer its. It waits for Retry.
func (s *Tasks) Refuse(ctx context.Context, p tasks.Push, why string, tell []domain.Message) (bool, error) {
	set, err := s.execTelling(ctx, tell, `
UPDATE task_pushes SET state = 'refused', claimed_until = NULL, claim_token = NULL, last_error = left($3, 1000)
WHERE id = $1 AND state = 'pending' AND claim_token = $2::uuid`, p.ID, p.Token, why)
	if err != nil {
		return false, fmt.Errorf("refuse push %d: %w", p.ID, err)
	}
	return set, nil
}

// Retry sends the refused push of proposalID again, by an admin who
// removed the cause: due now, its backoff counted afresh, the tracker's
// words cleared (they come back if it refuses again). It returns the
// proposal's run; domain.ErrNotFound when no push of it is refused (sent
// again already, or never refused).
func (s *Tasks) Retry(ctx context.Context, proposalID, by int64) (int64, error) {
	return s.decide(ctx, "retry", proposalID, `
UPDATE task_pushes tp SET state = 'pending', not_before = now(), attempts = 0, last_error = '', decided_by = $2
FROM analysis_proposals p
WHERE tp.proposal_id = $1 AND tp.state = 'refused' AND p.id = tp.proposal_id
RETURNING p.run_id`, proposalID, by)
}

// Link settles the held push of proposalID as the open task it looks
// like, by an admin: nothing is filed, and the proposal shows that task
// (and its closing is told, as of one filed). It returns the proposal's
// run; domain.ErrNotFound when no push of it is held (decided already,
// or never held).
func (s *Tasks) Link(ctx context.Context, proposalID, by int64) (int64, error) {
	return s.decide(ctx, "link", proposalID, `
UPDATE task_pushes tp SET state = 'pushed', linked = true, decided_by = $2, pushed_at = now(),
    number = like_number, url = like_url, issue_state = 'open', last_error = ''
FROM analysis_proposals p
WHERE tp.proposal_id = $1 AND tp.state = 'held' AND p.id = tp.proposal_id
RETURNING p.run_id`, proposalID, by)
}

// FileAnyway sends the held push of proposalID on after all, by an
// admin: due now, and not checked for duplicates again. It returns the
// proposal's run; domain.ErrNotFound as for Link.
func (s *Tasks) FileAnyway(ctx context.Context, proposalID, by int64) (int64, error) {
	return s.decide(ctx, "file anyway", proposalID, `
UPDATE task_pushes tp SET state = 'pending', file_anyway = true, decided_by = $2, not_before = now()
FROM analysis_proposals p
WHERE tp.proposal_id = $1 AND tp.state = 'held' AND p.id = tp.proposal_id
RETURNING p.run_id`, proposalID, by)
}

func (s *Tasks) decide(ctx context.Context, what string, proposalID int64, sql string, args ...any) (int64, error) {
	var runID int64
	err := s.pool.QueryRow(ctx, sql, args...).Scan(&runID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%s proposal %d: %w", what, proposalID, domain.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("%s proposal %d: %w", what, proposalID, err)
	}
	return runID, nil
}

// Pause holds every push in scope (a kind, or kind:target) until until,
// on every replica; a longer pause already set stays.
func (s *Tasks) Pause(ctx context.Context, scope string, until time.Time, reason string) error {
	if _, err := s.pool.Exec(ctx, `
INSERT INTO task_pauses (scope, until, reason) VALUES ($1, $2, left($3, 1000))
ON CONFLICT (scope) DO UPDATE SET until = greatest(task_pauses.until, EXCLUDED.until), reason = EXCLUDED.reason`,
		scope, until, reason); err != nil {
		return fmt.Errorf("pause %q: %w", scope, err)
	}
	return nil
}

// Paused is until when scope is held (zero: it is not).
func (s *Tasks) Paused(ctx context.Context, scope string) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `SELECT until FROM task_pauses WHERE scope = $1 AND until > now()`, scope).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("pause of %q: %w", scope, err)
	}
	return until, nil
}

// SetLogin links user's Telegram account to a GitHub login; "" unlinks.
func (s *Tasks) SetLogin(ctx context.Context, userID int64, login string) error {
	var err error
	if login == "" {
		_, err = s.pool.Exec(ctx, `DELETE FROM github_logins WHERE user_id = $1`, userID)
	} else {
		_, err = s.pool.Exec(ctx, `
INSERT INTO github_logins (user_id, login) VALUES ($1, $2)
ON CONFLICT (user_id) DO UPDATE SET login = EXCLUDED.login, set_at = now()`, userID, login)
	}
	if err != nil {
		return fmt.Errorf("GitHub login of user %d: %w", userID, err)
	}
	return nil
}

// Login is user's GitHub login ("" for none).
func (s *Tasks) Login(ctx context.Context, userID int64) (string, error) {
	var login string
	err := s.pool.QueryRow(ctx, `SELECT login FROM github_logins WHERE user_id = $1`, userID).Scan(&login)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("GitHub login of user %d: %w", userID, err)
	}
	return login, nil
}

// Recent are the pushes of the proposals approved within since, newest
// first, at most limit: /tasks.
func (s *Tasks) Recent(ctx context.Context, since time.Duration, limit int) ([]tasks.Pushed, error) {
	rows, err := s.pool.Query(ctx, `
SELECT tp.id, tp.proposal_id, p.title, tp.kind, tp.target, tp.state, coalesce(tp.number, 0), coalesce(tp.url, ''),
       coalesce(tp.issue_state, ''), tp.last_error, p.decided_at, tp.linked,
       coalesce(tp.like_number, 0), coalesce(tp.like_url, ''), coalesce(tp.like_title, '')
FROM task_pushes tp JOIN analysis_proposals p ON p.id = tp.proposal_id
WHERE p.decided_at > now() - $1 * interval '1 microsecond'
ORDER BY p.decided_at DESC, tp.id DESC
LIMIT $2`, since.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("recent pushes: %w", err)
	}
	var out []tasks.Pushed
	var r tasks.Pushed
	if _, err := pgx.ForEachRow(rows, []any{&r.ID, &r.ProposalID, &r.Title, &r.Destination.Kind, &r.Destination.Target, &r.State,
		&r.Number, &r.URL, &r.IssueState, &r.LastError, &r.ApprovedAt, &r.Linked,
		&r.Like.Number, &r.Like.URL, &r.Like.Title}, func() error {
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("recent pushes: %w", err)
	}
	return out, nil
}

// Filed are up to limit pushed issues approved within since whose closing
// was not told yet, the least recently read first: what the sync reads.
func (s *Tasks) Filed(ctx context.Context, since time.Duration, limit int) ([]tasks.Tracked, error) {
	rows, err := s.pool.Query(ctx, `
SELECT tp.id, tp.proposal_id, p.title, tp.chat_id, tp.kind, tp.target, tp.number, coalesce(tp.url, ''),
       coalesce(tp.issue_state, ''), coalesce(tp.etag, '')
FROM task_pushes tp JOIN analysis_proposals p ON p.id = tp.proposal_id
WHERE tp.state = 'pushed' AND tp.number IS NOT NULL AND NOT tp.closed_told
  AND p.decided_at > now() - $1 * interval '1 microsecond'
ORDER BY tp.synced_at NULLS FIRST, tp.id
LIMIT $2`, since.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("filed tasks: %w", err)
	}
	var out []tasks.Tracked
	var r tasks.Tracked
	if _, err := pgx.ForEachRow(rows, []any{&r.PushID, &r.ProposalID, &r.Title, &r.Destination.ChatID, &r.Destination.Kind,
		&r.Destination.Target, &r.Number, &r.URL, &r.State, &r.ETag}, func() error {
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("filed tasks: %w", err)
	}
	return out, nil
}

// Synced records what the tracker says of a filed task now; a closing
// not told before is told (tell's messages, written with it), once across
// replicas: the row's closed_told flips once.
func (s *Tasks) Synced(ctx context.Context, t tasks.Tracked, state, etag string, tell []domain.Message) (bool, error) {
	told := false
	err := s.withTx(ctx, func(tx pgx.Tx) (err error) {
		told = false
		if _, err := tx.Exec(ctx, `
UPDATE task_pushes SET issue_state = NULLIF($2, ''), etag = NULLIF($3, ''), synced_at = now() WHERE id = $1`,
			t.PushID, state, etag); err != nil {
			return err
		}
		if state != "closed" {
			return nil
		}
		told, err = execTellingTx(ctx, tx, tell, `UPDATE task_pushes SET closed_told = true WHERE id = $1 AND NOT closed_told`, t.PushID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("sync push %d: %w", t.PushID, err)
	}
	return told, nil
}
