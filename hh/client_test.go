package hh_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
	"switchboard/internal/testkit"
)

func TestMain(m *testing.M) {
	// Latency, cancellation and timeouts leave goroutines on both sides of
	// a connection; every test closes its Client and server, so none may
	// outlive it.
	goleak.VerifyTestMain(m)
}

const testUA = "switchboard-test/1.0 (dev@example.com)"

// catalogue is a fake with 250 generated vacancies.
func catalogue(t *testing.T, opts ...hhtest.Option) *hhtest.Server {
	t.Helper()
	return hhtest.Start(t, append([]hhtest.Option{hhtest.WithVacancies(hhtest.Generate(250, hhtest.GenOptions{Seed: 1})...)}, opts...)...)
}

// newClient builds a Client on url with its own registry; mutate adjusts
// the config first.
func newClient(t *testing.T, url string, mutate func(*hh.Config)) (*hh.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg := hh.Config{
		URL: url, UserAgent: testUA, Timeout: 5 * time.Second, Registerer: reg,
		Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := hh.New(cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, reg
}

// fixedServer answers every request with status and body.
func fixedServer(t *testing.T, status int, body []byte) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func idOf(t *testing.T, v hhtest.Vacancy) int64 {
	t.Helper()
	id, err := strconv.ParseInt(v.ID, 10, 64)
	require.NoError(t, err)
	return id
}

// requireMapped checks got against the catalogue vacancy it came from.
func requireMapped(t *testing.T, want hhtest.Vacancy, got vacancy.Vacancy) {
	t.Helper()
	require.Equal(t, idOf(t, want), got.ID)
	require.Equal(t, want.Name, got.Title)
	require.Equal(t, want.Employer.Name, got.Employer)
	require.Equal(t, "https://hh.ru/vacancy/"+want.ID, got.URL)
	require.Equal(t, want.Area.Name, got.Area)
	require.Equal(t, want.Experience, got.Experience)
	require.Equal(t, want.Schedule, got.Schedule)
	require.True(t, want.PublishedAt.Equal(got.PublishedAt), "published_at: want %s, got %s", want.PublishedAt, got.PublishedAt)
	var sal vacancy.Salary
	if s := want.Salary; s != nil {
		sal.Currency, sal.Gross = s.Currency, s.Gross
		if s.From != nil {
			sal.From = *s.From
		}
		if s.To != nil {
			sal.To = *s.To
		}
	}
	require.Equal(t, sal, got.Salary)
	var parts []string
	for _, p := range []string{want.Requirement, want.Responsibility} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	require.Equal(t, strings.Join(parts, "\n"), got.Snippet)
	var raw struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(got.Raw, &raw))
	require.Equal(t, want.ID, raw.ID)
}

func TestSearchPagesNewestFirstWithFilters(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	match := hhtest.Vacancy{
		Name:       "Квазиразработчик Go",
		Area:       hhtest.Area{ID: hhtest.AreaSPb},
		Salary:     hhtest.NewSalary(200_000, 300_000, "RUR", false),
		Experience: hhtest.Between1And3,
		Schedule:   hhtest.Remote,
		Employer:   hhtest.Employer{ID: "1", Name: "Acme"},
	}
	var want []hhtest.Vacancy
	for range 7 {
		want = append(want, srv.Publish(match)...)
		// Decoys interleaved in time, each failing exactly one filter.
		for _, d := range []func(*hhtest.Vacancy){
			func(v *hhtest.Vacancy) { v.Schedule = hhtest.FullDay },
			func(v *hhtest.Vacancy) { v.Experience = hhtest.NoExperience },
			func(v *hhtest.Vacancy) { v.Area.ID, v.Area.Name = hhtest.AreaMoscow, "" },
			func(v *hhtest.Vacancy) { v.Salary = hhtest.NewSalary(30_000, 40_000, "RUR", false) },
			func(v *hhtest.Vacancy) { v.Name = "Разработчик Go" },
		} {
			decoy := match
			d(&decoy)
			srv.Publish(decoy)
		}
	}
	c, _ := newClient(t, srv.URL(), nil)
	p := vacancy.Params{Text: "квазиразработчик", Salary: 250_000, Filters: map[string][]string{
		"area": {hhtest.AreaSPb}, "experience": {hhtest.Between1And3}, "schedule": {hhtest.Remote},
	}}

	var got []vacancy.Vacancy
	for page := range 3 {
		res, err := c.Search(t.Context(), p, page, 3)
		require.NoError(t, err)
		require.Equal(t, 7, res.Found)
		require.Equal(t, 3, res.Pages)
		require.Len(t, res.Items, min(3, 7-page*3))
		got = append(got, res.Items...)
	}
	require.Len(t, got, 7)
	for i, v := range got {
		// Publish returns oldest first; HH answers newest first.
		requireMapped(t, want[len(want)-1-i], v)
		if i > 0 {
			require.Greater(t, got[i-1].ID, v.ID)
			require.False(t, v.PublishedAt.After(got[i-1].PublishedAt))
		}
	}

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	for i, r := range reqs {
		require.Equal(t, "/vacancies", r.Path)
		require.Equal(t, testUA, r.UserAgent)
		require.Equal(t, testUA, r.HHUserAgent)
		require.Equal(t, map[string][]string{
			"text":       {"квазиразработчик"},
			"area":       {"2"},
			"salary":     {"250000"},
			"currency":   {"RUR"},
			"experience": {"between1And3"},
			"schedule":   {"remote"},
			"order_by":   {"publication_time"},
			"page":       {strconv.Itoa(i)},
			"per_page":   {"3"},
		}, map[string][]string(r.Query))
	}
}

func TestSearchSendsOnlySetFilters(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, _ := newClient(t, srv.URL(), nil)
	res, err := c.Search(t.Context(), vacancy.Params{}, 0, 20)
	require.NoError(t, err)
	require.Len(t, res.Items, 20)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, map[string][]string{
		"order_by": {"publication_time"},
		"page":     {"0"},
		"per_page": {"20"},
	}, map[string][]string(reqs[0].Query))
}

