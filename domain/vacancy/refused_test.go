package vacancy_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
)

// searchState reads a search's state and the arguments HH refused.
func (b *bundle) searchState(t *testing.T, searchID int64) (string, []string) {
	t.Helper()
	var state string
	var args []string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		`SELECT state, refused_args FROM searches WHERE id = $1`, searchID).Scan(&state, &args))
	return state, args
}

// requireSetAside checks that the search was set aside naming args, its
// user told once, and that neither the fetch nor first news asks HH for it
// any more.
func (b *bundle) requireSetAside(t *testing.T, searchID int64, args ...string) {
	t.Helper()
	state, got := b.searchState(t, searchID)
	require.Equal(t, "refused", state)
	require.Equal(t, args, got)
	require.Len(t, b.sent.refused(), 1)
	asked := b.searchCalls()
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.NoError(t, b.svc.FirstNews(b.ctx))
	require.Equal(t, asked, b.searchCalls(), "a search set aside is not fetched")
}

// searchCalls counts the searches HH was asked.
func (b *bundle) searchCalls() int {
	n := 0
	for _, r := range b.hh.Requests() {
		if r.Endpoint == hhtest.SearchEndpoint {
			n++
		}
	}
	return n
}

// refuseNext makes HH answer the next search 400 bad_argument naming arg,
// in HH's envelope with the legacy keys it still sends.
func (b *bundle) refuseNext(arg string) {
	b.hh.InjectFault(hhtest.Fault{Count: 1, Status: http.StatusBadRequest, On: hhtest.SearchEndpoint,
		Body: []byte(`{"errors":[{"type":"bad_argument","value":"` + arg + `"}],"bad_arguments":[{"name":"` + arg +
			`","description":"bad ` + arg + `"}],"bad_argument":"` + arg + `","description":"bad ` + arg + `"}`)})
}

// The audit's scenario: a search saved before /search knew HH's currency
// codes (currency=RUB; HH says RUR) is answered 400 bad_argument=currency.
// It is about the search, not an outage: the search is set aside, each of
// its users is told once which parameter HH refused, and neither the
// first-news ticks nor the fetch ask HH for it again, nor fail for it.
func TestSearchHHRefusesIsSetAsideToldOnceAndNotAskedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.hh.Add(vacancies(5, 100, 1)...)
	b.user(t, 7, "Go developer")
	b.user(t, 8, "Go developer")
	// As a row saved before the fix holds it: ParseParams now stores RUR.
	old := vacancy.Params{Text: "golang", Salary: 200000, Filters: map[string][]string{"currency": {"RUB"}}}
	var searches []vacancy.Search
	for _, u := range []int64{7, 8} {
		s, added, err := b.svc.AddSearch(b.ctx, u, old)
		require.NoError(t, err)
		searches = append(searches, s)
		b.svc.Begin(b.ctx, s, added)
	}

	_, err := b.svc.Discover(b.ctx, b.group(t, searches[0].Key))
	require.ErrorIs(t, err, vacancy.ErrSearchRefused)
	require.NotErrorIs(t, err, vacancy.ErrUnavailable, "not an outage")
	require.NotErrorIs(t, err, vacancy.ErrHHBlocked, "HH does not block us")
	var refusal *vacancy.SearchRefusal
	require.ErrorAs(t, err, &refusal)
	require.Equal(t, []string{"currency"}, refusal.Args)

	asked := b.searchCalls()
	for range 10 {
		require.NoError(t, b.svc.FirstNews(b.ctx), "a refused search is not the tick's failure")
	}
	require.NoError(t, b.svc.Fetch(b.ctx))
	require.Equal(t, asked, b.searchCalls(), "HH is not asked again for a search it refused")

	for _, s := range searches {
		state, args := b.searchState(t, s.ID)
		require.Equal(t, "refused", state)
		require.Equal(t, []string{"currency"}, args)
		require.Equal(t, "told", b.firstNews(t, s.ID), "the refusal is its first news")
		require.Equal(t, 1, b.newsRows(t, s.ID), "one note per search, in the outbox")
	}
	require.Empty(t, b.sent.told(), "not told that hh.ru did not answer")
	refusals := b.sent.refused()
	require.Len(t, refusals, 2, "each user told once")
	for _, r := range refusals {
		require.Equal(t, []string{"currency"}, r.Args)
		require.Equal(t, "golang salary=200000 currency=RUB", r.Search.Params.String())
	}
	list, err := b.svc.Searches(b.ctx, 7)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, vacancy.SearchRefused, list[0].State, "/searches shows it refused")
	require.Equal(t, []string{"currency"}, list[0].Refused)
	require.Equal(t, map[vacancy.Status]int{}, b.counts(t))

	// The same search saved again is asked of HH again, and HH's answer
	// (the same refusal here) is told again, once.
	again, added, err := b.svc.AddSearch(b.ctx, 7, old)
	require.NoError(t, err)
	require.True(t, added.Created, "a refused search saved again begins anew")
	require.Equal(t, searches[0].ID, again.ID)
	state, _ := b.searchState(t, again.ID)
	require.Equal(t, "active", state)
	require.Equal(t, "pending", b.firstNews(t, again.ID))
	_, err = b.svc.Discover(b.ctx, b.group(t, again.Key))
	require.ErrorIs(t, err, vacancy.ErrSearchRefused)
	require.Len(t, b.sent.refused(), 3, "told again, only user 7: user 8's search stayed aside")
	state, _ = b.searchState(t, searches[1].ID)
	require.Equal(t, "refused", state)
}

