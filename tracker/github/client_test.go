package github_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/domain/tasks"
	"switchboard/e2e/ghfake"
	"switchboard/tracker/github"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	repoName = "acme/jobs"
	token    = "github_pat_s3cret"
	botLogin = "switchboard-bot"
)

type testBundle struct {
	srv    *ghfake.Server
	clock  *clockwork.FakeClock
	client *github.Client
	hc     *http.Client
}

// setup starts a fake with one private repository, the bot's token with
// write access there and alice as a collaborator; the fake and the client
// share a clock.
func setup(t *testing.T, opts ...ghfake.Option) *testBundle {
	t.Helper()
	srv, clk := ghfake.NewOnClock(t, repoName, token, botLogin, opts...)
	srv.AddCollaborator(repoName, "alice")
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	b := &testBundle{srv: srv, clock: clk, hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
	b.client = b.newClient(t, token)
	return b
}

func (b *testBundle) newClient(t *testing.T, tok string) *github.Client {
	t.Helper()
	c, err := github.New(github.Config{URL: b.srv.URL(), Token: tok, HTTP: b.hc, Now: b.clock.Now, UserAgent: "switchboard-test"})
	require.NoError(t, err)
	return c
}

// file files tk in the repository, which must work.
func (b *testBundle) file(t *testing.T, tk tasks.Task) tasks.Filed {
	t.Helper()
	f, err := b.client.File(context.Background(), repoName, tk)
	require.NoError(t, err)
	return f
}

func task(id int64) tasks.Task {
	return tasks.Task{
		ProposalID:  id,
		RunID:       7,
		Title:       "Fix the login page",
		Description: "Users cannot log in since Monday; cc @bob.",
		Priority:    "high",
		Assignee:    "alice",
		Mention:     "Alice",
		Deadline:    "2026-03-10",
		Sources: []tasks.Source{
			{ChatID: -1001, ChatTitle: "Dev chat", MessageID: 42, Link: "https://t.me/c/1001/42", Author: "Bob", Text: "login is broken\nagain", At: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)},
			{ChatID: -55, ChatTitle: "Ops", MessageID: 3, Author: "Carol", Text: "same here", At: time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)},
		},
		ApprovedAt: time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC),
		ApprovedBy: 777,
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestFile(t *testing.T) {
	t.Parallel()
	b := setup(t)

	f := b.file(t, task(123))
	require.Equal(t, 1, f.Number)
	require.Equal(t, "https://github.com/acme/jobs/issues/1", f.URL)
	require.Equal(t, "open", f.State)
	require.False(t, f.AssigneeDropped)
	require.Equal(t, 2, f.Created, "the label and the issue, both counted by GitHub's content limits")

	is, ok := b.srv.Issue(repoName, 1)
	require.True(t, ok)
	require.Equal(t, "Fix the login page", is.Title)
	require.Equal(t, botLogin, is.Author)
	require.Equal(t, []string{"priority: high"}, is.Labels)
	require.Equal(t, []string{"alice"}, is.Assignees)
	require.Equal(t, []ghfake.Label{{Name: "priority: high", Color: "b60205", Description: "Priority of a task filed by Switchboard"}}, b.srv.Labels(repoName))

	body := is.Body
	require.Contains(t, body, "Users cannot log in since Monday; cc @\u2060bob.", "a chat's @name notifies nobody on GitHub")
	require.Contains(t, body, "**Priority:** high")
	require.Contains(t, body, "**Deadline:** 2026-03-10")
	require.NotContains(t, body, "Assignee", "GitHub shows the assignee")
	require.Contains(t, body, "> login is broken\n> again\n\n— Bob in [Dev chat](https://t.me/c/1001/42)")
	require.Contains(t, body, "> same here\n\n— Carol in Ops, 2026-03-01 09:30 UTC", "without a link: the chat and the time")
	require.Contains(t, body, "Approved in Telegram by user 777 on 2026-03-01 11:00 UTC")
	require.Equal(t, "<!-- switchboard-proposal-123 -->", lastLine(body))

	for _, r := range b.srv.Requests() {
		require.Equal(t, "application/vnd.github+json", r.Header.Get("Accept"))
		require.Equal(t, github.APIVersion, r.Header.Get("X-GitHub-Api-Version"))
		require.Equal(t, "switchboard-test", r.Header.Get("User-Agent"))
	}

	// The label is known now: the next task costs one request.
	n := len(b.srv.Requests())
	f = b.file(t, task(124))
	require.Len(t, b.srv.Requests(), n+1)
	require.Equal(t, 1, f.Created)
}

func TestFileCreatesLabelFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.RefuseUnknownLabels())
	b.srv.AddLabel(repoName, ghfake.Label{Name: "priority: low", Color: "c2e0c6"})
	ctx := context.Background()

	tk := task(1)
	tk.Priority = "medium"
	b.file(t, tk)
	var paths []string
	for _, r := range b.srv.Requests() {
		paths = append(paths, r.Method+" "+r.Path)
	}
	require.Equal(t, []string{
		"GET /repos/acme/jobs/labels/priority: medium",
		"POST /repos/acme/jobs/labels",
		"POST /repos/acme/jobs/issues",
	}, paths)

	// An existing label is used as it is.
	tk.Priority = "low"
	f := b.file(t, tk)
	require.Equal(t, 1, f.Created)
	require.Equal(t, []ghfake.Label{
		{Name: "priority: low", Color: "c2e0c6"},
		{Name: "priority: medium", Color: "fbca04", Description: "Priority of a task filed by Switchboard"},
	}, b.srv.Labels(repoName))
	is, _ := b.srv.Issue(repoName, 2)
	require.Equal(t, []string{"priority: low"}, is.Labels)

	// A label made by another worker between our GET and POST is fine.
	other := b.newClient(t, token)
	tk.Priority = "medium"
	f, err := other.File(ctx, repoName, tk)
	require.NoError(t, err)
	require.Equal(t, 1, f.Created)
}

func TestFileDropsUnassignableLogin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddUser("mallory")
	tk := task(5)
	tk.Assignee, tk.Mention = "mallory", "Mal"

	f := b.file(t, tk)
	require.True(t, f.AssigneeDropped)
	require.Equal(t, 2, f.Created, "the label and the issue; the refused attempt made nothing")
	is, _ := b.srv.Issue(repoName, f.Number)
	require.Empty(t, is.Assignees)
	require.Contains(t, is.Body, "**Assignee:** Mal (GitHub login `mallory` could not be assigned)")
	require.Len(t, b.srv.Issues(repoName), 1, "the refused attempt filed nothing")

	// Unmapped: the mention only.
	tk.Assignee, tk.Mention = "", "Dave"
	f = b.file(t, tk)
	require.False(t, f.AssigneeDropped)
	is, _ = b.srv.Issue(repoName, f.Number)
	require.Contains(t, is.Body, "**Assignee:** Dave (no GitHub login known)")
}

func TestFind(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithSearchLag(time.Hour))
	ctx := context.Background()

	// Issues that must not match: someone else's carrying the marker, and
	// the bot's quoting it.
	b.srv.AddIssue(repoName, ghfake.Issue{Title: "copy", Body: "<!-- switchboard-proposal-9 -->"})
	quoting := task(10)
	quoting.Sources[0].Text = "<!-- switchboard-proposal-9 -->"
	b.file(t, quoting)

	_, found, err := b.client.Find(ctx, repoName, tasks.Marker(9))
	require.NoError(t, err)
	require.False(t, found)

	filed := b.file(t, task(9))
	// A fresh client, as after a crash: it learns its login from /user.
	got, found, err := b.newClient(t, token).Find(ctx, repoName, tasks.Marker(9))
	require.NoError(t, err)
	require.True(t, found, "a just-filed issue is found although search lags")
	require.Equal(t, filed.Number, got.Number)
	require.Equal(t, filed.URL, got.URL)
	require.Equal(t, "open", got.State)

	for _, r := range b.srv.Requests() {
		require.NotEqual(t, "/search/issues", r.Path)
		if r.Path == "/repos/acme/jobs/issues" && r.Method == http.MethodGet {
			require.Equal(t, botLogin, r.Query.Get("creator"))
			require.Equal(t, "all", r.Query.Get("state"))
		}
	}

	// Closed issues count too.
	b.srv.CloseIssue(repoName, filed.Number, "completed")
	got, found, err = b.client.Find(ctx, repoName, tasks.Marker(9))
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "closed", got.State)
}

func TestClipping(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tk := task(77)
	tk.Title = strings.Repeat("я", 300)
	tk.Description = strings.Repeat("long text ", 7000)
	tk.Sources[0].Text = strings.Repeat("ё", 10000)

	f := b.file(t, tk)
	is, _ := b.srv.Issue(repoName, f.Number)
	require.Equal(t, github.MaxTitle, utf8.RuneCountInString(is.Title))
	require.LessOrEqual(t, utf8.RuneCountInString(is.Body), github.MaxBody)
	require.Equal(t, "<!-- switchboard-proposal-77 -->", lastLine(is.Body))
	require.Contains(t, is.Body, "Approved in Telegram")

	got, found, err := b.client.Find(context.Background(), repoName, tk.Marker())
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, f.Number, got.Number)
}

