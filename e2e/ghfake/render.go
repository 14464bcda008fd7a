package ghfake

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// htmlRoot is where html_url points, as on github.com; nothing is served
// there.
const htmlRoot = "https://github.com"

// UserJSON is GitHub's simple user.
type UserJSON struct {
	Login     string `json:"login"`
	ID        int64  `json:"id"`
	NodeID    string `json:"node_id"`
	URL       string `json:"url"`
	HTMLURL   string `json:"html_url"`
	Type      string `json:"type"`
	SiteAdmin bool   `json:"site_admin"`
}

// LabelJSON is GitHub's label.
type LabelJSON struct {
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	Color       string  `json:"color"`
	Default     bool    `json:"default"`
	Description *string `json:"description"`
}

// IssueJSON is GitHub's issue, with the fields a client reads.
type IssueJSON struct {
	ID                int64       `json:"id"`
	NodeID            string      `json:"node_id"`
	URL               string      `json:"url"`
	RepositoryURL     string      `json:"repository_url"`
	LabelsURL         string      `json:"labels_url"`
	CommentsURL       string      `json:"comments_url"`
	EventsURL         string      `json:"events_url"`
	HTMLURL           string      `json:"html_url"`
	Number            int         `json:"number"`
	State             string      `json:"state"`
	StateReason       *string     `json:"state_reason"`
	Title             string      `json:"title"`
	Body              *string     `json:"body"`
	User              UserJSON    `json:"user"`
	Labels            []LabelJSON `json:"labels"`
	Assignee          *UserJSON   `json:"assignee"`
	Assignees         []UserJSON  `json:"assignees"`
	Milestone         any         `json:"milestone"`
	Locked            bool        `json:"locked"`
	Comments          int         `json:"comments"`
	CreatedAt         string      `json:"created_at"`
	UpdatedAt         string      `json:"updated_at"`
	ClosedAt          *string     `json:"closed_at"`
	AuthorAssociation string      `json:"author_association"`
	// Score is set in search results only.
	Score *float64 `json:"score,omitempty"`
}

// SearchJSON is the answer of GET /search/issues.
type SearchJSON struct {
	TotalCount        int         `json:"total_count"`
	IncompleteResults bool        `json:"incomplete_results"`
	Items             []IssueJSON `json:"items"`
}

func nodeID(kind string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s:%d", kind, id)))
}

func ghTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Server) userJSONLocked(login string) UserJSON {
	a := s.accountLocked(login)
	return UserJSON{
		Login: a.login, ID: a.id, NodeID: nodeID("User", a.id),
		URL: s.URL() + "/users/" + url.PathEscape(a.login), HTMLURL: htmlRoot + "/" + a.login,
		Type: "User",
	}
}

func (s *Server) labelJSON(r *repo, l *label) LabelJSON {
	return LabelJSON{
		ID: l.ID, NodeID: nodeID("Label", l.ID),
		URL:  s.repoURL(r) + "/labels/" + url.PathEscape(l.Name),
		Name: l.Name, Color: l.Color, Description: strPtr(l.Description),
	}
}

func (s *Server) repoURL(r *repo) string {
	return s.URL() + "/repos/" + r.owner + "/" + r.name
}

// issueJSONLocked renders an issue (or one of its indexed versions).
func (s *Server) issueJSONLocked(r *repo, id int64, is Issue) IssueJSON {
	base := s.repoURL(r) + "/issues/" + strconv.Itoa(is.Number)
	out := IssueJSON{
		ID: id, NodeID: nodeID("Issue", id), URL: base, RepositoryURL: s.repoURL(r),
		LabelsURL: base + "/labels{/name}", CommentsURL: base + "/comments", EventsURL: base + "/events",
		HTMLURL: htmlRoot + "/" + r.fullName() + "/issues/" + strconv.Itoa(is.Number),
		Number:  is.Number, State: is.State, StateReason: strPtr(is.StateReason),
		Title: is.Title, Body: strPtr(is.Body), User: s.userJSONLocked(is.Author),
		Labels: []LabelJSON{}, Assignees: []UserJSON{},
		CreatedAt: ghTime(is.CreatedAt), UpdatedAt: ghTime(is.UpdatedAt),
		AuthorAssociation: "NONE",
	}
	if r.canPush(is.Author) {
		out.AuthorAssociation = "COLLABORATOR"
		if is.Author == r.owner {
			out.AuthorAssociation = "OWNER"
		}
	}
	for _, name := range is.Labels {
		if l := r.label(name); l != nil {
			out.Labels = append(out.Labels, s.labelJSON(r, l))
		}
	}
	for _, login := range is.Assignees {
		out.Assignees = append(out.Assignees, s.userJSONLocked(login))
	}
	if len(out.Assignees) > 0 {
		first := out.Assignees[0]
		out.Assignee = &first
	}
	if !is.ClosedAt.IsZero() {
		c := ghTime(is.ClosedAt)
		out.ClosedAt = &c
	}
	return out
}

// authenticatedUser answers GET /user with the token's user. GitHub's
// private user holds far more (plan, e-mail, counts); a client needs the
// login.
func (s *Server) authenticatedUser(req request) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return answer{status: http.StatusOK, body: s.userJSONLocked(req.login)}
}
