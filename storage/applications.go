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

// Applications is the applications aggregate: a user's matches from
// APPLIED on (the pipeline), the follow-up reminders, and the cover
// letters drafted for them (cover_letters.go).
type Applications struct{ *db }

// Applications is the store of the job seeker's applications and cover letters.
func (s *Store) Applications() *Applications { return &Applications{s.db} }

// The applications' store (vacancy.Applications).
var _ vacancy.Applications = (*Applications)(nil)

// The job seeker's pipeline (domain/vacancy/pipeline.go): matches from
// APPLIED on, their report times (migration 00027), the follow-up
// reminders, /applications.

// tasteLiked lists the statuses whose vacancies the person wanted: every
// application, however it went (a rejection says nothing against the
// person's taste). The claim reads these as liked examples, prune keeps
// the same ones, and the taste index's predicate covers them.
const tasteLiked = `('APPLIED', 'NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED')`

// tasteStage is how far the application of the match aliased a got, as
// the prompt marks it: an offer, an invitation (kept when a rejection
// followed it), or neither.
func tasteStage(a string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s.status = 'OFFER' THEN 'OFFER' WHEN %[1]s.invited_at IS NOT NULL THEN 'INVITED' ELSE 'APPLIED' END`, a)
}

// tasteOrder orders liked examples: offers, then invitations, then the
// rest, each newest first. The claim takes the first TasteExamples of it
// and prune keeps exactly those.
func tasteOrder(a string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s.status = 'OFFER' THEN 0 WHEN %[1]s.invited_at IS NOT NULL THEN 1 ELSE 2 END,
        %[1]s.updated_at DESC, %[1]s.id DESC`, a)
}

// tasteLikedSQL is the claim's liked examples of the user of the claimed
// match m, as a JSON array of [stage, title]; $2 is how many.
var tasteLikedSQL = `COALESCE((SELECT jsonb_agg(jsonb_build_array(x.stage, x.title) ORDER BY x.n) FROM (
           SELECT ` + tasteStage("d") + ` AS stage, t.title, row_number() OVER (ORDER BY ` + tasteOrder("d") + `) AS n
           FROM vacancy_matches d JOIN vacancies t ON t.id = d.vacancy_id
           WHERE d.user_id = m.user_id AND d.status IN ` + tasteLiked + `
           ORDER BY ` + tasteOrder("d") + ` LIMIT $2) x), '[]')`

// likedExamples decodes tasteLikedSQL's array.
func likedExamples(raw []byte) ([]vacancy.Liked, error) {
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("taste examples: %w", err)
	}
	out := make([]vacancy.Liked, len(pairs))
	for i, p := range pairs {
		out[i] = vacancy.Liked{Stage: vacancy.Status(p[0]), Title: p[1]}
	}
	return out, nil
}

// applicationColumns read a match m with its vacancy v and pipeline times.
const applicationColumns = matchColumns + `, m.applied_at, m.invited_at, m.reported_at, ` + vacancyColumns

type applicationRow struct {
	a                          vacancy.Application
	analysis                   []byte
	sent, fetched              *time.Time
	applied, invited, reported *time.Time
	lang, tgLang               string
}

func (r *applicationRow) dest(extra ...any) []any {
	d := append(matchDest(&r.a.Match, &r.analysis, &r.sent), &r.applied, &r.invited, &r.reported)
	d = append(d, vacancyDest(&r.a.Vacancy, &r.fetched)...)
	return append(d, extra...)
}

func (r *applicationRow) finish() (vacancy.Application, error) {
	for _, t := range []struct {
		from *time.Time
		to   *time.Time
	}{{r.applied, &r.a.AppliedAt}, {r.invited, &r.a.InvitedAt}, {r.reported, &r.a.ReportedAt}} {
		if t.from != nil {
			*t.to = *t.from
		}
	}
	return r.a, finishMatch(&r.a.Match, r.analysis, r.sent)
}

// Get returns a match with its vacancy and pipeline times, or
// domain.ErrNotFound.
func (s *Applications) Get(ctx context.Context, id int64) (vacancy.Application, error) {
	var r applicationRow
	err := s.pool.QueryRow(ctx, `SELECT `+applicationColumns+`
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id WHERE m.id = $1`, id).Scan(r.dest()...)
	if err != nil {
		return r.a, fmt.Errorf("application %d: %w", id, interpretError(err))
	}
	return r.finish()
}

// Move moves a match from → to in one conditional UPDATE naming
// from; false when it was not in from (someone moved it first). at, the
// service's clock, is the report's time: reported_at always, applied_at
// or invited_at for those steps; followed_up_at is cleared, so a new
// waiting period starts. The caller checks the table.
func (s *Applications) Move(ctx context.Context, id int64, from, to vacancy.Status, at time.Time) (vacancy.Application, bool, error) {
	var r applicationRow
	err := s.pool.QueryRow(ctx, `
WITH m AS (
    UPDATE vacancy_matches SET status = $3, updated_at = now(), reported_at = $4, followed_up_at = NULL,
        applied_at = CASE WHEN $3 = 'APPLIED' THEN $4 ELSE applied_at END,
        invited_at = CASE WHEN $3 = 'INVITED' THEN $4 ELSE invited_at END
    WHERE id = $1 AND status = $2
    RETURNING *
)
SELECT `+applicationColumns+` FROM m JOIN vacancies v ON v.id = m.vacancy_id`, id, from, to, at).Scan(r.dest()...)
	if err != nil {
		if err = interpretError(err); errors.Is(err, domain.ErrNotFound) {
			return vacancy.Application{}, false, nil
		}
		return vacancy.Application{}, false, fmt.Errorf("move application %d %s → %s: %w", id, from, to, err)
	}
	a, err := r.finish()
	return a, err == nil, err
}

