package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// A new search's first news (ARCHITECTURE "Vacancies"): searches.first_news
// moves pending → (retrying →) waiting or told, waiting → told, each step
// one conditional UPDATE naming the old state, so a search is told each
// thing once whichever replica, job run or worker gets there.
//
//   - pending: its first discovery has not been saved (never run, or the
//     replica that would have run it died); the first-news sweep runs it.
//   - retrying: its first fetch failed and the user was told it will be
//     retried; the sweep retries it until HH answers.
//   - waiting: its first discovery queued matches for the user (their ids
//     in first_matches); a delivered card of one of them is the news, and
//     if every one ends without a card (not relevant, archived, dropped by
//     a ban word) "nothing new yet" is written instead.
//   - told: the user heard the outcome. A search HH refuses for its
//     parameters (Searches.SetAside, state refused) is told too: the
//     refusal is its news, and it is asked of HH no more.

// newsColumns are what a note about a search needs, with users u.
const newsColumns = `s.id, s.user_id, s.params, s.search_key, s.created_at, u.language, u.telegram_language`

// scanNews reads rows of newsColumns (and, with queued, first_matches' length).
func scanNews(rows pgx.Rows, failed bool, withQueued bool) ([]vacancy.FirstNews, error) {
	defer rows.Close()
	var news []vacancy.FirstNews
	for rows.Next() {
		var n vacancy.FirstNews
		var sr searchRow
		var lang, tgLang string
		dest := append(sr.dest(), &lang, &tgLang)
		if withQueued {
			dest = append(dest, &n.Queued)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		var err error
		if n.Search, err = sr.search(); err != nil {
			return nil, err
		}
		n.Lang = domain.User{Language: lang, TelegramLanguage: tgLang}.Lang()
		n.Failed = failed
		news = append(news, n)
	}
	return news, rows.Err()
}

// tellFirstNews records the first discovery of the searches where holds
// (with $1 = arg) that wait for one (pending or retrying): a search whose
// user got matches (queued, by user) waits for them with their ids; the
// others are told, and announce's note for them (nil: none) goes to the
// outbox in the caller's transaction.
func tellFirstNews(ctx context.Context, tx pgx.Tx, where string, arg any, queued map[int64][]int64,
	announce domain.Render[[]vacancy.FirstNews]) error {
	var users, ids []int64
	for u, ms := range queued {
		for _, id := range ms {
			users, ids = append(users, u), append(ids, id)
		}
	}
	rows, err := tx.Query(ctx, `
WITH q AS (
    SELECT t.u, array_agg(t.m ORDER BY t.m) AS ids FROM unnest($2::bigint[], $3::bigint[]) AS t(u, m) GROUP BY t.u
)
UPDATE searches s SET first_news = CASE WHEN q.ids IS NULL THEN 'told' ELSE 'waiting' END, first_matches = q.ids
FROM users u LEFT JOIN q ON q.u = u.id
WHERE u.id = s.user_id AND s.first_news IN ('pending', 'retrying') AND `+where+`
RETURNING `+newsColumns+`, COALESCE(cardinality(q.ids), 0)`, arg, users, ids)
	if err != nil {
		return fmt.Errorf("first news: %w", err)
	}
	news, err := scanNews(rows, false, true)
	if err != nil {
		return fmt.Errorf("first news: %w", err)
	}
	// Cards are news enough: only the searches told now get a note.
	told := news[:0]
	for _, n := range news {
		if n.Queued == 0 {
			told = append(told, n)
		}
	}
	return announceTx(ctx, tx, told, announce)
}

// announceTx writes announce's messages for news to the outbox.
func announceTx(ctx context.Context, tx pgx.Tx, news []vacancy.FirstNews, announce domain.Render[[]vacancy.FirstNews]) error {
	if announce == nil || len(news) == 0 {
		return nil
	}
	if err := enqueueTx(ctx, tx, announce(news)); err != nil {
		return fmt.Errorf("first news: %w", err)
	}
	return nil
}

// FirstFetchFailed tells the users of the key's searches still waiting
// for their first discovery (pending) that it failed and will be retried:
// they become retrying, so each hears it once.
func (s *Matches) FirstFetchFailed(ctx context.Context, key string, announce domain.Render[[]vacancy.FirstNews]) error {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
UPDATE searches s SET first_news = 'retrying' FROM users u
WHERE u.id = s.user_id AND s.first_news = 'pending' AND s.search_key = $1
RETURNING `+newsColumns, key)
		if err != nil {
			return err
		}
		news, err := scanNews(rows, true, false)
		if err != nil {
			return err
		}
		return announceTx(ctx, tx, news, announce)
	})
	if err != nil {
		return fmt.Errorf("first fetch failed: %w", interpretError(err))
	}
	return nil
}

// settleFirstNews tells the waiting searches whose first matches have all
// ended without a card (NOT_SUITABLE, IN_ARCHIVE, or deleted) that there
// is nothing new yet, writing announce's note to the outbox in tx. With
// users nil it looks at every waiting search (the sweep); otherwise at
// those of users whose first matches include one of matches (the caller
// just ended them in tx).
//
// The searches are locked first and checked by a later statement, whose
// snapshot is taken after the lock is granted: of two transactions ending
// a search's last two matches, the second to lock sees the first's end
// committed and writes the note. Checked in the same statement as the
// lock, both could see the other's match still open and neither write it.
// The caller locks its matches before the searches, as delivery does
// (the vacancy delivery hook), so the two never wait for each other in a cycle.
// A stale snapshot can only show a match less final than it is, so the
// note is never written while a match may still bring a card.
func settleFirstNews(ctx context.Context, tx pgx.Tx, users, matches []int64, announce domain.Render[[]vacancy.FirstNews]) error {
	rows, err := tx.Query(ctx, `
SELECT s.id FROM searches s
WHERE s.first_news = 'waiting' AND ($1::bigint[] IS NULL OR s.user_id = ANY($1) AND s.first_matches && $2::bigint[])
ORDER BY s.id
FOR UPDATE`, users, matches)
	if err != nil {
		return fmt.Errorf("settle first news: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("settle first news: %w", err)
	}
	if len(ids) == 0 {
		return nil
	}
	rows, err = tx.Query(ctx, `
UPDATE searches s SET first_news = 'told' FROM users u
WHERE s.id = ANY($1) AND s.first_news = 'waiting' AND u.id = s.user_id
  AND NOT EXISTS (SELECT 1 FROM vacancy_matches m
                  WHERE m.id = ANY(s.first_matches) AND m.status NOT IN ('NOT_SUITABLE', 'IN_ARCHIVE'))
RETURNING `+newsColumns, ids)
	if err != nil {
		return fmt.Errorf("settle first news: %w", err)
	}
	news, err := scanNews(rows, false, false)
	if err != nil {
		return fmt.Errorf("settle first news: %w", err)
	}
	return announceTx(ctx, tx, news, announce)
}

// SettleFirstNews tells every waiting search whose first matches all
// ended without a card that there is nothing new yet. The transitions
// that end a match do so themselves; this sweep catches what ended them
// otherwise (a SKIPPED match pruned past recovery, say).
func (s *Matches) SettleFirstNews(ctx context.Context, announce domain.Render[[]vacancy.FirstNews]) error {
	if err := s.withTx(ctx, func(tx pgx.Tx) error { return settleFirstNews(ctx, tx, nil, nil, announce) }); err != nil {
		return fmt.Errorf("settle first news: %w", interpretError(err))
	}
	return nil
}

// FirstNewsGroups lists the search keys whose first discovery is owed:
// keys with a search pending for longer than grace (the replica that
// saved it runs it at once; past grace it did not, or died) or retrying.
// A refused search is never among them: SetAside marks it told.
func (s *Matches) FirstNewsGroups(ctx context.Context, grace time.Duration) ([]vacancy.Group, error) {
	out, err := groupsOf(ctx, s.pool, `
SELECT DISTINCT ON (search_key) search_key, params FROM searches
WHERE state = 'active' AND search_key IN (SELECT search_key FROM searches
                     WHERE first_news <> 'told' AND state = 'active' AND (first_news = 'retrying'
                        OR first_news = 'pending' AND created_at < now() - $1 * interval '1 millisecond'))
ORDER BY search_key, id`, grace.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("first news groups: %w", err)
	}
	return out, nil
}
