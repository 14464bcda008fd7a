package ghfake_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/ghfake"
)

func TestCreateIssue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddCollaborator(repoName, "alice")
	b.srv.AddLabel(repoName, ghfake.Label{Name: "bug", Color: "d73a4a"})

	r := b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{
		"title": "Crash on /start", "body": "<b>stack</b> & trace",
		"labels": []any{"BUG", map[string]any{"name": "triage"}}, "assignees": []string{"Alice"},
	})
	is := decode[ghfake.IssueJSON](t, r, http.StatusCreated)
	require.Equal(t, 1, is.Number)
	require.Equal(t, "open", is.State)
	require.Equal(t, "Crash on /start", is.Title)
	require.Equal(t, "<b>stack</b> & trace", *is.Body)
	require.Contains(t, string(r.body), `"<b>stack</b> & trace"`, "HTML is not escaped")
	require.Equal(t, b.srv.URL()+"/repos/acme/jobs/issues/1", is.URL)
	require.Equal(t, is.URL, r.header.Get("Location"))
	require.Equal(t, "https://github.com/acme/jobs/issues/1", is.HTMLURL)
	require.Equal(t, botLogin, is.User.Login)
	require.Equal(t, "2026-03-01T12:00:00Z", is.CreatedAt)
	require.Equal(t, is.CreatedAt, is.UpdatedAt)
	require.Nil(t, is.ClosedAt)
	require.Nil(t, is.StateReason)
	require.Len(t, is.Labels, 2)
	require.Equal(t, "bug", is.Labels[0].Name, "an existing label keeps its spelling")
	require.Equal(t, "d73a4a", is.Labels[0].Color)
	require.Equal(t, "triage", is.Labels[1].Name)
	require.Equal(t, "ededed", is.Labels[1].Color, "a missing label is created grey")
	require.Equal(t, "alice", is.Assignee.Login)
	require.Len(t, is.Assignees, 1)

	stored, ok := b.srv.Issue(repoName, 1)
	require.True(t, ok)
	require.Equal(t, []string{"bug", "triage"}, stored.Labels)
	require.Equal(t, []string{"alice"}, stored.Assignees)
	require.Len(t, b.srv.Labels(repoName), 2)

	// Numbers go on.
	require.Equal(t, 2, b.createIssue(t, map[string]any{"title": 42}).Number, "a title may be an integer")
}

func TestCreateIssueRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddUser("mallory")
	path := "/repos/" + repoName + "/issues"

	e := requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"body": "no title"}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{{Resource: "Issue", Code: "missing_field", Field: "title"}}, e.Errors)

	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x", "assignees": []string{"mallory", "nobody"}}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{
		{Resource: "Issue", Code: "invalid", Field: "assignees", Value: "mallory"},
		{Resource: "Issue", Code: "invalid", Field: "assignees", Value: "nobody"},
	}, e.Errors)

	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": strings.Repeat("é", ghfake.MaxTitle+1)}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, ghfake.MsgTitleTooLong, e.Errors[0].Message)
	b.createIssue(t, map[string]any{"title": strings.Repeat("é", ghfake.MaxTitle)})

	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x", "body": strings.Repeat("a", ghfake.MaxBody+1)}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, ghfake.MsgBodyTooLong, e.Errors[0].Message)

	requireError(t, b.call(t, http.MethodPost, path, botToken, `{"title":`), http.StatusBadRequest, ghfake.MsgProblemsParsing)
	requireError(t, b.call(t, http.MethodPost, path, botToken, `["x"]`), http.StatusBadRequest, ghfake.MsgBodyNotObject)
	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x", "labels": "bug"}),
		http.StatusUnprocessableEntity, "Invalid request.\n\nFor 'properties/labels', \"bug\" is not an array.")
	require.Empty(t, e.Errors)

	require.Len(t, b.srv.Issues(repoName), 1, "only the valid one was filed")

	b.srv.SetIssuesEnabled(repoName, false)
	requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x"}), http.StatusGone, ghfake.MsgIssuesDisabled)
	requireError(t, b.call(t, http.MethodGet, path, botToken), http.StatusGone, ghfake.MsgIssuesDisabled)
	requireError(t, b.call(t, http.MethodGet, path+"/1", botToken), http.StatusGone, ghfake.MsgIssuesDisabled)
}

func TestRefuseUnknownLabels(t *testing.T) {
	t.Parallel()
	b := setup(t, ghfake.RefuseUnknownLabels())
	b.srv.AddLabel(repoName, ghfake.Label{Name: "bug"})
	r := b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{"title": "x", "labels": []string{"bug", "new"}})
	e := requireError(t, r, http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Len(t, e.Errors, 1)
	require.Equal(t, "new", e.Errors[0].Value)
	require.Len(t, b.srv.Labels(repoName), 1)
	b.createIssue(t, map[string]any{"title": "x", "labels": []string{"bug"}})
}

