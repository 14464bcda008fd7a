package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/domain/tasks"
	"switchboard/tracker/webhook"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var secret = []byte("whsec_test")

// receiver is a team's endpoint: it checks the signature as a receiver
// should, records what it accepted and answers status.
type receiver struct {
	mu         sync.Mutex
	status     int
	header     http.Header
	deliveries []delivery
}

type delivery struct {
	header  http.Header
	payload webhook.Payload
	raw     []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Method != http.MethodPost || !webhook.Verify(secret, body, r.Header.Get(webhook.HeaderSignature)) {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var p webhook.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.deliveries = append(rc.deliveries, delivery{header: r.Header.Clone(), payload: p, raw: body})
	for k, v := range rc.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rc.status)
	_, _ = w.Write([]byte("ack"))
}

func (rc *receiver) got() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.deliveries...)
}

type testBundle struct {
	rc     *receiver
	url    string
	client *webhook.Client
	now    time.Time
}

func setup(t *testing.T, status int, key []byte) *testBundle {
	t.Helper()
	rc := &receiver{status: status}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c, err := webhook.New(webhook.Config{Secret: key, HTTP: &http.Client{Transport: tr}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	return &testBundle{rc: rc, url: srv.URL + "/hooks/T0KEN-IN-PATH?k=1", client: c, now: now}
}

func task() tasks.Task {
	return tasks.Task{
		ProposalID: 123, RunID: 7, Title: "Fix the login page", Description: "Broken since Monday.",
		Priority: "high", Assignee: "alice", Mention: "Alice", Deadline: "2026-03-10",
		Sources: []tasks.Source{
			{ChatID: -1001, ChatTitle: "Dev chat", MessageID: 42, Link: "https://t.me/c/1001/42", Author: "Bob", Text: "login is broken", At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)},
			{ChatID: -55, ChatTitle: "Ops", MessageID: 3, Author: "Carol", Text: "same", At: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)},
		},
		ApprovedAt: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC), ApprovedBy: 777,
	}
}

