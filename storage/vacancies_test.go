package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/storage/storagetest"
)

// A user saving a search while another user's discovery of the same key is
// being saved gets its vacancies either from the discovery or from the
// backfill: here the save holds the key's lock while the new search
// waits, and the backfill after it finds the hits.
func TestSearchSavedDuringDiscoveryGetsItsVacancies(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx := context.Background()
	for _, id := range []int64{1, 2} {
		_, err := st.UpsertUser(ctx, domain.User{ID: id})
		require.NoError(t, err)
	}
	p := vacancy.Params{Text: "golang"}
	key := p.Key()
	since := time.Now().Add(-48 * time.Hour)
	_, created, _, err := st.AddSearch(ctx, vacancy.Search{UserID: 1, Params: p, Key: key}, 100, since, nil)
	require.NoError(t, err)
	require.True(t, created)

	v := vacancy.Vacancy{ID: 42, Title: "Go developer", PublishedAt: time.Now().Add(-time.Hour)}
	added := make(chan int, 1)
	n, err := st.SaveDiscovery(ctx, key, []vacancy.Vacancy{v}, []int64{42}, vacancy.Markers{LastSeenMaxID: 42, LastCompleteSweepBeforeID: 42},
		func(users []vacancy.Recipient) []vacancy.NewMatch {
			go func() {
				_, _, q, err := st.AddSearch(ctx, vacancy.Search{UserID: 2, Params: p, Key: key}, 100, since, nil)
				if err != nil {
					q = -1
				}
				added <- q
			}()
			// Wait until user 2's save is blocked on the key's lock.
			require.Eventually(t, func() bool {
				var waiting int
				_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting)
				return waiting == 1
			}, 5*time.Second, 5*time.Millisecond)
			require.Len(t, users, 1, "user 2's search is not visible yet")
			return []vacancy.NewMatch{{UserID: users[0].ID, VacancyID: 42}}
		}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, <-added, "user 2 got vacancy 42 from the backfill")
	var owners []int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT array_agg(user_id ORDER BY user_id) FROM vacancy_matches WHERE vacancy_id = 42`).Scan(&owners))
	require.Equal(t, []int64{1, 2}, owners)
}

// An ANALYZED match is claimable only while its card is owed (it holds a
// claim token: analysed before the outbox, or with no notifier). Writing the
// card with QueueCard drops the token in the same transaction, so the match
// is never claimed again; the card's delivery makes it SENT_TO_USER.
func TestAnalyzedMatchClaimedOnlyWhileItsCardIsOwed(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx := context.Background()
	_, err := st.UpsertUser(ctx, domain.User{ID: 7})
	require.NoError(t, err)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := st.Pool().Exec(ctx, q, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO vacancies (id, title, published_at) VALUES (1, 'owed', now()), (2, 'carded', now() + interval '1 minute')`)
	// 2 is newer, so a claim would take it first if it were claimable.
	exec(`INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, claim_token, claimed_until)
VALUES (7, 1, 'ANALYZED', now(), true, gen_random_uuid(), now() - interval '1 second'),
       (7, 2, 'ANALYZED', now() + interval '1 minute', true, NULL, NULL)`)
	var owed, carded int64
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 1`).Scan(&owed))
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 2`).Scan(&carded))
	card := []domain.Message{{ChatID: 7, Kind: domain.KindVacancy, Ref: owed, Text: "owed"}}
	rows := func() int {
		var n int
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'vacancy' AND ref = $1`, owed).Scan(&n))
		return n
	}

	c, ok, err := st.ClaimMatch(ctx, vacancy.ClaimOptions{Lease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, owed, c.Match.ID, "the carded match waits for the outbox")
	_, ok, err = st.ClaimMatch(ctx, vacancy.ClaimOptions{Lease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.False(t, ok)

	ok, err = st.QueueCard(ctx, owed, "00000000-0000-0000-0000-000000000000", card)
	require.NoError(t, err)
	require.False(t, ok, "not our claim")
	require.Zero(t, rows())
	ok, err = st.QueueCard(ctx, owed, c.Match.ClaimToken, card)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, rows())
	ok, err = st.QueueCard(ctx, owed, c.Match.ClaimToken, card)
	require.NoError(t, err)
	require.False(t, ok, "queued once")
	require.Equal(t, 1, rows())

	exec(`UPDATE vacancy_matches SET claimed_until = now() - interval '1 hour'`)
	_, ok, err = st.ClaimMatch(ctx, vacancy.ClaimOptions{Lease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.False(t, ok, "neither is claimable now")

	q, err := st.ClaimOutbox(ctx, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, q, 1)
	ok, err = st.OutboxDelivered(ctx, q[0].ID, q[0].Token, 555)
	require.NoError(t, err)
	require.True(t, ok)
	m, _, err := st.MatchWithVacancy(ctx, owed)
	require.NoError(t, err)
	require.Equal(t, vacancy.SentToUser, m.Status)
	require.Equal(t, 555, m.MessageID)
	require.EqualValues(t, 7, m.ChatID)
	require.False(t, m.SentAt.IsZero())
}