func TestGetAndUpdateIssue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createIssue(t, map[string]any{"title": "first", "body": "text"})
	path := "/repos/" + repoName + "/issues/1"

	got := decode[ghfake.IssueJSON](t, b.call(t, http.MethodGet, path, readTok), http.StatusOK)
	require.Equal(t, "first", got.Title)
	requireError(t, b.call(t, http.MethodGet, path+"0", botToken), http.StatusNotFound, ghfake.MsgNotFound)
	requireError(t, b.call(t, http.MethodGet, "/repos/"+repoName+"/issues/abc", botToken), http.StatusNotFound, ghfake.MsgNotFound)

	b.clock.Advance(time.Minute)
	upd := decode[ghfake.IssueJSON](t, b.call(t, http.MethodPatch, path, botToken, map[string]any{"state": "closed", "state_reason": "not_planned", "body": nil}), http.StatusOK)
	require.Equal(t, "closed", upd.State)
	require.Equal(t, "not_planned", *upd.StateReason)
	require.Equal(t, "2026-03-01T12:01:00Z", *upd.ClosedAt)
	require.Equal(t, "2026-03-01T12:01:00Z", upd.UpdatedAt)
	require.Nil(t, upd.Body, "null clears the body")

	e := requireError(t, b.call(t, http.MethodPatch, path, botToken, map[string]any{"state": "done"}),
		http.StatusUnprocessableEntity, `Invalid request.

For 'properties/state', "done" is not one of ["open", "closed"].`)
	require.Empty(t, e.Errors)
	requireError(t, b.call(t, http.MethodPatch, path, readTok, map[string]any{"state": "open"}), http.StatusForbidden, ghfake.MsgNotAccessible)

	// Reopened on GitHub's side, by a person.
	b.clock.Advance(time.Minute)
	b.srv.ReopenIssue(repoName, 1)
	got = decode[ghfake.IssueJSON](t, b.call(t, http.MethodGet, path, botToken), http.StatusOK)
	require.Equal(t, "open", got.State)
	require.Equal(t, "reopened", *got.StateReason)
	require.Nil(t, got.ClosedAt)

	b.srv.CloseIssue(repoName, 1, "")
	got = decode[ghfake.IssueJSON](t, b.call(t, http.MethodGet, path, botToken), http.StatusOK)
	require.Equal(t, "closed", got.State)
	require.Equal(t, "completed", *got.StateReason)

	// An edit that changes nothing leaves updated_at.
	b.clock.Advance(time.Minute)
	same := decode[ghfake.IssueJSON](t, b.call(t, http.MethodPatch, path, botToken, map[string]any{"title": "first"}), http.StatusOK)
	require.Equal(t, got.UpdatedAt, same.UpdatedAt)

	b.srv.DeleteIssue(repoName, 1)
	requireError(t, b.call(t, http.MethodGet, path, botToken), http.StatusGone, ghfake.MsgIssueDeleted)
	requireError(t, b.call(t, http.MethodPatch, path, botToken, map[string]any{"state": "open"}), http.StatusGone, ghfake.MsgIssueDeleted)
}

func TestUpdateLabelsAndAssignees(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddCollaborator(repoName, "alice")
	b.srv.AddUser("mallory")
	b.createIssue(t, map[string]any{"title": "x", "labels": []string{"a"}, "assignees": []string{"alice"}})
	path := "/repos/" + repoName + "/issues/1"

	upd := decode[ghfake.IssueJSON](t, b.call(t, http.MethodPatch, path, botToken, map[string]any{"labels": []string{"b", "c"}, "assignees": []string{}}), http.StatusOK)
	require.Len(t, upd.Labels, 2, "labels are replaced")
	require.Equal(t, "b", upd.Labels[0].Name)
	require.Empty(t, upd.Assignees, "an empty list clears them")
	require.Nil(t, upd.Assignee)

	e := requireError(t, b.call(t, http.MethodPatch, path, botToken, map[string]any{"assignees": []string{"mallory"}}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, "mallory", e.Errors[0].Value)
	is, _ := b.srv.Issue(repoName, 1)
	require.Equal(t, []string{"b", "c"}, is.Labels)
	require.Empty(t, is.Assignees)
}

func TestListIssues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 5 {
		labels := []string{}
		if i%2 == 0 {
			labels = []string{"even"}
		}
		b.createIssue(t, map[string]any{"title": "issue", "labels": labels})
		b.clock.Advance(time.Minute)
	}
	b.srv.CloseIssue(repoName, 2, "")
	path := "/repos/" + repoName + "/issues"

	numbers := func(items []ghfake.IssueJSON) []int {
		var out []int
		for _, it := range items {
			out = append(out, it.Number)
		}
		return out
	}
	open := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, path, botToken), http.StatusOK)
	require.Equal(t, []int{5, 4, 3, 1}, numbers(open), "open by default, newest first")
	all := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, path+"?state=all&direction=asc", botToken), http.StatusOK)
	require.Equal(t, []int{1, 2, 3, 4, 5}, numbers(all))
	closed := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, path+"?state=closed", botToken), http.StatusOK)
	require.Equal(t, []int{2}, numbers(closed))
	even := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, path+"?labels=EVEN&state=all", botToken), http.StatusOK)
	require.Equal(t, []int{5, 3, 1}, numbers(even))
	since := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, path+"?since=2026-03-01T12:03:00Z", botToken), http.StatusOK)
	require.Equal(t, []int{5, 4}, numbers(since))
	requireError(t, b.call(t, http.MethodGet, path+"?since=yesterday", botToken), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	requireError(t, b.call(t, http.MethodGet, path+"?state=any", botToken), http.StatusUnprocessableEntity,
		"Invalid request.\n\nFor 'properties/state', \"any\" is not one of [\"open\", \"closed\", \"all\"].")

	r := b.call(t, http.MethodGet, path+"?state=all&per_page=2", botToken)
	require.Equal(t, []int{5, 4}, numbers(decode[[]ghfake.IssueJSON](t, r, http.StatusOK)))
	base := b.srv.URL() + "/repos/acme/jobs/issues?"
	require.Equal(t, `<`+base+`page=2&per_page=2&state=all>; rel="next", <`+base+`page=3&per_page=2&state=all>; rel="last"`, r.header.Get("Link"))
	r = b.call(t, http.MethodGet, path+"?state=all&per_page=2&page=3", botToken)
	require.Equal(t, []int{1}, numbers(decode[[]ghfake.IssueJSON](t, r, http.StatusOK)))
	require.Equal(t, `<`+base+`page=2&per_page=2&state=all>; rel="prev", <`+base+`page=1&per_page=2&state=all>; rel="first"`, r.header.Get("Link"))
	r = b.call(t, http.MethodGet, path+"?state=all&per_page=2&page=9", botToken)
	require.Empty(t, decode[[]ghfake.IssueJSON](t, r, http.StatusOK))
	r = b.call(t, http.MethodGet, path+"?state=all", botToken)
	require.Empty(t, r.header.Get("Link"), "one page needs no links")
}

