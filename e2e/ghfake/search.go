package ghfake

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// GitHub's bounds on a search.
const (
	MaxSearchResults   = 1000
	MaxSearchText      = 256 // characters of the query, qualifiers aside
	MaxSearchOperators = 5   // AND, OR and NOT together
)

// otherQualifiers are GitHub's issue-search qualifiers the fake does not
// model: a query using one is refused, so a test never passes on a filter
// the fake silently ignored.
var otherQualifiers = []string{
	"org", "user", "assignee", "mentions", "commenter", "involves", "team",
	"milestone", "project", "created", "updated", "closed", "comments",
	"interactions", "reactions", "no", "archived", "linked", "language",
	"sort", "reason", "review", "draft", "head", "base", "status", "merged",
	"team-review-requested", "review-requested", "reviewed-by", "parent-issue",
	"sub-issue", "has", "type",
}

// searchQuery is a parsed q of GET /search/issues.
type searchQuery struct {
	repos  []string
	kind   string // "issue" or "pr"
	state  string // "", "open", "closed"
	in     []string
	labels []string
	author string
	terms  [][]string // each a word or a phrase, lower-cased words
}

type searchToken struct {
	key, value string // key is "" for text
	quoted     bool
}

// tokenizeQuery splits q at spaces outside double quotes; a qualifier's
// value may be quoted (label:"in progress").
func tokenizeQuery(q string) []searchToken {
	var out []searchToken
	var cur strings.Builder
	inQuote, quoted := false, false
	flush := func() {
		if cur.Len() == 0 && !quoted {
			return
		}
		raw := cur.String()
		t := searchToken{value: raw, quoted: quoted}
		if !quoted || strings.Contains(raw, ":") {
			if k, v, ok := strings.Cut(raw, ":"); ok && k != "" && !strings.ContainsAny(k, " ") && isQualifierKey(k) {
				t = searchToken{key: strings.ToLower(k), value: v, quoted: quoted}
			}
		}
		out = append(out, t)
		cur.Reset()
		quoted = false
	}
	for _, r := range q {
		switch {
		case r == '"':
			inQuote = !inQuote
			quoted = true
		case unicode.IsSpace(r) && !inQuote:
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return out
}

func isQualifierKey(k string) bool {
	k = strings.TrimPrefix(strings.ToLower(k), "-")
	return slices.Contains([]string{"repo", "is", "state", "in", "label"}, k) || slices.Contains(otherQualifiers, k) || k == "author"
}

// parseSearch reads q; the error is GitHub's 422 for a query it refuses.
func parseSearch(q string) (searchQuery, *apiError) {
	var sq searchQuery
	textLen, operators := 0, 0
	unsupported := func(what string) *apiError {
		return validationFailed(docSearchIssues, FieldError{Resource: "Search", Field: "q", Code: "invalid",
			Message: "(ghfake) " + what + " is not modelled by the fake"})
	}
	for _, t := range tokenizeQuery(q) {
		if t.key == "" {
			switch {
			case !t.quoted && (t.value == "AND" || t.value == "OR" || t.value == "NOT"):
				operators++
				if t.value != "AND" {
					return sq, unsupported("the " + t.value + " operator")
				}
				continue
			case !t.quoted && strings.HasPrefix(t.value, "-"):
				return sq, unsupported("excluding with '-'")
			}
			textLen += utf8.RuneCountInString(t.value)
			if words := searchWords(t.value); len(words) > 0 {
				sq.terms = append(sq.terms, words)
			}
			continue
		}
		v := t.value
		switch t.key {
		case "repo":
			sq.repos = append(sq.repos, v)
		case "is":
			switch strings.ToLower(v) {
			case "issue":
				sq.kind = "issue"
			case "pr", "pull-request":
				sq.kind = "pr"
			case "open", "closed":
				sq.state = strings.ToLower(v)
			default:
				return sq, unsupported("is:" + v)
			}
		case "type":
			switch strings.ToLower(v) {
			case "issue":
				sq.kind = "issue"
			case "pr":
				sq.kind = "pr"
			default:
				return sq, unsupported("type:" + v)
			}
		case "state":
			switch strings.ToLower(v) {
			case "open", "closed":
				sq.state = strings.ToLower(v)
			default:
				return sq, unsupported("state:" + v)
			}
		case "in":
			for _, f := range strings.Split(strings.ToLower(v), ",") {
				if f != "title" && f != "body" && f != "comments" {
					return sq, unsupported("in:" + f)
				}
				sq.in = append(sq.in, f)
			}
		case "label":
			sq.labels = append(sq.labels, v)
		case "author":
			sq.author = v
		default:
			return sq, unsupported("the " + t.key + ": qualifier")
		}
	}
	if operators > MaxSearchOperators || textLen > MaxSearchText {
		return sq, validationFailed(docSearchIssues, FieldError{Resource: "Search", Field: "q", Code: "invalid",
			Message: "The search is longer than 256 characters."})
	}
	if sq.kind == "" {
		return sq, newError(http.StatusUnprocessableEntity, MsgSearchNeedsType, docSearchIssues)
	}
	return sq, nil
}

// searchWords splits text into lower-case words at anything that is not a
// letter or digit, as the index does; the fake has no stemming.
func searchWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// containsRun reports whether words holds run as consecutive words.
func containsRun(words, run []string) bool {
	for i := 0; i+len(run) <= len(words); i++ {
		if slices.Equal(words[i:i+len(run)], run) {
			return true
		}
	}
	return false
}

func (sq searchQuery) matches(is Issue) bool {
	if sq.kind == "pr" || sq.state != "" && is.State != sq.state {
		return false
	}
	if sq.author != "" && !strings.EqualFold(sq.author, is.Author) {
		return false
	}
	if !hasLabels(is.Labels, sq.labels) {
		return false
	}
	in := sq.in
	if len(in) == 0 {
		in = []string{"title", "body", "comments"}
	}
	var fields [][]string
	if slices.Contains(in, "title") {
		fields = append(fields, searchWords(is.Title))
	}
	if slices.Contains(in, "body") {
		fields = append(fields, searchWords(is.Body))
	}
	for _, term := range sq.terms {
		if !slices.ContainsFunc(fields, func(f []string) bool { return containsRun(f, term) }) {
			return false
		}
	}
	return true
}

type searchHit struct {
	r  *repo
	id int64
	Issue
}

// searchIssues answers GET /search/issues. Results are what the index
// held searchLag ago.
func (s *Server) searchIssues(q request) answer {
	query := q.URL.Query()
	raw, ok := query["q"]
	if !ok || strings.TrimSpace(raw[0]) == "" {
		return errAnswer(validationFailed(docSearchV3, FieldError{Resource: "Search", Field: "q", Code: "missing"}))
	}
	sq, apiErr := parseSearch(raw[0])
	if apiErr != nil {
		return errAnswer(apiErr)
	}
	perPage, page := paging(query)
	if (page-1)*perPage >= MaxSearchResults {
		return errAnswer(newError(http.StatusUnprocessableEntity, MsgSearchFirst1000, docSearchV3))
	}
	sortBy, order := query.Get("sort"), cmpOr(query.Get("order"), "desc")
	if sortBy != "" {
		if apiErr := oneOf("sort", sortBy, docSearchIssues, "comments", "reactions", "reactions-+1", "reactions--1",
			"reactions-smile", "reactions-thinking_face", "reactions-heart", "reactions-tada", "interactions", "created", "updated"); apiErr != nil {
			return errAnswer(apiErr)
		}
	}
	if apiErr := oneOf("order", order, docSearchIssues, "asc", "desc"); apiErr != nil {
		return errAnswer(apiErr)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	repos, apiErr := s.searchReposLocked(q, sq.repos)
	if apiErr != nil {
		return errAnswer(apiErr)
	}
	horizon := s.now().Add(-s.searchLag)
	var hits []searchHit
	for _, r := range repos {
		if r.issuesOff {
			continue
		}
		for _, is := range r.issues {
			v, ok := indexed(is, horizon)
			if ok && !v.Deleted && sq.matches(v) {
				hits = append(hits, searchHit{r: r, id: is.id, Issue: v})
			}
		}
	}
	// The fake has no relevance: best match orders newest first.
	slices.SortStableFunc(hits, func(a, b searchHit) int {
		ka, kb := a.CreatedAt, b.CreatedAt
		if sortBy == "updated" {
			ka, kb = a.UpdatedAt, b.UpdatedAt
		}
		c := ka.Compare(kb)
		if c == 0 {
			c = cmp.Compare(a.id, b.id)
		}
		if order == "desc" {
			c = -c
		}
		return c
	})
	total := len(hits)
	visible := hits[:min(total, MaxSearchResults)]
	from, to := pageOf(len(visible), page, perPage)
	out := SearchJSON{TotalCount: total, Items: make([]IssueJSON, 0, to-from)}
	score := 1.0
	for _, h := range visible[from:to] {
		item := s.issueJSONLocked(h.r, h.id, h.Issue)
		item.Score = &score
		out.Items = append(out.Items, item)
	}
	a := answer{status: http.StatusOK, body: out}
	if link := s.linkHeader(q.Request, page, perPage, len(visible)); link != "" {
		a.header = http.Header{"Link": {link}}
	}
	return a
}

// indexed is the version of an issue the search index held at horizon.
func indexed(is *issue, horizon time.Time) (Issue, bool) {
	for i := len(is.versions) - 1; i >= 0; i-- {
		if !is.versions[i].at.After(horizon) {
			return is.versions[i].Issue, true
		}
	}
	return Issue{}, false
}

// searchReposLocked is the repositories a search covers: those its repo:
// qualifiers name and the token may read, or every one it may read. When
// every named one is hidden, GitHub refuses the search; when only some
// are, it leaves them out silently.
func (s *Server) searchReposLocked(q request, named []string) ([]*repo, *apiError) {
	tok := s.tokens[bearer(q.Request)]
	readable := func(key string, r *repo) bool {
		if r == nil {
			return false
		}
		_, granted := tok.grants[key]
		return r.public || granted
	}
	var out []*repo
	if len(named) == 0 {
		for key, r := range s.repos {
			if readable(key, r) {
				out = append(out, r)
			}
		}
		slices.SortFunc(out, func(a, b *repo) int { return cmp.Compare(a.id, b.id) })
		return out, nil
	}
	for _, n := range named {
		key := strings.ToLower(n)
		if r := s.repos[key]; readable(key, r) && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, validationFailed(docSearchV3, FieldError{Resource: "Search", Field: "q", Code: "invalid", Message: MsgSearchCannotSearch})
	}
	return out, nil
}
