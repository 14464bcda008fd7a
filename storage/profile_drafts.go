package storage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/resume"
)

// ProfileDrafts is the résumé drafts aggregate (profile_drafts,
// migrations/00026_profile_drafts.sql): a document read into a profile
// draft, edited, and confirmed as the user's profile or dropped. Each
// change names the state it leaves and, for a button, the draft's id and
// revision; a button's statement also names the user, so a press on
// someone else's draft finds nothing.
type ProfileDrafts struct{ *db }

// ProfileDrafts is the store of the résumé drafts.
func (s *Store) ProfileDrafts() *ProfileDrafts { return &ProfileDrafts{s.db} }

var _ resume.Drafts = (*ProfileDrafts)(nil)

// draftColumns are what scanProfileDraft reads, of the table aliased a
// ("" for none).
func draftColumns(a string) string {
	if a != "" {
		a += "."
	}
	return strings.NewReplacer("@", a).Replace(`@id, @user_id, @chat_id, @message_id, @lang, @state, @revision,
COALESCE(@file_id, ''), @file_name, @format, COALESCE(@draft, ''), @attempts, COALESCE(@claim_token::text, '')`)
}

var profileDraftColumns = draftColumns("")

func scanProfileDraft(row pgx.Row) (resume.Draft, error) {
	var d resume.Draft
	err := row.Scan(&d.ID, &d.UserID, &d.ChatID, &d.MessageID, &d.Lang, &d.State, &d.Revision, &d.FileID,
		&d.FileName, &d.Format, &d.Text, &d.Attempts, &d.Token)
	return d, err
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// profileDraft runs a statement returning one draft: ok is false when it
// returned none.
func profileDraft(ctx context.Context, q rowQuerier, sql string, args ...any) (resume.Draft, bool, error) {
	d, err := scanProfileDraft(q.QueryRow(ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return resume.Draft{}, false, nil
	}
	if err != nil {
		return resume.Draft{}, false, err
	}
	return d, true, nil
}

// Create stores a Reading draft for the document's message,
// replacing the user's draft of another message, and tell's messages, in
// one transaction. The user's row lock orders two documents of one user;
// created is false when this message's draft is there already, a Failed
// one too.
func (s *ProfileDrafts) Create(ctx context.Context, d resume.Draft, tell domain.Render[resume.Draft]) (resume.Draft, bool, error) {
	var out resume.Draft
	var created bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM profile_drafts WHERE user_id = $1 AND NOT (chat_id = $2 AND message_id = $3)`,
			d.UserID, d.ChatID, d.MessageID); err != nil {
			return fmt.Errorf("replace draft: %w", err)
		}
		var err error
		out, created, err = profileDraft(ctx, tx, `INSERT INTO profile_drafts (user_id, chat_id, message_id, lang, file_id, file_name, format)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (user_id) DO NOTHING
RETURNING `+profileDraftColumns, d.UserID, d.ChatID, d.MessageID, d.Lang, d.FileID, d.FileName, d.Format)
		if err != nil || !created {
			return err
		}
		return enqueueTx(ctx, tx, tell.Of(out))
	})
	if err != nil {
		return resume.Draft{}, false, fmt.Errorf("create profile draft of user %d: %w", d.UserID, err)
	}
	return out, created, nil
}

// Claim claims the oldest Reading draft whose claim is free or
// lapsed (a release's backoff is a claim nobody holds), counting the attempt.
func (s *ProfileDrafts) Claim(ctx context.Context, lease time.Duration, claimer string) (resume.Draft, bool, error) {
	d, ok, err := profileDraft(ctx, s.pool, `WITH next AS (
    SELECT id FROM profile_drafts
    WHERE state = 'reading' AND (claimed_until IS NULL OR claimed_until < now())
    ORDER BY claimed_until NULLS FIRST, id
    LIMIT 1 FOR UPDATE SKIP LOCKED
)
UPDATE profile_drafts d SET claim_token = gen_random_uuid(), claimed_until = now() + $1 * interval '1 millisecond',
    claimed_by = NULLIF($2, ''), attempts = attempts + 1
FROM next WHERE d.id = next.id
RETURNING `+draftColumns("d"), lease.Milliseconds(), claimer)
	if err != nil {
		return resume.Draft{}, false, fmt.Errorf("claim profile draft: %w", err)
	}
	return d, ok, nil
}

// Release gives a claim back, claimable again after after.
func (s *ProfileDrafts) Release(ctx context.Context, id int64, token string, after time.Duration, counted bool) error {
	back := 0
	if !counted {
		back = 1
	}
	_, err := s.pool.Exec(ctx, `UPDATE profile_drafts SET claim_token = NULL,
    claimed_until = now() + $3 * interval '1 millisecond', attempts = greatest(attempts - $4, 0)
WHERE id = $1 AND claim_token = $2::uuid AND state = 'reading'`, id, token, after.Milliseconds(), back)
	if err != nil {
		return fmt.Errorf("release profile draft %d: %w", id, err)
	}
	return nil
}

// Finish makes a claimed draft Ready with its text, forgetting
// the file, and writes tell's messages, in one transaction.
func (s *ProfileDrafts) Finish(ctx context.Context, id int64, token, text string, tell domain.Render[resume.Draft]) (bool, error) {
	ok, err := s.changeProfileDraft(ctx, tell, `UPDATE profile_drafts SET state = 'ready', draft = $3, file_id = NULL,
    claim_token = NULL, claimed_until = NULL, revision = revision + 1, updated_at = now()
WHERE id = $1 AND claim_token = $2::uuid AND state = 'reading'
RETURNING `+profileDraftColumns, id, token, text)
	if err != nil {
		return false, fmt.Errorf("finish profile draft %d: %w", id, err)
	}
	return ok, nil
}

// Fail makes a claimed draft Failed, forgetting the file, and writes
// tell's messages, in one transaction. The row stays, naming the
// document's message, so that Create for that message again creates
// nothing; a newer document's Create, or the prune job, deletes it.
func (s *ProfileDrafts) Fail(ctx context.Context, id int64, token string, tell domain.Render[resume.Draft]) (bool, error) {
	ok, err := s.changeProfileDraft(ctx, tell, `UPDATE profile_drafts SET state = 'failed', file_id = NULL, file_name = '',
    claim_token = NULL, claimed_until = NULL, updated_at = now()
WHERE id = $1 AND claim_token = $2::uuid AND state = 'reading'
RETURNING `+profileDraftColumns, id, token)
	if err != nil {
		return false, fmt.Errorf("fail profile draft %d: %w", id, err)
	}
	return ok, nil
}

// WaitForModel marks a claimed Reading draft as waiting for the model and,
// the first time only, writes msgs, in one transaction: waited is how long
// the draft has waited since that first time (the database's clock), told
// whether msgs were written now. ok is false when the claim is lost.
func (s *ProfileDrafts) WaitForModel(ctx context.Context, id int64, token string, msgs []domain.Message) (waited time.Duration, told, ok bool, err error) {
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		var secs float64
		err := tx.QueryRow(ctx, `UPDATE profile_drafts d SET model_wait_since = coalesce(o.model_wait_since, now()), updated_at = now()
FROM (SELECT id, model_wait_since FROM profile_drafts
      WHERE id = $1 AND claim_token = $2::uuid AND state = 'reading' FOR UPDATE) o
WHERE d.id = o.id
RETURNING extract(epoch FROM now() - d.model_wait_since)::float8, o.model_wait_since IS NULL`, id, token).Scan(&secs, &told)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok, waited = true, time.Duration(secs*float64(time.Second))
		if !told {
			return nil
		}
		return enqueueTx(ctx, tx, msgs)
	})
	if err != nil {
		return 0, false, false, fmt.Errorf("profile draft %d waits for the model: %w", id, err)
	}
	return waited, told, ok, nil
}

// changeProfileDraft runs one statement that returns the draft it changed
// and, if it changed one, writes tell's messages in its transaction.
func (s *ProfileDrafts) changeProfileDraft(ctx context.Context, tell domain.Render[resume.Draft], sql string, args ...any) (bool, error) {
	var ok bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		d, found, err := profileDraft(ctx, tx, sql, args...)
		if err != nil || !found {
			return err
		}
		ok = true
		return enqueueTx(ctx, tx, tell.Of(d))
	})
	return ok, err
}

// Edit moves the user's Ready draft to Editing under a new revision.
func (s *ProfileDrafts) Edit(ctx context.Context, userID, id int64, revision int, ttl time.Duration) (resume.Draft, bool, error) {
	d, ok, err := profileDraft(ctx, s.pool, `UPDATE profile_drafts SET state = 'editing', revision = revision + 1, updated_at = now()
WHERE id = $1 AND user_id = $2 AND revision = $3 AND state = 'ready'
  AND updated_at > now() - $4 * interval '1 millisecond'
RETURNING `+profileDraftColumns, id, userID, revision, ttl.Milliseconds())
	if err != nil {
		return resume.Draft{}, false, fmt.Errorf("edit profile draft %d: %w", id, err)
	}
	return d, ok, nil
}

// Revise sets the text of the user's Editing draft, making it
// Ready under a new revision, and writes tell's messages, in one transaction.
func (s *ProfileDrafts) Revise(ctx context.Context, userID int64, messageID int, text string, ttl time.Duration, tell domain.Render[resume.Draft]) (resume.Draft, bool, error) {
	var (
		d  resume.Draft
		ok bool
	)
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		d, ok, err = profileDraft(ctx, tx, `UPDATE profile_drafts SET state = 'ready', draft = $2, revision = revision + 1,
    revised_by = NULLIF($4, 0), updated_at = now()
WHERE user_id = $1 AND state = 'editing' AND updated_at > now() - $3 * interval '1 millisecond'
RETURNING `+profileDraftColumns, userID, text, ttl.Milliseconds(), messageID)
		if err != nil || !ok {
			return err
		}
		return enqueueTx(ctx, tx, tell.Of(d))
	})
	if err != nil {
		return resume.Draft{}, false, fmt.Errorf("revise profile draft of user %d: %w", userID, err)
	}
	return d, ok, nil
}

// Confirm makes the draft the user's profile and deletes it,
// in one statement.
func (s *ProfileDrafts) Confirm(ctx context.Context, userID, id int64, revision int, ttl time.Duration) (resume.Draft, bool, error) {
	d, ok, err := profileDraft(ctx, s.pool, `WITH d AS (
    DELETE FROM profile_drafts
    WHERE id = $1 AND user_id = $2 AND revision = $3 AND state IN ('ready', 'editing')
      AND updated_at > now() - $4 * interval '1 millisecond'
    RETURNING *
), u AS (
    UPDATE users SET profile = d.draft, updated_at = now() FROM d WHERE users.id = d.user_id
)
SELECT `+draftColumns("d")+` FROM d`, id, userID, revision, ttl.Milliseconds())
	if err != nil {
		return resume.Draft{}, false, fmt.Errorf("confirm profile draft %d: %w", id, err)
	}
	return d, ok, nil
}

// Cancel deletes the user's draft of this id and revision.
func (s *ProfileDrafts) Cancel(ctx context.Context, userID, id int64, revision int) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM profile_drafts WHERE id = $1 AND user_id = $2 AND revision = $3`, id, userID, revision)
	if err != nil {
		return false, fmt.Errorf("cancel profile draft %d: %w", id, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Editing reports whether the user has a draft waiting for
// corrected text.
//
// revised: the draft was revised by messageID already (that message
// handled again after a crash).
func (s *ProfileDrafts) Editing(ctx context.Context, userID int64, messageID int, ttl time.Duration) (waiting, revised bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM profile_drafts
WHERE user_id = $1 AND state = 'editing' AND updated_at > now() - $2 * interval '1 millisecond'),
       EXISTS (SELECT 1 FROM profile_drafts WHERE user_id = $1 AND revised_by = NULLIF($3, 0))`,
		userID, ttl.Milliseconds(), messageID).Scan(&waiting, &revised)
	if err != nil {
		return false, false, fmt.Errorf("editing profile draft of user %d: %w", userID, err)
	}
	return waiting, revised, nil
}

// pruneProfileDrafts deletes drafts untouched since the horizon: the user
// never answered, or (a draft still being read) every reader died.
func pruneProfileDrafts(ctx context.Context, tx pgx.Tx, b *pruneBatch) (int64, bool, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM profile_drafts WHERE id IN (
    SELECT id FROM profile_drafts WHERE updated_at < $1 ORDER BY updated_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
		b.horizon, b.limit)
	if err != nil {
		return 0, false, err
	}
	return tag.RowsAffected(), tag.RowsAffected() == int64(b.limit), nil
}
