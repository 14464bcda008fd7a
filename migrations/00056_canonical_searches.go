package migrations

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"switchboard/domain/vacancy"
)

// canonicalSearches rewrites each saved search into the form /search saves
// today (vacancy.Params.Canonical), with the search_key that form has. A
// search saved as "currency=RUB" before /search took RUB as HH's RUR was
// refused by HH on every fetch and set aside; rewritten, it is asked again
// as if just saved: active, its first news pending. Other rows whose form
// changed (a default spelled out, values in another order) keep their
// state and are discovered on from where their old key was: its
// discovery_state is copied to the new key unless that key has one. A
// search that turns out equal to another of the same user's is deleted:
// the other serves it. Go, not SQL, because the key is the domain's hash
// of the canonical form. Down does nothing: the old form meant the same.
func canonicalSearches(ctx context.Context, tx *sql.Tx) error {
	all, err := storedSearches(ctx, tx)
	if err != nil {
		return err
	}
	type userKey struct {
		user int64
		key  string
	}
	taken := map[userKey]bool{}
	for _, s := range all {
		taken[userKey{s.user, s.key}] = true
	}
	for _, s := range all {
		c, changed := s.params.Canonical()
		key := c.Key()
		if key == s.key {
			continue
		}
		if taken[userKey{s.user, key}] {
			if _, err := tx.ExecContext(ctx, `DELETE FROM searches WHERE id = $1`, s.id); err != nil {
				return fmt.Errorf("delete search %d, a twin of another: %w", s.id, err)
			}
			continue
		}
		taken[userKey{s.user, key}] = true
		raw, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("search %d: %w", s.id, err)
		}
		// Refused for nothing but what the rewrite changed (or for nothing
		// HH named): ask HH again.
		retry := s.refused &&
			!slices.ContainsFunc(s.refusedOn, func(a string) bool { return !slices.Contains(changed, a) })
		if _, err := tx.ExecContext(ctx, `
UPDATE searches SET params = $2, search_key = $3,
    state = CASE WHEN $4 THEN 'active' ELSE state END,
    refused_args = CASE WHEN $4 THEN NULL ELSE refused_args END,
    refused_at = CASE WHEN $4 THEN NULL ELSE refused_at END,
    first_news = CASE WHEN $4 THEN 'pending' ELSE first_news END,
    first_matches = CASE WHEN $4 THEN NULL ELSE first_matches END
WHERE id = $1`, s.id, raw, key, retry); err != nil {
			return fmt.Errorf("rewrite search %d: %w", s.id, err)
		}
		if _, err := tx.ExecContext(ctx, `
INSERT INTO discovery_state (search_key, last_seen_max_id, last_complete_sweep_before_id)
SELECT $2, last_seen_max_id, last_complete_sweep_before_id FROM discovery_state WHERE search_key = $1
ON CONFLICT (search_key) DO NOTHING`, s.key, key); err != nil {
			return fmt.Errorf("carry search %d's discovery over: %w", s.id, err)
		}
	}
	return nil
}

// storedSearch is one row of searches as the rewrite reads it.
type storedSearch struct {
	id, user  int64
	key       string
	params    vacancy.Params
	refused   bool
	refusedOn []string
}

// storedSearches reads every search, oldest first. A row that does not
// read as a search is left to the code that already copes with it (it is
// logged where it is read).
func storedSearches(ctx context.Context, tx *sql.Tx) ([]storedSearch, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, user_id, search_key, params, state = 'refused', COALESCE(to_jsonb(refused_args), '[]') FROM searches ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read searches: %w", err)
	}
	defer rows.Close()
	var all []storedSearch
	for rows.Next() {
		var s storedSearch
		var raw, args []byte
		if err := rows.Scan(&s.id, &s.user, &s.key, &raw, &s.refused, &args); err != nil {
			return nil, fmt.Errorf("read searches: %w", err)
		}
		if err := json.Unmarshal(args, &s.refusedOn); err != nil {
			return nil, fmt.Errorf("search %d: refused_args: %w", s.id, err)
		}
		if json.Unmarshal(raw, &s.params) == nil {
			all = append(all, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read searches: %w", err)
	}
	return all, nil
}
