package ghfake

import (
	"net/http"
	"net/url"
	"strings"
)

// request is an authenticated request as the handlers see it.
type request struct {
	*http.Request
	body  []byte
	login string
}

// route is where a request goes: its handler, the primary-limit resource
// it counts against ("" for none) and whether it creates content, which
// the content limits bound.
type route struct {
	known    bool
	resource string
	creates  bool
	handle   func(request) answer
}

// route maps a request to its endpoint. Every path and method the fake
// does not serve answers 404, as GitHub answers an unknown route, also
// with a trailing slash.
func (s *Server) route(r *http.Request) route {
	seg := segments(r.URL)
	missing := route{resource: "core", handle: func(request) answer { return errAnswer(notFound(docRest)) }}
	on := func(method string, h func(request) answer) route {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			return missing
		}
		return route{known: true, resource: "core", handle: h}
	}
	switch {
	case len(seg) == 1 && "/"+seg[0] == rateLimitPath:
		rt := on(http.MethodGet, s.rateLimit)
		if rt.known {
			rt.resource = ""
		}
		return rt
	case len(seg) == 1 && seg[0] == "user":
		return on(http.MethodGet, s.authenticatedUser)
	case len(seg) == 2 && seg[0] == "search" && seg[1] == "issues":
		rt := on(http.MethodGet, s.searchIssues)
		if rt.known {
			rt.resource = "search"
		}
		return rt
	case len(seg) < 4 || seg[0] != "repos":
		return missing
	}
	owner, name := seg[1], seg[2]
	write := func(doc string, h func(request, object, *repo) answer) func(request) answer {
		return func(q request) answer { return s.write(q, owner, name, doc, h) }
	}
	// list is a repository's list: GET reads it, POST adds to it, which
	// creates content (bound by the content limits); any other method is
	// no route.
	list := func(read func(request, string, string) answer, create func(request) answer) route {
		if r.Method != http.MethodPost {
			return on(http.MethodGet, func(q request) answer { return read(q, owner, name) })
		}
		rt := on(http.MethodPost, create)
		rt.creates = true
		return rt
	}
	switch {
	case len(seg) == 4 && seg[3] == "issues":
		return list(s.listIssues, write(docCreateIssue, s.createIssueLocked))
	case len(seg) == 5 && seg[3] == "issues":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			return on(http.MethodGet, func(q request) answer { return s.getIssue(q, owner, name, seg[4]) })
		case http.MethodPatch:
			return on(http.MethodPatch, write(docUpdateIssue, func(q request, in object, rp *repo) answer {
				return s.updateIssueLocked(q, in, rp, seg[4])
			}))
		}
	case len(seg) == 4 && seg[3] == "labels":
		return list(s.listLabels, write(docCreateLabel, s.createLabelLocked))
	case len(seg) == 5 && seg[3] == "labels":
		return on(http.MethodGet, func(q request) answer { return s.getLabel(q, owner, name, seg[4]) })
	}
	return missing
}

// segments splits the escaped path, so that a label name with an encoded
// '/' stays one segment, and unescapes each.
func segments(u *url.URL) []string {
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if v, err := url.PathUnescape(p); err == nil {
			parts[i] = v
		}
	}
	return parts
}

// repoFor finds the repository a request names and checks the token's
// access: a private repository it has no grant for is hidden (404); one it
// may read but not write refuses writes with 403.
func (s *Server) repoFor(q request, owner, name string, write bool, doc string) (*repo, *apiError) {
	key := strings.ToLower(owner + "/" + name)
	r := s.repos[key]
	if r == nil {
		return nil, notFound(doc)
	}
	tok := s.tokens[bearer(q.Request)]
	canWrite, granted := false, false
	if tok != nil {
		canWrite, granted = tok.grants[key]
	}
	if !granted && !r.public {
		return nil, notFound(doc)
	}
	if write && !canWrite {
		return nil, notAccessible(doc, "issues=write")
	}
	return r, nil
}

// write answers a write to owner/name: its body, a JSON object, is read
// first (one GitHub cannot parse is refused before the repository is
// looked at), then under s.mu the repository is found and the token
// checked for the right to write there; h answers with both, s.mu still
// held.
func (s *Server) write(q request, owner, name, doc string, h func(request, object, *repo) answer) answer {
	in, apiErr := parseObject(q.body)
	if apiErr != nil {
		return errAnswer(apiErr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, apiErr := s.repoFor(q, owner, name, true, doc)
	if apiErr != nil {
		return errAnswer(apiErr)
	}
	if r.archived {
		// A 403 like a token's refusal, though the token is fine: a
		// client must tell the two apart by the message.
		return errAnswer(newError(http.StatusForbidden, MsgArchived, doc))
	}
	return h(q, in, r)
}

// read answers a read of owner/name: under s.mu the repository is found
// and the token checked for the right to see it; h answers with it, s.mu
// still held.
func (s *Server) read(q request, owner, name, doc string, h func(*repo) answer) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, apiErr := s.repoFor(q, owner, name, false, doc)
	if apiErr != nil {
		return errAnswer(apiErr)
	}
	return h(r)
}

// canPush reports whether login may set labels and assignees.
func (r *repo) canPush(login string) bool {
	return strings.EqualFold(login, r.owner) || r.collabs[strings.ToLower(login)]
}

func bearer(r *http.Request) string {
	_, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return strings.TrimSpace(tok)
}

// rateLimitPath is GitHub's rate-limit status, which counts against no
// limit.
const rateLimitPath = "/rate_limit"
