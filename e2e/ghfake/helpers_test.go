package ghfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/e2e/ghfake"
)

// HangNext and client deadlines involve goroutines on both sides of the
// connection; goleak proves none outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	repoName = "acme/jobs"
	botToken = "github_pat_writer"
	readTok  = "github_pat_reader"
	botLogin = "switchboard-bot"
)

// testBundle is a fake with one private repository, a token that may
// write there and one that may only read.
type testBundle struct {
	srv    *ghfake.Server
	clock  *clockwork.FakeClock // the fake's clock (WithClock), moved by hand
	client *http.Client
}

func setup(t *testing.T, opts ...ghfake.Option) *testBundle {
	t.Helper()
	srv, c := ghfake.NewOnClock(t, repoName, botToken, botLogin, opts...)
	srv.AddToken(readTok, "reader", ghfake.Read(repoName))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &testBundle{srv: srv, clock: c, client: &http.Client{Transport: tr}}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) errorBody(t *testing.T) ghfake.ErrorBody {
	t.Helper()
	var e ghfake.ErrorBody
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	return e
}

// call sends one request with the token (none if ""); rest is the body
// (JSON-encoded unless a string; nil for none), then header name and value
// pairs.
func (b *testBundle) call(t *testing.T, method, path, token string, rest ...any) response {
	t.Helper()
	var body any
	var headers []string
	for i, v := range rest {
		if i == 0 {
			body = v
			continue
		}
		headers = append(headers, v.(string))
	}
	var rd io.Reader
	if body != nil {
		raw, ok := body.(string)
		if !ok {
			enc, err := json.Marshal(body)
			require.NoError(t, err)
			raw = string(enc)
		}
		rd = bytes.NewReader([]byte(raw))
	}
	req, err := http.NewRequestWithContext(context.Background(), method, b.srv.URL()+path, rd)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("User-Agent", "switchboard-test")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header[http.CanonicalHeaderKey(headers[i])] = []string{headers[i+1]}
	}
	resp, err := b.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

func decode[T any](t *testing.T, r response, status int) T {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	var v T
	require.NoError(t, json.Unmarshal(r.body, &v), "body: %s", r.body)
	return v
}

// requireError checks GitHub's error document: status, message, a
// documentation_url and the status repeated as a string.
func requireError(t *testing.T, r response, status int, message string) ghfake.ErrorBody {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	require.Equal(t, "application/json; charset=utf-8", r.header.Get("Content-Type"))
	e := r.errorBody(t)
	require.Equal(t, message, e.Message)
	require.NotEmpty(t, e.DocumentationURL)
	require.Equal(t, strconv.Itoa(status), e.Status)
	return e
}

func (b *testBundle) createIssue(t *testing.T, fields map[string]any) ghfake.IssueJSON {
	t.Helper()
	return decode[ghfake.IssueJSON](t, b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, fields), http.StatusCreated)
}
