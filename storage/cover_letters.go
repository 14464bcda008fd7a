package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// LetterChannel is the workflow's: the statement that asks for a letter
// notifies it.
const LetterChannel = vacancy.LetterChannel

const letterColumns = `l.id, l.match_id, l.user_id, l.version, l.style, COALESCE(l.base_id, 0), l.language, l.state,
l.text, l.failure, l.tokens_in, l.tokens_out, l.attempts, l.created_at, COALESCE(l.claim_token::text, '')`

func letterDest(l *vacancy.Letter) []any {
	return []any{&l.ID, &l.MatchID, &l.UserID, &l.Version, &l.Style, &l.BaseID, &l.Language, &l.State,
		&l.Text, &l.Failure, &l.TokensIn, &l.TokensOut, &l.Attempts, &l.CreatedAt, &l.ClaimToken}
}

// CoverLetter reads one letter, or domain.ErrNotFound.
func (s *Applications) CoverLetter(ctx context.Context, id int64) (vacancy.Letter, error) {
	var l vacancy.Letter
	err := s.pool.QueryRow(ctx, `SELECT `+letterColumns+` FROM cover_letters l WHERE l.id = $1`, id).Scan(letterDest(&l)...)
	if err != nil {
		return l, fmt.Errorf("cover letter %d: %w", id, interpretError(err))
	}
	return l, nil
}

// AskCoverLetter writes a pending letter for a press, in one transaction
// that first locks the user's row: the same user's presses take turns,
// so the limit counted here holds on any number of replicas. A press taken
// before (its callback id) is a repeat and writes nothing; so is a press on
// a match whose letter is pending (busy), and one past the limit, which
// also says when the oldest counted letter leaves the window. Failed
// letters do not count.
func (s *Applications) AskCoverLetter(ctx context.Context, nl vacancy.NewLetter, limit int, window time.Duration) (vacancy.Asked, error) {
	var a vacancy.Asked
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		a = vacancy.Asked{Limit: limit}
		tag, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, nl.UserID)
		if err != nil {
			return fmt.Errorf("lock user: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return domain.ErrNotFound
		}
		err = tx.QueryRow(ctx, `SELECT `+letterColumns+` FROM cover_letters l WHERE l.press_id = $1`, nl.PressID).
			Scan(letterDest(&a.Letter)...)
		if err == nil {
			a.Repeat = true
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("press: %w", err)
		}
		var used int
		var resets *time.Time
		err = tx.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM cover_letters WHERE match_id = $2 AND state = 'pending'),
       count(*),
       -- The letter whose leaving the window brings the count under the limit.
       (array_agg(created_at ORDER BY created_at))[GREATEST(count(*) - $4 + 1, 1)] + $3 * interval '1 millisecond'
FROM cover_letters
WHERE user_id = $1 AND state <> 'failed' AND created_at > now() - $3 * interval '1 millisecond'`,
			nl.UserID, nl.MatchID, window.Milliseconds(), limit).Scan(&a.Busy, &used, &resets)
		if err != nil {
			return fmt.Errorf("count letters: %w", err)
		}
		if a.Busy {
			return nil
		}
		if used >= limit {
			a.Limited = true
			if resets != nil {
				a.Resets = *resets
			}
			return nil
		}
		var base any
		if nl.BaseID != 0 {
			base = nl.BaseID
		}
		err = tx.QueryRow(ctx, `
