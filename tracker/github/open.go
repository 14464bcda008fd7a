package github

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"switchboard/domain"
	"switchboard/domain/tasks"
)

// openPages bounds Open's listing: the 300 most recently updated open
// issues, where a duplicate of a task the chat just talked about is
// likely to be (an issue nobody touched for long is rarely the one a team
// is discussing again; a repository with more open issues than that is
// checked against its liveliest).
const (
	openPages   = 3
	openPerPage = 100
)

// openPage is one page of a repository's open issues as last read.
type openPage struct {
	etag   string
	issues []tasks.Open
	next   bool // GitHub's Link named a next page
}

// Open lists target's open issues (pull requests left out), the most
// recently updated first, for the duplicate check. Each page is asked
// with the ETag of its last answer, so an unchanged page is GitHub's 304,
// which costs no rate limit.
func (c *Client) Open(ctx context.Context, target string) ([]tasks.Open, error) {
	repo, err := repoPath(target)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cached := append([]openPage(nil), c.open[repo]...)
	c.mu.Unlock()
	var pages []openPage
	for n := 1; n <= openPages; n++ {
		var last openPage
		if n <= len(cached) {
			last = cached[n-1]
		}
		page, err := c.openPage(ctx, repo, n, last)
		if err != nil {
			return nil, err
		}
		pages = append(pages, page)
		if !page.next || len(page.issues) == 0 {
			break
		}
	}
	c.mu.Lock()
	c.open[repo] = pages
	c.mu.Unlock()
	var out []tasks.Open
	seen := map[int]bool{}
	for _, p := range pages {
		for _, o := range p.issues {
			// An issue updated between two pages' reads moves up and may
			// show on both.
			if !seen[o.Number] {
				seen[o.Number] = true
				out = append(out, o)
			}
		}
	}
	return out, nil
}

func (c *Client) openPage(ctx context.Context, repo string, n int, last openPage) (openPage, error) {
	q := url.Values{
		"state": {"open"}, "sort": {"updated"}, "direction": {"desc"},
		"per_page": {strconv.Itoa(openPerPage)}, "page": {strconv.Itoa(n)},
	}
	var h http.Header
	if last.etag != "" {
		h = http.Header{"If-None-Match": {last.etag}}
	}
	path := repo + "/issues?" + q.Encode()
	a, err := c.do(ctx, http.MethodGet, path, nil, h, http.StatusOK, http.StatusNotModified)
	if err != nil {
		return openPage{}, err
	}
	if a.status == http.StatusNotModified {
		return last, nil
	}
	var items []issueJSON
	if err := json.Unmarshal(a.body, &items); err != nil {
		return openPage{}, &Error{Method: http.MethodGet, Path: repo + "/issues", Status: a.status, Message: "unreadable answer", Err: err}
	}
	page := openPage{etag: domain.CleanText(a.header.Get("ETag")), next: strings.Contains(a.header.Get("Link"), `rel="next"`)}
	for _, is := range items {
		if is.PullRequest == nil && is.Number > 0 {
			page.issues = append(page.issues, tasks.Open{Number: is.Number, URL: is.HTMLURL, Title: is.Title})
		}
	}
	return page, nil
}
