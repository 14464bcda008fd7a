package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// A digest's delivery records its message and, like a card's, tells a new
// search's first news that waits on one of the matches it lists.
const digestSentHook = `
digest_sent AS (
    UPDATE vacancy_digests g SET sent_at = now(), message_id = done.message_id
    FROM done WHERE done.kind = 'digest' AND NOT done.edit AND g.id = done.ref AND g.sent_at IS NULL
    RETURNING g.id, g.user_id
), digest_told AS (
    UPDATE searches s SET first_news = 'told'
    FROM digest_sent g WHERE s.user_id = g.user_id AND s.first_news = 'waiting'
      AND EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.digest_id = g.id AND m.id = ANY(s.first_matches))
)`

// rhythmColumns read vacancy_settings (as s).
const rhythmColumns = `s.mode, s.digest_times, s.digest_size, s.quiet_from, s.quiet_to, s.daily_cap`

// rhythmRow is vacancy_settings as scanned.
type rhythmRow struct {
	mode             string
	times            []int32
	size             int32
	quietFrom, quiet *int32
	cap              *int32
}

func (r *rhythmRow) dest() []any {
	return []any{&r.mode, &r.times, &r.size, &r.quietFrom, &r.quiet, &r.cap}
}

func (r rhythmRow) rhythm() vacancy.Rhythm {
	out := vacancy.Rhythm{Mode: vacancy.Mode(r.mode), DigestSize: int(r.size)}
	for _, t := range r.times {
		out.DigestTimes = append(out.DigestTimes, int(t))
	}
	if r.quietFrom != nil && r.quiet != nil {
		out.Quiet = vacancy.Span{From: int(*r.quietFrom), To: int(*r.quiet)}
	}
	if r.cap != nil {
		out.DailyCap = int(*r.cap)
	}
	return out
}

// rhythmArgs are a rhythm's columns as statement arguments, in
// rhythmColumns' order; off is NULL.
func rhythmArgs(r vacancy.Rhythm) []any {
	var from, to, limit any
	if r.Quiet.On() {
		from, to = r.Quiet.From, r.Quiet.To
	}
	if r.DailyCap > 0 {
		limit = r.DailyCap
	}
	return []any{string(r.Mode), r.DigestTimes, r.DigestSize, from, to, limit}
}

// Rhythm is the user's rhythm: vacancy.DefaultRhythm when they never set one.
func (s *Matches) Rhythm(ctx context.Context, userID int64) (vacancy.Rhythm, error) {
	var row rhythmRow
	err := s.pool.QueryRow(ctx, `SELECT `+rhythmColumns+` FROM vacancy_settings s WHERE s.user_id = $1`, userID).
		Scan(row.dest()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return vacancy.DefaultRhythm(), nil
	}
	if err != nil {
		return vacancy.Rhythm{}, fmt.Errorf("rhythm of user %d: %w", userID, err)
	}
	return row.rhythm(), nil
}

// TuneRhythm changes the user's rhythm with tune, holding the row's lock
// from the read to the write, so two presses at once both count; the row
// is created with the defaults first.
func (s *Matches) TuneRhythm(ctx context.Context, userID int64, tune func(vacancy.Rhythm) (vacancy.Rhythm, error)) (vacancy.Rhythm, error) {
	var out vacancy.Rhythm
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO vacancy_settings (user_id) VALUES ($1) ON CONFLICT (user_id) DO NOTHING`, userID); err != nil {
			return err
		}
		var row rhythmRow
		if err := tx.QueryRow(ctx, `SELECT `+rhythmColumns+` FROM vacancy_settings s WHERE s.user_id = $1 FOR UPDATE`, userID).
			Scan(row.dest()...); err != nil {
			return err
		}
		r, err := tune(row.rhythm())
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE vacancy_settings SET mode = $2, digest_times = $3, digest_size = $4,
    quiet_from = $5, quiet_to = $6, daily_cap = $7, updated_at = now() WHERE user_id = $1`, append([]any{userID}, rhythmArgs(r)...)...)
		out = r
		return err
	})
	if err != nil {
		return vacancy.Rhythm{}, fmt.Errorf("tune rhythm of user %d: %w", userID, err)
	}
	return out, nil
}

