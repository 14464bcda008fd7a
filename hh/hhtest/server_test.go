package hhtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/hh/hhtest"
)

func TestSearchPagingFollowsHHLimits(t *testing.T) {
	const n = 2500
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(n, hhtest.GenOptions{Seed: 7})...))

	seen := map[string]bool{}
	var all []item
	for p := range 20 {
		res := search(t, srv, vals("per_page", "100", "page", strconv.Itoa(p)))
		require.Equal(t, n, res.Found, "found is the true number of matches")
		require.Equal(t, 20, res.Pages, "pages stop at the 2000-item depth limit")
		require.Equal(t, p, res.Page)
		require.Equal(t, 100, res.PerPage)
		require.Len(t, res.Items, 100, "page %d", p)
		for _, it := range res.Items {
			require.False(t, seen[it.ID], "duplicate id %s on page %d", it.ID, p)
			seen[it.ID] = true
		}
		all = append(all, res.Items...)
	}

	// Newest first across pages: published_at descending, ties by larger id.
	for i := 1; i < len(all); i++ {
		prev, cur := parseHHTime(t, all[i-1].PublishedAt), parseHHTime(t, all[i].PublishedAt)
		require.False(t, cur.After(prev), "item %d is newer than item %d", i, i-1)
		if cur.Equal(prev) {
			require.Greater(t, mustAtoi(t, all[i-1].ID), mustAtoi(t, all[i].ID), "tie at %d not broken by id", i)
		}
	}
	// Generated ids grow with time, so the 2000 reachable items are exactly
	// the newest ids.
	require.Equal(t, strconv.Itoa(hhtest.DefaultFirstID+n-1), all[0].ID)
	require.Equal(t, strconv.Itoa(hhtest.DefaultFirstID+n-2000), all[len(all)-1].ID)

	deep := do(t, srv, "/vacancies", vals("per_page", "100", "page", "20"), map[string]string{"User-Agent": testUA})
	requireHHError(t, deep, http.StatusBadRequest, "bad_argument", "page", "per_page")
	var legacy struct {
		Description string `json:"description"`
	}
	require.NoError(t, json.Unmarshal(deep.body, &legacy))
	require.Equal(t, hhtest.DepthLimitDescription, legacy.Description)

	tooBig := do(t, srv, "/vacancies", vals("per_page", "101"), map[string]string{"User-Agent": testUA})
	requireHHError(t, tooBig, http.StatusBadRequest, "bad_argument", "per_page")

	// The depth example of HH's docs: page 199 of 10 is the last allowed.
	require.Len(t, search(t, srv, vals("per_page", "10", "page", "199")).Items, 10)
	requireHHError(t, do(t, srv, "/vacancies", vals("per_page", "10", "page", "200"), map[string]string{"User-Agent": testUA}),
		http.StatusBadRequest, "bad_argument", "page", "per_page")

	for _, bad := range []string{"0", "-1", "abc"} {
		requireHHError(t, do(t, srv, "/vacancies", vals("per_page", bad), map[string]string{"User-Agent": testUA}),
			http.StatusBadRequest, "bad_argument", "per_page")
	}
	requireHHError(t, do(t, srv, "/vacancies", vals("page", "-1"), map[string]string{"User-Agent": testUA}),
		http.StatusBadRequest, "bad_argument", "page")

	def := search(t, srv, nil)
	require.Equal(t, 20, def.PerPage, "HH's default per_page")
	require.Len(t, def.Items, 20)
	require.Equal(t, 100, def.Pages, "2000/20")
	require.Equal(t, ids(all[:20]), ids(def.Items), "no order_by is newest first too")

	byTime := search(t, srv, vals("order_by", "publication_time"))
	require.Equal(t, ids(def.Items), ids(byTime.Items))
}

func TestSearchPagesPastTheEndAreEmpty(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(13, hhtest.GenOptions{Seed: 1})...))

	res := search(t, srv, vals("per_page", "5", "page", "2"))
	require.Equal(t, 13, res.Found)
	require.Equal(t, 3, res.Pages)
	require.Len(t, res.Items, 3)

	past := get(t, srv, "/vacancies", vals("per_page", "5", "page", "7"))
	require.Contains(t, string(past), `"items":[]`, "an empty page is [] not null")
}