func TestIssueConditional(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	f := b.file(t, task(1))

	got, etag, notModified, err := b.client.Issue(ctx, repoName, f.Number, "")
	require.NoError(t, err)
	require.False(t, notModified)
	require.NotEmpty(t, etag)
	require.Equal(t, "open", got.State)

	_, etag2, notModified, err := b.client.Issue(ctx, repoName, f.Number, etag)
	require.NoError(t, err)
	require.True(t, notModified)
	require.Equal(t, etag, etag2)
	reqs := b.srv.Requests()
	require.Equal(t, http.StatusNotModified, reqs[len(reqs)-1].Status)
	require.Empty(t, reqs[len(reqs)-1].Resource, "a 304 costs no rate limit")

	b.srv.CloseIssue(repoName, f.Number, "completed")
	got, etag3, notModified, err := b.client.Issue(ctx, repoName, f.Number, etag)
	require.NoError(t, err)
	require.False(t, notModified)
	require.NotEqual(t, etag, etag3)
	require.Equal(t, "closed", got.State)
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		prepare func(b *testBundle) string // returns the token to use
		want    error
		status  int
		says    string
	}{
		{"revoked token", func(b *testBundle) string { b.srv.RevokeToken(token); return token }, tasks.ErrAccess, 401, "Bad credentials"},
		{"repository deleted", func(b *testBundle) string { b.srv.DeleteRepo(repoName); return token }, tasks.ErrGone, 404, "not found"},
		{"issues disabled", func(b *testBundle) string { b.srv.SetIssuesEnabled(repoName, false); return token }, tasks.ErrGone, 410, "Issues are disabled"},
		// A 403 that is neither a limit nor our token: the destination
		// alone refuses writes, so it is gone (its pushes wait for a new
		// one), not a credential every destination shares.
		{"repository archived", func(b *testBundle) string { b.srv.SetArchived(repoName, true); return token }, tasks.ErrGone, 403, "archived"},
		{"read-only token", func(b *testBundle) string {
			b.srv.AddToken("github_pat_reader", "reader", ghfake.Read(repoName))
			return "github_pat_reader"
		}, tasks.ErrAccess, 403, "Resource not accessible"},
		// About the request itself: sent again, refused again.
		{"validation failed", func(b *testBundle) string {
			b.srv.RefuseIssues(repoName, ghfake.FieldError{Resource: "Label", Code: "invalid", Field: "name", Value: "priority: high"})
			return token
		}, tasks.ErrRefused, 422, `"Validation Failed: Label name invalid (priority: high)"`},
		{"bad request", func(b *testBundle) string { b.srv.FailNext(1, 400); return token }, tasks.ErrRefused, 400, "Bad Request"},
		{"server error", func(b *testBundle) string { b.srv.FailNext(1, 500); return token }, nil, 500, "Server Error"},
		{"gateway page", func(b *testBundle) string { b.srv.FailNext(1, 502); return token }, nil, 502, "502 Bad Gateway"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			tok := c.prepare(b)
			_, err := b.newClient(t, tok).File(context.Background(), repoName, task(1))
			require.Error(t, err)
			var e *github.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, c.status, e.Status)
			require.Contains(t, err.Error(), c.says)
			require.Contains(t, err.Error(), "github ")
			require.NotContains(t, err.Error(), tok)
			var rl *tasks.RateLimited
			require.False(t, errors.As(err, &rl))
			if c.want != nil {
				require.ErrorIs(t, err, c.want)
			} else {
				require.NotErrorIs(t, err, tasks.ErrAccess)
				require.NotErrorIs(t, err, tasks.ErrGone)
			}
		})
	}
}

// A 422 that remains once the assignee is dropped is refused as any
// other: two tries, the second without the assignee, and nothing filed.
func TestRefusedAfterTheAssigneeIsDropped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddUser("mallory")
	b.srv.RefuseIssues(repoName, ghfake.FieldError{Resource: "Issue", Code: "custom", Field: "body", Message: "body is not allowed here (ghfake)"})
	tk := task(6)
	tk.Assignee = "mallory"
	_, err := b.client.File(context.Background(), repoName, tk)
	require.ErrorIs(t, err, tasks.ErrRefused)
	require.Contains(t, err.Error(), "body is not allowed here")
	require.NotContains(t, err.Error(), "assignees", "the last answer's words, without the assignee")
	posts := 0
	for _, r := range b.srv.Requests() {
		if r.Method == http.MethodPost && r.Path == "/repos/"+repoName+"/issues" {
			posts++
		}
	}
	require.Equal(t, 2, posts)
	require.Empty(t, b.srv.Issues(repoName))
}