func TestFileSigned(t *testing.T) {
	t.Parallel()
	b := setup(t, http.StatusAccepted, secret)
	f, err := b.client.File(context.Background(), b.url, task())
	require.NoError(t, err)
	require.Equal(t, tasks.Filed{}, f)

	require.Len(t, b.rc.got(), 1)
	d := b.rc.got()[0]
	require.Equal(t, "application/json", d.header.Get("Content-Type"))
	require.Equal(t, "task.approved", d.header.Get(webhook.HeaderEvent))
	require.Equal(t, "switchboard-proposal-123", d.header.Get(webhook.HeaderDelivery))
	require.Equal(t, webhook.Sign(secret, d.raw), d.header.Get(webhook.HeaderSignature))

	link := "https://t.me/c/1001/42"
	deadline := "2026-03-10"
	require.Equal(t, webhook.Payload{
		Event: "task.approved", ProposalID: 123, RunID: 7, Title: "Fix the login page", Description: "Broken since Monday.",
		Priority: "high", Assignee: &webhook.Assignee{Login: "alice", Mention: "Alice"}, Deadline: &deadline,
		Sources: []webhook.Source{
			{ChatID: -1001, ChatTitle: "Dev chat", MessageID: 42, Link: &link, Author: "Bob", Text: "login is broken", At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)},
			{ChatID: -55, ChatTitle: "Ops", MessageID: 3, Author: "Carol", Text: "same", At: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)},
		},
		ApprovedAt: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC), ApprovedBy: 777, Marker: "switchboard-proposal-123",
	}, d.payload)
	require.Contains(t, string(d.raw), `"link":null`, "a source without a link says so")

	_, found, err := b.client.Find(context.Background(), b.url, "switchboard-proposal-123")
	require.NoError(t, err)
	require.False(t, found, "a webhook cannot be asked")
}

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	sig := webhook.Sign(secret, body)
	require.True(t, webhook.Verify(secret, body, sig))
	require.False(t, webhook.Verify(secret, []byte(`{"a":2}`), sig))
	require.False(t, webhook.Verify([]byte("other"), body, sig))
	require.False(t, webhook.Verify(secret, body, sig[len("sha256="):]))
	require.False(t, webhook.Verify(secret, body, "sha256=zz"))
	require.False(t, webhook.Verify(nil, body, webhook.Sign(nil, body)), "no secret verifies nothing")
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		status int
		key    []byte
		header http.Header
		check  func(t *testing.T, b *testBundle, err error)
	}{
		{"500 is transient", http.StatusInternalServerError, secret, nil, func(t *testing.T, _ *testBundle, err error) {
			require.NotErrorIs(t, err, tasks.ErrGone)
			require.NotErrorIs(t, err, tasks.ErrRefused)
			require.NotErrorIs(t, err, tasks.ErrAccess)
			var rl *tasks.RateLimited
			require.False(t, errors.As(err, &rl))
		}},
		{"410 is gone", http.StatusGone, secret, nil, func(t *testing.T, _ *testBundle, err error) {
			require.ErrorIs(t, err, tasks.ErrGone)
		}},
		{"404 is gone", http.StatusNotFound, secret, nil, func(t *testing.T, _ *testBundle, err error) {
			require.ErrorIs(t, err, tasks.ErrGone)
		}},
		{"422 refuses the task", http.StatusUnprocessableEntity, secret, nil, func(t *testing.T, _ *testBundle, err error) {
			require.ErrorIs(t, err, tasks.ErrRefused)
			require.NotErrorIs(t, err, tasks.ErrGone)
		}},
		{"400 refuses the task", http.StatusBadRequest, secret, nil, func(t *testing.T, _ *testBundle, err error) {
			require.ErrorIs(t, err, tasks.ErrRefused)
		}},
		{"413 refuses the task", http.StatusRequestEntityTooLarge, secret, nil, func(t *testing.T, _ *testBundle, err error) {
			require.ErrorIs(t, err, tasks.ErrRefused)
		}},
		{"a wrong secret is refused access", http.StatusOK, []byte("wrong"), nil, func(t *testing.T, _ *testBundle, err error) {
			require.ErrorIs(t, err, tasks.ErrAccess)
		}},
		{"429 with Retry-After", http.StatusTooManyRequests, secret, http.Header{"Retry-After": {"120"}}, func(t *testing.T, b *testBundle, err error) {
			var rl *tasks.RateLimited
			require.ErrorAs(t, err, &rl)
			require.Equal(t, b.now.Add(2*time.Minute), rl.Until)
		}},
		{"429 without Retry-After", http.StatusTooManyRequests, secret, nil, func(t *testing.T, b *testBundle, err error) {
			var rl *tasks.RateLimited
			require.ErrorAs(t, err, &rl)
			require.Equal(t, b.now.Add(time.Minute), rl.Until)
		}},
		{"a redirect is not followed", http.StatusFound, secret, http.Header{"Location": {"/elsewhere"}}, func(t *testing.T, b *testBundle, err error) {
			require.Contains(t, err.Error(), "redirect not followed")
			require.Len(t, b.rc.got(), 1)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, c.status, c.key)
			b.rc.header = c.header
			_, err := b.client.File(context.Background(), b.url, task())
			require.Error(t, err)
			var e *webhook.Error
			require.ErrorAs(t, err, &e)
			require.NotContains(t, err.Error(), "T0KEN", "the URL's path may be a secret")
			require.NotContains(t, err.Error(), "k=1")
			c.check(t, b, err)
		})
	}
}

func TestUnreachableAndMalformed(t *testing.T) {
	t.Parallel()
	b := setup(t, http.StatusOK, secret)
	_, err := b.client.File(context.Background(), "ftp://example.com/x", task())
	require.ErrorIs(t, err, tasks.ErrGone)

	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL + "/hooks/T0KEN"
	srv.Close()
	_, err = b.client.File(context.Background(), url, task())
	require.Error(t, err)
	require.NotErrorIs(t, err, tasks.ErrGone)
	require.NotContains(t, err.Error(), "T0KEN")
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := webhook.New(webhook.Config{})
	require.Error(t, err)
}