// transitionPaced is Transition for a relevant match's move with
// ch.Pace, in one transaction: the user's rhythm read under its row's lock
// (so matches of one user judged at once are paced one after another, and
// the cap counts each), their cards of the period when a cap is set, the
// move, then the match's card column and the card's rows as Pace decides.
// A user without a rhythm row has the default one and takes no lock.
func (s *Matches) transitionPaced(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	var m vacancy.Match
	var ok bool
	var paced vacancy.Paced
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		p := vacancy.Pacing{Rhythm: vacancy.DefaultRhythm()}
		var row rhythmRow
		err := tx.QueryRow(ctx, `SELECT `+rhythmColumns+`, `+userColumns+`
FROM vacancy_settings s JOIN users ON users.id = s.user_id
WHERE s.user_id = (SELECT user_id FROM vacancy_matches WHERE id = $1)
FOR UPDATE OF s`, id).Scan(append(row.dest(), userDest(&p.User)...)...)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return fmt.Errorf("read rhythm: %w", err)
		default:
			p.Rhythm = row.rhythm()
		}
		if p.Rhythm.DailyCap > 0 && p.Rhythm.Mode == vacancy.ModeInstant {
			// A statement of its own, after the lock: it sees the cards
			// of the transaction that held it.
			rows, err := tx.Query(ctx, `SELECT card_at FROM vacancy_matches
WHERE user_id = $1 AND card = 'outbox' AND card_at >= $2`, p.User.ID, ch.Pace.Since)
			if err != nil {
				return fmt.Errorf("count cards: %w", err)
			}
			if p.Cards, err = pgx.CollectRows(rows, pgx.RowTo[time.Time]); err != nil {
				return fmt.Errorf("count cards: %w", err)
			}
		}
		// Decided before the move, so the move writes where the card is
		// in its own UPDATE: a second one would be another version of the
		// row with an entry in each index.
		paced = ch.Pace.Decide(p)
		mark := &cardMark{card: "outbox", at: paced.At}
		if paced.Digest {
			mark.card = "digest"
		}
		if m, ok, err = transition(ctx, tx, id, from, to, ch, mark); err != nil || !ok {
			return err
		}

		if err := enqueueTx(ctx, tx, paced.Card); err != nil {
			return fmt.Errorf("pace card: %w", err)
		}
		if ch.Announce != nil {
			return settleFirstNews(ctx, tx, []int64{m.UserID}, []int64{id}, ch.Announce)
		}
		return nil
	})
	if err != nil {
		return vacancy.Match{}, false, fmt.Errorf("transition match %d %s → %s: %w", id, from, to, err)
	}
	if ok && ch.Pace.Moved != nil {
		ch.Pace.Moved(paced)
	}
	return m, ok, nil
}

// DigestsWaiting lists the users with matches waiting for a digest, with
// their rhythm and the latest slot handled.
func (s *Matches) DigestsWaiting(ctx context.Context) ([]vacancy.DigestWaiting, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rhythmColumns+`, s.digest_slot, `+userColumns+`
FROM vacancy_settings s JOIN users ON users.id = s.user_id
WHERE EXISTS (SELECT 1 FROM vacancy_matches m WHERE m.user_id = s.user_id AND m.status = 'ANALYZED' AND m.card = 'digest')
ORDER BY s.user_id`)
	if err != nil {
		return nil, fmt.Errorf("digests waiting: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (vacancy.DigestWaiting, error) {
		var w vacancy.DigestWaiting
		var row rhythmRow
		var last *time.Time
		err := r.Scan(append(append(row.dest(), &last), userDest(&w.User)...)...)
		w.Rhythm = row.rhythm()
		if last != nil {
			w.Last = *last
		}
		return w, err
	})
	if err != nil {
		return nil, fmt.Errorf("digests waiting: %w", err)
	}
	return out, nil
}

// writeDigestSQL lists the user's matches judged by the slot ($2) that
// wait for a digest in a new digest of them, if any wait.
const writeDigestSQL = `
WITH picked AS (
    SELECT id FROM vacancy_matches
    WHERE user_id = $1 AND status = 'ANALYZED' AND card = 'digest' AND card_at <= $2
    FOR UPDATE
), digest AS (
    INSERT INTO vacancy_digests (user_id, slot, matches, page_size)
    SELECT $1, $2, count(*), $3 FROM picked HAVING count(*) > 0
    ON CONFLICT (user_id, slot) DO NOTHING
    RETURNING id
), listed AS (
    UPDATE vacancy_matches m SET card = 'listed', digest_id = digest.id, updated_at = now()
    FROM digest, picked WHERE m.id = picked.id
)
SELECT id FROM digest`