// Every filter a search keeps reaches HH as it was saved, repeated
// parameters repeated, and the currency of the salary kept.
func TestSearchSendsEveryFilter(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, _ := newClient(t, srv.URL(), nil)
	p, err := vacancy.ParseParams("golang area=1,2 salary=3000 currency=USD period=7 search_field=name professional_role=96 only_with_salary=true")
	require.NoError(t, err)
	_, err = c.Search(t.Context(), p, 0, 20)
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, map[string][]string{
		"text": {"golang"}, "area": {"1", "2"}, "salary": {"3000"}, "currency": {"USD"}, "period": {"7"},
		"search_field": {"name"}, "professional_role": {"96"}, "only_with_salary": {"true"},
		"order_by": {"publication_time"}, "page": {"0"}, "per_page": {"20"},
	}, map[string][]string(reqs[0].Query))
}

func TestSearchMapsEveryItem(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	// A caller's own http.Client is used as given.
	c, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.HTTPClient = srv.Client() })
	catalogue := srv.Vacancies()
	require.Len(t, catalogue, 250)

	var got []vacancy.Vacancy
	for page := 0; ; page++ {
		res, err := c.Search(t.Context(), vacancy.Params{}, page, 100)
		require.NoError(t, err)
		require.Equal(t, 250, res.Found)
		require.Equal(t, 3, res.Pages)
		got = append(got, res.Items...)
		if page+1 >= res.Pages {
			break
		}
	}
	require.Len(t, got, len(catalogue))
	for i := range got {
		requireMapped(t, catalogue[i], got[i])
		require.Empty(t, got[i].Description, "search does not fill the description")
		require.Empty(t, got[i].KeySkills)
	}
}

func TestSearchSnippetLosesHighlight(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, _ := newClient(t, srv.URL(), nil)
	res, err := c.Search(t.Context(), vacancy.Params{Text: "образование"}, 0, 100)
	require.NoError(t, err)
	require.NotEmpty(t, res.Items)
	for _, v := range res.Items {
		require.NotContains(t, v.Snippet, "highlighttext")
		require.Contains(t, strings.ToLower(v.Snippet), "образование")
		want, ok := srv.Vacancy(strconv.FormatInt(v.ID, 10))
		require.True(t, ok)
		requireMapped(t, want, v)
		// Raw stays as HH sent it, tags included.
		require.Contains(t, string(v.Raw), "<highlighttext>")
	}
}

