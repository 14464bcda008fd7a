package vacancy_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
	"switchboard/llm/llmtest"
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

	second, g := b.searchGroup(t, 7, "golang area=113")
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
	// for a user new to it; for one who has its vacancies already, the
	// reply to /search says nothing is new (a note of its own would be
	// queued ahead of that reply).
	b.user(t, 8, "")
	third := b.search(t, 8, "golang area=113")
	require.Zero(t, b.newsRows(t, third.ID))
	require.Equal(t, 10, b.counts(t)[vacancy.Queued], "user 8 got the five from the backfill")
	p, err := vacancy.ParseParams("golang")
	require.NoError(t, err)
	fourth, added, err := b.svc.AddSearch(b.ctx, 8, p)
	require.NoError(t, err)
	require.Equal(t, vacancy.Added{Created: true, NothingNew: true}, added)
	require.Zero(t, b.newsRows(t, fourth.ID), "the reply tells it")
	require.Len(t, b.sent.told(), 1)
	require.Equal(t, "told", b.firstNews(t, fourth.ID))
	again, added, err := b.svc.AddSearch(b.ctx, 8, fourth.Params)
	require.NoError(t, err)
	require.Equal(t, vacancy.Added{}, added, "saving it again tells nothing new")
	require.Zero(t, b.newsRows(t, again.ID))
}

// HH down at the first fetch: the user hears it will be retried, then,
// once a run gets through, the outcome; each once.
func TestFirstDiscoveryFailureIsToldThenTheOutcome(t *testing.T) {
	t.Parallel()
	b, s, g := setupSearching(t, "golang")
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
	require.Equal(t, "waiting", b.firstNews(t, s.ID), "until a card is delivered or every match ended without one")
}

