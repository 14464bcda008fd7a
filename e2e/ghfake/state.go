package ghfake

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"switchboard/internal/testkit"
)

// Grant is a token's access to one repository ("owner/name").
type Grant struct {
	Repo  string
	Write bool // issues: write (and push, for labels and assignees)
}

// Read grants reading a repository's issues and labels.
func Read(repo string) Grant { return Grant{Repo: repo} }

// Write grants reading and writing a repository's issues and labels.
func Write(repo string) Grant { return Grant{Repo: repo, Write: true} }

// RepoOption configures a repository made by AddRepo.
type RepoOption func(*repo)

// Public makes the repository public: any token may read it (a
// fine-grained token still writes only where granted). Repositories are
// private unless made public, so a token without a grant sees 404.
func Public() RepoOption { return func(r *repo) { r.public = true } }

// IssuesDisabled turns the repository's issues off: creating, reading and
// listing them answers 410 Gone.
func IssuesDisabled() RepoOption { return func(r *repo) { r.issuesOff = true } }

// Archived makes the repository archived: read-only, so every write
// (an issue, a label, an edit) answers GitHub's 403 "Repository was
// archived so is read-only." while reads go on as before.
func Archived() RepoOption { return func(r *repo) { r.archived = true } }

type repo struct {
	id          int64
	owner, name string
	public      bool
	issuesOff   bool
	archived    bool
	collabs     map[string]bool // lower-case logins with push access
	labels      []*label
	issues      []*issue     // by number - 1
	refusal     []FieldError // what every new issue is refused with (RefuseIssues)
}

func (r *repo) fullName() string { return r.owner + "/" + r.name }

func (r *repo) label(name string) *label {
	for _, l := range r.labels {
		if strings.EqualFold(l.Name, name) {
			return l
		}
	}
	return nil
}

type label struct {
	ID          int64
	Name        string
	Color       string
	Description string
}

// Label is a repository's label as the fake holds it.
type Label struct {
	Name        string
	Color       string // six hex digits, no '#'
	Description string
}

type tokenState struct {
	login   string
	grants  map[string]bool // lower-case "owner/name" → may write
	revoked bool
}

// account is a GitHub user: the rate limits are theirs, shared by all
// their tokens.
type account struct {
	id     int64
	login  string
	core   window
	search window
	// holdUntil is the earliest time GitHub told this user to come back
	// (Retry-After or X-RateLimit-Reset); a request before it is early.
	holdUntil time.Time
	// created holds when content-creating requests took effect, for the
	// content limits.
	created []time.Time
}

// Issue is an issue as the fake holds it.
type Issue struct {
	Repo        string // "owner/name"
	Number      int
	Title       string
	Body        string
	State       string // "open" or "closed"
	StateReason string // "", "completed", "not_planned", "reopened"
	Labels      []string
	Assignees   []string
	Author      string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	ClosedAt    time.Time // zero while open
	Deleted     bool
}

type issue struct {
	id int64
	Issue
	// versions are what the search index holds, oldest first: GitHub
	// indexes a change some time after it happens (WithSearchLag).
	versions []version
}

type version struct {
	at time.Time
	Issue
}

func (i *issue) snapshot() Issue {
	c := i.Issue
	c.Labels = slices.Clone(i.Labels)
	c.Assignees = slices.Clone(i.Assignees)
	return c
}

// touchLocked records a change at now for the search index.
func (i *issue) touchLocked(now time.Time) {
	i.versions = append(i.versions, version{at: now, Issue: i.snapshot()})
}

// AddRepo creates a repository "owner/name". It panics on a malformed or
// duplicate name: the mistake is in the test.
func (s *Server) AddRepo(fullName string, opts ...RepoOption) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		panic(fmt.Sprintf("ghfake: repository %q is not owner/name", fullName))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(fullName)
	if _, dup := s.repos[key]; dup {
		panic(fmt.Sprintf("ghfake: repository %q exists", fullName))
	}
	s.nextID++
	r := &repo{id: s.nextID, owner: owner, name: name, collabs: map[string]bool{}}
	for _, o := range opts {
		o(r)
	}
	s.accountLocked(owner)
	s.repos[key] = r
	s.hub.NotifyLocked()
}

