package ghfake_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

func requireRate(t *testing.T, r response, resource string, limit, remaining int, reset time.Time) {
	t.Helper()
	require.Equal(t, resource, r.header.Get("X-RateLimit-Resource"))
	require.Equal(t, strconv.Itoa(limit), r.header.Get("X-RateLimit-Limit"))
	require.Equal(t, strconv.Itoa(remaining), r.header.Get("X-RateLimit-Remaining"))
	require.Equal(t, strconv.Itoa(limit-remaining), r.header.Get("X-RateLimit-Used"))
	require.Equal(t, strconv.FormatInt(reset.Unix(), 10), r.header.Get("X-RateLimit-Reset"))
}

func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithLimits(ghfake.Limits{Core: 3, Search: 30}))
	start := b.clock.Now()
	path := "/repos/" + repoName + "/issues"

	r := b.call(t, http.MethodGet, path, botToken)
	requireRate(t, r, "core", 3, 2, start.Add(time.Hour))
	require.NotEmpty(t, r.header.Get("X-GitHub-Request-Id"))
	// Errors count too.
	r = b.call(t, http.MethodGet, path+"/9", botToken)
	requireRate(t, r, "core", 3, 1, start.Add(time.Hour))

	// GET /rate_limit counts against nothing.
	b.clock.Advance(time.Minute)
	r = b.call(t, http.MethodGet, "/rate_limit", botToken)
	status := decode[ghfake.RateLimitStatus](t, r, http.StatusOK)
	require.Equal(t, ghfake.RateLimitResource{Limit: 3, Used: 2, Remaining: 1, Reset: start.Add(time.Hour).Unix()}, status.Resources["core"])
	require.Equal(t, status.Resources["core"], status.Rate)
	require.Equal(t, 30, status.Resources["search"].Limit)
	requireRate(t, r, "core", 3, 1, start.Add(time.Hour))

	// Another token of the same user shares the limit.
	b.srv.AddToken("second", botLogin, ghfake.Write(repoName))
	r = b.call(t, http.MethodGet, path, "second")
	requireRate(t, r, "core", 3, 0, start.Add(time.Hour))

	r = b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x"})
	e := requireError(t, r, http.StatusForbidden, r.errorBody(t).Message)
	require.True(t, strings.HasPrefix(e.Message, ghfake.MsgPrimaryPrefix+"9000002."), e.Message)
	require.Contains(t, e.Message, r.header.Get("X-GitHub-Request-Id"))
	requireRate(t, r, "core", 3, 0, start.Add(time.Hour))
	require.Empty(t, b.srv.Issues(repoName), "a refused request has no effect")
	require.Len(t, b.srv.EarlyRequests(), 0, "the refusal itself is not early")

	// Coming back before the reset is early; after it, a new window.
	b.clock.Advance(10 * time.Minute)
	r = b.call(t, http.MethodGet, path, botToken)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/rate_limit", botToken).status)
	require.Len(t, b.srv.EarlyRequests(), 2, "both the refused read and the /rate_limit call came early")
	b.clock.Advance(time.Hour)
	r = b.call(t, http.MethodGet, path, botToken)
	require.Equal(t, http.StatusOK, r.status)
	requireRate(t, r, "core", 3, 2, b.clock.Now().Add(time.Hour))
	require.Len(t, b.srv.EarlyRequests(), 2)
}

func TestRateLimitStatus429(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithLimits(ghfake.Limits{Core: 1, Search: 1}), ghfake.WithRateLimitStatus(http.StatusTooManyRequests))
	b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken)
	r := b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken)
	require.Equal(t, http.StatusTooManyRequests, r.status)
	require.Equal(t, "0", r.header.Get("X-RateLimit-Remaining"))
}

func TestSearchRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithLimits(ghfake.Limits{Core: 100, Search: 2}))
	start := b.clock.Now()
	requireRate(t, b.search(t, "is:issue a"), "search", 2, 1, start.Add(time.Minute))
	// A failed search counts as well.
	requireRate(t, b.search(t, "a"), "search", 2, 0, start.Add(time.Minute))
	r := b.search(t, "is:issue a")
	require.Equal(t, http.StatusForbidden, r.status)
	require.True(t, strings.HasPrefix(r.errorBody(t).Message, ghfake.MsgPrimaryPrefix))
	requireRate(t, r, "search", 2, 0, start.Add(time.Minute))

	// The core limit is untouched by searches.
	requireRate(t, b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken), "core", 100, 99, start.Add(time.Hour))
	b.clock.Advance(time.Minute)
	requireRate(t, b.search(t, "is:issue a"), "search", 2, 1, b.clock.Now().Add(time.Minute))
}

func TestSecondaryRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/repos/" + repoName + "/issues"
	b.srv.TripSecondaryLimit(90 * time.Second)
	b.clock.Advance(500 * time.Millisecond)

	r := b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x"})
	e := requireError(t, r, http.StatusForbidden, r.errorBody(t).Message)
	require.True(t, strings.HasPrefix(e.Message, ghfake.MsgSecondaryPrefix), e.Message)
	require.Equal(t, "90", r.header.Get("Retry-After"), "rounded up")
	require.NotEqual(t, "0", r.header.Get("X-RateLimit-Remaining"), "not the primary limit")
	require.Empty(t, b.srv.Issues(repoName))

	// Reads are served meanwhile, but a request before Retry-After has
	// passed is early.
	b.clock.Advance(30 * time.Second)
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, path, botToken).status)
	r = b.call(t, http.MethodPatch, path+"/1", botToken, map[string]any{"state": "closed"})
	require.Equal(t, http.StatusForbidden, r.status)
	require.True(t, strings.HasPrefix(r.errorBody(t).Message, ghfake.MsgSecondaryPrefix))
	require.Equal(t, "60", r.header.Get("Retry-After"))
	early := b.srv.EarlyRequests()
	require.Len(t, early, 2)
	require.Equal(t, http.MethodGet, early[0].Method)
	require.Equal(t, http.MethodPatch, early[1].Method)

	b.clock.Advance(time.Minute)
	b.createIssue(t, map[string]any{"title": "after the wait"})
	require.Len(t, b.srv.EarlyRequests(), 2, "a request after Retry-After is not early")
}

func TestContentCreationLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithLimits(ghfake.Limits{Core: 5000, Search: 30, ContentPerMinute: 2, ContentPerHour: 3}))
	path := "/repos/" + repoName + "/issues"
	b.createIssue(t, map[string]any{"title": "1"})
	b.clock.Advance(10 * time.Second)
	b.createIssue(t, map[string]any{"title": "2"})
	r := b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "3"})
	require.Equal(t, http.StatusForbidden, r.status)
	require.True(t, strings.HasPrefix(r.errorBody(t).Message, ghfake.MsgSecondaryPrefix))
	require.Equal(t, "50", r.header.Get("Retry-After"), "until the first creation leaves the minute")

	// Edits are no content creation.
	require.Equal(t, http.StatusOK, b.call(t, http.MethodPatch, path+"/1", botToken, map[string]any{"title": "one"}).status)

	b.clock.Advance(50 * time.Second)
	b.createIssue(t, map[string]any{"title": "3"})
	b.clock.Advance(2 * time.Minute)
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/labels", botToken, map[string]any{"name": "x"})
	require.Equal(t, http.StatusForbidden, r.status, "the hour's bound covers labels too")
	require.Equal(t, strconv.Itoa(int((time.Hour - 3*time.Minute).Seconds())), r.header.Get("Retry-After"))
	require.Len(t, b.srv.Issues(repoName), 3)
}

// At time scale 60 the minute lasts a second and the hour a minute, at the
// limits' counts; Retry-After still speaks whole real seconds, rounded up,
// and X-RateLimit-Reset the whole second the shortened window ends.
func TestTimeScale(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithTimeScale(60), ghfake.WithLimits(ghfake.Limits{Core: 100, Search: 1, ContentPerMinute: 2, ContentPerHour: 3}))
	start := b.clock.Now()
	path := "/repos/" + repoName + "/issues"
	r := b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "1"})
	require.Equal(t, http.StatusCreated, r.status)
	requireRate(t, r, "core", 100, 99, start.Add(time.Minute))
	b.clock.Advance(200 * time.Millisecond)
	b.createIssue(t, map[string]any{"title": "2"})

	b.clock.Advance(100 * time.Millisecond)
	r = b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "3"})
	require.Equal(t, http.StatusForbidden, r.status)
	require.True(t, strings.HasPrefix(r.errorBody(t).Message, ghfake.MsgSecondaryPrefix))
	require.Equal(t, "1", r.header.Get("Retry-After"), "0.7 s rounded up")
	b.clock.Advance(699 * time.Millisecond)
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, path, botToken).status)
	require.Len(t, b.srv.EarlyRequests(), 1, "a millisecond before the first creation leaves the minute")
	b.clock.Advance(time.Millisecond)
	b.createIssue(t, map[string]any{"title": "3"})

	// The hour, a minute long, holds three: the next waits until the first
	// leaves it, 60 s after it.
	b.clock.Advance(time.Second)
	r = b.call(t, http.MethodPost, "/repos/"+repoName+"/labels", botToken, map[string]any{"name": "x"})
	require.Equal(t, http.StatusForbidden, r.status)
	require.Equal(t, "58", r.header.Get("Retry-After"))
	b.clock.Advance(58 * time.Second)
	b.createIssue(t, map[string]any{"title": "4"})
	require.Len(t, b.srv.EarlyRequests(), 1, "Retry-After honoured to the second is not early")
	require.Len(t, b.srv.Issues(repoName), 4)

	// The search minute lasts a second; its reset is the whole second after.
	b.clock.Advance(300 * time.Millisecond)
	requireRate(t, b.search(t, "is:issue a"), "search", 1, 0, start.Add(62*time.Second))
	r = b.search(t, "is:issue a")
	require.Equal(t, http.StatusForbidden, r.status)
	requireRate(t, r, "search", 1, 0, start.Add(62*time.Second))
	b.clock.Advance(1700 * time.Millisecond)
	require.Equal(t, http.StatusOK, b.search(t, "is:issue a").status)
	require.Len(t, b.srv.EarlyRequests(), 1)
}

// Start serves without a test: the bench's way in, closed by its caller.
func TestStartWithoutATest(t *testing.T) {
	t.Parallel()
	srv := ghfake.Start(ghfake.WithTimeScale(60))
	srv.AddRepo(repoName)
	srv.AddToken(botToken, botLogin, ghfake.Write(repoName))
	req, err := http.NewRequest(http.MethodGet, srv.URL()+"/rate_limit", nil)
	require.NoError(t, err)
	req.Header.Set("User-Agent", "switchboard-test")
	req.Header.Set("Authorization", "Bearer "+botToken)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	srv.Close()
	srv.Close()
}
