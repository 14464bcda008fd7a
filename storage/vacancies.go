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

// The vacancy workflow's repository (vacancy.Repository).
var _ vacancy.Repository = (*Store)(nil)

// A card's delivery is its match's ANALYZED → SENT_TO_USER with the chat,
// message id and sent_at, in the statement that marks the card's outbox
// row sent (only from ANALYZED: a match decided meanwhile stays as it is).
// The card of a match a new search's first news waits on is that news: the
// search is told, and no "nothing new yet" follows (the match is locked
// before the search, as where matches end: settleFirstNews).
var _ = onDelivered(domain.KindVacancy, transitionSQL(vacancy.Analyzed, vacancy.SentToUser, `
vacancy_sent AS (
    UPDATE vacancy_matches m SET status = '%[2]s', chat_id = done.chat_id, message_id = done.message_id,
        sent_at = now(), updated_at = now(), claimed_until = NULL, claim_token = NULL
    FROM done WHERE done.kind = 'vacancy' AND NOT done.edit AND m.id = done.ref AND m.status = '%[1]s'
      AND done.message_id IS NOT NULL
    RETURNING m.id, m.user_id
), vacancy_told AS (
    UPDATE searches s SET first_news = 'told'
    FROM vacancy_sent m WHERE s.user_id = m.user_id AND s.first_news = 'waiting' AND m.id = ANY(s.first_matches)
)`))

// transitionSQL fills a statement moving matches from → to (%[1]s, %[2]s)
// after the workflow's transition table allowed the move; a move the table
// refuses is a programming error, caught at start-up.
func transitionSQL(from, to vacancy.Status, sql string) string {
	if !vacancy.CanTransition(from, to) {
		panic(fmt.Sprintf("storage: vacancy transition %s → %s not in the table", from, to))
	}
	return fmt.Sprintf(sql, from, to)
}

// QueueChannel is notified when matches are queued, so every replica's
// workers wake at once instead of at their next sweep.
const QueueChannel = "vacancy_queue"

// Profile returns the user's profile ("" if none).
func (s *Store) Profile(ctx context.Context, userID int64) (string, error) {
	var p string
	err := s.pool.QueryRow(ctx, `SELECT profile FROM users WHERE id = $1`, userID).Scan(&p)
	if err != nil {
		return "", fmt.Errorf("profile of user %d: %w", userID, interpretError(err))
	}
	return p, nil
}

// SetProfile stores the user's profile.
func (s *Store) SetProfile(ctx context.Context, userID int64, profile string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET profile = $2, updated_at = now() WHERE id = $1`, userID, profile)
	if err != nil {
		return fmt.Errorf("set profile of user %d: %w", userID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set profile of user %d: %w", userID, domain.ErrNotFound)
	}
	return nil
}

// AddSearch saves a search unless the user already has one with its key;
// created reports which happened, and the stored search is returned. A new
// search is given, in the same transaction, up to backfill of the key's
// vacancies published since since (those other users' discovery already
// collected), as QUEUED matches; queued counts them. When the key has been
// discovered before, that backfill is the search's first discovery: the
// search is marked told and announce's messages (nil is none) are written
// to the outbox with it.
func (s *Store) AddSearch(ctx context.Context, sr vacancy.Search, backfill int, since time.Time,
	announce domain.Render[[]vacancy.FirstNews]) (vacancy.Search, bool, int, error) {
	params, err := json.Marshal(sr.Params)
	if err != nil {
		return sr, false, 0, fmt.Errorf("add search: %w", err)
	}
	var out vacancy.Search
	created, queued := false, 0
	err = s.WithTx(ctx, func(tx pgx.Tx) error {
		if err := lockSearchKey(ctx, tx, sr.Key); err != nil {
			return err
		}
		row := tx.QueryRow(ctx, `
INSERT INTO searches (user_id, params, search_key) VALUES ($1, $2, $3)
ON CONFLICT (user_id, search_key) DO NOTHING
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

func scanSearch(row pgx.Row) (vacancy.Search, error) {
	var sr vacancy.Search
	var params []byte
	if err := row.Scan(&sr.ID, &sr.UserID, &params, &sr.Key, &sr.CreatedAt); err != nil {
		return sr, err
	}
	if err := json.Unmarshal(params, &sr.Params); err != nil {
		return sr, fmt.Errorf("search %d params: %w", sr.ID, err)
	}
	return sr, nil
}

// UserSearches lists a user's searches, oldest first.
func (s *Store) UserSearches(ctx context.Context, userID int64) ([]vacancy.Search, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, user_id, params, search_key, created_at FROM searches
WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("searches of user %d: %w", userID, err)
	}
	defer rows.Close()
	var out []vacancy.Search
	for rows.Next() {
		sr, err := scanSearch(rows)
		if err != nil {
			return nil, fmt.Errorf("searches of user %d: %w", userID, err)
		}
		out = append(out, sr)
	}
	return out, rows.Err()
}

