package vacancy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/storage"
)

// Once the prune job has deleted a vacancy's matches, the vacancy and the
// search's hit of it (everything aged past every retention), discovery
// meeting it again on HH does not queue it, so it is not delivered twice;
// a vacancy published afterwards is still found and delivered.
func TestPrunedVacanciesAreNotDeliveredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.relevant()
	b.queue(t, vacancies(5, 1, 1)...)
	b.drain(t)
	require.Equal(t, 5, b.deliverOutbox(t))

	later := time.Now().Add(100 * 24 * time.Hour)
	ret := storage.Retention{VacancyMatches: 90 * 24 * time.Hour, SearchHits: 90 * 24 * time.Hour,
		RecoveryWindow: 48 * time.Hour, TasteExamples: 5}
	for _, r := range b.store.Prune(b.ctx, later, ret, storage.PruneOptions{Batch: 2}) {
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