// DeleteRepo removes a repository; every request to it answers 404 after.
func (s *Server) DeleteRepo(fullName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.repos, strings.ToLower(fullName))
	s.hub.NotifyLocked()
}

// SetIssuesEnabled turns a repository's issues on or off.
func (s *Server) SetIssuesEnabled(fullName string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepoLocked(fullName).issuesOff = !on
	s.hub.NotifyLocked()
}

// SetArchived archives a repository or brings it back (see Archived).
func (s *Server) SetArchived(fullName string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepoLocked(fullName).archived = on
	s.hub.NotifyLocked()
}

// RefuseIssues makes the repository refuse every new issue with GitHub's
// 422 Validation Failed carrying errs (beside whatever else the request
// gets wrong), until it is called again without any: a refusal of the
// issue's content the fake does not model itself (a label GitHub will not
// take, a rule of the repository). Nothing is filed meanwhile.
func (s *Server) RefuseIssues(fullName string, errs ...FieldError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustRepoLocked(fullName).refusal = slices.Clone(errs)
	s.hub.NotifyLocked()
}

// AddCollaborator gives login push access to the repository, which makes
// it assignable. The owner is always assignable.
func (s *Server) AddCollaborator(fullName, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accountLocked(login)
	s.mustRepoLocked(fullName).collabs[strings.ToLower(login)] = true
}

// AddUser registers a GitHub user who is no collaborator anywhere: a
// login that exists but cannot be assigned.
func (s *Server) AddUser(login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accountLocked(login)
}

// AddToken registers a fine-grained personal access token acting as login,
// with access to the granted repositories. A write grant makes login a
// collaborator there, since only they can grant it.
func (s *Server) AddToken(token, login string, grants ...Grant) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accountLocked(login)
	t := &tokenState{login: login, grants: map[string]bool{}}
	for _, g := range grants {
		key := strings.ToLower(g.Repo)
		t.grants[key] = t.grants[key] || g.Write
		if r := s.repos[key]; r != nil && g.Write {
			r.collabs[strings.ToLower(login)] = true
		}
	}
	s.tokens[token] = t
}

// RevokeToken makes every later request with token answer 401 Bad
// credentials, as a revoked or expired token does.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.tokens[token]; t != nil {
		t.revoked = true
	}
}

// AddLabel creates a label as someone on GitHub's side would.
func (s *Server) AddLabel(fullName string, l Label) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepoLocked(fullName)
	if l.Color == "" {
		l.Color = defaultLabelColor
	}
	s.nextID++
	r.labels = append(r.labels, &label{ID: s.nextID, Name: l.Name, Color: l.Color, Description: l.Description})
	s.hub.NotifyLocked()
}

// Labels returns a repository's labels in creation order.
func (s *Server) Labels(fullName string) []Label {
	s.mu.Lock()
	defer s.mu.Unlock()
	return testkit.Map(s.mustRepoLocked(fullName).labels, func(l *label) Label {
		return Label{Name: l.Name, Color: l.Color, Description: l.Description}
	})
}

// AddIssue files an issue as someone on GitHub's side (in.Author, default
// the owner) would; Number, times and state are set by the fake unless
// given. It returns the issue as stored.
func (s *Server) AddIssue(fullName string, in Issue) Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.mustRepoLocked(fullName)
	if in.Author == "" {
		in.Author = r.owner
	}
	for _, name := range in.Labels {
		s.ensureLabelLocked(r, name)
	}
	return s.fileIssueLocked(r, in).snapshot()
}