// firstNews reads a search's first_news.
func (b *bundle) firstNews(t *testing.T, searchID int64) string {
	t.Helper()
	var state string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT first_news FROM searches WHERE id = $1`, searchID).Scan(&state))
	return state
}

// notRelevant scripts the LLM to judge every vacancy not relevant.
func (b *bundle) notRelevant() *llmtest.Rule {
	return b.llm.On(llmtest.SystemContains("screen job vacancies")).Named("relevance").
		ReplyJSON(map[string]any{"is_relevant": false, "score": 10, "reasons": []string{"PHP"}, "matched_skills": []string{}})
}

// newsOf are the recorded notes about a search.
func (b *bundle) newsOf(searchID int64) []vacancy.FirstNews {
	var out []vacancy.FirstNews
	for _, n := range b.sent.told() {
		if n.Search.ID == searchID {
			out = append(out, n)
		}
	}
	return out
}

// The first discovery queues vacancies and the LLM finds none relevant:
// each user hears "nothing new yet" once, from whichever worker ends the
// last of their matches, while three replicas' workers and first-news
// sweeps race over them.
func TestFirstMatchesAllNotRelevantTellNothingNewOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{ClaimLease: 30 * time.Second, Workers: 3}))
	b.notRelevant()
	b.hh.Add(vacancies(10, 100, 41)...)
	users := []int64{7, 8, 9, 10}
	var searches []vacancy.Search
	for _, u := range users {
		b.user(t, u, "Go developer")
		searches = append(searches, b.search(t, u, "golang"))
	}
	run, err := b.svc.Discover(b.ctx, b.group(t, searches[0].Key))
	require.NoError(t, err)
	require.Equal(t, 40, run.Queued)
	require.Empty(t, b.sent.told(), "their cards may yet come")
	for _, s := range searches {
		require.Equal(t, "waiting", b.firstNews(t, s.ID))
	}

	replicas := []*vacancy.Service{b.svc, b.newService(t), b.newService(t)}
	deadline := time.Now().Add(30 * time.Second)
	var wg sync.WaitGroup
	for _, svc := range replicas {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A drain ends early while another worker holds a
				// vacancy's detail lease: go on until all are judged.
				for b.counts(t)[vacancy.NotSuitable] < 40 && time.Now().Before(deadline) {
					_, err := svc.Drain(b.ctx)
					assert.NoError(t, err)
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				assert.NoError(t, svc.FirstNews(b.ctx))
			}
		}()
	}
	wg.Wait()
	require.Equal(t, map[vacancy.Status]int{vacancy.NotSuitable: 40}, b.counts(t))
	require.Len(t, b.sent.told(), len(users))
	for _, s := range searches {
		news := b.newsOf(s.ID)
		require.Len(t, news, 1, "search %d", s.ID)
		require.Zero(t, news[0].Queued)
		require.False(t, news[0].Failed)
		require.Equal(t, 1, b.newsRows(t, s.ID), "one note in the outbox")
		require.Equal(t, "told", b.firstNews(t, s.ID))
	}
	for _, svc := range replicas {
		require.NoError(t, svc.FirstNews(b.ctx))
	}
	require.Len(t, b.sent.told(), len(users), "later sweeps tell nothing")
}

// One relevant vacancy among irrelevant ones: its card is the news. While
// the card waits in the outbox no note goes out, even with every other
// match ended; its delivery tells the search.
func TestFirstCardIsTheNews(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On(llmtest.SystemContains("screen job vacancies"), llmtest.PromptContains("Golang developer 102")).
		ReplyJSON(map[string]any{"is_relevant": true, "score": 80, "reasons": []string{"Go"}, "matched_skills": []string{"Go"}})
	b.notRelevant()
	b.hh.Add(vacancies(4, 100, 42)...)
	b.user(t, 7, "Go developer")
	s := b.search(t, 7, "golang")
	_, err := b.svc.Discover(b.ctx, b.group(t, s.Key))
	require.NoError(t, err)
	require.Equal(t, 4, b.drain(t))
	require.Equal(t, map[vacancy.Status]int{vacancy.NotSuitable: 3, vacancy.Analyzed: 1}, b.counts(t))
	require.NoError(t, b.svc.FirstNews(b.ctx))
	require.Empty(t, b.sent.told(), "the card is on its way")
	require.Equal(t, "waiting", b.firstNews(t, s.ID))

	require.Equal(t, 1, b.deliverOutbox(t))
	require.Equal(t, vacancy.SentToUser, b.status(t, 7, 102))
	require.Equal(t, "told", b.firstNews(t, s.ID), "the delivered card told it")
	require.NoError(t, b.svc.FirstNews(b.ctx))
	require.Empty(t, b.sent.told())
	require.Zero(t, b.newsRows(t, s.ID))
}

// A search of a key discovered before gets its backfill as first
// discovery; a ban word drops one match, HH archives another, one fails
// for a technical reason the last of the times it may and the rest are
// not relevant. The SKIPPED match is waited for: recovery returns it, and
// its end tells the user.
func TestFirstMatchesBannedArchivedOrSkippedThenNothingNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rule := b.notRelevant()
	vs := vacancies(5, 100, 43)
	vs[4].Description = "<p>Поддержка сайтов на 1С-Битрикс.</p>"
	b.hh.Add(vs...)
	b.user(t, 7, "")
	first := b.search(t, 7, "golang")
	_, err := b.svc.Discover(b.ctx, b.group(t, first.Key))
	require.NoError(t, err)

	b.user(t, 8, "Go developer")
	_, _, err = b.svc.Ban(b.ctx, 8, "битрикс")
	require.NoError(t, err)
	s := b.search(t, 8, "golang")
	require.Equal(t, "waiting", b.firstNews(t, s.ID), "the backfill queued five")
	b.exec(t, `DELETE FROM vacancy_matches WHERE user_id = 7`)
	b.hh.Archive("103")
	b.exec(t, `UPDATE vacancy_matches SET failures = $1 - 1 WHERE user_id = 8 AND vacancy_id = 102`, vacancy.DefaultMaxFailures)
	rule.FaultNext(1, llmtest.ServerError())
	require.Equal(t, 5, b.drain(t))
	require.Equal(t, vacancy.Skipped, b.status(t, 8, 102), "the newest left is judged first")
	require.Equal(t, vacancy.InArchive, b.status(t, 8, 103))
	require.Equal(t, "(none)", string(b.status(t, 8, 104)), "banned")
	require.NoError(t, b.svc.FirstNews(b.ctx))
	require.Empty(t, b.newsOf(s.ID), "the SKIPPED match may yet bring a card")
	require.Equal(t, "waiting", b.firstNews(t, s.ID))

	res, err := b.svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Recovered)
	require.Equal(t, 1, b.drain(t))
	news := b.newsOf(s.ID)
	require.Len(t, news, 1)
	require.Equal(t, "told", b.firstNews(t, s.ID))
	require.Equal(t, 1, b.newsRows(t, s.ID))
}

// The replica that saved a search died before its first discovery, and
// HH blocks us: another replica's sweep tells the user, once, that it
// will be retried; once HH answers, the sweep discovers it and the user
// hears the outcome.
func TestFirstNewsSweepOutlivesTheReplicaAndHHRefusing(t *testing.T) {
	t.Parallel()
	// Open long enough that the sweeps below end before the breaker
	// half-opens on a busy machine: a half-open breaker lets the next
	// sweep probe HH, a request this test would count.
	b := setup(t, withHHBreaker(2*time.Second, 2*time.Second))
	b.notRelevant()
	b.hh.Add(vacancies(3, 100, 44)...)
	b.user(t, 7, "Go developer")
	b.user(t, 8, "Go developer")
	// b.svc saves both searches and dies: its Run never starts.
	s1 := b.search(t, 7, "golang")
	s2 := b.search(t, 8, "golang developer")
	other, third := b.newService(t), b.newService(t)
	require.NoError(t, other.FirstNews(b.ctx))
	require.Empty(t, b.hh.Requests(), "the saving replica is given its grace")
	b.exec(t, `UPDATE searches SET created_at = created_at - interval '1 minute'`)

	b.hh.SetCaptcha(true)
	var wg sync.WaitGroup
	for _, svc := range []*vacancy.Service{other, third, other, third} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, svc.FirstNews(b.ctx))
		}()
	}
	wg.Wait()
	for _, s := range []vacancy.Search{s1, s2} {
		news := b.newsOf(s.ID)
		require.Len(t, news, 1, "search %d", s.ID)
		require.True(t, news[0].Failed)
		require.Equal(t, "retrying", b.firstNews(t, s.ID))
	}
	asked := len(b.hh.Requests())
	require.NoError(t, other.FirstNews(b.ctx))
	require.Equal(t, asked, len(b.hh.Requests()), "nothing asked of HH while it refuses us")

	b.hh.SetCaptcha(false)
	require.Eventually(t, func() bool {
		assert.NoError(t, other.FirstNews(b.ctx))
		return b.firstNews(t, s1.ID) != "retrying" && b.firstNews(t, s2.ID) != "retrying"
	}, 10*time.Second, 100*time.Millisecond)
	require.Equal(t, 6, b.counts(t)[vacancy.Queued], "three per search's first discovery, once")
	require.Len(t, b.sent.told(), 2, "their cards may yet come")
	_, err := other.Drain(b.ctx)
	require.NoError(t, err)
	for _, s := range []vacancy.Search{s1, s2} {
		news := b.newsOf(s.ID)
		require.Len(t, news, 2, "search %d: retrying, then nothing new", s.ID)
		require.False(t, news[1].Failed)
		require.Equal(t, "told", b.firstNews(t, s.ID))
	}
}
