package storage

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
)

// Notices are the conditions the admin chat has been told of (an outage,
// a refusing model), each told once when it starts and once when it ends.
type Notices struct{ *db }

// Notices is the store of the admin chat's notices.
func (s *Store) Notices() *Notices { return &Notices{s.db} }

// Once records that the admin chat is told about key and writes what
// tell renders for key to the outbox in the same transaction, unless key
// is recorded already:
// every replica may notice the same condition, the chat hears it once.
// Whether this call told it.
func (s *Notices) Once(ctx context.Context, key, text string, tell domain.Render[string]) (bool, error) {
	return s.noticeTx(ctx, "notice", key, tell,
		`INSERT INTO admin_notices (key, text) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, text)
}

// End forgets key and writes tell's messages (the condition's end) in the same
// transaction, only if key was recorded: the end is told once too.
func (s *Notices) End(ctx context.Context, key string, tell domain.Render[string]) (bool, error) {
	return s.noticeTx(ctx, "end notice", key, tell, `DELETE FROM admin_notices WHERE key = $1`, key)
}

// noticeTx runs sql and, if it changed a row, writes what tell renders for
// key with it: whether it did.
func (s *Notices) noticeTx(ctx context.Context, what, key string, tell domain.Render[string], sql string, args ...any) (bool, error) {
	told, err := s.execTelling(ctx, tell.Of(key), sql, args...)
	if err != nil {
		return false, fmt.Errorf("%s %q: %w", what, key, err)
	}
	return told, nil
}

// Text returns what key was told, if it is recorded.
func (s *Notices) Text(ctx context.Context, key string) (string, bool, error) {
	var text string
	err := s.pool.QueryRow(ctx, `SELECT text FROM admin_notices WHERE key = $1`, key).Scan(&text)
	if err == pgx.ErrNoRows {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("notice %q: %w", key, err)
	}
	return text, true, nil
}

// TaskNotices are the notices the task pusher gives (domain/tasks.Notices):
// its messages rendered before, each key told once.
type TaskNotices struct{ Notices *Notices }

// Once tells msgs under key unless key is told already.
func (n TaskNotices) Once(ctx context.Context, key string, msgs []domain.Message) error {
	text := ""
	if len(msgs) > 0 {
		text = msgs[0].Text
	}
	_, err := n.Notices.Once(ctx, key, text, domain.Fixed[string](msgs...))
	return err
}

// End tells msgs and forgets key, if key was told.
func (n TaskNotices) End(ctx context.Context, key string, msgs []domain.Message) error {
	_, err := n.Notices.End(ctx, key, domain.Fixed[string](msgs...))
	return err
}
