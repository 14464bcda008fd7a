package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// Searches is the searches aggregate: a user's saved searches, the
// search keys they share (one discovery serves every search of a key),
// and what the user filters out of them: ban words and hidden employers.
type Searches struct{ *db }

// Searches is the store of the users' saved searches and their filters.
func (s *Store) Searches() *Searches { return &Searches{s.db} }

// The searches' store (vacancy.Searches).
var _ vacancy.Searches = (*Searches)(nil)

// Add saves a search unless the user already has one with its key;
// created reports which happened, and the stored search is returned. A
// search of the key that HH refused (state refused) is brought back as if
// new: active, its first news pending, so HH is asked again. A new
// search is given, in the same transaction, up to backfill of the key's
// vacancies published since since (those other users' discovery already
// collected), as QUEUED matches; queued counts them. When the key has been
// discovered before, that backfill is the search's first discovery: the
// search is marked told and announce's messages (nil is none) are written
// to the outbox with it.
func (s *Searches) Add(ctx context.Context, sr vacancy.Search, backfill int, since time.Time,
	announce domain.Render[[]vacancy.FirstNews]) (vacancy.Search, bool, int, error) {
	params, err := json.Marshal(sr.Params)
	if err != nil {
		return sr, false, 0, fmt.Errorf("add search: %w", err)
	}
	var out vacancy.Search
	created, queued := false, 0
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockSearchKey(ctx, tx, sr.Key); err != nil {
			return err
		}
		row := tx.QueryRow(ctx, `
INSERT INTO searches (user_id, params, search_key) VALUES ($1, $2, $3)
ON CONFLICT (user_id, search_key) DO UPDATE
SET state = 'active', refused_args = NULL, refused_at = NULL, first_news = 'pending', first_matches = NULL
WHERE searches.state = 'refused'
RETURNING id, user_id, params, search_key, created_at`, sr.UserID, params, sr.Key)
		var err error
		out, err = scanSearch(row)
		if errors.Is(err, pgx.ErrNoRows) {
			out, err = scanSearch(tx.QueryRow(ctx, `SELECT id, user_id, params, search_key, created_at FROM searches
WHERE user_id = $1 AND search_key = $2`, sr.UserID, sr.Key))
			return err
		}
		if err != nil {
			return err
		}
		created = true
		rows, err := tx.Query(ctx, `
INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at)
SELECT $2, v.id, 'QUEUED', v.published_at
FROM search_hits h JOIN vacancies v ON v.id = h.vacancy_id
WHERE h.search_key = $1 AND v.published_at >= $4 AND (v.experience <> 'moreThan6' OR $5)
ORDER BY v.published_at DESC, v.id DESC LIMIT $3
ON CONFLICT (user_id, vacancy_id) DO NOTHING
RETURNING id`, sr.Key, sr.UserID, backfill, since, sr.Params.Has("experience", vacancy.MoreThan6))
		if err != nil {
			return fmt.Errorf("backfill: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("backfill: %w", err)
		}
		if queued = len(ids); queued > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, QueueChannel); err != nil {
				return fmt.Errorf("notify queue: %w", err)
			}
		}
		// A key never discovered is left pending: its first discovery,
		// which the service starts at once, tells the user.
		return tellFirstNews(ctx, tx, `s.id = $1 AND EXISTS (SELECT 1 FROM discovery_state d WHERE d.search_key = s.search_key)`,
			out.ID, map[int64][]int64{sr.UserID: ids}, announce)
	})
	if err != nil {
		return sr, false, 0, fmt.Errorf("add search: %w", interpretError(err))
	}
	return out, created, queued, nil
}

// searchRow reads a searches row's id, user_id, params, search_key and
// created_at (dest, in that order); search decodes the params.
type searchRow struct {
	s      vacancy.Search
	params []byte
}

func (r *searchRow) dest() []any {
	return []any{&r.s.ID, &r.s.UserID, &r.params, &r.s.Key, &r.s.CreatedAt}
}

func (r *searchRow) search() (vacancy.Search, error) {
	if err := json.Unmarshal(r.params, &r.s.Params); err != nil {
		return r.s, fmt.Errorf("search %d params: %w", r.s.ID, err)
	}
	return r.s, nil
}

func scanSearch(row pgx.Row) (vacancy.Search, error) {
	var r searchRow
	if err := row.Scan(r.dest()...); err != nil {
		return r.s, err
	}
	return r.search()
}

// OfUser lists a user's searches, oldest first, with their state.
func (s *Searches) OfUser(ctx context.Context, userID int64) ([]vacancy.Search, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, user_id, params, search_key, created_at, state, refused_args FROM searches
WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("searches of user %d: %w", userID, err)
	}
	defer rows.Close()
	var out []vacancy.Search
	for rows.Next() {
		var r searchRow
		var state string
		var refused []string
		if err := rows.Scan(append(r.dest(), &state, &refused)...); err != nil {
			return nil, fmt.Errorf("searches of user %d: %w", userID, err)
		}
		sr, err := r.search()
		if err != nil {
			return nil, fmt.Errorf("searches of user %d: %w", userID, err)
		}
		sr.State, sr.Refused = vacancy.SearchState(state), refused
		out = append(out, sr)
	}
	return out, rows.Err()
}

