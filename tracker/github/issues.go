package github

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"switchboard/domain"
	"switchboard/domain/tasks"
)

// findPages bounds Find's listing; see the package doc for why two pages
// of 100 are enough.
const (
	findPages   = 2
	findPerPage = 100
)

// Priority labels: name, colour (GitHub's own red, yellow and green) and
// description, at most 100 characters.
var priorityLabels = map[string]struct{ name, color string }{
	"high":   {"priority: high", "b60205"},
	"medium": {"priority: medium", "fbca04"},
	"low":    {"priority: low", "0e8a16"},
}

const labelDescription = "Priority of a task filed by Switchboard"

// issueJSON is what the Client reads of GitHub's issue.
type issueJSON struct {
	Number      int       `json:"number"`
	Title       string    `json:"title"`
	HTMLURL     string    `json:"html_url"`
	State       string    `json:"state"`
	Body        *string   `json:"body"`
	PullRequest *struct{} `json:"pull_request"`
}

func (is issueJSON) filed() tasks.Filed {
	return tasks.Filed{Number: is.Number, URL: is.HTMLURL, State: is.State}
}

// File files t as an issue of target ("owner/repo").
func (c *Client) File(ctx context.Context, target string, t tasks.Task) (tasks.Filed, error) {
	repo, err := repoPath(target)
	if err != nil {
		return tasks.Filed{}, err
	}
	var labels []string
	made := 0
	if l, ok := priorityLabels[strings.ToLower(strings.TrimSpace(t.Priority))]; ok {
		created, err := c.ensureLabel(ctx, repo, l.name, l.color)
		if err != nil {
			return tasks.Filed{}, err
		}
		if created {
			made++
		}
		labels = []string{l.name}
	}
	in := map[string]any{"title": Title(t), "body": Body(t, t.Assignee != "")}
	if len(labels) > 0 {
		in["labels"] = labels
	}
	if t.Assignee != "" {
		in["assignees"] = []string{t.Assignee}
	}
	a, err := c.do(ctx, http.MethodPost, repo+"/issues", in, nil, http.StatusCreated)
	dropped := false
	if err != nil && t.Assignee != "" && refusesAssignee(a, err) {
		// Nothing was filed: GitHub validates before it creates. The body
		// now names the assignee, since GitHub will not show one.
		delete(in, "assignees")
		in["body"] = Body(t, false)
		dropped = true
		a, err = c.do(ctx, http.MethodPost, repo+"/issues", in, nil, http.StatusCreated)
	}
	if err != nil {
		return tasks.Filed{}, err
	}
	var is issueJSON
	if err := json.Unmarshal(a.body, &is); err != nil || is.Number == 0 {
		// Filed, but we cannot say where: transient, and the retry's Find
		// will see it by its marker.
		return tasks.Filed{}, &Error{Method: http.MethodPost, Path: repo + "/issues", Status: a.status, Message: "unreadable answer", Err: err}
	}
	f := is.filed()
	f.AssigneeDropped = dropped
	f.Created = made + 1
	return f, nil
}

// refusesAssignee reports whether a failed create was GitHub's 422
// refusing the assignee.
func refusesAssignee(a answer, err error) bool {
	return validationFailed(a, err, func(fe fieldError) bool { return fe.Field == "assignees" || fe.Field == "assignee" })
}

// validationFailed reports whether err is GitHub's 422 with an error
// about a field that is.
func validationFailed(a answer, err error, is func(fieldError) bool) bool {
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity {
		return false
	}
	var eb errorBody
	if json.Unmarshal(a.body, &eb) != nil {
		return false
	}
	return slices.ContainsFunc(eb.Errors, is)
}

