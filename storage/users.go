package storage

import (
	"context"
	"errors"
	"fmt"

	"switchboard/domain"
)

// Users is the users aggregate: who has written to the bot, their
// language, time zone and profile, and /forget, which erases them.
type Users struct{ *db }

// Users is the store of the bot's users.
func (s *Store) Users() *Users { return &Users{s.db} }

// userColumns read users (unaliased) with the city of the user's master
// record, if any: the bot's default zone for a master is their city's.
const userColumns = `id, username, first_name, language, telegram_language, COALESCE(time_zone, ''),
    COALESCE((SELECT m.city FROM masters m WHERE m.user_id = users.id), ''), created_at`

// Upsert records a user seen on an update, refreshing the names Telegram
// reports, and clears the unreachable mark of their private chat; the
// chosen language is left alone.
//
// Nearly every update comes from a user stored as they are now, whose chat
// is not marked: for them it is one read, which writes nothing, so its
// commit waits for no WAL flush. Going straight to the upsert would not
// do: ON CONFLICT locks the existing row even when its WHERE skips the
// write, and a row lock is WAL that every update's commit waited to flush.
func (s *Users) Upsert(ctx context.Context, u domain.User) (domain.User, error) {
	var out domain.User
	var unreachable bool
	err := s.pool.QueryRow(ctx, `SELECT `+userColumns+`,
    EXISTS (SELECT 1 FROM unreachable_chats c WHERE c.chat_id = users.id)
FROM users WHERE id = $1`, u.ID).Scan(append(userDest(&out), &unreachable)...)
	found := err == nil
	switch err := interpretError(err); {
	case found && !unreachable && out.Username == u.Username && out.FirstName == u.FirstName &&
		out.TelegramLanguage == u.TelegramLanguage:
		return out, nil
	case err != nil && !errors.Is(err, domain.ErrNotFound):
		return domain.User{}, fmt.Errorf("read user %d: %w", u.ID, err)
	}
	// A user who writes to the bot can be written to again: their private
	// chat (id = user id) loses its unreachable mark in the same statement.
	const q = `
WITH reachable AS (DELETE FROM unreachable_chats WHERE chat_id = $1)
INSERT INTO users (id, username, first_name, telegram_language)
VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET
    username = EXCLUDED.username,
    first_name = EXCLUDED.first_name,
    telegram_language = EXCLUDED.telegram_language,
    updated_at = now()
WHERE users.username IS DISTINCT FROM EXCLUDED.username
   OR users.first_name IS DISTINCT FROM EXCLUDED.first_name
   OR users.telegram_language IS DISTINCT FROM EXCLUDED.telegram_language
RETURNING ` + userColumns
	err = s.pool.QueryRow(ctx, q, u.ID, u.Username, u.FirstName, u.TelegramLanguage).
		Scan(userDest(&out)...)
	if err == nil {
		return out, nil
	}
	// The WHERE above skips the write when the names are as stored (a chat
	// only unmarked, or another replica's upsert first), which returns no
	// row: the stored one is the row read above, or, if another replica
	// added it since, read now.
	if errors.Is(interpretError(err), domain.ErrNotFound) {
		if found {
			return out, nil
		}
		return s.Get(ctx, u.ID)
	}
	return domain.User{}, fmt.Errorf("upsert user %d: %w", u.ID, err)
}

// Get returns one user or domain.ErrNotFound.
func (s *Users) Get(ctx context.Context, id int64) (domain.User, error) {
	var out domain.User
	err := s.pool.QueryRow(ctx,
		`SELECT `+userColumns+` FROM users WHERE id = $1`, id).
		Scan(userDest(&out)...)
	if err != nil {
		return domain.User{}, fmt.Errorf("user %d: %w", id, interpretError(err))
	}
	return out, nil
}

// SetLanguage stores the language chosen with /lang.
func (s *Users) SetLanguage(ctx context.Context, id int64, lang string) error {
	return s.update(ctx, "language", `UPDATE users SET language = $2, updated_at = now() WHERE id = $1`, id, lang)
}

// update runs update, which sets one field (what, for the error) of
// user id to $2; domain.ErrNotFound when there is no such user.
func (s *Users) update(ctx context.Context, what, update string, id int64, value string) error {
	tag, err := s.pool.Exec(ctx, update, id, value)
	if err != nil {
		return fmt.Errorf("set %s of user %d: %w", what, id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set %s of user %d: %w", what, id, domain.ErrNotFound)
	}
	return nil
}

func userDest(u *domain.User) []any {
	return []any{&u.ID, &u.Username, &u.FirstName, &u.Language, &u.TelegramLanguage, &u.TimeZone, &u.MasterCity, &u.CreatedAt}
}

// SetTimeZone stores the zone chosen with /timezone (a name
// locales.ParseZone returned); "" forgets the choice.
func (s *Users) SetTimeZone(ctx context.Context, id int64, zone string) error {
	return s.update(ctx, "time zone", `UPDATE users SET time_zone = NULLIF($2, ''), updated_at = now() WHERE id = $1`, id, zone)
}

// Profile returns the user's profile ("" if none).
func (s *Users) Profile(ctx context.Context, userID int64) (string, error) {
	var p string
	err := s.pool.QueryRow(ctx, `SELECT profile FROM users WHERE id = $1`, userID).Scan(&p)
	if err != nil {
		return "", fmt.Errorf("profile of user %d: %w", userID, interpretError(err))
	}
	return p, nil
}

// SetProfile stores the user's profile.
func (s *Users) SetProfile(ctx context.Context, userID int64, profile string) error {
	return s.update(ctx, "profile", `UPDATE users SET profile = $2, updated_at = now() WHERE id = $1`, userID, profile)
}
