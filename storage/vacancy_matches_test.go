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