// ensureLabel makes sure repo has the label, creating it if missing;
// created says this call made it.
func (c *Client) ensureLabel(ctx context.Context, repo, name, color string) (created bool, err error) {
	key := repo + "\x00" + strings.ToLower(name)
	c.mu.Lock()
	known := c.labels[key]
	c.mu.Unlock()
	if known {
		return false, nil
	}
	a, err := c.do(ctx, http.MethodGet, repo+"/labels/"+url.PathEscape(name), nil, nil, http.StatusOK, http.StatusNotFound)
	if err != nil {
		return false, err
	}
	if a.status == http.StatusNotFound {
		in := map[string]string{"name": name, "color": color, "description": labelDescription}
		a, err = c.do(ctx, http.MethodPost, repo+"/labels", in, nil, http.StatusCreated)
		if err != nil && !labelExists(a, err) {
			return false, err
		}
		created = err == nil
	}
	c.mu.Lock()
	c.labels[key] = true
	c.mu.Unlock()
	return created, nil
}

// labelExists reports whether a failed label create was 422
// already_exists: another worker made it between our GET and POST.
func labelExists(a answer, err error) bool {
	return validationFailed(a, err, func(fe fieldError) bool { return fe.Code == "already_exists" })
}

// Find looks for the issue carrying marker among the newest issues the
// token's user filed in target.
func (c *Client) Find(ctx context.Context, target, marker string) (tasks.Filed, bool, error) {
	repo, err := repoPath(target)
	if err != nil {
		return tasks.Filed{}, false, err
	}
	login, err := c.user(ctx)
	if err != nil {
		return tasks.Filed{}, false, err
	}
	line := markerLine(marker)
	for page := 1; page <= findPages; page++ {
		q := url.Values{
			"creator": {login}, "state": {"all"}, "sort": {"created"}, "direction": {"desc"},
			"per_page": {strconv.Itoa(findPerPage)}, "page": {strconv.Itoa(page)},
		}
		path := repo + "/issues?" + q.Encode()
		a, err := c.do(ctx, http.MethodGet, path, nil, nil, http.StatusOK)
		if err != nil {
			return tasks.Filed{}, false, err
		}
		var items []issueJSON
		if err := json.Unmarshal(a.body, &items); err != nil {
			return tasks.Filed{}, false, &Error{Method: http.MethodGet, Path: repo + "/issues", Status: a.status, Message: "unreadable answer", Err: err}
		}
		for _, is := range items {
			if is.PullRequest == nil && is.Body != nil && hasMarker(*is.Body, line) {
				return is.filed(), true, nil
			}
		}
		if len(items) < findPerPage || !strings.Contains(a.header.Get("Link"), `rel="next"`) {
			break
		}
	}
	return tasks.Filed{}, false, nil
}

// hasMarker reports whether body holds the marker on a line of its own.
// A line, not a substring: a source quoted in the body is prefixed "> ",
// so another task's marker quoted there does not count.
func hasMarker(body, line string) bool {
	for l := range strings.Lines(body) {
		if strings.TrimSpace(l) == line {
			return true
		}
	}
	return false
}

// Issue reads issue number of target for the /tasks view. With the ETag
// of an earlier read, an unchanged issue answers notModified (GitHub's
// 304, which costs no rate limit) and the Filed is zero.
func (c *Client) Issue(ctx context.Context, target string, number int, etag string) (f tasks.Filed, newETag string, notModified bool, err error) {
	repo, err := repoPath(target)
	if err != nil {
		return tasks.Filed{}, "", false, err
	}
	if number <= 0 {
		return tasks.Filed{}, "", false, fmt.Errorf("github: issue number %d: %w", number, tasks.ErrGone)
	}
	var h http.Header
	if etag != "" {
		h = http.Header{"If-None-Match": {etag}}
	}
	path := repo + "/issues/" + strconv.Itoa(number)
	a, err := c.do(ctx, http.MethodGet, path, nil, h, http.StatusOK, http.StatusNotModified)
	if err != nil {
		return tasks.Filed{}, "", false, err
	}
	if a.status == http.StatusNotModified {
		return tasks.Filed{}, etag, true, nil
	}
	var is issueJSON
	if err := json.Unmarshal(a.body, &is); err != nil {
		return tasks.Filed{}, "", false, &Error{Method: http.MethodGet, Path: path, Status: a.status, Message: "unreadable answer", Err: err}
	}
	return is.filed(), domain.CleanText(a.header.Get("ETag")), false, nil
}