func TestSearchRefusesArgumentsHHWouldRefuse(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, reg := newClient(t, srv.URL(), nil)
	for _, tc := range []struct{ page, perPage int }{
		{20, 100}, // (20+1)*100 > 2000
		{200, 10},
		{66, 30},
		{0, 0},
		{0, 101},
		{-1, 20},
		{int(^uint(0) >> 1), 100}, // must not overflow into acceptance
	} {
		_, err := c.Search(t.Context(), vacancy.Params{Text: "go"}, tc.page, tc.perPage)
		require.Error(t, err, "page %d per_page %d", tc.page, tc.perPage)
		require.NotErrorIs(t, err, vacancy.ErrUnavailable)
		var apiErr *hh.APIError
		require.NotErrorAs(t, err, &apiErr)
	}
	require.Zero(t, srv.SearchCalls(), "refused locally, without a request")
	require.Zero(t, sampleCount(t, reg, "search"), "no request, no metric")

	// The deepest pages HH serves are allowed.
	for _, tc := range []struct{ page, perPage int }{{19, 100}, {199, 10}, {65, 30}} {
		_, err := c.Search(t.Context(), vacancy.Params{}, tc.page, tc.perPage)
		require.NoError(t, err)
	}
	require.Equal(t, 3, srv.SearchCalls())
}

func TestVacancyDetail(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, _ := newClient(t, srv.URL(), nil)
	checked := 0
	for _, want := range srv.Vacancies()[:30] {
		got, err := c.Vacancy(t.Context(), idOf(t, want))
		require.NoError(t, err)
		// The full representation has no snippet.
		want.Requirement, want.Responsibility = "", ""
		requireMapped(t, want, got)
		require.Equal(t, want.Description, got.Description)
		require.Contains(t, got.Description, "<p>")
		require.Equal(t, want.KeySkills, got.KeySkills)
		require.Contains(t, string(got.Raw), `"key_skills"`)
		if len(want.KeySkills) > 0 {
			checked++
		}
	}
	require.NotZero(t, checked, "some vacancies have key skills")
	reqs := srv.Requests()
	require.Equal(t, "/vacancies/"+srv.Vacancies()[0].ID, reqs[0].Path)
	require.Equal(t, testUA, reqs[0].HHUserAgent)
}

func TestVacancyGone(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	vs := srv.Vacancies()
	archived, removed := vs[3], vs[4]
	srv.Archive(archived.ID)
	srv.DetailNotFound(removed.ID)
	c, reg := newClient(t, srv.URL(), nil)

	for _, id := range []int64{idOf(t, archived), idOf(t, removed), 1} {
		_, err := c.Vacancy(t.Context(), id)
		require.ErrorIs(t, err, vacancy.ErrArchived)
		require.NotErrorIs(t, err, vacancy.ErrUnavailable)
		require.Contains(t, err.Error(), "404")
		require.Contains(t, err.Error(), "not_found")
	}
	require.Equal(t, 3.0, counter(t, reg, "vacancy", "not_found"))
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		on     hhtest.Endpoint
		detail string
	}{
		{503, hhtest.DetailEndpoint, "service_unavailable"},
		{502, hhtest.DetailEndpoint, ""}, // nginx HTML page
		{500, hhtest.SearchEndpoint, ""},
		{503, hhtest.SearchEndpoint, "service_unavailable"},
		{504, hhtest.DetailEndpoint, ""},
	} {
		t.Run(strconv.Itoa(tc.status)+"_"+tc.on.String(), func(t *testing.T) {
			t.Parallel()
			srv := catalogue(t)
			srv.FailNext(1, tc.status, tc.on)
			c, reg := newClient(t, srv.URL(), nil)
			id := idOf(t, srv.Vacancies()[0])
			var err error
			endpoint := "search"
			if tc.on == hhtest.DetailEndpoint {
				endpoint = "vacancy"
				_, err = c.Vacancy(t.Context(), id)
			} else {
				_, err = c.Search(t.Context(), vacancy.Params{}, 0, 20)
			}
			require.ErrorIs(t, err, vacancy.ErrUnavailable)
			require.NotErrorIs(t, err, vacancy.ErrArchived)
			var apiErr *hh.APIError
			require.NotErrorAs(t, err, &apiErr)
			require.Contains(t, err.Error(), strconv.Itoa(tc.status))
			require.Contains(t, err.Error(), tc.detail)
			require.NotContains(t, err.Error(), "<html>")
			require.Equal(t, 1.0, counter(t, reg, endpoint, "unavailable"))

			// The fault was one answer; the client does not retry by itself.
			require.Len(t, srv.Requests(), 1)
			if tc.on == hhtest.DetailEndpoint {
				_, err = c.Vacancy(t.Context(), id)
			} else {
				_, err = c.Search(t.Context(), vacancy.Params{}, 0, 20)
			}
			require.NoError(t, err)
		})
	}
}

