package ghfake

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// GitHub's bounds on an issue's text.
const (
	MaxTitle = 256
	MaxBody  = 65536
)

// createIssueLocked answers POST /repos/{owner}/{repo}/issues (see
// write).
func (s *Server) createIssueLocked(q request, in object, r *repo) answer {
	if r.issuesOff {
		return errAnswer(newError(http.StatusGone, MsgIssuesDisabled, docCreateIssue))
	}
	f := in.fields(docCreateIssue)
	title := f.required("Issue", "title", f.strOrInt)
	body, _ := f.str("body")
	labels, _ := f.names("labels", true)
	assignees, _ := f.names("assignees", false)
	if one, ok := f.str("assignee"); ok {
		assignees = append(assignees, one)
	}
	if f.err != nil {
		return errAnswer(f.err)
	}
	// A repository's refusal (RefuseIssues) comes with what GitHub finds
	// wrong in the request itself, in one answer, as GitHub lists every
	// error it finds.
	if errs := append(s.issueErrorsLocked(r, q.login, title, body, labels, assignees), r.refusal...); len(errs) > 0 {
		return errAnswer(validationFailed(docCreateIssue, errs...))
	}
	// Only users with push access set labels and assignees; GitHub drops
	// them silently for anyone else.
	if !r.canPush(q.login) {
		labels, assignees = nil, nil
	}
	for i, l := range labels {
		labels[i] = s.ensureLabelLocked(r, l).Name
	}
	is := s.fileIssueLocked(r, Issue{Title: title, Body: body, Labels: dedupFold(labels), Assignees: canonicalLogins(s, assignees), Author: q.login})
	out := s.issueJSONLocked(r, is.id, is.snapshot())
	return answer{status: http.StatusCreated, body: out, header: http.Header{"Location": {out.URL}}}
}

// issueErrorsLocked validates what creating or editing an issue sets:
// GitHub's 422 errors, one per offending value, every one found, not only
// the first.
func (s *Server) issueErrorsLocked(r *repo, login, title, body string, labels, assignees []string) []FieldError {
	var errs []FieldError
	if utf8.RuneCountInString(title) > MaxTitle {
		errs = append(errs, FieldError{Resource: "Issue", Code: "custom", Field: "title", Message: MsgTitleTooLong})
	}
	if utf8.RuneCountInString(body) > MaxBody {
		errs = append(errs, FieldError{Resource: "Issue", Code: "custom", Field: "body", Message: MsgBodyTooLong})
	}
	if !r.canPush(login) {
		return errs
	}
	for _, l := range labels {
		switch {
		case utf8.RuneCountInString(l) > MaxLabelName:
			// GitHub would have to create the label, and will not make one
			// that long: the name, not a message, is what its answer says.
			errs = append(errs, FieldError{Resource: "Label", Code: "invalid", Field: "name", Value: l})
		case s.refuseLabels && r.label(l) == nil:
			errs = append(errs, FieldError{Resource: "Label", Code: "invalid", Field: "name", Value: l,
				Message: "(ghfake) no such label; RefuseUnknownLabels is on"})
		}
	}
	for _, a := range assignees {
		if s.accounts[strings.ToLower(a)] == nil || !r.canPush(a) {
			errs = append(errs, FieldError{Resource: "Issue", Code: "invalid", Field: "assignees", Value: a})
		}
	}
	return errs
}

func dedupFold(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, n) }) {
			out = append(out, n)
		}
	}
	return out
}

// canonicalLogins spells logins as their accounts do (GitHub logins are
// case-insensitive).
func canonicalLogins(s *Server, logins []string) []string {
	out := dedupFold(logins)
	for i, l := range out {
		if a := s.accounts[strings.ToLower(l)]; a != nil {
			out[i] = a.login
		}
	}
	return out
}

// issueFor finds an issue named in a path: 410 for a repository without
// issues or a deleted issue, 404 for a number that is no issue.
func (s *Server) issueFor(r *repo, number, doc string) (*issue, *apiError) {
	if r.issuesOff {
		return nil, newError(http.StatusGone, MsgIssuesDisabled, doc)
	}
	n, err := strconv.Atoi(number)
	if err != nil || n < 1 || n > len(r.issues) {
		return nil, notFound(doc)
	}
	is := r.issues[n-1]
	if is.Deleted {
		return nil, newError(http.StatusGone, MsgIssueDeleted, doc)
	}
	return is, nil
}

// getIssue answers GET /repos/{owner}/{repo}/issues/{number}.
func (s *Server) getIssue(q request, owner, name, number string) answer {
	return s.read(q, owner, name, docGetIssue, func(r *repo) answer {
		is, apiErr := s.issueFor(r, number, docGetIssue)
		if apiErr != nil {
			return errAnswer(apiErr)
		}
		return answer{status: http.StatusOK, body: s.issueJSONLocked(r, is.id, is.snapshot())}
	})
}

