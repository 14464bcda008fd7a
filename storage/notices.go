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
// is open already: every replica may notice the same condition, the chat
// hears it once. It returns the generation of the open notice — a new one
// when this call told it — which the caller names when it ends it.
func (s *Notices) Once(ctx context.Context, key, text string, tell domain.Render[string]) (gen int64, told bool, err error) {
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		// An ended row of generation 0 makes sure there is a row to lock:
		// two replicas that first notice key at once take turns below.
		if _, err := tx.Exec(ctx, `INSERT INTO admin_notices (key, generation, ended_at) VALUES ($1, 0, now())
ON CONFLICT (key) DO NOTHING`, key); err != nil {
			return err
		}
		var open bool
		if err := tx.QueryRow(ctx, `SELECT generation, ended_at IS NULL FROM admin_notices WHERE key = $1 FOR UPDATE`,
			key).Scan(&gen, &open); err != nil {
			return err
		}
		if open {
			return nil
		}
		gen++
		if _, err := tx.Exec(ctx, `UPDATE admin_notices SET generation = $2, text = $3, since = now(), ended_at = NULL
WHERE key = $1`, key, gen, text); err != nil {
			return err
		}
		told = true
		return enqueueTx(ctx, tx, tell.Of(key))
	})
	if err != nil {
		return 0, false, fmt.Errorf("notice %q: %w", key, err)
	}
	return gen, told, nil
}

// End ends key's notice of generation gen (0: whichever is open) and
// writes tell's messages (the condition's end) in the same transaction,
// only if that notice was open: the end is told once too, and never for a
// later start than the one the caller saw. Whether this call told it.
func (s *Notices) End(ctx context.Context, key string, gen int64, tell domain.Render[string]) (bool, error) {
	told, err := s.execTelling(ctx, tell.Of(key), `UPDATE admin_notices SET ended_at = now()
WHERE key = $1 AND ended_at IS NULL AND ($2 = 0 OR generation = $2)`, key, gen)
	if err != nil {
		return false, fmt.Errorf("end notice %q: %w", key, err)
	}
	return told, nil
}

// Open returns the generation of key's notice if it is told and not
// ended.
func (s *Notices) Open(ctx context.Context, key string) (gen int64, ok bool, err error) {
	err = s.pool.QueryRow(ctx, `SELECT generation FROM admin_notices WHERE key = $1 AND ended_at IS NULL`, key).Scan(&gen)
	if err == pgx.ErrNoRows {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("notice %q: %w", key, err)
	}
	return gen, true, nil
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
	_, _, err := n.Notices.Once(ctx, key, text, domain.Fixed[string](msgs...))
	return err
}

// End tells msgs and forgets key, if key was told.
func (n TaskNotices) End(ctx context.Context, key string, msgs []domain.Message) error {
	_, err := n.Notices.End(ctx, key, 0, domain.Fixed[string](msgs...))
	return err
}
