package hhtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/hh/hhtest"
	"switchboard/internal/testkit"
)

const testUA = "switchboard-test/1.0 (dev@example.com)"

type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a GET with the given headers; a header mapped to "" is sent
// empty, which for User-Agent suppresses Go's default.
func do(t *testing.T, srv *hhtest.Server, path string, q url.Values, headers map[string]string) response {
	t.Helper()
	target := srv.URL() + path
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, target, nil)
	require.NoError(t, err)
	for k, v := range headers {
		req.Header[http.CanonicalHeaderKey(k)] = []string{v}
	}
	return send(t, srv, req)
}

// send sends req to the fake and reads the whole answer.
func send(t *testing.T, srv *hhtest.Server, req *http.Request) response {
	t.Helper()
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: body}
}

// get sends a GET with a proper HH-User-Agent and expects 200.
func get(t *testing.T, srv *hhtest.Server, path string, q url.Values) []byte {
	t.Helper()
	r := do(t, srv, path, q, map[string]string{"HH-User-Agent": testUA})
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	require.Equal(t, "application/json; charset=UTF-8", r.header.Get("Content-Type"))
	return r.body
}

type item struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	PublishedAt string `json:"published_at"`
	CreatedAt   string `json:"created_at"`
	Archived    bool   `json:"archived"`
	URL         string `json:"url"`
	Area        struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"area"`
	Experience struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"experience"`
	Schedule struct {
		ID string `json:"id"`
	} `json:"schedule"`
	Salary *struct {
		From     *int   `json:"from"`
		To       *int   `json:"to"`
		Currency string `json:"currency"`
	} `json:"salary"`
	Snippet struct {
		Requirement    *string `json:"requirement"`
		Responsibility *string `json:"responsibility"`
	} `json:"snippet"`
}

type page struct {
	Found   int    `json:"found"`
	Pages   int    `json:"pages"`
	Page    int    `json:"page"`
	PerPage int    `json:"per_page"`
	Items   []item `json:"items"`
}

func search(t *testing.T, srv *hhtest.Server, q url.Values) page {
	t.Helper()
	var p page
	require.NoError(t, json.Unmarshal(get(t, srv, "/vacancies", q), &p))
	return p
}

func ids(items []item) []string {
	return testkit.Map(items, func(it item) string { return it.ID })
}

// hhError is the parsed HH error envelope, ignoring the legacy keys.
type hhError struct {
	Errors []struct {
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"errors"`
}

func requireHHError(t *testing.T, r response, status int, typ string, values ...string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	var e hhError
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	require.NotEmpty(t, e.Errors)
	var gotValues []string
	for _, it := range e.Errors {
		require.Equal(t, typ, it.Type)
		if it.Value != "" {
			gotValues = append(gotValues, it.Value)
		}
	}
	require.ElementsMatch(t, values, gotValues)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func parseHHTime(t *testing.T, s string) time.Time {
	t.Helper()
	ts, err := time.Parse("2006-01-02T15:04:05-0700", s)
	require.NoError(t, err, "time %q", s)
	return ts
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return n
}

func vals(kv ...string) url.Values {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q
}
