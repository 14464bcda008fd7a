package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// DiscoveryMarkers returns a search_key's discovery state (zero before its first run).
func (s *Matches) DiscoveryMarkers(ctx context.Context, key string) (vacancy.Markers, error) {
	var m vacancy.Markers
	err := s.pool.QueryRow(ctx, `SELECT last_seen_max_id, last_complete_sweep_before_id, updated_at
FROM discovery_state WHERE search_key = $1`, key).Scan(&m.LastSeenMaxID, &m.LastCompleteSweepBeforeID, &m.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return vacancy.Markers{}, nil
	}
	if err != nil {
		return m, fmt.Errorf("discovery markers: %w", err)
	}
	return m, nil
}

// UnseenVacancies reports which ids the search_key has not collected yet: neither
// among its hits nor at or below its pruned_through_id (the highest id of
// its hits the prune job deleted; HH's ids grow with time).
func (s *Matches) UnseenVacancies(ctx context.Context, key string, ids []int64) (map[int64]bool, error) {
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	seen, err := queryAll(ctx, s.pool, pgx.RowTo[int64], `SELECT vacancy_id FROM search_hits WHERE search_key = $1 AND vacancy_id = ANY($2)
UNION ALL
SELECT i FROM unnest($2::bigint[]) i, discovery_state d WHERE d.search_key = $1 AND i <= d.pruned_through_id`, key, ids)
	if err != nil {
		return nil, fmt.Errorf("unseen vacancies: %w", err)
	}
	for _, id := range seen {
		delete(out, id)
	}
	return out, nil
}

// SaveDiscovery stores one discovery run in one transaction: the vacancies
// (kept if already known), the search's hits, the markers (last_seen_max_id
// never decreases, the sweep marker only deepens) and the QUEUED matches
// pick chooses for the users who follow the key at that moment. A
// per-key advisory lock orders it with Searches.Add, so a user who saves the
// same search meanwhile gets these vacancies either here or from the
// backfill, never from neither. It returns how many matches were created
// and notifies QueueChannel.
func (s *Matches) SaveDiscovery(ctx context.Context, key string, found []vacancy.Vacancy, hits []int64,
	m vacancy.Markers, pick func(users []vacancy.Recipient) []vacancy.NewMatch, announce domain.Render[[]vacancy.FirstNews]) (int, error) {
	queued := 0
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if err := lockSearchKey(ctx, tx, key); err != nil {
			return err
		}
		if len(found) > 0 {
			b := &pgx.Batch{}
			for _, v := range found {
				queueVacancy(b, v)
			}
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("insert vacancies: %w", err)
			}
		}
		if len(hits) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO search_hits (search_key, vacancy_id)
SELECT $1, unnest($2::bigint[]) ON CONFLICT DO NOTHING`, key, hits); err != nil {
				return fmt.Errorf("insert hits: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `
INSERT INTO discovery_state AS d (search_key, last_seen_max_id, last_complete_sweep_before_id, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (search_key) DO UPDATE SET
    last_seen_max_id = GREATEST(d.last_seen_max_id, EXCLUDED.last_seen_max_id),
    last_complete_sweep_before_id = CASE
        WHEN d.last_complete_sweep_before_id = 0 THEN EXCLUDED.last_complete_sweep_before_id
        WHEN EXCLUDED.last_complete_sweep_before_id = 0 THEN d.last_complete_sweep_before_id
        ELSE LEAST(d.last_complete_sweep_before_id, EXCLUDED.last_complete_sweep_before_id) END,
    updated_at = now()`, key, m.LastSeenMaxID, m.LastCompleteSweepBeforeID); err != nil {
			return fmt.Errorf("upsert markers: %w", err)
		}
		perUser, err := queueMatches(ctx, tx, key, found, pick)
		if err != nil {
			return err
		}
		for _, ids := range perUser {
			queued += len(ids)
		}
		if queued > 0 {
			if _, err := tx.Exec(ctx, `SELECT pg_notify($1, '')`, QueueChannel); err != nil {
				return fmt.Errorf("notify queue: %w", err)
			}
		}
		return tellFirstNews(ctx, tx, `s.search_key = $1`, key, perUser, announce)
	})
	if err != nil {
		return 0, fmt.Errorf("save discovery: %w", err)
	}
	return queued, nil
}

// queueMatches creates the QUEUED matches pick chooses among the key's
// followers: the ids of those each user got (a user may already have a
// vacancy from another search).
func queueMatches(ctx context.Context, tx pgx.Tx, key string, found []vacancy.Vacancy,
	pick func(users []vacancy.Recipient) []vacancy.NewMatch) (map[int64][]int64, error) {
	perUser := map[int64][]int64{}
	if len(found) == 0 {
		return perUser, nil
	}
	users, err := followers(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	matches := pick(users)
	if len(matches) == 0 {
		return perUser, nil
	}
	uids := make([]int64, len(matches))
	vids := make([]int64, len(matches))
	for i, nm := range matches {
		uids[i], vids[i] = nm.UserID, nm.VacancyID
	}
	rows, err := tx.Query(ctx, `
INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at)
SELECT t.u, t.v, 'QUEUED', v.published_at
FROM unnest($1::bigint[], $2::bigint[]) AS t(u, v) JOIN vacancies v ON v.id = t.v
ON CONFLICT (user_id, vacancy_id) DO NOTHING
RETURNING user_id, id`, uids, vids)
	if err != nil {
		return nil, fmt.Errorf("queue matches: %w", err)
	}
	var u, id int64
	if _, err := pgx.ForEachRow(rows, []any{&u, &id}, func() error {
		perUser[u] = append(perUser[u], id)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("queue matches: %w", err)
	}
	return perUser, nil
}

// lockSearchKey serializes, per search_key, saving a discovery with saving
// a search (see SaveDiscovery).
func lockSearchKey(ctx context.Context, tx pgx.Tx, key string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('search_key:' || $1, 0))`, key); err != nil {
		return fmt.Errorf("lock search key: %w", err)
	}
	return nil
}

// queueVacancy queues the insert of a vacancy HH listed (its search
// fields; the detail comes later), unless it is stored already.
func queueVacancy(b *pgx.Batch, v vacancy.Vacancy) {
	b.Queue(`
INSERT INTO vacancies (id, title, employer, url, area, salary_from, salary_to, salary_currency, salary_gross,
                       experience, schedule, published_at, snippet, raw, apply_url, response_url, letter_required, has_test)
VALUES ($1, $2, $3, $4, $5, NULLIF($6, 0), NULLIF($7, 0), $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (id) DO NOTHING`,
		v.ID, v.Title, v.Employer, v.URL, v.Area, v.Salary.From, v.Salary.To, v.Salary.Currency, v.Salary.Gross,
		v.Experience, v.Schedule, v.PublishedAt, v.Snippet, rawJSON(v.Raw), v.ApplyURL, v.ResponseURL, v.LetterRequired, v.HasTest)
}
