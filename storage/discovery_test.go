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
		_, err := st.Users().Upsert(ctx, domain.User{ID: id})
		require.NoError(t, err)
	}
	p := vacancy.Params{Text: "golang"}
	key := p.Key()
	since := time.Now().Add(-48 * time.Hour)
	_, created, _, err := st.Searches().Add(ctx, vacancy.Search{UserID: 1, Params: p, Key: key}, 100, since, nil)
	require.NoError(t, err)
	require.True(t, created)

	v := vacancy.Vacancy{ID: 42, Title: "Go developer", PublishedAt: time.Now().Add(-time.Hour)}
	added := make(chan int, 1)
	n, err := st.Matches().SaveDiscovery(ctx, key, []vacancy.Vacancy{v}, []int64{42}, vacancy.Markers{LastSeenMaxID: 42, LastCompleteSweepBeforeID: 42},
		func(users []vacancy.Recipient) []vacancy.NewMatch {
			go func() {
				_, _, q, err := st.Searches().Add(ctx, vacancy.Search{UserID: 2, Params: p, Key: key}, 100, since, nil)
				if err != nil {
					q = -1
				}
				added <- q
			}()
			// Wait until user 2's save is blocked on the key's lock.
			require.Eventually(t, func() bool { return advisoryWaiters(ctx, st) == 1 }, 5*time.Second, 5*time.Millisecond)
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