// Remind takes up to limit applications waiting in APPLIED or
// INVITED since before due with no reminder in this waiting period, the
// longest waiting first, marks them reminded and writes remind's messages
// to the outbox, all in one transaction: a reminder is queued exactly when
// its mark commits. Rows another replica is marking are skipped (SKIP
// LOCKED), and a second run finds them marked.
func (s *Applications) Remind(ctx context.Context, due time.Time, limit int, remind domain.Render[vacancy.FollowUp]) (int, error) {
	n := 0
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		n = 0
		rows, err := tx.Query(ctx, `
WITH due AS (
    SELECT id FROM vacancy_matches
    WHERE status IN ('APPLIED', 'INVITED') AND followed_up_at IS NULL AND reported_at <= $1
    ORDER BY reported_at, id LIMIT $2
    FOR UPDATE SKIP LOCKED
), m AS (
    UPDATE vacancy_matches x SET followed_up_at = now() FROM due WHERE x.id = due.id
    RETURNING x.*
)
SELECT `+applicationColumns+`, u.language, u.telegram_language
FROM m JOIN vacancies v ON v.id = m.vacancy_id JOIN users u ON u.id = m.user_id
ORDER BY m.reported_at, m.id`, due, limit)
		if err != nil {
			return err
		}
		var msgs []domain.Message
		for rows.Next() {
			var r applicationRow
			if err := rows.Scan(r.dest(&r.lang, &r.tgLang)...); err != nil {
				rows.Close()
				return err
			}
			a, err := r.finish()
			if err != nil {
				rows.Close()
				return err
			}
			lang := domain.User{Language: r.lang, TelegramLanguage: r.tgLang}.Lang()
			msgs = append(msgs, remind.Of(vacancy.FollowUp{Application: a, Lang: lang})...)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return enqueueTx(ctx, tx, msgs)
	})
	if err != nil {
		return 0, fmt.Errorf("remind applications: %w", err)
	}
	return n, nil
}

// funnelCounts are a Funnel's aggregates over matches m.
const funnelCounts = `count(*) AS applied,
       count(*) FILTER (WHERE m.invited_at IS NOT NULL OR m.status IN ('REJECTED', 'OFFER')) AS answered,
       count(*) FILTER (WHERE m.invited_at IS NOT NULL) AS invited,
       count(*) FILTER (WHERE m.status = 'OFFER') AS offer`

func funnelDest(f *vacancy.Funnel) []any { return []any{&f.Applied, &f.Answered, &f.Invited, &f.Offer} }

// Funnel counts the user's applications made since (applied_at),
// overall and for each of their saved searches that found the vacancy
// (search_hits), in the searches' order; searches with none are left out.
// An application counts in every search that found its vacancy.
func (s *Applications) Funnel(ctx context.Context, userID int64, since time.Time) (vacancy.Funnel, []vacancy.SearchFunnel, error) {
	var all vacancy.Funnel
	err := s.pool.QueryRow(ctx, `SELECT `+funnelCounts+`
FROM vacancy_matches m WHERE m.user_id = $1 AND m.applied_at >= $2`, userID, since).Scan(funnelDest(&all)...)
	if err != nil {
		return all, nil, fmt.Errorf("application funnel of user %d: %w", userID, err)
	}
	if all.Applied == 0 {
		return all, nil, nil
	}
	rows, err := s.pool.Query(ctx, `
SELECT s.id, s.user_id, s.params, s.search_key, s.created_at, f.applied, f.answered, f.invited, f.offer
FROM searches s, LATERAL (
    SELECT `+funnelCounts+`
    FROM vacancy_matches m
    WHERE m.user_id = s.user_id AND m.applied_at >= $2
      AND EXISTS (SELECT 1 FROM search_hits h WHERE h.search_key = s.search_key AND h.vacancy_id = m.vacancy_id)
) f
WHERE s.user_id = $1 AND f.applied > 0
ORDER BY s.id`, userID, since)
	if err != nil {
		return all, nil, fmt.Errorf("application funnel of user %d: %w", userID, err)
	}
	defer rows.Close()
	var per []vacancy.SearchFunnel
	for rows.Next() {
		var sf vacancy.SearchFunnel
		var sr searchRow
		if err := rows.Scan(append(sr.dest(), funnelDest(&sf.Funnel)...)...); err != nil {
			return all, nil, fmt.Errorf("application funnel of user %d: %w", userID, err)
		}
		if sf.Search, err = sr.search(); err != nil {
			return all, nil, err
		}
		per = append(per, sf)
	}
	if err := rows.Err(); err != nil {
		return all, nil, fmt.Errorf("application funnel of user %d: %w", userID, err)
	}
	return all, per, nil
}

// Waiting lists up to limit of the user's applications still
// waiting for the employer (APPLIED, NO_ANSWER, INVITED), those reported
// longest ago first, and counts them all.
func (s *Applications) Waiting(ctx context.Context, userID int64, limit int) ([]vacancy.Application, int, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+applicationColumns+`, count(*) OVER ()
FROM vacancy_matches m JOIN vacancies v ON v.id = m.vacancy_id
WHERE m.user_id = $1 AND m.status IN ('APPLIED', 'NO_ANSWER', 'INVITED')
ORDER BY m.reported_at, m.id LIMIT $2`, userID, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("waiting applications of user %d: %w", userID, err)
	}
	defer rows.Close()
	var out []vacancy.Application
	total := 0
	for rows.Next() {
		var r applicationRow
		if err := rows.Scan(r.dest(&total)...); err != nil {
			return nil, 0, fmt.Errorf("waiting applications of user %d: %w", userID, err)
		}
		a, err := r.finish()
		if err != nil {
			return nil, 0, err
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("waiting applications of user %d: %w", userID, err)
	}
	return out, total, nil
}