func TestUserAgentIsRequired(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(3, hhtest.GenOptions{})...))

	// An empty User-Agent header stops net/http from sending its default.
	missing := do(t, srv, "/vacancies", nil, map[string]string{"User-Agent": ""})
	requireHHError(t, missing, http.StatusBadRequest, "bad_user_agent", "unset")
	require.JSONEq(t, `{"errors":[{"type":"bad_user_agent","value":"unset"}]}`, string(missing.body))

	id := srv.Vacancies()[0].ID
	requireHHError(t, do(t, srv, "/vacancies/"+id, nil, map[string]string{"User-Agent": ""}),
		http.StatusBadRequest, "bad_user_agent", "unset")

	// HH-User-Agent alone is enough, and HH accepts Go's default too.
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", nil, map[string]string{"User-Agent": "", "HH-User-Agent": testUA}).status)
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", nil, nil).status)

	log := srv.Requests()
	require.Len(t, log, 4)
	require.Equal(t, "", log[0].UserAgent)
	require.Equal(t, http.StatusBadRequest, log[0].Status)
	require.Equal(t, testUA, log[2].HHUserAgent)
	require.True(t, strings.HasPrefix(log[3].UserAgent, "Go-http-client/"))
}

func TestStrictUserAgentRefusesGoDefault(t *testing.T) {
	strict := hhtest.Start(t, hhtest.StrictUserAgent())
	requireHHError(t, do(t, strict, "/vacancies", nil, nil), http.StatusBadRequest, "bad_user_agent", "blacklisted")
	require.Equal(t, http.StatusOK, do(t, strict, "/vacancies", nil, map[string]string{"User-Agent": testUA}).status)

	prefixed := hhtest.Start(t, hhtest.RequireUserAgent("switchboard/"))
	requireHHError(t, do(t, prefixed, "/vacancies", nil, map[string]string{"User-Agent": testUA}),
		http.StatusBadRequest, "bad_user_agent", "blacklisted")
	// HH-User-Agent wins over User-Agent.
	require.Equal(t, http.StatusOK, do(t, prefixed, "/vacancies", nil,
		map[string]string{"User-Agent": "curl/8", "HH-User-Agent": "switchboard/2.0 (a@b.c)"}).status)
}