// GitHub's content throttle may answer a 422 "was submitted too quickly":
// a limit, which passes, so the client holds for a minute as for a
// secondary limit without Retry-After, and the task is not refused.
func TestSubmittedTooQuicklyIsALimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.RefuseIssues(repoName, ghfake.FieldError{Resource: "Issue", Code: "custom", Message: "was submitted too quickly"})
	_, err := b.client.File(context.Background(), repoName, task(8))
	var rl *tasks.RateLimited
	require.ErrorAs(t, err, &rl)
	require.True(t, rl.Secondary)
	require.Equal(t, b.clock.Now().Add(time.Minute), rl.Until)
	require.NotErrorIs(t, err, tasks.ErrRefused)
	n := len(b.srv.Requests())
	_, err = b.client.File(context.Background(), repoName, task(8))
	require.ErrorAs(t, err, &rl)
	require.Len(t, b.srv.Requests(), n, "held: nothing sent before the minute is over")
}

func TestMalformedTargetIsGoneWithoutRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, target := range []string{"acme", "acme/jobs/issues", "../user", "acme/jobs?x=1", ""} {
		_, err := b.client.File(context.Background(), target, task(1))
		require.ErrorIs(t, err, tasks.ErrGone, target)
		_, _, err = b.client.Find(context.Background(), target, "m")
		require.ErrorIs(t, err, tasks.ErrGone, target)
	}
	require.Empty(t, b.srv.Requests())
}

// requireLimited checks err is a RateLimited and returns it.
func requireLimited(t *testing.T, err error) *tasks.RateLimited {
	t.Helper()
	var rl *tasks.RateLimited
	require.ErrorAs(t, err, &rl, "%v", err)
	return rl
}

func TestPrimaryLimit(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusForbidden, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, ghfake.WithLimits(ghfake.Limits{Core: 3}), ghfake.WithRateLimitStatus(status))
			ctx := context.Background()
			start := b.clock.Now()

			b.file(t, task(1))                              // GET label, POST label, POST issue
			_, err := b.client.File(ctx, repoName, task(2)) // POST issue: refused
			rl := requireLimited(t, err)
			require.False(t, rl.Secondary)
			require.Equal(t, start.Add(time.Hour).Unix(), rl.Until.Unix(), "until X-RateLimit-Reset")

			// The client holds itself: nothing is sent before Until.
			n := len(b.srv.Requests())
			_, _, err = b.client.Find(ctx, repoName, tasks.Marker(2))
			require.Equal(t, rl.Until, requireLimited(t, err).Until)
			require.Len(t, b.srv.Requests(), n)

			// The worker waits until Until, then files.
			b.clock.Advance(rl.Until.Sub(b.clock.Now()))
			b.file(t, task(2))
			require.Empty(t, b.srv.EarlyRequests())
		})
	}
}

func TestSecondaryLimit(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusForbidden, http.StatusTooManyRequests} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, ghfake.WithRateLimitStatus(status))
			ctx := context.Background()
			b.srv.TripSecondaryLimit(90 * time.Second)

			_, err := b.client.File(ctx, repoName, task(1))
			rl := requireLimited(t, err)
			require.True(t, rl.Secondary)
			require.Equal(t, b.clock.Now().Add(90*time.Second), rl.Until, "until Retry-After")
			var e *github.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, "/repos/acme/jobs/labels", e.Path, "nothing after the refused label")
			require.Equal(t, http.MethodPost, b.srv.Requests()[len(b.srv.Requests())-1].Method)

			n := len(b.srv.Requests())
			_, err = b.client.File(ctx, repoName, task(1))
			requireLimited(t, err)
			require.Len(t, b.srv.Requests(), n, "no request before Until")

			b.clock.Advance(90 * time.Second)
			_, found, err := b.client.Find(ctx, repoName, tasks.Marker(1))
			require.NoError(t, err)
			require.False(t, found)
			b.file(t, task(1))
			require.Empty(t, b.srv.EarlyRequests())
		})
	}
}

// GitHub's guidance for a secondary limit that names no time is to wait
// at least a minute; the fake always sends Retry-After, so a bare server
// plays that answer.
func TestSecondaryLimitWithoutRetryAfter(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`))
	}))
	t.Cleanup(srv.Close)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := github.New(github.Config{URL: srv.URL, Token: token, Login: botLogin, HTTP: &http.Client{Transport: tr}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	_, _, err = c.Find(context.Background(), repoName, "m")
	rl := requireLimited(t, err)
	require.True(t, rl.Secondary)
	require.Equal(t, now.Add(time.Minute), rl.Until)
}

func TestNew(t *testing.T) {
	t.Parallel()
	for _, cfg := range []github.Config{
		{},
		{Token: "a b"},
		{Token: "t", URL: "ftp://x"},
		{Token: "t", URL: "https://u:p@api.github.com"},
	} {
		_, err := github.New(cfg)
		require.Error(t, err)
	}
	_, err := github.New(github.Config{Token: "t"})
	require.NoError(t, err)
}