// DeleteSearch deletes the user's search; another user's id deletes nothing.
func (s *Store) DeleteSearch(ctx context.Context, userID, id int64) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM searches WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return false, fmt.Errorf("delete search %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// BanWords lists a user's ban words alphabetically.
func (s *Store) BanWords(ctx context.Context, userID int64) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT word FROM ban_words WHERE user_id = $1 ORDER BY word`, userID)
	if err != nil {
		return nil, fmt.Errorf("ban words of user %d: %w", userID, err)
	}
	words, err := pgx.CollectRows(rows, pgx.RowTo[string])
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

// Stats counts a user's matches by status, with the last fetch of their
// searches and the queue sizes.
func (s *Store) Stats(ctx context.Context, userID int64) (vacancy.Stats, error) {
	st := vacancy.Stats{Counts: map[vacancy.Status]int{}}
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM vacancy_matches WHERE user_id = $1 GROUP BY status`, userID)
	if err != nil {
		return st, fmt.Errorf("vacancy stats: %w", err)
	}
	for rows.Next() {
		var status string
		var n int
		if err := rows.Scan(&status, &n); err != nil {
			rows.Close()
			return st, fmt.Errorf("vacancy stats: %w", err)
		}
		st.Counts[vacancy.Status(status)] = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return st, fmt.Errorf("vacancy stats: %w", err)
	}
	var last *time.Time
	err = s.pool.QueryRow(ctx, `
SELECT (SELECT max(d.updated_at) FROM discovery_state d JOIN searches s ON s.search_key = d.search_key WHERE s.user_id = $1),
       (SELECT count(*) FROM vacancy_matches WHERE status = 'QUEUED')`, userID).Scan(&last, &st.QueueTotal)
	if err != nil {
		return st, fmt.Errorf("vacancy stats: %w", err)
	}
	if last != nil {
		st.LastFetch = *last
	}
	return st, nil
}

// SearchGroups returns every distinct search_key with its parameters.
func (s *Store) SearchGroups(ctx context.Context) ([]vacancy.Group, error) {
	return searchGroups(ctx, s.pool, "")
}

