package storage

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/vacancy"
)

// BanWords lists a user's ban words alphabetically.
func (s *Store) BanWords(ctx context.Context, userID int64) ([]string, error) {
	words, err := queryAll(ctx, s.pool, pgx.RowTo[string], `SELECT word FROM ban_words WHERE user_id = $1 ORDER BY word`, userID)
	if err != nil {
		return nil, fmt.Errorf("ban words of user %d: %w", userID, err)
	}
	return words, nil
}

// AddBanWord stores a normalized ban word; false if the user had it. A
// user at max words gets vacancy.ErrTooManyBans.
func (s *Store) AddBanWord(ctx context.Context, userID int64, word string, max int) (bool, error) {
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
func (s *Store) RemoveBanWord(ctx context.Context, userID int64, word string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM ban_words WHERE user_id = $1 AND word = $2`, userID, word)
	if err != nil {
		return false, fmt.Errorf("remove ban word: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}
