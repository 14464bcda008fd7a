package ghfake_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createIssue(t, map[string]any{"title": "cached"})
	path := "/repos/" + repoName + "/issues/1"

	first := b.call(t, http.MethodGet, path, botToken)
	require.Equal(t, http.StatusOK, first.status)
	etag := first.header.Get("ETag")
	require.Regexp(t, `^W/"[0-9a-f]{32}"$`, etag)
	require.Equal(t, "4998", first.header.Get("X-RateLimit-Remaining"))

	r := b.call(t, http.MethodGet, path, botToken, nil, "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, r.status)
	require.Empty(t, r.body)
	require.Equal(t, etag, r.header.Get("ETag"))
	require.Equal(t, "4998", r.header.Get("X-RateLimit-Remaining"), "a 304 does not count")
	r = b.call(t, http.MethodGet, path, botToken, nil, "If-None-Match", `"other", `+etag[2:])
	require.Equal(t, http.StatusNotModified, r.status, "a list, compared weakly")

	// Another user gets another tag for the same issue.
	other := b.call(t, http.MethodGet, path, readTok, nil, "If-None-Match", etag)
	require.Equal(t, http.StatusOK, other.status)
	require.NotEqual(t, etag, other.header.Get("ETag"))

	// A change changes the tag, and the answer counts again.
	require.Equal(t, http.StatusOK, b.call(t, http.MethodPatch, path, botToken, map[string]any{"title": "changed"}).status)
	r = b.call(t, http.MethodGet, path, botToken, nil, "If-None-Match", etag)
	require.Equal(t, http.StatusOK, r.status)
	require.NotEqual(t, etag, r.header.Get("ETag"))
	require.Equal(t, "4996", r.header.Get("X-RateLimit-Remaining"))

	// Lists and searches carry tags too.
	list := b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken)
	require.Equal(t, http.StatusNotModified, b.call(t, http.MethodGet, "/repos/"+repoName+"/issues", botToken, nil, "If-None-Match", list.header.Get("ETag")).status)
	found := b.search(t, "is:issue changed")
	r = b.call(t, http.MethodGet, "/search/issues?q=is%3Aissue+changed", botToken, nil, "If-None-Match", found.header.Get("ETag"))
	require.Equal(t, http.StatusNotModified, r.status)
	require.Equal(t, "29", r.header.Get("X-RateLimit-Remaining"))
}

func TestFaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/repos/" + repoName + "/issues"

	b.srv.FailNext(1, http.StatusInternalServerError)
	b.srv.InjectFault(1, ghfake.Fault{Status: http.StatusBadGateway, Method: http.MethodPost})
	requireError(t, b.call(t, http.MethodGet, path, botToken), http.StatusInternalServerError, ghfake.MsgServerError)
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, path, botToken).status, "the 502 waits for a POST")
	r := b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x"})
	require.Equal(t, http.StatusBadGateway, r.status)
	require.Contains(t, r.header.Get("Content-Type"), "text/html")
	require.Empty(t, b.srv.Issues(repoName))
	require.Zero(t, b.srv.PendingFaults())

	b.srv.HangNext(1)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL()+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+botToken)
	resp, err := b.client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	require.True(t, errors.Is(err, context.DeadlineExceeded), "err: %v", err)

	reqs := b.srv.WaitRequests(t, 4)
	require.Equal(t, ghfake.StatusClientClosedRequest, reqs[3].Status)
	for _, i := range []int{0, 2, 3} {
		require.True(t, reqs[i].Fault)
	}
	r = b.call(t, http.MethodGet, path, botToken)
	require.Equal(t, "4998", r.header.Get("X-RateLimit-Remaining"), "faults count against no limit")
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createIssue(t, map[string]any{"title": "logged"})
	reqs := b.srv.Requests()
	require.Len(t, reqs, 1)
	got := reqs[0]
	require.Equal(t, http.MethodPost, got.Method)
	require.Equal(t, "/repos/acme/jobs/issues", got.Path)
	require.JSONEq(t, `{"title":"logged"}`, string(got.Body))
	require.Equal(t, "Bearer "+botToken, got.Header.Get("Authorization"))
	require.Equal(t, botLogin, got.Login)
	require.Equal(t, "core", got.Resource)
	require.Equal(t, http.StatusCreated, got.Status)
	require.Contains(t, b.srv.RequestLog(), "POST /repos/acme/jobs/issues -> 201")
}
