package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/vacancy"
)

// exclusionsSQL is the vacancy.Exclusions of the user whose id is the SQL
// expression user, as the columns exclusionsDest scans: the one fragment
// discovery's followers, the worker's claim, recovery and Recipient read
// them with, so an exclusion of a new kind is read everywhere from here.
func exclusionsSQL(user string) string {
	return fmt.Sprintf(`COALESCE((SELECT array_agg(word ORDER BY word) FROM ban_words b WHERE b.user_id = %[1]s), '{}'),
       COALESCE((SELECT array_agg(employer) FROM hidden_employers h WHERE h.user_id = %[1]s), '{}')`, user)
}

// exclusionsDest scans what exclusionsSQL reads into e.
func exclusionsDest(e *vacancy.Exclusions) []any {
	return []any{&e.BanWords, &e.HiddenEmployers}
}

// BanWords lists a user's ban words alphabetically.
func (s *Searches) BanWords(ctx context.Context, userID int64) ([]string, error) {
	words, err := queryAll(ctx, s.pool, pgx.RowTo[string], `SELECT word FROM ban_words WHERE user_id = $1 ORDER BY word`, userID)
	if err != nil {
		return nil, fmt.Errorf("ban words of user %d: %w", userID, err)
	}
	return words, nil
}

// AddBanWord stores a normalized ban word; false if the user had it. A
// user at max words gets vacancy.ErrTooManyBans.
func (s *Searches) AddBanWord(ctx context.Context, userID int64, word string, max int) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
INSERT INTO ban_words (user_id, word)
SELECT $1, $2 WHERE (SELECT count(*) FROM ban_words WHERE user_id = $1) < $3
ON CONFLICT DO NOTHING`, userID, word, max)
	if err != nil {
		return false, fmt.Errorf("add ban word: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM ban_words WHERE user_id = $1 AND word = $2)`,
		userID, word).Scan(&exists); err != nil {
		return false, fmt.Errorf("add ban word: %w", err)
	}
	if !exists {
		return false, vacancy.ErrTooManyBans
	}
	return false, nil
}

// RemoveBanWord deletes a ban word; false if the user had no such word.
func (s *Searches) RemoveBanWord(ctx context.Context, userID int64, word string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM ban_words WHERE user_id = $1 AND word = $2`, userID, word)
	if err != nil {
		return false, fmt.Errorf("remove ban word: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// HideEmployer keeps an employer's vacancies from the user; false if they
// were hidden already. A user at max hidden gets vacancy.ErrTooManyHidden.
func (s *Searches) HideEmployer(ctx context.Context, userID int64, employer string, max int) (bool, error) {
	var added, exists bool
	err := s.pool.QueryRow(ctx, `
WITH ins AS (
    INSERT INTO hidden_employers (user_id, employer)
    SELECT $1, $2 WHERE (SELECT count(*) FROM hidden_employers WHERE user_id = $1) < $3
    ON CONFLICT DO NOTHING
    RETURNING id
)
SELECT EXISTS (SELECT 1 FROM ins), EXISTS (SELECT 1 FROM hidden_employers WHERE user_id = $1 AND employer = $2)`,
		userID, employer, max).Scan(&added, &exists)
	switch {
	case err != nil:
		return false, fmt.Errorf("hide employer: %w", err)
	case added:
		return true, nil
	case !exists:
		return false, vacancy.ErrTooManyHidden
	}
	return false, nil
}

// ShowEmployer undoes a user's hiding of an employer by its id; the name,
// and false if the user had no such hiding.
func (s *Searches) ShowEmployer(ctx context.Context, userID, id int64) (string, bool, error) {
	var name string
	err := s.pool.QueryRow(ctx, `DELETE FROM hidden_employers WHERE id = $1 AND user_id = $2 RETURNING employer`,
		id, userID).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("show employer %d: %w", id, err)
	}
	return name, true, nil
}

// HiddenEmployers lists the employers a user hid, by name.
func (s *Searches) HiddenEmployers(ctx context.Context, userID int64) ([]vacancy.HiddenEmployer, error) {
	out, err := queryAll(ctx, s.pool, pgx.RowToStructByPos[vacancy.HiddenEmployer],
		`SELECT id, employer FROM hidden_employers WHERE user_id = $1 ORDER BY lower(employer), id`, userID)
	if err != nil {
		return nil, fmt.Errorf("hidden employers of user %d: %w", userID, err)
	}
	return out, nil
}