func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close()
	c, reg := newClient(t, url, nil)
	_, err := c.Search(t.Context(), vacancy.Params{Text: "секретная строка"}, 0, 20)
	require.ErrorIs(t, err, vacancy.ErrUnavailable)
	require.NotContains(t, err.Error(), "секретная", "the URL with the query is not repeated")
	require.Equal(t, 1.0, counter(t, reg, "search", "unavailable"))
}

func TestAPIError(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, reg := newClient(t, srv.URL(), nil)

	_, err := c.Search(t.Context(), vacancy.Params{Text: "go", Filters: map[string][]string{"experience": {"ancient"}}}, 0, 20)
	var apiErr *hh.APIError
	require.ErrorAs(t, err, &apiErr)
	require.NotErrorIs(t, err, vacancy.ErrUnavailable)
	require.NotErrorIs(t, err, vacancy.ErrArchived)
	require.Equal(t, 400, apiErr.Status)
	require.Len(t, apiErr.Errors, 1)
	require.Equal(t, "bad_argument", apiErr.Errors[0].Type)
	require.Equal(t, "experience", apiErr.Errors[0].Value)
	require.Contains(t, err.Error(), "400")
	require.Contains(t, err.Error(), "bad_argument=experience")

	// A 403 that is not a captcha or forbidden is the request's error;
	// those two refuse us as a client (breaker_test.go).
	srv.InjectFault(hhtest.Fault{Count: 1, Status: http.StatusForbidden, On: hhtest.DetailEndpoint,
		Body: []byte(`{"errors":[{"type":"oauth","value":"bad_authorization"}]}`)})
	_, err = c.Vacancy(t.Context(), idOf(t, srv.Vacancies()[0]))
	require.ErrorAs(t, err, &apiErr)
	require.NotErrorIs(t, err, vacancy.ErrUnavailable)
	require.NotErrorIs(t, err, vacancy.ErrHHBlocked)
	require.Equal(t, 403, apiErr.Status)
	require.Equal(t, "oauth", apiErr.Errors[0].Type)

	require.Equal(t, 1.0, counter(t, reg, "search", "error"))
	require.Equal(t, 1.0, counter(t, reg, "vacancy", "error"))
}

func TestSearch404IsAPIError(t *testing.T) {
	t.Parallel()
	// Only a vacancy can be gone; a 404 on search means a wrong URL.
	ts := fixedServer(t, http.StatusNotFound, fixture(t, "not_found.json"))
	c, _ := newClient(t, ts.URL, nil)
	_, err := c.Search(t.Context(), vacancy.Params{}, 0, 20)
	var apiErr *hh.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 404, apiErr.Status)
	require.NotErrorIs(t, err, vacancy.ErrArchived)
}

func TestStrictUserAgentAccepted(t *testing.T) {
	t.Parallel()
	srv := catalogue(t, hhtest.StrictUserAgent(), hhtest.RequireUserAgent("switchboard-test/"))
	c, _ := newClient(t, srv.URL(), nil)
	_, err := c.Search(t.Context(), vacancy.Params{}, 0, 5)
	require.NoError(t, err)
	_, err = c.Vacancy(t.Context(), idOf(t, srv.Vacancies()[0]))
	require.NoError(t, err)
	for _, r := range srv.Requests() {
		require.Equal(t, http.StatusOK, r.Status)
		require.Equal(t, testUA, r.UserAgent)
		require.Equal(t, testUA, r.HHUserAgent)
	}
}

func TestCallerCancelIsNotUnavailable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var once sync.Once
	srv := catalogue(t, hhtest.OnRequest(func(*http.Request) { once.Do(cancel) }))
	srv.SetLatency(time.Minute, hhtest.AnyEndpoint)
	c, reg := newClient(t, srv.URL(), nil)

	start := time.Now()
	_, err := c.Search(ctx, vacancy.Params{}, 0, 20)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, vacancy.ErrUnavailable)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, 1.0, counter(t, reg, "search", "error"))
	require.Zero(t, counter(t, reg, "search", "unavailable"))

	// The caller's own deadline is reported as such, too.
	dctx, dcancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer dcancel()
	_, err = c.Vacancy(dctx, idOf(t, srv.Vacancies()[0]))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, vacancy.ErrUnavailable)
}

func TestTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	srv.SetLatency(time.Minute, hhtest.DetailEndpoint)
	// A second: far past a healthy search's answer on a loaded machine
	// (100 ms was not: CI once took longer over the search below), far
	// short of the detail's minute.
	c, reg := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Timeout = time.Second })

	start := time.Now()
	_, err := c.Vacancy(t.Context(), idOf(t, srv.Vacancies()[0]))
	require.ErrorIs(t, err, vacancy.ErrUnavailable)
	// Not the caller's deadline, so not reported as one.
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, 1.0, counter(t, reg, "vacancy", "unavailable"))

	// The timeout is per request, not per Client.
	_, err = c.Search(t.Context(), vacancy.Params{}, 0, 20)
	require.NoError(t, err)
}

func TestPublishedSearchFixture(t *testing.T) {
	t.Parallel()
	body := fixture(t, "vacancies_search.json")
	ts := fixedServer(t, http.StatusOK, body)
	c, _ := newClient(t, ts.URL, nil)
	res, err := c.Search(t.Context(), vacancy.Params{Text: "секретарь"}, 0, 1)
	require.NoError(t, err)
	require.Equal(t, 13, res.Found)
	require.Equal(t, 13, res.Pages)
	require.Len(t, res.Items, 1)
	v := res.Items[0]
	require.Equal(t, int64(8331228), v.ID)
	require.Equal(t, "Секретарь", v.Title)
	require.Equal(t, "HeadHunter", v.Employer)
	require.Equal(t, "https://hh.ru/vacancy/8331228", v.URL)
	require.Equal(t, "Москва", v.Area)
	gross := true
	require.Equal(t, vacancy.Salary{From: 30000, Currency: "RUR", Gross: &gross}, v.Salary)
	require.Empty(t, v.Experience, "the published search item has no experience")
	require.Equal(t, "fullDay", v.Schedule)
	require.True(t, v.PublishedAt.Equal(time.Date(2013, 7, 8, 12, 17, 21, 0, time.UTC)), "got %s", v.PublishedAt)
	require.Equal(t, "Высшее образование. Опыт работы в качестве секретаря, офис-менеджера. Знание делопроизводства, документооборота. Коммуникативные навыки.\n"+
		"Документооборот (регистрация, отправка, контроль исполнения писем, ведение протоколов, отчетность). Распределение корреспонденции. Прием и распределение телефонных звонков.",
		v.Snippet)
	// Raw is the item exactly as sent.
	start := bytes.Index(body, []byte(`{`+"\n"+`      "salary"`))
	require.Positive(t, start)
	require.True(t, bytes.HasPrefix(body[start:], v.Raw), "Raw is the item's bytes")
	require.True(t, json.Valid(v.Raw))
}

func TestPublishedDetailFixture(t *testing.T) {
	t.Parallel()
	body := fixture(t, "vacancy_detail.json")
	ts := fixedServer(t, http.StatusOK, body)
	c, _ := newClient(t, ts.URL, nil)
	v, err := c.Vacancy(t.Context(), 8331228)
	require.NoError(t, err)
	require.Equal(t, int64(8331228), v.ID)
	require.Equal(t, "Секретарь", v.Title)
	require.Equal(t, "HeadHunter", v.Employer)
	require.Equal(t, "https://hh.ru/vacancy/8331228", v.URL)
	require.Equal(t, "Москва", v.Area)
	require.Equal(t, "between1And3", v.Experience)
	require.Equal(t, "fullDay", v.Schedule)
	require.Equal(t, 30000, v.Salary.From)
	require.Zero(t, v.Salary.To)
	require.Equal(t, "RUR", v.Salary.Currency)
	require.True(t, v.PublishedAt.Equal(time.Date(2013, 7, 8, 12, 17, 21, 0, time.UTC)))
	require.Equal(t, "...", v.Description)
	require.Equal(t, []string{"Прием посетителей", "Первичный документооборот"}, v.KeySkills)
	require.Empty(t, v.Snippet)
	require.Equal(t, bytes.TrimSpace(body), v.Raw)

	// HH serves archived vacancies it remembers with 200 and this flag.
	archived := bytes.Replace(body, []byte(`"archived": false`), []byte(`"archived": true`), 1)
	require.NotEqual(t, body, archived)
	ts2 := fixedServer(t, http.StatusOK, archived)
	c2, reg := newClient(t, ts2.URL, nil)
	_, err = c2.Vacancy(t.Context(), 8331228)
	require.ErrorIs(t, err, vacancy.ErrArchived)
	require.NotErrorIs(t, err, vacancy.ErrUnavailable)
	require.Equal(t, 1.0, counter(t, reg, "vacancy", "not_found"))
}