// SetAside moves the key's active searches to refused, naming the
// arguments HH refused; one still owed its first news counts as told, for
// the refusal is its news. One statement naming the old state, with
// tell's notes written in its transaction: each user hears it once on any
// number of replicas.
func (s *Searches) SetAside(ctx context.Context, key string, args []string, tell domain.Render[[]vacancy.Refusal]) (int, error) {
	if args == nil {
		args = []string{}
	}
	n := 0
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
UPDATE searches s SET state = 'refused', refused_args = $2, refused_at = now(),
    first_news = CASE WHEN s.first_news IN ('pending', 'retrying') THEN 'told' ELSE s.first_news END
FROM users u
WHERE u.id = s.user_id AND s.search_key = $1 AND s.state = 'active'
RETURNING `+newsColumns, key, args)
		if err != nil {
			return err
		}
		news, err := scanNews(rows, false, false)
		if err != nil {
			return err
		}
		n = len(news)
		if tell == nil || n == 0 {
			return nil
		}
		refusals := make([]vacancy.Refusal, len(news))
		for i, fn := range news {
			fn.Search.State, fn.Search.Refused = vacancy.SearchRefused, args
			refusals[i] = vacancy.Refusal{Search: fn.Search, Lang: fn.Lang, Args: args}
		}
		return enqueueTx(ctx, tx, tell(refusals))
	})
	if err != nil {
		return 0, fmt.Errorf("set aside search %s: %w", key, interpretError(err))
	}
	return n, nil
}

// Delete deletes the user's search; another user's id deletes nothing.
func (s *Searches) Delete(ctx context.Context, userID, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM searches WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return false, fmt.Errorf("delete search %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// KeyGroups returns every distinct search_key of an active search with
// its parameters; a refused search is asked of HH no more.
func (s *Searches) KeyGroups(ctx context.Context) ([]vacancy.Group, error) {
	return searchGroups(ctx, s.pool, "")
}

// KeyGroup is KeyGroups for one key.
func (s *Searches) KeyGroup(ctx context.Context, key string) (vacancy.Group, error) {
	gs, err := searchGroups(ctx, s.pool, key)
	if err != nil {
		return vacancy.Group{}, err
	}
	if len(gs) == 0 {
		return vacancy.Group{}, fmt.Errorf("search group: %w", domain.ErrNotFound)
	}
	return gs[0], nil
}

// querier is what a pool and a transaction have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryAll runs sql on q and reads every row with to.
func queryAll[T any](ctx context.Context, q querier, to pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, to)
}

// searchGroups lists distinct search_keys with the parameters of each key's
// oldest search (all searches of a key have equal parameters up to case and
// spacing). Who follows a key is read when a discovery is saved.
func searchGroups(ctx context.Context, q querier, key string) ([]vacancy.Group, error) {
	out, err := groupsOf(ctx, q, `
SELECT DISTINCT ON (search_key) search_key, params FROM searches
WHERE state = 'active' AND ($1 = '' OR search_key = $1)
ORDER BY search_key, id`, key)
	if err != nil {
		return nil, fmt.Errorf("search groups: %w", err)
	}
	return out, nil
}

// groupsOf reads the search groups sql picks: rows of search_key, params.
func groupsOf(ctx context.Context, q querier, sql string, args ...any) ([]vacancy.Group, error) {
	return queryAll(ctx, q, func(row pgx.CollectableRow) (vacancy.Group, error) {
		var g vacancy.Group
		var params []byte
		if err := row.Scan(&g.Key, &params); err != nil {
			return g, err
		}
		if err := json.Unmarshal(params, &g.Params); err != nil {
			return g, fmt.Errorf("params of %s: %w", g.Key, err)
		}
		return g, nil
	}, sql, args...)
}

// followers are the users whose active searches have key, with what they
// exclude: a search set aside gets nothing.
func followers(ctx context.Context, q querier, key string) ([]vacancy.Recipient, error) {
	rows, err := q.Query(ctx, `
SELECT s.user_id, `+exclusionsSQL("s.user_id")+`
FROM searches s WHERE s.search_key = $1 AND s.state = 'active' ORDER BY s.id`, key)
	if err != nil {
		return nil, fmt.Errorf("followers of %s: %w", key, err)
	}
	users, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (vacancy.Recipient, error) {
		var u vacancy.Recipient
		err := row.Scan(append([]any{&u.ID}, exclusionsDest(&u.Exclusions)...)...)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("followers of %s: %w", key, err)
	}
	return users, nil
}
