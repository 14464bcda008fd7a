package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/hh"
)

// HHTokens is the hh.ru application token aggregate (hh_app_tokens):
// one token per client id for every replica, obtained once however many
// ask, and refused when hh.ru stops taking it. It is hh.TokenStore.
type HHTokens struct{ *db }

// HHTokens is the store of the hh.ru application tokens.
func (s *Store) HHTokens() *HHTokens { return &HHTokens{s.db} }

var _ hh.TokenStore = (*HHTokens)(nil)

// AppToken returns the application token (its times measured by the
// database's clock, which every replica shares) stored for clientID after
// calling renew with it (nil when none is stored), all in one transaction
// holding an advisory lock of clientID: replicas asking at once run renew
// one after another, and a later one sees what an earlier one stored, so
// one token is obtained however many ask. A token renew returns replaces
// the stored one (and is no longer refused); nil keeps the stored one. An
// error from renew is returned as is, and nothing changes.
func (s *HHTokens) AppToken(ctx context.Context, clientID string, renew func(ctx context.Context, stored *hh.StoredToken) (*hh.NewToken, error)) (hh.StoredToken, error) {
	var out hh.StoredToken
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('hh_app_token:' || $1, 0))`, clientID); err != nil {
			return fmt.Errorf("hh app token of %q: lock: %w", clientID, err)
		}
		var (
			stored *hh.StoredToken
			t      hh.StoredToken
			ageUS  int64
			ttlUS  *int64
		)
		// clock_timestamp, not now(): the lock may have been waited for.
		err := tx.QueryRow(ctx, `
SELECT token,
       floor(extract(epoch FROM clock_timestamp() - obtained_at) * 1000000)::bigint,
       floor(extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint,
       refused_at IS NOT NULL
FROM hh_app_tokens WHERE client_id = $1`, clientID).Scan(&t.Token, &ageUS, &ttlUS, &t.Refused)
		switch {
		case err == nil:
			t.Age = time.Duration(ageUS) * time.Microsecond
			if ttlUS != nil {
				t.Expires, t.TTL = true, time.Duration(*ttlUS)*time.Microsecond
			}
			stored = &t
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("hh app token of %q: %w", clientID, err)
		}
		fresh, err := renew(ctx, stored)
		if err != nil {
			return err
		}
		if fresh == nil {
			if stored == nil {
				return fmt.Errorf("hh app token of %q: none stored and none obtained", clientID)
			}
			out = *stored
			return nil
		}
		if fresh.Token == "" {
			return fmt.Errorf("hh app token of %q: refusing to store an empty token", clientID)
		}
		// clock_timestamp: obtained after renew's request to HH, which
		// counts its five minutes from when it answered.
		_, err = tx.Exec(ctx, `
INSERT INTO hh_app_tokens (client_id, token, obtained_at, expires_at, refused_at)
VALUES ($1, $2, clock_timestamp(),
        CASE WHEN $3::bigint > 0 THEN clock_timestamp() + $3::bigint * interval '1 microsecond' END, NULL)
ON CONFLICT (client_id) DO UPDATE SET
    token = EXCLUDED.token, obtained_at = EXCLUDED.obtained_at,
    expires_at = EXCLUDED.expires_at, refused_at = NULL`,
			clientID, fresh.Token, micros(fresh.Lifetime))
		if err != nil {
			return fmt.Errorf("hh app token of %q: store: %w", clientID, err)
		}
		out = hh.StoredToken{Token: fresh.Token}
		if fresh.Lifetime > 0 {
			out.Expires, out.TTL = true, fresh.Lifetime
		}
		return nil
	})
	if err != nil {
		return hh.StoredToken{}, err
	}
	return out, nil
}

// RefuseAppToken marks token refused if it is still the one stored for
// clientID and not refused yet, so that the next AppToken replaces it;
// whether it did. A replica refused a token another has already replaced
// changes nothing.
func (s *HHTokens) RefuseAppToken(ctx context.Context, clientID, token string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `
UPDATE hh_app_tokens SET refused_at = clock_timestamp()
WHERE client_id = $1 AND token = $2 AND refused_at IS NULL`, clientID, token)
	if err != nil {
		return false, fmt.Errorf("refuse hh app token of %q: %w", clientID, err)
	}
	return tag.RowsAffected() == 1, nil
}