func TestDetailFullRepresentationAndNotFound(t *testing.T) {
	vs := hhtest.Generate(50, hhtest.GenOptions{Seed: 3})
	srv := hhtest.Start(t, hhtest.WithVacancies(vs...))
	notFound := fixture(t, "not_found.json")

	var withSkills hhtest.Vacancy
	for _, v := range vs {
		if len(v.KeySkills) > 0 {
			withSkills = v
			break
		}
	}
	require.NotEmpty(t, withSkills.ID)

	var full struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
		KeySkills   []struct {
			Name string `json:"name"`
		} `json:"key_skills"`
		Experience struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"experience"`
		PublishedAt string `json:"published_at"`
	}
	require.NoError(t, json.Unmarshal(get(t, srv, "/vacancies/"+withSkills.ID, nil), &full))
	require.Equal(t, withSkills.ID, full.ID)
	require.Equal(t, withSkills.Name, full.Name)
	require.True(t, strings.HasPrefix(full.Description, "<p>"), full.Description)
	require.Contains(t, full.Description, "<ul><li>")
	require.Contains(t, full.Description, "<strong>")
	require.Len(t, full.KeySkills, len(withSkills.KeySkills))
	require.Equal(t, withSkills.KeySkills[0], full.KeySkills[0].Name)
	require.NotEmpty(t, full.Experience.Name)
	require.True(t, parseHHTime(t, full.PublishedAt).Equal(withSkills.PublishedAt))

	srv.Archive(withSkills.ID)
	gone := do(t, srv, "/vacancies/"+withSkills.ID, nil, map[string]string{"User-Agent": testUA})
	require.Equal(t, http.StatusNotFound, gone.status)
	require.JSONEq(t, string(notFound), string(gone.body))
	for _, it := range search(t, srv, vals("per_page", "100")).Items {
		require.NotEqual(t, withSkills.ID, it.ID, "archived vacancies leave search")
	}
	require.Equal(t, 49, srv.Len())

	unknown := do(t, srv, "/vacancies/1", nil, map[string]string{"User-Agent": testUA})
	require.Equal(t, http.StatusNotFound, unknown.status)
	require.JSONEq(t, string(notFound), string(unknown.body))

	// DetailNotFound: still searchable, but the detail is gone.
	hidden := vs[len(vs)-1].ID
	srv.DetailNotFound(hidden)
	require.Equal(t, hidden, search(t, srv, nil).Items[0].ID)
	require.Equal(t, http.StatusNotFound, do(t, srv, "/vacancies/"+hidden, nil, map[string]string{"User-Agent": testUA}).status)
	require.Equal(t, 1, srv.DetailCalls(hidden))
	require.Equal(t, 4, srv.DetailCallsTotal(), "found, archived, unknown and hidden")

	other := do(t, srv, "/employers/1455", nil, map[string]string{"User-Agent": testUA})
	require.Equal(t, http.StatusNotFound, other.status)
	require.JSONEq(t, string(notFound), string(other.body))
}

func TestItemURLLeadsBackToTheFake(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(5, hhtest.GenOptions{})...))
	it := search(t, srv, nil).Items[0]
	require.Equal(t, srv.URL()+"/vacancies/"+it.ID, it.URL)
	path := strings.TrimPrefix(it.URL, srv.URL())
	var full struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(get(t, srv, path, nil), &full))
	require.Equal(t, it.ID, full.ID)
}

func TestPublishAppearsOnTopOfFirstPage(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(300, hhtest.GenOptions{Seed: 5})...))
	before := search(t, srv, vals("per_page", "50", "order_by", "publication_time"))
	require.Equal(t, 300, before.Found)

	handMade := srv.Publish(hhtest.Vacancy{
		Name:       "Go-разработчик в команду платёжного шлюза",
		Area:       hhtest.Area{ID: hhtest.AreaSPb},
		Experience: hhtest.Between3And6,
		Salary:     hhtest.NewSalary(250_000, 0, "RUR", false),
	})
	generated := srv.PublishN(2)
	require.Len(t, handMade, 1)
	require.Len(t, generated, 2)
	require.Greater(t, mustAtoi(t, handMade[0].ID), mustAtoi(t, before.Items[0].ID), "new ids are larger")
	require.True(t, handMade[0].PublishedAt.After(parseHHTime(t, before.Items[0].PublishedAt)))

	after := search(t, srv, vals("per_page", "50", "order_by", "publication_time"))
	require.Equal(t, 303, after.Found)
	require.Equal(t, []string{generated[1].ID, generated[0].ID, handMade[0].ID}, ids(after.Items[:3]))
	require.Equal(t, ids(before.Items[:47]), ids(after.Items[3:]), "older items shift down")
	require.Equal(t, "Санкт-Петербург", after.Items[2].Area.Name, "names come from the dictionary")
	require.Equal(t, "От 3 до 6 лет", after.Items[2].Experience.Name)
	require.NotNil(t, after.Items[2].Salary)
	require.Nil(t, after.Items[2].Salary.To)
}

func TestSearchFilters(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(400, hhtest.GenOptions{Seed: 11})...))
	planted := srv.Publish(
		hhtest.Vacancy{Name: "Ведущий ГОЛАНГ-Разработчик", Area: hhtest.Area{ID: "88"}, Experience: hhtest.MoreThan6,
			Requirement: "Опыт с очередями.", Responsibility: "Писать на Голанге."},
		hhtest.Vacancy{Name: "Стажёр", Area: hhtest.Area{ID: hhtest.AreaMoscow}, Experience: hhtest.NoExperience,
			Requirement: "Знание голанг приветствуется."},
	)

	t.Run("text is case-insensitive Cyrillic over name and snippet", func(t *testing.T) {
		res := search(t, srv, vals("text", "голанг", "per_page", "100"))
		require.ElementsMatch(t, []string{planted[0].ID, planted[1].ID}, ids(res.Items))
		require.Equal(t, 2, res.Found)
		// Publish makes later arguments newer, so the trainee comes first.
		require.Equal(t, planted[1].ID, res.Items[0].ID)
		require.Equal(t, "Знание <highlighttext>голанг</highlighttext> приветствуется.", *res.Items[0].Snippet.Requirement)
		require.Nil(t, res.Items[0].Snippet.Responsibility, "an empty snippet field is null")
		require.Equal(t, "Писать на <highlighttext>Голанг</highlighttext>е.", *res.Items[1].Snippet.Responsibility)

		// Every word must match; upper-case query matches lower-case text.
		require.Equal(t, []string{planted[0].ID}, ids(search(t, srv, vals("text", "ВЕДУЩИЙ голанг")).Items))
		require.Equal(t, []string{planted[0].ID}, ids(search(t, srv, vals("text", "голанг", "search_field", "name")).Items))
		require.Empty(t, search(t, srv, vals("text", "несуществующееслово")).Items)
	})

	t.Run("generated titles are searchable", func(t *testing.T) {
		res := search(t, srv, vals("text", "разработчик", "per_page", "100"))
		require.NotZero(t, res.Found)
		for _, it := range res.Items {
			haystack := strings.ToLower(it.Name + deref(it.Snippet.Requirement) + deref(it.Snippet.Responsibility))
			require.Contains(t, haystack, "разработчик")
		}
	})

	t.Run("area is multi and regions cover cities", func(t *testing.T) {
		res := search(t, srv, vals("area", "2", "area", "88", "per_page", "100"))
		require.NotZero(t, res.Found)
		areas := map[string]bool{}
		for _, it := range res.Items {
			areas[it.Area.ID] = true
		}
		require.Equal(t, map[string]bool{"2": true, "88": true}, areas)
		require.Equal(t, srv.Len(), search(t, srv, vals("area", hhtest.AreaRussia)).Found)
	})

	t.Run("experience and schedule are multi", func(t *testing.T) {
		res := search(t, srv, vals("experience", hhtest.MoreThan6, "experience", hhtest.NoExperience, "per_page", "100"))
		require.NotZero(t, res.Found)
		for _, it := range res.Items {
			require.Contains(t, []string{hhtest.MoreThan6, hhtest.NoExperience}, it.Experience.ID)
		}
		remote := search(t, srv, vals("schedule", hhtest.Remote, "per_page", "100"))
		require.NotZero(t, remote.Found)
		for _, it := range remote.Items {
			require.Equal(t, hhtest.Remote, it.Schedule.ID)
		}
		total := 0
		for _, id := range []string{hhtest.NoExperience, hhtest.Between1And3, hhtest.Between3And6, hhtest.MoreThan6} {
			total += search(t, srv, vals("experience", id)).Found
		}
		require.Equal(t, srv.Len(), total, "experience values partition the catalogue")
	})

	t.Run("salary and only_with_salary", func(t *testing.T) {
		all := search(t, srv, vals("per_page", "1")).Found
		withSalary := search(t, srv, vals("only_with_salary", "true", "per_page", "100"))
		require.Less(t, withSalary.Found, all)
		for _, it := range withSalary.Items {
			require.NotNil(t, it.Salary)
		}
		near := search(t, srv, vals("salary", "200000", "only_with_salary", "true", "per_page", "100"))
		require.NotZero(t, near.Found)
		require.Less(t, near.Found, withSalary.Found)
		rate := map[string]float64{"RUR": 1, "USD": 90, "EUR": 100}
		for _, it := range near.Items {
			if it.Salary.From != nil {
				require.LessOrEqual(t, float64(*it.Salary.From)*rate[it.Salary.Currency]*0.8, 200000.0)
			}
			if it.Salary.To != nil {
				require.GreaterOrEqual(t, float64(*it.Salary.To)*rate[it.Salary.Currency]*1.2, 200000.0)
			}
		}
		// Without only_with_salary, vacancies without a salary come along.
		withNone := search(t, srv, vals("salary", "200000")).Found
		require.Equal(t, near.Found+(all-withSalary.Found), withNone)
	})

	t.Run("unknown parameters are ignored, bad dictionary ids refused", func(t *testing.T) {
		require.Equal(t, srv.Len(), search(t, srv, vals("no_such_param", "1", "clusters", "true")).Found)
		requireHHError(t, do(t, srv, "/vacancies", vals("experience", "between1and3"), map[string]string{"User-Agent": testUA}),
			http.StatusBadRequest, "bad_argument", "experience")
		requireHHError(t, do(t, srv, "/vacancies", vals("order_by", "distance"), map[string]string{"User-Agent": testUA}),
			http.StatusBadRequest, "bad_argument", "order_by")
	})

	t.Run("salary_desc", func(t *testing.T) {
		res := search(t, srv, vals("order_by", "salary_desc", "only_with_salary", "true", "currency", "RUR", "per_page", "100"))
		require.NotEmpty(t, res.Items)
		rate := map[string]float64{"RUR": 1, "USD": 90, "EUR": 100}
		key := func(it item) float64 {
			v := it.Salary.To
			if v == nil {
				v = it.Salary.From
			}
			return float64(*v) * rate[it.Salary.Currency]
		}
		for i := 1; i < len(res.Items); i++ {
			require.GreaterOrEqual(t, key(res.Items[i-1]), key(res.Items[i]))
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestFaultsThenRecovery(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(10, hhtest.GenOptions{})...))
	ua := map[string]string{"User-Agent": testUA}

	srv.FailNext(2, http.StatusServiceUnavailable, hhtest.SearchEndpoint)
	require.Equal(t, 2, srv.PendingFaults())

	// A search-only fault leaves detail alone.
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies/"+srv.Vacancies()[0].ID, nil, ua).status)

	for range 2 {
		r := do(t, srv, "/vacancies", nil, ua)
		requireHHError(t, r, http.StatusServiceUnavailable, "service_unavailable")
	}
	require.Equal(t, 0, srv.PendingFaults())
	require.Len(t, search(t, srv, nil).Items, 10, "recovers after the faults")
	require.Equal(t, 3, srv.SearchCalls(), "faulted attempts are counted")

	srv.FailNext(1, http.StatusBadGateway, hhtest.AnyEndpoint)
	bad := do(t, srv, "/vacancies/"+srv.Vacancies()[1].ID, nil, ua)
	require.Equal(t, http.StatusBadGateway, bad.status)
	require.False(t, json.Valid(bad.body), "5xx bodies may be non-JSON: %s", bad.body)
	require.Equal(t, "text/html", bad.header.Get("Content-Type"))

	statuses := []int{}
	for _, r := range srv.Requests() {
		statuses = append(statuses, r.Status)
	}
	require.Equal(t, []int{200, 503, 503, 200, 502}, statuses)

	srv.ResetLog()
	require.Empty(t, srv.Requests())
	require.Zero(t, srv.SearchCalls())
}

// A fault narrowed by Query answers only the requests whose query has its
// values, however many of them, and leaves the others to be served.
func TestFaultNarrowedToOneSearch(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(10, hhtest.GenOptions{})...))
	ua := map[string]string{"User-Agent": testUA}
	srv.InjectFault(hhtest.Fault{Count: 2, Status: http.StatusBadRequest, On: hhtest.SearchEndpoint, Query: vals("area", "1")})

	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", vals("area", "2"), ua).status)
	require.Equal(t, http.StatusBadRequest, do(t, srv, "/vacancies", vals("text", "go", "area", "1"), ua).status)
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", vals("text", "go"), ua).status)
	require.Equal(t, http.StatusBadRequest, do(t, srv, "/vacancies", vals("area", "2", "area", "1"), ua).status)
	require.Zero(t, srv.PendingFaults())
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", vals("area", "1"), ua).status, "its count spent")
}

func TestLatencyHonoursClientCancellation(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := hhtest.Start(t,
		hhtest.WithVacancies(hhtest.Generate(5, hhtest.GenOptions{})...),
		hhtest.OnRequest(func(*http.Request) { arrived <- struct{}{} }),
	)
	srv.SetLatency(time.Hour, hhtest.SearchEndpoint)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/vacancies", nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", testUA)

	errc := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)

	// The handler notices the cancellation and finishes; goleak in TestMain
	// would catch it otherwise.
	waitCtx, waitCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer waitCancel()
	log, err := srv.WaitRequests(waitCtx, 1)
	require.NoError(t, err)
	require.Equal(t, hhtest.StatusClientClosedRequest, log[0].Status)

	// Detail has no latency: only the endpoint given was slowed down.
	id := srv.Vacancies()[0].ID
	res := do(t, srv, "/vacancies/"+id, nil, map[string]string{"User-Agent": testUA})
	<-arrived
	require.Equal(t, http.StatusOK, res.status)
}

func TestCloseReleasesDelayedRequests(t *testing.T) {
	arrived := make(chan struct{})
	var once sync.Once
	srv := hhtest.New(
		hhtest.WithLatency(time.Hour),
		hhtest.OnRequest(func(*http.Request) { once.Do(func() { close(arrived) }) }),
	)
	client := srv.Client()

	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/vacancies", nil)
		req.Header.Set("User-Agent", testUA)
		resp, err := client.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		resp.Body.Close()
		done <- result{status: resp.StatusCode}
	}()
	<-arrived
	srv.Close() // must not wait out the hour
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, http.StatusServiceUnavailable, r.status)
	srv.Close() // idempotent
}

func TestConcurrentMutationsAndSearches(t *testing.T) {
	srv := hhtest.Start(t, hhtest.WithVacancies(hhtest.Generate(500, hhtest.GenOptions{Seed: 2})...))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL()+"/vacancies?per_page=100&text=go", nil)
				req.Header.Set("User-Agent", testUA)
				resp, err := srv.Client().Do(req)
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						t.Errorf("search: %v", err)
					}
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	for i := range 20 {
		published := srv.PublishN(2)
		srv.Archive(published[0].ID)
		if i%10 == 0 {
			srv.FailNext(1, http.StatusServiceUnavailable, hhtest.DetailEndpoint)
		}
	}
	cancel()
	wg.Wait()
	require.Equal(t, 520, srv.Len())
	require.Equal(t, 520, search(t, srv, vals("per_page", "1")).Found)
}