func TestSearchToleratesOddItems(t *testing.T) {
	t.Parallel()
	body := `{"found": 5, "pages": 1, "page": 0, "per_page": 20, "some_new_key": {"x": [1]}, "items": [
		{"id": "abc", "name": "no number", "published_at": "2024-01-02T03:04:05+0300"},
		{"id": "7", "name": "bad date", "published_at": "yesterday"},
		{"id": "8", "name": "RFC 3339", "published_at": "2024-01-02T03:04:05+03:00",
		 "salary": {"from": null, "to": 1500.0, "currency": "USD", "gross": null},
		 "snippet": {"requirement": null, "responsibility": "&quot;Go&quot; &amp; <highlighttext>SQL</highlighttext> &lt;highlighttext&gt;"},
		 "experience": null, "unknown": true},
		{"id": 9, "name": "numeric id", "published_at": "2024-01-02T03:04:05+0300"},
		{"id": "10", "name": "bare", "published_at": "2024-01-02T03:04:05+0300", "salary": null, "snippet": null, "employer": null, "area": null}
	]}`
	ts := fixedServer(t, http.StatusOK, []byte(body))
	var logs testkit.SyncBuffer
	c, _ := newClient(t, ts.URL, func(cfg *hh.Config) {
		cfg.Log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	res, err := c.Search(t.Context(), vacancy.Params{}, 0, 20)
	require.NoError(t, err)
	require.Equal(t, 5, res.Found)
	require.Len(t, res.Items, 2)
	require.Equal(t, 3, strings.Count(logs.String(), "level=WARN msg=\"hh search item skipped\""), logs.String())

	v := res.Items[0]
	require.Equal(t, int64(8), v.ID)
	require.True(t, v.PublishedAt.Equal(time.Date(2024, 1, 2, 0, 4, 5, 0, time.UTC)))
	require.Equal(t, vacancy.Salary{To: 1500, Currency: "USD"}, v.Salary)
	require.Equal(t, `"Go" & SQL <highlighttext>`, v.Snippet)
	require.Empty(t, v.Experience)

	v = res.Items[1]
	require.Equal(t, int64(10), v.ID)
	require.Equal(t, vacancy.Salary{}, v.Salary)
	require.Empty(t, v.Snippet)
	require.Empty(t, v.Employer)
}

func TestBadAnswers(t *testing.T) {
	t.Parallel()
	for name, body := range map[string][]byte{
		"not json":  []byte("<html>ok</html>"),
		"too large": append(append([]byte(`{"items": [], "x": "`), bytes.Repeat([]byte("a"), 5<<20)...), `"}`...),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ts := fixedServer(t, http.StatusOK, body)
			c, reg := newClient(t, ts.URL, nil)
			_, err := c.Search(t.Context(), vacancy.Params{}, 0, 20)
			require.Error(t, err)
			require.NotErrorIs(t, err, vacancy.ErrUnavailable)
			require.Equal(t, 1.0, counter(t, reg, "search", "error"))
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]hh.Config{
		"no URL":        {UserAgent: testUA},
		"no scheme":     {URL: "api.hh.ru", UserAgent: testUA},
		"bad scheme":    {URL: "ftp://api.hh.ru", UserAgent: testUA},
		"unparsable":    {URL: "http://[::1", UserAgent: testUA},
		"query":         {URL: "https://api.hh.ru?x=1", UserAgent: testUA},
		"no UA":         {URL: "https://api.hh.ru"},
		"blank UA":      {URL: "https://api.hh.ru", UserAgent: "  "},
		"UA newline":    {URL: "https://api.hh.ru", UserAgent: "a\r\nX-Evil: 1"},
		"neg. timeout":  {URL: "https://api.hh.ru", UserAgent: testUA, Timeout: -time.Second},
		"bad registrar": {URL: "https://api.hh.ru", UserAgent: testUA, Registerer: conflicting(t)},
	} {
		_, err := hh.New(cfg)
		require.Error(t, err, name)
	}
	c, err := hh.New(hh.Config{URL: "https://api.hh.ru/", UserAgent: testUA})
	require.NoError(t, err)
	c.Close()
}

// conflicting holds a different collector under hh_requests_total.
func conflicting(t *testing.T) prometheus.Registerer {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(prometheus.NewCounter(prometheus.CounterOpts{Name: "hh_requests_total", Help: "x"})))
	return reg
}

func TestURLPathPrefixKept(t *testing.T) {
	t.Parallel()
	var path string
	ts := httptest.NewServer(http.StripPrefix("/hh", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items": [], "found": 0, "pages": 0}`))
	})))
	t.Cleanup(ts.Close)
	c, _ := newClient(t, ts.URL+"/hh/", nil)
	_, err := c.Search(t.Context(), vacancy.Params{}, 0, 20)
	require.NoError(t, err)
	require.Equal(t, "/vacancies", path)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	reg := prometheus.NewRegistry()
	c, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Registerer = reg })
	// A second Client on the same registry shares the series.
	c2, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Registerer = reg })

	vs := srv.Vacancies()
	srv.Archive(vs[0].ID)
	ctx := t.Context()
	_, err := c.Search(ctx, vacancy.Params{}, 0, 20)
	require.NoError(t, err)
	_, err = c2.Search(ctx, vacancy.Params{}, 1, 20)
	require.NoError(t, err)
	_, err = c.Vacancy(ctx, idOf(t, vs[1]))
	require.NoError(t, err)
	_, err = c.Vacancy(ctx, idOf(t, vs[0]))
	require.ErrorIs(t, err, vacancy.ErrArchived)
	srv.FailNext(1, 503, hhtest.DetailEndpoint)
	_, err = c.Vacancy(ctx, idOf(t, vs[1]))
	require.ErrorIs(t, err, vacancy.ErrUnavailable)
	_, err = c.Search(ctx, vacancy.Params{Filters: map[string][]string{"schedule": {"never"}}}, 0, 20)
	require.Error(t, err)

	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP hh_requests_total Requests to the HH.ru API by endpoint (search, vacancy) and outcome (ok, not_found, unavailable, refused, error); refused includes those the breaker held back.
