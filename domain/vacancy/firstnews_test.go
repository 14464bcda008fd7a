package vacancy_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
)

// newsRows counts the outbox's notes about a search.
func (b *bundle) newsRows(t *testing.T, searchID int64) int {
	t.Helper()
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT count(*) FROM outbox WHERE kind = 'reply' AND ref = $1`, searchID).Scan(&n))
	return n
}

// A new search whose vacancies the user already has from another search
// queues nothing: its first discovery says so, once, however many runs
// and replicas follow.
func TestFirstDiscoveryWithNothingNewIsToldOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hh.Add(vacancies(5, 100, 1)...)
	b.user(t, 7, "Go developer")
	first := b.search(t, 7, "golang")
	_, err := b.svc.Discover(b.ctx, b.group(t, first.Key))
	require.NoError(t, err)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 5}, b.counts(t))
	require.Empty(t, b.sent.told(), "cards are news enough")
	require.Zero(t, b.newsRows(t, first.ID))

	second := b.search(t, 7, "golang area=113")
	g := b.group(t, second.Key)
	other := b.newService(t)
	var wg sync.WaitGroup
	for _, svc := range []*vacancy.Service{b.svc, other, b.svc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := svc.Discover(b.ctx, g)
			require.NoError(t, err)
			require.Zero(t, run.Queued)
		}()
	}
	wg.Wait()
	news := b.sent.told()
	require.Len(t, news, 1)
	require.Equal(t, second.ID, news[0].Search.ID)
	require.Equal(t, "golang area=113", news[0].Search.Params.String())
	require.False(t, news[0].Failed)
	require.Equal(t, 1, b.newsRows(t, second.ID), "one note in the outbox")

	// A key discovered before is told from the backfill at once: cards
	// for a user new to it, a note for one who has its vacancies already.
	b.user(t, 8, "")
	third := b.search(t, 8, "golang area=113")
	require.Zero(t, b.newsRows(t, third.ID))
	require.Equal(t, 10, b.counts(t)[vacancy.Queued], "user 8 got the five from the backfill")
	fourth := b.search(t, 8, "golang")
	require.Equal(t, 1, b.newsRows(t, fourth.ID))
	require.Len(t, b.sent.told(), 2)
	again, created, err := b.svc.AddSearch(b.ctx, 8, fourth.Params)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, 1, b.newsRows(t, again.ID), "saving it again tells nothing new")
}

// HH down at the first fetch: the user hears it will be retried, then,
// once a run gets through, the outcome; each once.
func TestFirstDiscoveryFailureIsToldThenTheOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hh.Add(vacancies(3, 100, 1)...)
	b.user(t, 7, "Go developer")
	s := b.search(t, 7, "golang")
	g := b.group(t, s.Key)
	b.hh.FailNext(100, 503, hhtest.SearchEndpoint)
	for range 2 {
		_, err := b.svc.Discover(b.ctx, g)
		require.ErrorIs(t, err, vacancy.ErrUnavailable)
	}
	b.hh.ClearFaults()
	news := b.sent.told()
	require.Len(t, news, 1, "told once that it will be retried")
	require.True(t, news[0].Failed)

	run, err := b.svc.Discover(b.ctx, g)
	require.NoError(t, err)
	require.Equal(t, 3, run.Queued)
	require.Len(t, b.sent.told(), 1, "cards follow; no note")
	var state string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT first_news FROM searches WHERE id = $1`, s.ID).Scan(&state))
	require.Equal(t, "told", state)
}