// fileIssueLocked stores a new issue with the next number.
func (s *Server) fileIssueLocked(r *repo, in Issue) *issue {
	now := s.now().UTC().Truncate(time.Second)
	s.nextID++
	in.Repo = r.fullName()
	in.Number = len(r.issues) + 1
	if in.State == "" {
		in.State = "open"
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = now
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	if in.State == "closed" && in.ClosedAt.IsZero() {
		in.ClosedAt = in.UpdatedAt
	}
	in.Labels = slices.Clone(in.Labels)
	in.Assignees = slices.Clone(in.Assignees)
	is := &issue{id: s.nextID, Issue: in}
	is.touchLocked(s.now())
	r.issues = append(r.issues, is)
	s.hub.NotifyLocked()
	return is
}

// ensureLabelLocked returns the label called name, creating it with
// GitHub's grey when missing.
func (s *Server) ensureLabelLocked(r *repo, name string) *label {
	if l := r.label(name); l != nil {
		return l
	}
	s.nextID++
	l := &label{ID: s.nextID, Name: name, Color: defaultLabelColor}
	r.labels = append(r.labels, l)
	return l
}

// defaultLabelColor is the grey GitHub gives a label made without one.
const defaultLabelColor = "ededed"

// CloseIssue closes an issue from GitHub's side (a person on the web),
// with reason "completed" or "not_planned" ("" means completed).
func (s *Server) CloseIssue(fullName string, number int, reason string) {
	if reason == "" {
		reason = "completed"
	}
	s.setIssueState(fullName, number, "closed", reason)
}

// ReopenIssue reopens an issue from GitHub's side.
func (s *Server) ReopenIssue(fullName string, number int) {
	s.setIssueState(fullName, number, "open", "reopened")
}

func (s *Server) setIssueState(fullName string, number int, state, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.mustIssueLocked(fullName, number)
	s.applyStateLocked(is, state, reason)
	is.UpdatedAt = s.now().UTC().Truncate(time.Second)
	is.touchLocked(s.now())
	s.hub.NotifyLocked()
}

// applyStateLocked moves an issue between open and closed; closed_at is
// kept only while closed, as on GitHub.
func (s *Server) applyStateLocked(is *issue, state, reason string) {
	now := s.now().UTC().Truncate(time.Second)
	switch {
	case state == "closed" && is.State != "closed":
		is.ClosedAt = now
		if reason == "" {
			reason = "completed"
		}
	case state == "open" && is.State != "open":
		is.ClosedAt = time.Time{}
		if reason == "" {
			reason = "reopened"
		}
	}
	if reason != "" {
		is.StateReason = reason
	}
	is.State = state
}

// DeleteIssue deletes an issue as an admin would on the web: reading it
// answers 410 "This issue was deleted", and it leaves lists and search.
func (s *Server) DeleteIssue(fullName string, number int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.mustIssueLocked(fullName, number)
	is.Deleted = true
	is.touchLocked(s.now())
	s.hub.NotifyLocked()
}

// Issues returns a repository's issues, deleted ones included, by number.
func (s *Server) Issues(fullName string) []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return testkit.Map(s.mustRepoLocked(fullName).issues, (*issue).snapshot)
}

// Issue returns one issue.
func (s *Server) Issue(fullName string, number int) (Issue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[strings.ToLower(fullName)]
	if r == nil || number < 1 || number > len(r.issues) {
		return Issue{}, false
	}
	return r.issues[number-1].snapshot(), true
}

func (s *Server) mustRepoLocked(fullName string) *repo {
	r := s.repos[strings.ToLower(fullName)]
	if r == nil {
		panic(fmt.Sprintf("ghfake: no repository %q", fullName))
	}
	return r
}

func (s *Server) mustIssueLocked(fullName string, number int) *issue {
	r := s.mustRepoLocked(fullName)
	if number < 1 || number > len(r.issues) {
		panic(fmt.Sprintf("ghfake: no issue %s#%d", fullName, number))
	}
	return r.issues[number-1]
}

// accountLocked returns the user called login, registering it.
func (s *Server) accountLocked(login string) *account {
	key := strings.ToLower(login)
	if a := s.accounts[key]; a != nil {
		return a
	}
	s.nextUserID++
	a := &account{id: s.nextUserID, login: login}
	s.accounts[key] = a
	return a
}