# TYPE hh_requests_total counter
hh_requests_total{endpoint="search",outcome="error"} 1
hh_requests_total{endpoint="search",outcome="not_found"} 0
hh_requests_total{endpoint="search",outcome="ok"} 2
hh_requests_total{endpoint="search",outcome="refused"} 0
hh_requests_total{endpoint="search",outcome="unavailable"} 0
hh_requests_total{endpoint="vacancy",outcome="error"} 0
hh_requests_total{endpoint="vacancy",outcome="not_found"} 1
hh_requests_total{endpoint="vacancy",outcome="ok"} 1
hh_requests_total{endpoint="vacancy",outcome="refused"} 0
hh_requests_total{endpoint="vacancy",outcome="unavailable"} 1
`), "hh_requests_total"))
	require.Equal(t, uint64(3), sampleCount(t, reg, "search"))
	require.Equal(t, uint64(3), sampleCount(t, reg, "vacancy"))
}

// counter reads hh_requests_total{endpoint,outcome}; the series exist at
// zero from New on, so a missing one fails the test.
func counter(t *testing.T, reg *prometheus.Registry, endpoint, outcome string) float64 {
	t.Helper()
	m := find(t, reg, "hh_requests_total", map[string]string{"endpoint": endpoint, "outcome": outcome})
	return m.GetCounter().GetValue()
}

func sampleCount(t *testing.T, reg *prometheus.Registry, endpoint string) uint64 {
	t.Helper()
	m := find(t, reg, "hh_request_duration_seconds", map[string]string{"endpoint": endpoint})
	return m.GetHistogram().GetSampleCount()
}

// find returns the series of name with these labels, failing the test
// when there is none.
func find(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	m := testkit.Series(t, reg, name, labels)
	if m == nil {
		require.Failf(t, "metric not found", "%s%v", name, labels)
	}
	return m
}