// WriteDigest handles the user's digest slot once: the slot recorded
// (only if later than the last handled: a second run, or a second
// replica, finds it recorded and does nothing) and, when matches judged
// by then wait, a digest listing them and its first page's message in the
// outbox, in one transaction. ok is false when the slot was handled.
func (s *Matches) WriteDigest(ctx context.Context, userID int64, slot time.Time, tell domain.Render[vacancy.Digest]) (vacancy.Digest, bool, error) {
	var d vacancy.Digest
	var ok bool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		d, ok = vacancy.Digest{}, false
		var size int
		err := tx.QueryRow(ctx, `UPDATE vacancy_settings SET digest_slot = $2
WHERE user_id = $1 AND (digest_slot IS NULL OR digest_slot < $2) RETURNING digest_size`, userID, slot).Scan(&size)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		var id int64
		err = tx.QueryRow(ctx, writeDigestSQL, userID, slot, size).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // nothing judged by the slot: it is handled all the same
		}
		if err != nil {
			return err
		}
		if d, err = digestPage(ctx, tx, id, 0); err != nil {
			return err
		}
		return enqueueTx(ctx, tx, tell.Of(d))
	})
	if err != nil {
		return vacancy.Digest{}, false, fmt.Errorf("write digest of user %d: %w", userID, err)
	}
	return d, ok, nil
}

// DigestPage reads page (from 0; past the last, the last) of a digest:
// the matches it lists that are still there, best score first.
func (s *Matches) DigestPage(ctx context.Context, id int64, page int) (vacancy.Digest, error) {
	d, err := digestPage(ctx, s.pool, id, page)
	if err != nil {
		return vacancy.Digest{}, fmt.Errorf("digest %d: %w", id, interpretError(err))
	}
	return d, nil
}

// pageQuerier is what a pool and a transaction have in common for a page.
type pageQuerier interface {
	querier
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func digestPage(ctx context.Context, q pageQuerier, id int64, page int) (vacancy.Digest, error) {
	d := vacancy.Digest{ID: id}
	err := q.QueryRow(ctx, `SELECT g.user_id, g.slot, g.page_size,
    (SELECT count(*) FROM vacancy_matches m WHERE m.digest_id = g.id)
FROM vacancy_digests g WHERE g.id = $1`, id).Scan(&d.UserID, &d.Slot, &d.Size, &d.Total)
	if err != nil {
		return d, err
	}
	d.Page = min(max(page, 0), d.Pages()-1)
	rows, err := q.Query(ctx, `SELECT m.id, m.status, COALESCE(m.score, 0), `+vacancyColumns+`
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id
WHERE m.digest_id = $1
ORDER BY m.score DESC NULLS LAST, m.published_at DESC, m.id
LIMIT $2 OFFSET $3`, id, d.Size, d.Page*d.Size)
	if err != nil {
		return d, err
	}
	d.Items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (vacancy.DigestItem, error) {
		var it vacancy.DigestItem
		var fetched *time.Time
		err := r.Scan(append([]any{&it.MatchID, &it.Status, &it.Score}, vacancyDest(&it.Vacancy, &fetched)...)...)
		return it, err
	})
	return d, err
}

// OpenDigestCard writes the card of a match one of the user's digests
// lists, with the mark that it was written, once: false when the match is
// not the user's, not listed by a digest, or its card was written already.
func (s *Matches) OpenDigestCard(ctx context.Context, userID, matchID int64, card []domain.Message) (bool, error) {
	opened, err := s.execTelling(ctx, card, `UPDATE vacancy_matches SET card = 'opened', updated_at = now()
WHERE id = $1 AND user_id = $2 AND status = 'ANALYZED' AND card = 'listed'`, matchID, userID)
	if err != nil {
		return false, fmt.Errorf("open digest card of match %d: %w", matchID, err)
	}
	return opened, nil
}