// SearchGroup is SearchGroups for one key.
func (s *Store) SearchGroup(ctx context.Context, key string) (vacancy.Group, error) {
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

// searchGroups lists distinct search_keys with the parameters of each key's
// oldest search (all searches of a key have equal parameters up to case and
// spacing). Who follows a key is read when a discovery is saved.
func searchGroups(ctx context.Context, q querier, key string) ([]vacancy.Group, error) {
	rows, err := q.Query(ctx, `
SELECT DISTINCT ON (search_key) search_key, params FROM searches
WHERE $1 = '' OR search_key = $1
ORDER BY search_key, id`, key)
	if err != nil {
		return nil, fmt.Errorf("search groups: %w", err)
	}
	defer rows.Close()
	var out []vacancy.Group
	for rows.Next() {
		var g vacancy.Group
		var params []byte
		if err := rows.Scan(&g.Key, &params); err != nil {
			return nil, fmt.Errorf("search groups: %w", err)
		}
		if err := json.Unmarshal(params, &g.Params); err != nil {
			return nil, fmt.Errorf("search groups: params of %s: %w", g.Key, err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// followers are the users whose searches have key, with their ban words.
func followers(ctx context.Context, q querier, key string) ([]vacancy.Recipient, error) {
	rows, err := q.Query(ctx, `
SELECT s.user_id, COALESCE((SELECT array_agg(word ORDER BY word) FROM ban_words b WHERE b.user_id = s.user_id), '{}')
FROM searches s WHERE s.search_key = $1 ORDER BY s.id`, key)
	if err != nil {
		return nil, fmt.Errorf("followers of %s: %w", key, err)
	}
	users, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (vacancy.Recipient, error) {
		var u vacancy.Recipient
		err := row.Scan(&u.ID, &u.BanWords)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("followers of %s: %w", key, err)
	}
	return users, nil
}

// Markers returns a search_key's discovery state (zero before its first run).
func (s *Store) Markers(ctx context.Context, key string) (vacancy.Markers, error) {
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

// Unseen reports which ids the search_key has not collected yet: neither
// among its hits nor at or below its pruned_through_id (the highest id of
// its hits the prune job deleted; HH's ids grow with time).
func (s *Store) Unseen(ctx context.Context, key string, ids []int64) (map[int64]bool, error) {
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	rows, err := s.pool.Query(ctx, `SELECT vacancy_id FROM search_hits WHERE search_key = $1 AND vacancy_id = ANY($2)
UNION ALL
SELECT i FROM unnest($2::bigint[]) i, discovery_state d WHERE d.search_key = $1 AND i <= d.pruned_through_id`, key, ids)
	if err != nil {
		return nil, fmt.Errorf("unseen vacancies: %w", err)
	}
	seen, err := pgx.CollectRows(rows, pgx.RowTo[int64])
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
// per-key advisory lock orders it with AddSearch, so a user who saves the
// same search meanwhile gets these vacancies either here or from the
// backfill, never from neither. It returns how many matches were created
// and notifies QueueChannel.
func (s *Store) SaveDiscovery(ctx context.Context, key string, found []vacancy.Vacancy, hits []int64,
	m vacancy.Markers, pick func(users []vacancy.Recipient) []vacancy.NewMatch, announce domain.Render[[]vacancy.FirstNews]) (int, error) {
	queued := 0
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		if err := lockSearchKey(ctx, tx, key); err != nil {
			return err
		}
		if len(found) > 0 {
			b := &pgx.Batch{}
			for _, v := range found {
				b.Queue(`
INSERT INTO vacancies (id, title, employer, url, area, salary_from, salary_to, salary_currency, salary_gross,
                       experience, schedule, published_at, snippet, raw)
VALUES ($1, $2, $3, $4, $5, NULLIF($6, 0), NULLIF($7, 0), $8, $9, $10, $11, $12, $13, $14)
ON CONFLICT (id) DO NOTHING`,
					v.ID, v.Title, v.Employer, v.URL, v.Area, v.Salary.From, v.Salary.To, v.Salary.Currency, v.Salary.Gross,
					v.Experience, v.Schedule, v.PublishedAt, v.Snippet, rawJSON(v.Raw))
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

func rawJSON(b []byte) any {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return string(b)
}

const matchColumns = `m.id, m.user_id, m.vacancy_id, m.status, m.published_at, m.is_relevant, m.analysis,
m.skip_reason, m.attempts, COALESCE(m.chat_id, 0), COALESCE(m.message_id, 0), m.sent_at, m.created_at, m.updated_at,
COALESCE(m.claim_token::text, '')`

func matchDest(m *vacancy.Match, analysis *[]byte, sentAt **time.Time) []any {
	return []any{&m.ID, &m.UserID, &m.VacancyID, &m.Status, &m.PublishedAt, new(*bool), analysis,
		&m.SkipReason, &m.Attempts, &m.ChatID, &m.MessageID, sentAt, &m.CreatedAt, &m.UpdatedAt, &m.ClaimToken}
}

func finishMatch(m *vacancy.Match, analysis []byte, sentAt *time.Time) error {
	if sentAt != nil {
		m.SentAt = *sentAt
	}
	if len(analysis) > 0 {
		var v vacancy.Verdict
		if err := json.Unmarshal(analysis, &v); err != nil {
			return fmt.Errorf("match %d analysis: %w", m.ID, err)
		}
		m.Verdict = &v
	}
	return nil
}

const vacancyColumns = `v.id, v.title, v.employer, v.url, v.area, COALESCE(v.salary_from, 0), COALESCE(v.salary_to, 0),
v.salary_currency, v.salary_gross, v.experience, v.schedule, v.published_at, v.snippet, v.description, v.key_skills,
v.detail_fetched_at`

func vacancyDest(v *vacancy.Vacancy, fetched **time.Time) []any {
	return []any{&v.ID, &v.Title, &v.Employer, &v.URL, &v.Area, &v.Salary.From, &v.Salary.To,
		&v.Salary.Currency, &v.Salary.Gross, &v.Experience, &v.Schedule, &v.PublishedAt, &v.Snippet, &v.Description,
		&v.KeySkills, fetched}
}

// ClaimMatch claims the newest-published claimable match whose lease is
// free or expired, in one statement with FOR UPDATE SKIP LOCKED so
// concurrent workers on any replica never take the same one. ok is false
// when nothing is claimable.
//
// Claimable are QUEUED matches: an ANALYZED one has its card in the
// outbox, written in the transaction that made it ANALYZED, and claiming
// it would send the card twice.
func (s *Store) ClaimMatch(ctx context.Context, o vacancy.ClaimOptions) (vacancy.Claim, bool, error) {
	var c vacancy.Claim
	var analysis []byte
	var sentAt, fetched *time.Time
	var lang, tgLang string
	dest := append(matchDest(&c.Match, &analysis, &sentAt), vacancyDest(&c.Vacancy, &fetched)...)
	dest = append(dest, &lang, &tgLang, &c.User.Profile, &c.User.BanWords, &c.User.Applied, &c.User.NotInterested, &c.DetailStale, &c.DetailMine,
		&c.User.Senior, &c.FirstNews)
	err := s.pool.QueryRow(ctx, `
WITH c AS (
    SELECT q.id FROM vacancy_matches q
    WHERE q.status = 'QUEUED'
      AND (q.claimed_until IS NULL OR q.claimed_until < now())
      -- A QUEUED match waits while another worker fetches its vacancy's
      -- detail, and, while HH refuses us ($3), unless the detail is at hand.
      -- A scalar subquery, evaluated per candidate row as the index walk
      -- reaches it: NOT EXISTS here costs a fifth of the claim rate.
      AND (SELECT d.detail_fetching_until > now()
                  OR $3 AND (d.detail_fetched_at IS NULL OR d.detail_fetched_at <= now() - $4 * interval '1 millisecond')
           FROM vacancies d WHERE d.id = q.vacancy_id) IS NOT TRUE
    ORDER BY q.published_at DESC, q.id
    LIMIT 1
    FOR UPDATE OF q SKIP LOCKED
), m AS (
    UPDATE vacancy_matches m
    SET claimed_until = now() + $1 * interval '1 millisecond', claim_token = gen_random_uuid(),
        attempts = m.attempts + 1, updated_at = now()
    FROM c WHERE m.id = c.id
    RETURNING m.*
), o AS (
    -- Whether another open match waits on this vacancy: only then is a
    -- fetch lease worth its write (most vacancies have one match).
    SELECT EXISTS (SELECT 1 FROM m, vacancy_matches x
                   WHERE x.vacancy_id = m.vacancy_id AND x.id <> m.id AND x.status = 'QUEUED') AS shared
), l AS (
    -- A QUEUED match whose vacancy's detail is stale takes its fetch lease,
    -- unless another worker holds it: then this claim learns it waits. Two
    -- claims racing for one vacancy serialize on its row here.
    UPDATE vacancies f SET detail_fetching_until = now() + $5 * interval '1 millisecond'
    FROM m, o WHERE f.id = m.vacancy_id AND m.status = 'QUEUED' AND o.shared
      AND (f.detail_fetched_at IS NULL OR f.detail_fetched_at <= now() - $4 * interval '1 millisecond')
      AND (f.detail_fetching_until IS NULL OR f.detail_fetching_until < now())
    RETURNING f.id
)
SELECT `+matchColumns+`, `+vacancyColumns+`, u.language, u.telegram_language, u.profile,
       COALESCE((SELECT array_agg(word) FROM ban_words b WHERE b.user_id = m.user_id), '{}'),
       -- The user's taste: their latest decided vacancies.
       ARRAY(SELECT t.title FROM vacancy_matches d JOIN vacancies t ON t.id = d.vacancy_id
             WHERE d.user_id = m.user_id AND d.status = 'APPLIED' ORDER BY d.updated_at DESC LIMIT $2),
       ARRAY(SELECT t.title FROM vacancy_matches d JOIN vacancies t ON t.id = d.vacancy_id
             WHERE d.user_id = m.user_id AND d.status = 'NOT_INTERESTED' ORDER BY d.updated_at DESC LIMIT $2),
       v.detail_fetched_at IS NULL OR v.detail_fetched_at <= now() - $4 * interval '1 millisecond',
       EXISTS (SELECT 1 FROM l) OR NOT (SELECT shared FROM o),
       -- A jsonb string contains itself and an array its elements, so this
       -- reads searches stored with one experience and with several.
       EXISTS (SELECT 1 FROM searches s WHERE s.user_id = m.user_id AND s.params->'experience' @> '"moreThan6"'),
       -- A new search's first news waits on this match: its end without
       -- a card is checked for the note (a match is queued in the
       -- transaction that makes its search wait, so none becomes one later).
       EXISTS (SELECT 1 FROM searches s WHERE s.user_id = m.user_id AND s.first_news = 'waiting'
               AND m.id = ANY(s.first_matches))
FROM m JOIN vacancies v ON v.id = m.vacancy_id JOIN users u ON u.id = m.user_id,
     -- A claim lost in a database crash is only taken again.
     `+asyncCommit,
		o.ClaimLease.Milliseconds(), o.Taste, o.FreshOnly, o.DetailFresh.Milliseconds(), o.FetchLease.Milliseconds()).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("claim match: %w", err)
	}
	if err := finishMatch(&c.Match, analysis, sentAt); err != nil {
		return c, false, err
	}
	if fetched != nil {
		c.DetailFetchedAt = *fetched
	}
	c.User.ID = c.Match.UserID
	c.User.Lang = domain.User{Language: lang, TelegramLanguage: tgLang}.Lang()
	return c, true, nil
}

// NextLeaseExpiry is when the earliest live claim runs out, so an idle
// worker can wake to take over work a dead replica left.
func (s *Store) NextLeaseExpiry(ctx context.Context) (time.Time, bool, error) {
	var at *time.Time
	err := s.pool.QueryRow(ctx, `SELECT min(claimed_until) FROM vacancy_matches
WHERE status IN ('QUEUED', 'ANALYZED') AND claimed_until > now()`).Scan(&at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next lease expiry: %w", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return *at, true, nil
}

// ReleaseClaim moves a claim's expiry to until (a card that could not be
// rendered yet); it does nothing if the claim is no longer token's.
func (s *Store) ReleaseClaim(ctx context.Context, id int64, token string, until time.Time) error {
	_, err := s.pool.Exec(ctx, `UPDATE vacancy_matches SET claimed_until = $3, updated_at = now()
WHERE id = $1 AND claim_token = $2::uuid`, id, token, until)
	if err != nil {
		return fmt.Errorf("release claim of match %d: %w", id, err)
	}
	return nil
}

// SaveDetail stores a detail fetched from HH and ends the fetch lease, so
// the vacancy's other matches are claimed with it.
func (s *Store) SaveDetail(ctx context.Context, v vacancy.Vacancy) error {
	skills := v.KeySkills
	if skills == nil {
		skills = []string{}
	}
	if _, err := s.pool.Exec(ctx, saveDetailSQL, v.ID, v.Description, skills, v.Experience, v.Schedule, rawJSON(v.Raw)); err != nil {
		return fmt.Errorf("save detail of vacancy %d: %w", v.ID, err)
	}
	return nil
}

// ReleaseDetail ends a fetch lease that fetched nothing (HH failed or
// refused), so another worker may ask later.
func (s *Store) ReleaseDetail(ctx context.Context, id int64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE vacancies SET detail_fetching_until = NULL WHERE id = $1`, id); err != nil {
		return fmt.Errorf("release detail lease of vacancy %d: %w", id, err)
	}
	return nil
}

// ArchiveVacancy moves every open match of a vacancy HH no longer serves
// (NEW, QUEUED, SKIPPED; claimed or not: a claim's holder finds its next
// conditional update refused) to IN_ARCHIVE in one statement, then ends
// the fetch lease; a separate statement, because a claim locks a match
// before its vacancy and this must not lock them the other way round.
// It returns how many left each status. A new search whose first matches
// have all ended without a card with these hears announce's note (nil:
// none) in the same transaction (the matches are locked before the
// searches, as everywhere).
func (s *Store) ArchiveVacancy(ctx context.Context, id int64, announce domain.Render[[]vacancy.FirstNews]) (map[vacancy.Status]int, error) {
	out := map[vacancy.Status]int{}
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
WITH o AS (
    SELECT id, status FROM vacancy_matches
    WHERE vacancy_id = $1 AND status IN ('NEW', 'QUEUED', 'SKIPPED')
    FOR UPDATE
)
UPDATE vacancy_matches m SET status = 'IN_ARCHIVE', claimed_until = NULL, claim_token = NULL, updated_at = now()
FROM o WHERE m.id = o.id AND m.status = o.status
RETURNING o.status, m.id, m.user_id`, id)
		if err != nil {
			return err
		}
		var st vacancy.Status
		var mid, uid int64
		var mids, uids []int64
		if _, err := pgx.ForEachRow(rows, []any{&st, &mid, &uid}, func() error {
			out[st]++
			mids, uids = append(mids, mid), append(uids, uid)
			return nil
		}); err != nil {
			return err
		}
		if announce == nil || len(mids) == 0 {
			return nil
		}
		return settleFirstNews(ctx, tx, uids, mids, announce)
	})
	if err != nil {
		return nil, fmt.Errorf("archive vacancy %d: %w", id, err)
	}
	if err := s.ReleaseDetail(ctx, id); err != nil {
		return out, err
	}
	return out, nil
}

// saveDetailSQL stores a vacancy's detail fetched from HH and ends its
// fetch lease.
const saveDetailSQL = `
UPDATE vacancies SET description = $2, key_skills = $3,
    experience = COALESCE(NULLIF($4, ''), experience), schedule = COALESCE(NULLIF($5, ''), schedule),
    raw = COALESCE($6::jsonb, raw), detail_fetched_at = now(), detail_fetching_until = NULL
WHERE id = $1`

// Transition moves a match from → to in one conditional UPDATE; ok is false
// when the match was not in from (or, with ch.Token, no longer under that
// claim): someone else moved it first. The caller checks the table.
//
// What ch.Tell renders from the moved match is written to the outbox in the
// same transaction, only when the match moved. Every move releases the claim: a move to ANALYZED
// carries the vacancy's card, and the outbox owns the delivery from then on.
//
// With ch.Announce (a match a new search's first news waits on), a move
// that ends the last of that search's first matches without a card writes
// its "nothing new yet" note in the same transaction.
func (s *Store) Transition(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	if ch.Tell == nil && ch.Announce == nil {
		return transition(ctx, s.pool, id, from, to, ch, false)
	}
	if ch.Announce == nil {
		return s.transitionTelling(ctx, id, from, to, ch)
	}
	var m vacancy.Match
	var ok bool
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var err error
		if m, ok, err = transition(ctx, tx, id, from, to, ch, false); err != nil || !ok {
			return err
		}
		if err := enqueueTx(ctx, tx, ch.Tell.Of(m)); err != nil {
			return fmt.Errorf("transition match %d %s → %s: %w", id, from, to, err)
		}
		return settleFirstNews(ctx, tx, []int64{m.UserID}, []int64{id}, ch.Announce)
	})
	if err != nil {
		return vacancy.Match{}, false, err
	}
	return m, ok, nil
}

// transitionTelling is a move and the messages it tells in one
// transaction of two round trips, the card's path: BEGIN travels with the
// move, COMMIT with the messages, which are rendered from the match as the
// move left it in between.
func (s *Store) transitionTelling(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return vacancy.Match{}, false, fmt.Errorf("transition match %d: %w", id, err)
	}
	// A connection released inside a transaction is closed by the pool, so
	// no error path below can hand an open transaction to the next user.
	defer conn.Release()
	end := func(sql string) error {
		_, err := conn.Exec(ctx, sql)
		return err
	}
	m, ok, err := transition(ctx, conn, id, from, to, ch, true)
	if err != nil {
		_ = end("ROLLBACK")
		return m, false, err
	}
	msgs := ch.Tell.Of(m)
	if !ok || len(msgs) == 0 {
		// The detail, if any, is kept even when the match moved on.
		if err := end("COMMIT"); err != nil {
			return vacancy.Match{}, false, fmt.Errorf("transition match %d: commit: %w", id, err)
		}
		return m, ok, nil
	}
	sql, args, err := insertMessagesSQL(msgs)
	if err != nil {
		_ = end("ROLLBACK")
		return vacancy.Match{}, false, err
	}
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		_ = end("ROLLBACK")
		return vacancy.Match{}, false, fmt.Errorf("transition match %d %s → %s: enqueue %d messages: %w", id, from, to, len(msgs), err)
	}
	return m, true, nil
}

// batcher is what a pool and a transaction have in common for a batch.
type batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// transition moves a match in one batch; begin opens a transaction with
// it, which the caller ends.
func transition(ctx context.Context, q batcher, id int64, from, to vacancy.Status, ch vacancy.Change, begin bool) (vacancy.Match, bool, error) {
	var relevant *bool
	var score *int
	var analysis []byte
	if ch.Verdict != nil {
		r := ch.Verdict.Relevant()
		relevant, score = &r, &ch.Verdict.Score
		var err error
		if analysis, err = json.Marshal(ch.Verdict); err != nil {
			return vacancy.Match{}, false, fmt.Errorf("transition match %d: %w", id, err)
		}
	}
	var token, sentAt any
	if ch.Token != "" {
		token = ch.Token
	}
	if !ch.SentAt.IsZero() {
		sentAt = ch.SentAt
	}
	var chat, msg any
	if ch.MessageID != 0 {
		chat, msg = ch.ChatID, ch.MessageID
	}
	var m vacancy.Match
	var sent *time.Time
	// With a detail, both statements go in one batch: one round trip and
	// one implicit transaction (or the caller's). The match goes first: a
	// claim locks a match before its vacancy, and this must not lock them
	// the other way round.
	b := &pgx.Batch{}
	if begin {
		b.Queue("BEGIN")
	}
	b.Queue(`
UPDATE vacancy_matches m SET
    status = $3, updated_at = now(),
    is_relevant = COALESCE($4, is_relevant), score = COALESCE($5, score), analysis = COALESCE($6::jsonb, analysis),
    skip_reason = CASE WHEN $3 = 'SKIPPED' THEN $7 ELSE '' END,
    chat_id = COALESCE($8, chat_id), message_id = COALESCE($9, message_id), sent_at = COALESCE($10, sent_at),
    claimed_until = NULL, claim_token = NULL
WHERE id = $1 AND status = $2 AND ($11::uuid IS NULL OR claim_token = $11::uuid)
RETURNING `+matchColumns,
		id, from, to, relevant, score, analysis, ch.SkipReason, chat, msg, sentAt, token)
	if v := ch.Detail; v != nil {
		skills := v.KeySkills
		if skills == nil {
			skills = []string{}
		}
		b.Queue(saveDetailSQL, v.ID, v.Description, skills, v.Experience, v.Schedule, rawJSON(v.Raw))
	}
	if ch.Token != "" {
		// A move under a claim is the workers' own (a press has no
		// claim): its commit does not wait for the disk, as dispatch's
		// steps and the memory chat's stages (ARCHITECTURE "Commits").
		// Lost in a database crash, the match is QUEUED again and judged
		// again; its card, if any, was lost with it and never sent, since
		// a sender's claim commits synchronously and so flushes past it.
		b.Queue(setAsyncCommit)
	}
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if begin {
		if _, err := br.Exec(); err != nil {
			return vacancy.Match{}, false, fmt.Errorf("transition match %d: begin: %w", id, err)
		}
	}
	err := br.QueryRow().Scan(matchDest(&m, &analysis, &sent)...)
	if ch.Detail != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		// Stored even when the match had moved on: the detail is good, and
		// storing it ends the vacancy's fetch lease.
		if _, derr := br.Exec(); derr != nil {
			return vacancy.Match{}, false, fmt.Errorf("transition match %d: save vacancy %d detail: %w", id, ch.Detail.ID, derr)
		}
	}
	if err == nil {
		err = br.Close()
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return vacancy.Match{}, false, nil
	}
	if err != nil {
		return vacancy.Match{}, false, fmt.Errorf("transition match %d %s → %s: %w", id, from, to, err)
	}
	if err := finishMatch(&m, analysis, sent); err != nil {
		return m, true, err
	}
	return m, true, nil
}

// DeleteMatch deletes a QUEUED or SKIPPED match (a ban word hit), and its
// vacancy if no other match holds it. With a token, only under that claim.
// With announce, a new search whose first matches have all ended without
// a card once this one is gone hears "nothing new yet" in the same
// transaction.
func (s *Store) DeleteMatch(ctx context.Context, id int64, token string, announce domain.Render[[]vacancy.FirstNews]) (bool, error) {
	var tok any
	if token != "" {
		tok = token
	}
	deleted := false
	err := s.WithTx(ctx, func(tx pgx.Tx) error {
		var vid, uid int64
		err := tx.QueryRow(ctx, `DELETE FROM vacancy_matches
WHERE id = $1 AND status IN ('QUEUED', 'SKIPPED') AND ($2::uuid IS NULL OR claim_token = $2::uuid)
RETURNING vacancy_id, user_id`, id, tok).Scan(&vid, &uid)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		deleted = true
		if _, err = tx.Exec(ctx, `DELETE FROM vacancies v WHERE v.id = $1
AND NOT EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.vacancy_id = v.id)`, vid); err != nil {
			return err
		}
		if announce == nil {
			return nil
		}
		return settleFirstNews(ctx, tx, []int64{uid}, []int64{id}, announce)
	})
	if err != nil {
		return false, fmt.Errorf("delete match %d: %w", id, err)
	}
	return deleted, nil
}

// MatchWithVacancy returns one match and its vacancy, or domain.ErrNotFound.
func (s *Store) MatchWithVacancy(ctx context.Context, id int64) (vacancy.Match, vacancy.Vacancy, error) {
	var m vacancy.Match
	var v vacancy.Vacancy
	var analysis []byte
	var sent, fetched *time.Time
	dest := append(matchDest(&m, &analysis, &sent), vacancyDest(&v, &fetched)...)
	err := s.pool.QueryRow(ctx, `SELECT `+matchColumns+`, `+vacancyColumns+`
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id WHERE m.id = $1`, id).Scan(dest...)
	if err != nil {
		return m, v, fmt.Errorf("match %d: %w", id, interpretError(err))
	}
	return m, v, finishMatch(&m, analysis, sent)
}

// Skipped lists SKIPPED matches created since since, by id after afterID.
func (s *Store) Skipped(ctx context.Context, since time.Time, afterID int64, limit int) ([]vacancy.SkippedMatch, error) {
	rows, err := s.pool.Query(ctx, `
SELECT `+matchColumns+`, v.title, v.snippet, v.description,
       COALESCE((SELECT array_agg(word) FROM ban_words b WHERE b.user_id = m.user_id), '{}')
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id
WHERE m.status = 'SKIPPED' AND m.created_at >= $1 AND m.id > $2
ORDER BY m.id LIMIT $3`, since, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("skipped matches: %w", err)
	}
	defer rows.Close()
	var out []vacancy.SkippedMatch
	for rows.Next() {
		var sm vacancy.SkippedMatch
		var analysis []byte
		var sent *time.Time
		dest := append(matchDest(&sm.Match, &analysis, &sent), &sm.Title, &sm.Snippet, &sm.Desc, &sm.BanWords)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("skipped matches: %w", err)
		}
		if err := finishMatch(&sm.Match, analysis, sent); err != nil {
			return nil, err
		}
		out = append(out, sm)
	}
	return out, rows.Err()
}