func TestWaitIssue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.srv.AddIssue(repoName, ghfake.Issue{Title: "from elsewhere"})
	}()
	is := b.srv.WaitIssue(t, repoName, func(is ghfake.Issue) bool { return is.Title == "from elsewhere" })
	<-done
	require.Equal(t, "acme", is.Author)
	require.Equal(t, 1, is.Number)
}

func TestListIssuesByCreatorAndUser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.createIssue(t, map[string]any{"title": "by the bot"})
	b.srv.AddIssue(repoName, ghfake.Issue{Title: "by the owner"})

	me := decode[ghfake.UserJSON](t, b.call(t, http.MethodGet, "/user", botToken), http.StatusOK)
	require.Equal(t, botLogin, me.Login)

	mine := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, "/repos/"+repoName+"/issues?state=all&creator=SWITCHBOARD-BOT", botToken), http.StatusOK)
	require.Len(t, mine, 1, "creator matches case-insensitively")
	require.Equal(t, "by the bot", mine[0].Title)
	all := decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, "/repos/"+repoName+"/issues?state=all", botToken), http.StatusOK)
	require.Len(t, all, 2)
}

// A new issue wrong in several ways is refused with every error at once,
// as GitHub lists them, not with the first one found.
func TestCreateIssueListsEveryRefusedField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.srv.AddUser("mallory")
	e := requireError(t, b.call(t, http.MethodPost, "/repos/"+repoName+"/issues", botToken, map[string]any{
		"title": strings.Repeat("t", 257), "body": strings.Repeat("b", 65537), "assignees": []string{"mallory"},
	}), http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{
		{Resource: "Issue", Code: "custom", Field: "title", Message: ghfake.MsgTitleTooLong},
		{Resource: "Issue", Code: "custom", Field: "body", Message: ghfake.MsgBodyTooLong},
		{Resource: "Issue", Code: "invalid", Field: "assignees", Value: "mallory"},
	}, e.Errors)
	require.Empty(t, b.srv.Issues(repoName))
}

// RefuseIssues refuses every new issue of the repository with GitHub's
// 422 and the errors given, files nothing meanwhile, and ends when it is
// called without any.
func TestRefuseIssues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	refusal := ghfake.FieldError{Resource: "Label", Code: "invalid", Field: "name", Value: "priority: high"}
	b.srv.RefuseIssues(repoName, refusal)
	path := "/repos/" + repoName + "/issues"
	e := requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": "x"}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Equal(t, []ghfake.FieldError{refusal}, e.Errors)
	e = requireError(t, b.call(t, http.MethodPost, path, botToken, map[string]any{"title": strings.Repeat("t", 257)}),
		http.StatusUnprocessableEntity, ghfake.MsgValidationFailed)
	require.Len(t, e.Errors, 2, "what else is wrong is said too")
	require.Empty(t, b.srv.Issues(repoName))
	decode[[]ghfake.IssueJSON](t, b.call(t, http.MethodGet, path, botToken), http.StatusOK)

	b.srv.RefuseIssues(repoName)
	require.Equal(t, 1, b.createIssue(t, map[string]any{"title": "x"}).Number)
}