// updateIssueLocked answers PATCH
// /repos/{owner}/{repo}/issues/{number} (see write).
func (s *Server) updateIssueLocked(q request, in object, r *repo, number string) answer {
	is, apiErr := s.issueFor(r, number, docUpdateIssue)
	if apiErr != nil {
		return errAnswer(apiErr)
	}
	next := is.snapshot()
	f := in.fields(docUpdateIssue)
	if title, ok := f.strOrInt("title"); ok { // null leaves it as it is
		if strings.TrimSpace(title) == "" {
			f.missing("Issue", "title")
		}
		next.Title = title
	}
	if _, present := in["body"]; present {
		next.Body, _ = f.str("body")
	}
	state, stateSet := f.enum("state", "open", "closed")
	reason, reasonSet := f.enum("state_reason", "completed", "not_planned", "duplicate", "reopened")
	labels, labelsSet := f.names("labels", true)
	assignees, assigneesSet := f.names("assignees", false)
	if f.err != nil {
		return errAnswer(f.err)
	}
	if errs := s.issueErrorsLocked(r, q.login, next.Title, next.Body, labels, assignees); len(errs) > 0 {
		return errAnswer(validationFailed(docUpdateIssue, errs...))
	}
	if r.canPush(q.login) {
		if labelsSet {
			next.Labels = nil
			for _, l := range dedupFold(labels) {
				next.Labels = append(next.Labels, s.ensureLabelLocked(r, l).Name)
			}
		}
		if assigneesSet {
			next.Assignees = canonicalLogins(s, assignees)
		}
	}
	changed := next.Title != is.Title || next.Body != is.Body ||
		!slices.Equal(next.Labels, is.Labels) || !slices.Equal(next.Assignees, is.Assignees) ||
		stateSet && state != is.State || reasonSet && reason != is.StateReason
	if changed {
		is.Title, is.Body, is.Labels, is.Assignees = next.Title, next.Body, next.Labels, next.Assignees
		if stateSet || reasonSet {
			s.applyStateLocked(is, cmpOr(state, is.State), reason)
		}
		is.UpdatedAt = s.now().UTC().Truncate(time.Second)
		is.touchLocked(s.now())
		s.hub.NotifyLocked()
	}
	return answer{status: http.StatusOK, body: s.issueJSONLocked(r, is.id, is.snapshot())}
}

// listIssues answers GET /repos/{owner}/{repo}/issues. GitHub lists pull
// requests here too; the fake has none, so the list holds issues only.
func (s *Server) listIssues(q request, owner, name string) answer {
	return s.read(q, owner, name, docListIssues, func(r *repo) answer {
		if r.issuesOff {
			return errAnswer(newError(http.StatusGone, MsgIssuesDisabled, docListIssues))
		}
		query := q.URL.Query()
		state := cmpOr(query.Get("state"), "open")
		if apiErr := oneOf("state", state, docListIssues, "open", "closed", "all"); apiErr != nil {
			return errAnswer(apiErr)
		}
		sortBy := cmpOr(query.Get("sort"), "created")
		if apiErr := oneOf("sort", sortBy, docListIssues, "created", "updated", "comments"); apiErr != nil {
			return errAnswer(apiErr)
		}
		direction := cmpOr(query.Get("direction"), "desc")
		if apiErr := oneOf("direction", direction, docListIssues, "asc", "desc"); apiErr != nil {
			return errAnswer(apiErr)
		}
		var since time.Time
		if v := query.Get("since"); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return errAnswer(validationFailed(docListIssues, FieldError{Resource: "Issue", Code: "invalid", Field: "since", Value: v}))
			}
			since = t
		}
		var wantLabels []string
		if v := query.Get("labels"); v != "" {
			wantLabels = strings.Split(v, ",")
		}
		creator := query.Get("creator")
		var hits []*issue
		for _, is := range r.issues {
			if is.Deleted || state != "all" && is.State != state || is.UpdatedAt.Before(since) {
				continue
			}
			if creator != "" && !strings.EqualFold(is.Author, creator) {
				continue
			}
			if !hasLabels(is.Labels, wantLabels) {
				continue
			}
			hits = append(hits, is)
		}
		sortIssues(hits, sortBy, direction)
		perPage, page := paging(query)
		from, to := pageOf(len(hits), page, perPage)
		items := make([]IssueJSON, 0, to-from)
		for _, is := range hits[from:to] {
			items = append(items, s.issueJSONLocked(r, is.id, is.snapshot()))
		}
		a := answer{status: http.StatusOK, body: items}
		if link := s.linkHeader(q.Request, page, perPage, len(hits)); link != "" {
			a.header = http.Header{"Link": {link}}
		}
		return a
	})
}

func hasLabels(have, want []string) bool {
	for _, w := range want {
		w = strings.TrimSpace(w)
		if w != "" && !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, w) }) {
			return false
		}
	}
	return true
}

// sortIssues orders as GitHub's sort and direction do; ties go by
// number, so pages are stable.
func sortIssues(xs []*issue, by, direction string) {
	key := func(is *issue) time.Time {
		if by == "updated" {
			return is.UpdatedAt
		}
		return is.CreatedAt
	}
	sort.SliceStable(xs, func(i, j int) bool {
		a, b := xs[i], xs[j]
		if direction == "desc" {
			a, b = b, a
		}
		if ka, kb := key(a), key(b); !ka.Equal(kb) {
			return ka.Before(kb)
		}
		return a.Number < b.Number
	})
}
