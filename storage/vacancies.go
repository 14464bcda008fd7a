package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

func rawJSON(b []byte) any {
	if len(b) == 0 || !json.Valid(b) {
		return nil
	}
	return string(b)
}

const vacancyColumns = `v.id, v.title, v.employer, v.url, v.area, COALESCE(v.salary_from, 0), COALESCE(v.salary_to, 0),
v.salary_currency, v.salary_gross, v.experience, v.schedule, v.published_at, v.snippet, v.description, v.key_skills,
v.detail_fetched_at, v.apply_url, v.response_url, v.letter_required, v.has_test`

func vacancyDest(v *vacancy.Vacancy, fetched **time.Time) []any {
	return []any{&v.ID, &v.Title, &v.Employer, &v.URL, &v.Area, &v.Salary.From, &v.Salary.To,
		&v.Salary.Currency, &v.Salary.Gross, &v.Experience, &v.Schedule, &v.PublishedAt, &v.Snippet, &v.Description,
		&v.KeySkills, fetched, &v.ApplyURL, &v.ResponseURL, &v.LetterRequired, &v.HasTest}
}

// SaveVacancyDetail stores a detail fetched from HH and ends the fetch lease, so
// the vacancy's other matches are claimed with it.
func (s *Matches) SaveVacancyDetail(ctx context.Context, v vacancy.Vacancy) error {
	if _, err := s.pool.Exec(ctx, saveDetailSQL, detailArgs(v)...); err != nil {
		return fmt.Errorf("save detail of vacancy %d: %w", v.ID, err)
	}
	return nil
}

// detailArgs are saveDetailSQL's arguments for a fetched detail (no key
// skills are an empty array, not NULL).
func detailArgs(v vacancy.Vacancy) []any {
	skills := v.KeySkills
	if skills == nil {
		skills = []string{}
	}
	return []any{v.ID, v.Description, skills, v.Experience, v.Schedule, rawJSON(v.Raw),
		v.ApplyURL, v.ResponseURL, v.LetterRequired, v.HasTest}
}

// ReleaseVacancyDetail ends a fetch lease that fetched nothing (HH failed or
// refused), so another worker may ask later.
func (s *Matches) ReleaseVacancyDetail(ctx context.Context, id int64) error {
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
func (s *Matches) ArchiveVacancy(ctx context.Context, id int64, announce domain.Render[[]vacancy.FirstNews]) (map[vacancy.Status]int, error) {
	out := map[vacancy.Status]int{}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
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
	if err := s.ReleaseVacancyDetail(ctx, id); err != nil {
		return out, err
	}
	return out, nil
}

// saveDetailSQL stores a vacancy's detail fetched from HH and ends its
// fetch lease.
const saveDetailSQL = `
UPDATE vacancies SET description = $2, key_skills = $3,
    experience = COALESCE(NULLIF($4, ''), experience), schedule = COALESCE(NULLIF($5, ''), schedule),
    raw = COALESCE($6::jsonb, raw), detail_fetched_at = now(), detail_fetching_until = NULL,
    apply_url = COALESCE(NULLIF($7, ''), apply_url), response_url = $8, letter_required = $9, has_test = $10
WHERE id = $1`
