package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// An ANALYZED match is never claimed: its card is in the outbox, and its
// delivery makes it SENT_TO_USER. A QUEUED match older than it is claimed.
func TestAnalyzedMatchIsNeverClaimed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st, exec := f.ctx, f.st, f.exec
	_, err := st.UpsertUser(ctx, domain.User{ID: 7})
	require.NoError(t, err)
	exec(`INSERT INTO vacancies (id, title, published_at) VALUES (1, 'queued', now()), (2, 'carded', now() + interval '1 minute')`)
	// 2 is newer, so a claim would take it first if it were claimable.
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant)
VALUES (7, 1, 'QUEUED', now(), NULL), (7, 2, 'ANALYZED', now() + interval '1 minute', true)`)
	var queued, carded int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 1`).Scan(&queued))
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 2`).Scan(&carded))
	require.NoError(t, st.EnqueueMessages(ctx, domain.Message{ChatID: 7, Kind: domain.KindVacancy, Ref: carded, Text: "carded"}))

	c, ok, err := st.ClaimMatch(ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, queued, c.Match.ID, "the carded match waits for the outbox")
	exec(`UPDATE vacancy_matches SET claimed_until = now() - interval '1 hour'`)
	exec(`DELETE FROM vacancy_matches WHERE id = $1`, queued)
	_, ok, err = st.ClaimMatch(ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.False(t, ok, "an ANALYZED match is not claimable")

	q, err := st.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, q, 1)
	ok, err = st.OutboxDelivered(ctx, q[0].ID, q[0].Token, 555)
	require.NoError(t, err)
	require.True(t, ok)
	m, _, err := st.MatchWithVacancy(ctx, carded)
	require.NoError(t, err)
	require.Equal(t, vacancy.SentToUser, m.Status)
	require.Equal(t, 555, m.MessageID)
	require.EqualValues(t, 7, m.ChatID)
	require.False(t, m.SentAt.IsZero())
}

// /skills counts each skill once a vacancy, case folded, under the
// spelling most vacancies used, over the user's relevant matches of the
// window only.
func TestMatchedSkills(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, st, exec := f.ctx, f.st, f.exec
	for _, id := range []int64{7, 8} {
		_, err := st.UpsertUser(ctx, domain.User{ID: id})
		require.NoError(t, err)
	}
	exec(`INSERT INTO vacancies (id, title, published_at, key_skills) VALUES
 (1, 'a', now(), '{Go,PostgreSQL,Docker}'),
 (2, 'b', now(), '{go,Go,Kubernetes}'),
 (3, 'c', now(), '{GO, PostgreSQL }'),
 (4, 'd', now(), '{}'),
 (5, 'judged not relevant', now(), '{Java}'),
 (6, 'too old', now(), '{Rust}'),
 (7, 'someone else''s', now(), '{Python}')`)
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, created_at, sent_at, message_id) VALUES
 (7, 1, 'SENT_TO_USER', now(), true, now(), now(), 1),
 (7, 2, 'SENT_TO_USER', now(), true, now() - interval '10 days', now(), 2),
 (7, 3, 'ANALYZED', now(), true, now(), NULL, NULL),
 (7, 4, 'NOT_INTERESTED', now(), true, now(), now(), 4),
 (7, 5, 'NOT_SUITABLE', now(), false, now(), NULL, NULL),
 (7, 6, 'SENT_TO_USER', now(), true, now() - interval '40 days', now(), 6),
 (8, 7, 'SENT_TO_USER', now(), true, now(), now(), 7)`)
	exec(`UPDATE vacancy_matches SET status = 'APPLIED', applied_at = now(), reported_at = now() WHERE vacancy_id = 2`)

	matched, with, skills, err := st.MatchedSkills(ctx, 7, time.Now().Add(-30*24*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 4, matched, "relevant matches of the window: 1, 2, 3, 4")
	require.Equal(t, 3, with, "4 lists no skills")
	require.Equal(t, []vacancy.SkillCount{
		{Name: "Go", Vacancies: 3},         // once per vacancy; "Go" twice, "go" and "GO" once each
		{Name: "PostgreSQL", Vacancies: 2}, // trimmed
		{Name: "Docker", Vacancies: 1},
		{Name: "Kubernetes", Vacancies: 1},
	}, skills)

	_, _, top, err := st.MatchedSkills(ctx, 7, time.Now().Add(-30*24*time.Hour), 2)
	require.NoError(t, err)
	require.Len(t, top, 2)

	matched, with, skills, err = st.MatchedSkills(ctx, 9, time.Now().Add(-30*24*time.Hour), 10)
	require.NoError(t, err)
	require.Zero(t, matched)
	require.Zero(t, with)
	require.Empty(t, skills)
}