// A search HH refuses while it is watched (a value HH dropped from its
// dictionary, say) is set aside by the fetch; saved again once HH takes
// it, it is discovered as a new search and watched again.
func TestRefusedSearchSavedAgainIsWatchedAgain(t *testing.T) {
	t.Parallel()
	b, s, g := setupSearching(t, "golang area=113")
	run, err := b.svc.Discover(b.ctx, g)
	require.NoError(t, err)
	require.Equal(t, 3, run.Queued)

	b.hh.Add(vacancies(2, 200, 2)...)
	b.refuseNext("area")
	require.NoError(t, b.svc.Fetch(b.ctx), "set aside and told: not the fetch's failure")
	b.requireSetAside(t, s.ID, "area")

	again, added, err := b.svc.AddSearch(b.ctx, 7, s.Params)
	require.NoError(t, err)
	require.True(t, added.Created)
	run, err = b.svc.Discover(b.ctx, b.group(t, again.Key))
	require.NoError(t, err)
	require.Equal(t, 2, run.Queued, "the two published while it was aside")
	state, args := b.searchState(t, s.ID)
	require.Equal(t, "active", state)
	require.Empty(t, args)
	require.Len(t, b.sent.refused(), 1, "nothing more to tell")
}

// A 400 bad_argument naming only what the client adds itself (paging) is
// our bug, not the search's: the search is not set aside.
func TestBadArgumentOfOurOwnParameterDoesNotSetTheSearchAside(t *testing.T) {
	t.Parallel()
	b, s, g := setupSearching(t, "golang")
	b.refuseNext("per_page")
	_, err := b.svc.Discover(b.ctx, g)
	require.Error(t, err)
	require.NotErrorIs(t, err, vacancy.ErrSearchRefused)
	state, _ := b.searchState(t, s.ID)
	require.Equal(t, "active", state)
	require.Empty(t, b.sent.refused())
}

// HH's refusal naming a parameter with a NUL in it (an escape in its JSON)
// sets the search aside like any refusal, the name cleaned. Taken as sent,
// the NUL made the setting aside refused by PostgreSQL: the search stayed
// active, HH was asked for it again at every fetch and first-news tick,
// and its users were never told.
func TestARefusalNamingAParameterWithANULSetsTheSearchAside(t *testing.T) {
	t.Parallel()
	b, s, _ := setupSearching(t, "golang area=113")
	b.refuseNext(`are\u0000a`)
	require.NoError(t, b.svc.Fetch(b.ctx), "set aside and told: not the fetch's failure")
	b.requireSetAside(t, s.ID, "are\uFFFDa")
}
