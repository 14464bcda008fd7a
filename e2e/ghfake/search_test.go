package ghfake_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

func (b *testBundle) search(t *testing.T, q string, extra ...string) response {
	t.Helper()
	v := url.Values{"q": {q}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return b.call(t, http.MethodGet, "/search/issues?"+v.Encode(), botToken)
}

func (b *testBundle) found(t *testing.T, q string) []int {
	t.Helper()
	res := decode[ghfake.SearchJSON](t, b.search(t, q), http.StatusOK)
	require.False(t, res.IncompleteResults)
	require.Equal(t, len(res.Items), res.TotalCount)
	out := []int{}
	for _, it := range res.Items {
		out = append(out, it.Number)
	}
	return out
}

func TestSearchIssues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddRepo("acme/other")
	b.srv.AddToken("other", "other-bot", ghfake.Write("acme/other"))
	b.createIssue(t, map[string]any{"title": "Crash in digest", "body": "key: vacancy-4711\nThe digest job crashed."})
	b.clock.Advance(time.Second)
	b.createIssue(t, map[string]any{"title": "Slow digest", "body": "key: vacancy-4712", "labels": []string{"perf"}})
	b.clock.Advance(time.Second)
	b.srv.AddIssue("acme/other", ghfake.Issue{Title: "Crash elsewhere", Body: "vacancy-4711"})
	b.srv.CloseIssue(repoName, 2, "")

	repo := "repo:" + repoName + " is:issue "
	require.Equal(t, []int{2, 1}, b.found(t, repo+"digest"))
	require.Equal(t, []int{1}, b.found(t, repo+"is:open digest"))
	require.Equal(t, []int{1}, b.found(t, repo+"state:open digest"))
	require.Equal(t, []int{2}, b.found(t, repo+"is:closed"))
	require.Equal(t, []int{1}, b.found(t, repo+`"vacancy-4711" in:body`))
	require.Equal(t, []int{}, b.found(t, repo+`"vacancy-4711" in:title`))
	require.Equal(t, []int{1}, b.found(t, repo+`"digest job crashed"`))
	require.Equal(t, []int{}, b.found(t, repo+`"job digest"`), "a phrase keeps its order")
	require.Equal(t, []int{}, b.found(t, repo+"crashes"), "no stemming")
	require.Equal(t, []int{2}, b.found(t, repo+"label:perf"))
	require.Equal(t, []int{2, 1}, b.found(t, repo+"author:"+botLogin))
	require.Equal(t, []int{}, b.found(t, repo+"is:pr digest"), "the fake has no pull requests")
	require.Equal(t, []int{1}, b.found(t, "is:issue vacancy 4711"), "without repo:, every readable repository")

	res := decode[ghfake.SearchJSON](t, b.search(t, repo+"digest", "sort", "created", "order", "asc"), http.StatusOK)
	require.Equal(t, 1, res.Items[0].Number)
	require.NotNil(t, res.Items[0].Score)
	require.Equal(t, b.srv.URL()+"/repos/acme/jobs", res.Items[0].RepositoryURL)

	// One readable repository is enough; the hidden one is left out.
	require.Equal(t, []int{2, 1}, b.found(t, repo+"repo:acme/other digest"))
}

func TestSearchRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddRepo("acme/secret")

	e := requireError(t, b.call(t, http.MethodGet, "/search/issues", botToken), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Search", Field: "q", Code: "missing"}}, e.Errors)

	requireError(t, b.search(t, "repo:"+repoName+" crash"), http.StatusUnprocessableEntity, ghfake.MsgSearchNeedsType)

	for _, q := range []string{"repo:acme/secret is:issue", "repo:acme/gone is:issue"} {
		e = requireError(t, b.search(t, q), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
		require.Equal(t, []ghfake.FieldError{{Resource: "Search", Field: "q", Code: "invalid", Message: ghfake.MsgSearchCannotSearch}}, e.Errors)
	}

	e = requireError(t, b.search(t, "is:issue "+strings.Repeat("a", ghfake.MaxSearchText+1)), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, "q", e.Errors[0].Field)
	require.Equal(t, http.StatusOK, b.search(t, "is:issue "+strings.Repeat("a", ghfake.MaxSearchText)).status)
	e = requireError(t, b.search(t, "is:issue a AND b AND c AND d AND e AND f AND g"), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, "q", e.Errors[0].Field)

	for _, q := range []string{"is:issue a OR b", "is:issue -label:bug", "is:issue created:>2020-01-01", "is:issue in:readme"} {
		e = requireError(t, b.search(t, q), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
		require.Contains(t, e.Errors[0].Message, "(ghfake)", q)
	}

	requireError(t, b.search(t, "is:issue", "per_page", "100", "page", "11"), http.StatusUnprocessableEntity, ghfake.MsgSearchFirst1000)
	require.Equal(t, http.StatusOK, b.search(t, "is:issue", "per_page", "100", "page", "10").status)
}

func TestSearchPagingAndCap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for range 5 {
		b.srv.AddIssue(repoName, ghfake.Issue{Title: "same"})
	}
	r := b.search(t, "is:issue same", "per_page", "2", "page", "2")
	res := decode[ghfake.SearchJSON](t, r, http.StatusOK)
	require.Equal(t, 5, res.TotalCount)
	require.Len(t, res.Items, 2)
	require.Contains(t, r.header.Get("Link"), `rel="next"`)
	require.Contains(t, r.header.Get("Link"), `rel="prev"`)
}

func TestSearchLag(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.WithSearchLag(30*time.Second))
	b.createIssue(t, map[string]any{"title": "fresh"})
	q := "repo:" + repoName + " is:issue fresh"
	require.Equal(t, []int{}, b.found(t, q), "not indexed yet")
	b.clock.Advance(30 * time.Second)
	require.Equal(t, []int{1}, b.found(t, q))

	// A change is indexed late too: the old version is found meanwhile.
	r := b.call(t, http.MethodPatch, "/repos/"+repoName+"/issues/1", botToken, map[string]any{"state": "closed"})
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, []int{1}, b.found(t, q+" is:open"))
	b.clock.Advance(30 * time.Second)
	require.Equal(t, []int{}, b.found(t, q+" is:open"))
}
