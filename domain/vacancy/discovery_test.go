package vacancy_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
	"switchboard/storage"
)

// searchGroup saves text as userID's search and returns it with its group.
func (b *bundle) searchGroup(t *testing.T, userID int64, text string) (vacancy.Search, vacancy.Group) {
	t.Helper()
	s := b.search(t, userID, text)
	return s, b.group(t, s.Key)
}

// setupSearching is setup with three vacancies on HH and user 7, a Go
// developer, who has just saved text as a search: where the tests of what
// the user is told about a new search start.
func setupSearching(t *testing.T, text string) (*bundle, vacancy.Search, vacancy.Group) {
	t.Helper()
	b := setup(t)
	b.hh.Add(vacancies(3, 100, 1)...)
	b.user(t, 7, "Go developer")
	s, g := b.searchGroup(t, 7, text)
	return b, s, g
}

func (b *bundle) group(t *testing.T, key string) vacancy.Group {
	t.Helper()
	g, err := b.store.Searches().KeyGroup(b.ctx, key)
	require.NoError(t, err)
	return g
}

func (b *bundle) hits(t *testing.T, key string) []int64 {
	t.Helper()
	var ids []int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT COALESCE(array_agg(vacancy_id ORDER BY vacancy_id), '{}') FROM search_hits WHERE search_key = $1`, key).Scan(&ids))
	return ids
}

// The design's example: 350 vacancies and a limit of 100 take four runs,
// 100/100/100/50, each newest-unseen first, with markers recording the
// largest id seen and how deep the sweep has gone.
func TestDiscoveryWorksDownABacklogInLimitSizedRuns(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{FetchLimit: 100}))
	const first = 1000
	b.hh.Add(vacancies(350, first, 1)...)
	b.user(t, 7, "Go developer")
	s, g := b.searchGroup(t, 7, "golang")

	want := []struct {
		unseen  int
		sweepTo int64
		end     string
	}{
		{100, first + 250, "limit"},
		{100, first + 150, "limit"},
		{100, first + 50, "limit"},
		{50, first, "end"},
		{0, first, "end"},
	}
	for i, w := range want {
		run, err := b.svc.Discover(b.ctx, g)
		require.NoError(t, err, "run %d", i+1)
		require.Equal(t, w.unseen, run.Unseen, "run %d unseen", i+1)
		require.Equal(t, w.end, run.End, "run %d end", i+1)
		require.Equal(t, w.unseen, run.Queued, "run %d: one QUEUED match per collected vacancy", i+1)
		m, err := b.store.Matches().DiscoveryMarkers(b.ctx, s.Key)
		require.NoError(t, err)
		require.Equal(t, int64(first+349), m.LastSeenMaxID, "run %d last_seen_max_id", i+1)
		require.Equal(t, w.sweepTo, m.LastCompleteSweepBeforeID, "run %d last_complete_sweep_before_id", i+1)
	}
	require.Len(t, b.hits(t, s.Key), 350)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 350}, b.counts(t))
	// Each run starts at the top: run 2 re-read page 0 (all seen) before
	// collecting page 1, and so on; run 5 read all four pages to find nothing.
	require.Equal(t, 1+2+3+4+4, b.hh.SearchCalls())
}

// A vacancy published between runs is at the top of page 0 and is the
// first thing the next run collects.
func TestDiscoveryCollectsArrivalsOnTheNextRun(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{FetchLimit: 100}))
	b.hh.Add(vacancies(150, 1, 2)...)
	b.user(t, 7, "")
	s, g := b.searchGroup(t, 7, "golang")

	run, err := b.svc.Discover(b.ctx, g)
	require.NoError(t, err)
	require.Equal(t, 100, run.Unseen)

	fresh := b.hh.Publish(vacancies(1, 5000, 3)...)[0]
	run, err = b.svc.Discover(b.ctx, g)
	require.NoError(t, err)
	require.Equal(t, 51, run.Unseen, "the new one plus the 50 left")
	require.Equal(t, "end", run.End)
	require.Equal(t, vacancy.Queued, b.status(t, 7, id(fresh)))
	m, err := b.store.Matches().DiscoveryMarkers(b.ctx, s.Key)
	require.NoError(t, err)
	require.Equal(t, id(fresh), m.LastSeenMaxID)
	require.Equal(t, int64(1), m.LastCompleteSweepBeforeID)
}

// Property: whatever arrives whenever, each run collects exactly
// min(limit, unseen remaining) (so nothing is skipped over), and once
// arrivals stop, runs end with every vacancy collected exactly once.
func TestDiscoveryMissesNothingUnderRandomArrivals(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 42))
			limit := 5 + r.IntN(60)
			per := []int{10, 20, 50, 100}[r.IntN(4)]
			b := setup(t, withConfig(vacancy.Config{FetchLimit: limit, PerPage: per}))
			next := int64(10_000)
			publish := func(n int) {
				if n == 0 {
					return
				}
				b.hh.Publish(vacancies(n, next, int64(seed)+next)...)
				next += int64(n)
			}
			publish(r.IntN(300))
			b.user(t, 1, "")
			s, g := b.searchGroup(t, 1, "golang")

			lastMax := int64(0)
			for run := range 10 {
				remaining := b.hh.Len() - len(b.hits(t, s.Key))
				res, err := b.svc.Discover(b.ctx, g)
				require.NoError(t, err)
				require.Equal(t, min(limit, remaining), res.Unseen, "run %d (limit %d, per page %d)", run+1, limit, per)
				require.GreaterOrEqual(t, res.Markers.LastSeenMaxID, lastMax, "last_seen_max_id never decreases")
				lastMax = res.Markers.LastSeenMaxID
				publish(r.IntN(2 * limit))
			}
			for range 100 {
				res, err := b.svc.Discover(b.ctx, g)
				require.NoError(t, err)
				if res.Unseen == 0 {
					break
				}
			}
			var all []int64
			for _, v := range b.hh.Vacancies() {
				all = append(all, id(v))
			}
			slices.Sort(all)
			require.Equal(t, all, b.hits(t, s.Key), "every vacancy collected")
			require.Equal(t, len(all), b.counts(t)[vacancy.Queued], "one match each")
			m, err := b.store.Matches().DiscoveryMarkers(b.ctx, s.Key)
			require.NoError(t, err)
			require.Equal(t, all[len(all)-1], m.LastSeenMaxID)
			require.Equal(t, all[0], m.LastCompleteSweepBeforeID)
		})
	}
}

// HH serves at most 2000 results of one search; discovery stops there
// instead of asking for a page HH refuses.
func TestDiscoveryStopsAtHHDepth(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{FetchLimit: 5000}))
	b.hh.Add(vacancies(2100, 1, 4)...)
	b.user(t, 1, "")
	s := b.search(t, 1, "golang")
	run, err := b.svc.Discover(b.ctx, b.group(t, s.Key))
	require.NoError(t, err)
	require.Equal(t, "depth", run.End)
	require.Equal(t, 2000, run.Unseen)
	require.Equal(t, 20, run.Pages)
	for _, r := range b.hh.Requests() {
		require.Less(t, r.Status, 400, "no request beyond HH's depth: %v", r.Query)
	}
}

// Filters before queuing: experience over six years reaches nobody; a
// user's ban word in the title or snippet keeps the match from that user
// only. Users sharing a search_key share one discovery.
func TestDiscoveryFiltersPerUserBeforeQueuing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	vs := vacancies(3, 100, 5)
	vs[0].Name = "Golang developer (Битрикс)"
	vs[1].Experience = hhtest.MoreThan6
	b.hh.Add(vs...)
	b.user(t, 1, "")
	b.user(t, 2, "")
	s1 := b.search(t, 1, "golang")
	s2 := b.search(t, 2, "Golang  ")
	require.Equal(t, s1.Key, s2.Key, "same parameters, one search_key")
	_, _, err := b.svc.Ban(b.ctx, 1, "БИТРИКС")
	require.NoError(t, err)

	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, 1, b.hh.SearchCalls(), "one discovery for both users")
	require.Equal(t, "(none)", string(b.status(t, 1, 100)), "banned for user 1")
	require.Equal(t, vacancy.Queued, b.status(t, 2, 100))
	require.Equal(t, "(none)", string(b.status(t, 1, 101)), "moreThan6 dropped")
	require.Equal(t, "(none)", string(b.status(t, 2, 101)))
	require.Equal(t, vacancy.Queued, b.status(t, 1, 102))
	require.Equal(t, vacancy.Queued, b.status(t, 2, 102))
}

// A page failing midway keeps what earlier pages collected; the next run
// picks up the rest.
func TestDiscoverySavesProgressWhenAPageFails(t *testing.T) {
	t.Parallel()
	var srv *hhtest.Server
	var once sync.Once
	b := setup(t, withConfig(vacancy.Config{FetchLimit: 100, PerPage: 20}), withHH(hhtest.OnRequest(func(r *http.Request) {
		if r.URL.Query().Get("page") == "1" {
			once.Do(func() { srv.FailNext(1, 503, hhtest.SearchEndpoint) })
		}
	})))
	srv = b.hh
	b.hh.Add(vacancies(60, 1, 6)...)
	b.user(t, 1, "")
	s, g := b.searchGroup(t, 1, "golang")
	run, err := b.svc.Discover(b.ctx, g)
	require.Error(t, err)
	require.ErrorIs(t, err, vacancy.ErrUnavailable)
	require.Equal(t, 20, run.Unseen)
	require.Len(t, b.hits(t, s.Key), 20)

	run, err = b.svc.Discover(b.ctx, g)
	require.NoError(t, err)
	require.Equal(t, 40, run.Unseen)
}

// Once the prune job has deleted a vacancy's matches, the vacancy and the
// search's hit of it (everything aged past every retention), discovery
// meeting it again on HH does not queue it, so it is not delivered twice;
// a vacancy published afterwards is still found and delivered.
func TestPrunedVacanciesAreNotDeliveredAgain(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(5, 1, 1)...)
	b.drain(t)
	require.Equal(t, 5, b.deliverOutbox(t))

	later := time.Now().Add(100 * 24 * time.Hour)
	ret := storage.Retention{VacancyMatches: 90 * 24 * time.Hour, SearchHits: 90 * 24 * time.Hour,
		RecoveryWindow: 48 * time.Hour, TasteExamples: 5}
	for _, r := range b.store.Jobs().Prune(b.ctx, later, ret, storage.PruneOptions{Batch: 2}) {
		require.NoError(t, r.Err, r.Kind)
		require.Zero(t, r.Timeouts, r.Kind)
	}
	for _, table := range []string{"vacancy_matches", "vacancies", "search_hits"} {
		var n int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM `+table).Scan(&n))
		require.Zero(t, n, table)
	}

	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Empty(t, b.counts(t), "nothing queued again")
	require.Zero(t, b.drain(t))
	require.Zero(t, b.deliverOutbox(t))

	fresh := b.hh.Publish(vacancies(1, 5000, 3)...)[0]
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, 1, b.deliverOutbox(t))
	seen := map[string]int{}
	for _, d := range b.sent.deliveries() {
		seen[d.Vacancy.Title]++
	}
	require.Len(t, seen, 6)
	require.Equal(t, 1, seen[fresh.Name])
	for title, n := range seen {
		require.Equal(t, 1, n, title)
	}
}