INSERT INTO cover_letters AS l (match_id, user_id, version, style, base_id, language, press_id)
SELECT $1, $2, COALESCE(max(version), 0) + 1, $3, $4, $5, $6 FROM cover_letters WHERE match_id = $1
RETURNING `+letterColumns, nl.MatchID, nl.UserID, nl.Style, base, nl.Language, nl.PressID).Scan(letterDest(&a.Letter)...)
		if err != nil {
			return fmt.Errorf("insert letter: %w", err)
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, LetterChannel); err != nil {
			return fmt.Errorf("notify letters: %w", err)
		}
		return nil
	})
	if err != nil {
		return vacancy.Asked{}, fmt.Errorf("ask cover letter for match %d: %w", nl.MatchID, err)
	}
	return a, nil
}

// claimLetterSQL is ClaimCoverLetter's one statement: $1 the lease, $2 the
// claimer.
const claimLetterSQL = `
WITH c AS (
    SELECT id FROM cover_letters
    WHERE state = 'pending' AND (claimed_until IS NULL OR claimed_until < now())
    ORDER BY id LIMIT 1
    FOR UPDATE SKIP LOCKED
), l AS (
    UPDATE cover_letters l SET claimed_until = now() + $1 * interval '1 millisecond',
        claim_token = gen_random_uuid(), claimed_by = NULLIF($2, ''), attempts = l.attempts + 1
    FROM c WHERE l.id = c.id
    RETURNING l.*
)
SELECT ` + letterColumns + `, ` + vacancyColumns + `, u.language, u.telegram_language, u.profile, COALESCE(b.text, '')
FROM l JOIN vacancy_matches m ON m.id = l.match_id JOIN vacancies v ON v.id = m.vacancy_id
     JOIN users u ON u.id = l.user_id LEFT JOIN cover_letters b ON b.id = l.base_id`

// ClaimCoverLetter claims the oldest pending letter whose lease is free or
// ran out, in one statement with FOR UPDATE SKIP LOCKED, with the vacancy,
// the profile and a rewrite's base text; ok is false when none is claimable.
func (s *Applications) ClaimCoverLetter(ctx context.Context, lease time.Duration, claimer string) (vacancy.LetterClaim, bool, error) {
	var c vacancy.LetterClaim
	var fetched *time.Time
	var lang, tgLang string
	dest := append(letterDest(&c.Letter), vacancyDest(&c.Vacancy, &fetched)...)
	dest = append(dest, &lang, &tgLang, &c.Profile, &c.Base)
	err := s.pool.QueryRow(ctx, claimLetterSQL, lease.Milliseconds(), claimer).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("claim cover letter: %w", err)
	}
	c.Lang = domain.User{Language: lang, TelegramLanguage: tgLang}.Lang()
	return c, true, nil
}

// FinishCoverLetter moves a claimed pending letter to l.State with its text,
// failure and tokens, and writes what tell renders from it to the outbox
// in the same transaction; ok is false when the claim is no longer
// l.ClaimToken's (another worker took the letter over).
func (s *Applications) FinishCoverLetter(ctx context.Context, l vacancy.Letter, tell domain.Render[vacancy.Letter]) (bool, error) {
	ok := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var done vacancy.Letter
		err := tx.QueryRow(ctx, `
UPDATE cover_letters l SET state = $3, text = $4, failure = $5, tokens_in = $6, tokens_out = $7,
    finished_at = now(), claimed_until = NULL, claim_token = NULL
WHERE l.id = $1 AND l.state = 'pending' AND l.claim_token = $2::uuid
RETURNING `+letterColumns, l.ID, l.ClaimToken, l.State, l.Text, l.Failure, l.TokensIn, l.TokensOut).Scan(letterDest(&done)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return enqueueTx(ctx, tx, tell.Of(done))
	})
	if err != nil {
		return false, fmt.Errorf("finish cover letter %d: %w", l.ID, err)
	}
	return ok, nil
}

// ReleaseCoverLetter gives a claimed letter back, the attempt uncounted,
// so another worker drafts it at once.
func (s *Applications) ReleaseCoverLetter(ctx context.Context, id int64, token string) error {
	_, err := s.pool.Exec(ctx, `UPDATE cover_letters SET claimed_until = NULL, claim_token = NULL, attempts = attempts - 1
WHERE id = $1 AND state = 'pending' AND claim_token = $2::uuid`, id, token)
	if err != nil {
		return fmt.Errorf("release cover letter %d: %w", id, err)
	}
	return nil
}

// NextCoverLetterLeaseExpiry is when the earliest live claim of a letter
// runs out.
func (s *Applications) NextCoverLetterLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	return s.nextLeaseExpiry(ctx, "cover letter", `SELECT min(claimed_until) FROM cover_letters
WHERE state = 'pending' AND claimed_until > now()`)
}
