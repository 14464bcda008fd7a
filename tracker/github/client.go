package github

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchboard/domain"
	"switchboard/domain/tasks"
	"switchboard/tracker"
)

// DefaultURL is GitHub's API root.
const DefaultURL = "https://api.github.com"

// APIVersion is the REST API version the Client is written against; it is
// sent with every request so that a newer default cannot change answers
// under us.
const APIVersion = "2022-11-28"

// DefaultTimeout bounds a request when Config.HTTP is nil.
const DefaultTimeout = 30 * time.Second

// maxAnswer caps a successful answer: a page of 100 issues with bodies of
// GitHub's largest size is about 26 MiB in the worst case of 4-byte runes.
const maxAnswer = 32 << 20

// Config configures New.
type Config struct {
	// URL is the API root; "" means DefaultURL. GitHub Enterprise Server's
	// is https://HOST/api/v3.
	URL string
	// Token is a personal access token (fine-grained: issues read and
	// write on the repositories) or an installation token. Required.
	Token string
	// HTTP is used as given; nil means a client with DefaultTimeout.
	HTTP *http.Client
	// Login is the token's user, whose issues Find lists; "" learns it
	// from GET /user on first use.
	Login string
	// UserAgent is sent with every request, as GitHub requires; "" means
	// "switchboard".
	UserAgent string
	// Now is the clock Retry-After is counted from and the local hold is
	// read on; nil means time.Now.
	Now func() time.Time
}

// Client files tasks into GitHub repositories' issues. It is safe for
// concurrent use.
type Client struct {
	base  string
	token string
	hc    *http.Client
	ua    string
	now   func() time.Time

	mu     sync.Mutex
	login  string
	labels map[string]bool // "owner/repo\x00label" known to exist
	// open caches each repository's pages of open issues with their
	// ETags (Open): a cache, which a restart only makes cost requests.
	open map[string][]openPage
	// hold is the RateLimited GitHub last gave; nothing is sent before its
	// Until.
	hold *tasks.RateLimited
}

var (
	_ tasks.Tracker = (*Client)(nil)
	_ tasks.Lister  = (*Client)(nil)
	_ tasks.Syncer  = (*Client)(nil)
)

// New validates cfg and builds a Client. It does not contact GitHub.
func New(cfg Config) (*Client, error) {
	base := strings.TrimRight(cmp.Or(strings.TrimSpace(cfg.URL), DefaultURL), "/")
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("github: Config.URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("github: Config.URL %q: want http(s)://host[/path] without query or credentials", cfg.URL)
	}
	if strings.TrimSpace(cfg.Token) == "" {
		return nil, errors.New("github: Config.Token is empty")
	}
	// Caught here: net/http would refuse the header per request, which
	// would then look like a transient failure.
	if strings.ContainsAny(cfg.Token, "\r\n\x00 ") {
		return nil, errors.New("github: Config.Token contains a space or control character")
	}
	ua := cmp.Or(strings.TrimSpace(cfg.UserAgent), "switchboard")
	if strings.ContainsAny(ua, "\r\n\x00") {
		return nil, errors.New("github: Config.UserAgent contains a control character")
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Client{
		base: base, token: cfg.Token, hc: hc, ua: ua, now: now,
		login: strings.TrimSpace(cfg.Login), labels: map[string]bool{}, open: map[string][]openPage{},
	}, nil
}

// Error is GitHub's answer to one request that was not a success, or a
// request that got no answer. It unwraps to what the worker acts on
// (tasks.ErrAccess, tasks.ErrGone, *tasks.RateLimited) or, for a
// transient failure, to the cause if there is one.
type Error struct {
	Method, Path string
	Status       int    // 0 when no answer came
	Message      string // GitHub's message, or the start of a body that was not its JSON
	Err          error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "github %s %s", e.Method, e.Path)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d", e.Status)
	}
	if e.Message != "" {
		b.WriteString(" " + strconv.Quote(e.Message))
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// fieldError is one of a 422's errors: what about which field.
type fieldError struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Code     string `json:"code"`
	Value    any    `json:"value"`
	Message  string `json:"message"`
}

// errorBody is GitHub's error document.
type errorBody struct {
	Message string       `json:"message"`
	Errors  []fieldError `json:"errors"`
}

// said is the document's message with what each of a 422's errors says:
// "Validation Failed" alone tells an admin nothing of what to fix.
func (eb errorBody) said() string {
	var parts []string
	for _, fe := range eb.Errors {
		if d := fe.said(); d != "" {
			parts = append(parts, d)
		}
	}
	if len(parts) == 0 {
		return eb.Message
	}
	return eb.Message + ": " + strings.Join(parts, "; ")
}

// said is one error as GitHub words it, or where it gives no words (most
// codes but custom), the field, the code and the value refused.
func (fe fieldError) said() string {
	if m := strings.TrimSpace(fe.Message); m != "" {
		return m
	}
	s := strings.Join(strings.Fields(fe.Resource+" "+fe.Field+" "+fe.Code), " ")
	if fe.Value != nil {
		if v := strings.TrimSpace(fmt.Sprint(fe.Value)); v != "" {
			s += " (" + v + ")"
		}
	}
	return s
}

// answer is a response read whole: status, headers, body.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// do sends one request and returns its answer if its status is one of
// want; any other status becomes an *Error. A nil in is no body.
func (c *Client) do(ctx context.Context, method, path string, in any, header http.Header, want ...int) (answer, error) {
	fail := func(status int, msg string, err error) (answer, error) {
		return answer{}, &Error{Method: method, Path: pathOnly(path), Status: status, Message: msg, Err: err}
	}
	if err := c.held(); err != nil {
		return fail(0, "not sent", err)
	}
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fail(0, "", err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return fail(0, "", err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", APIVersion)
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		// url.Error names the URL, which holds no secret: the token goes
		// in a header only.
		return fail(0, "", err)
	}
	defer resp.Body.Close()
	for _, s := range want {
		if resp.StatusCode != s {
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		if err != nil {
			return fail(resp.StatusCode, "reading the answer", err)
		}
		return answer{status: resp.StatusCode, header: resp.Header, body: clean(raw)}, nil
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	raw = clean(raw)
	var eb errorBody
	msg, said := "", ""
	if json.Unmarshal(raw, &eb) == nil && eb.Message != "" {
		msg, said = eb.Message, domain.CleanText(eb.said())
	} else {
		msg = tracker.ErrorText(bytes.NewReader(raw))
		said = msg
	}
	kind := c.classify(resp.StatusCode, resp.Header, msg, said)
	e := &Error{Method: method, Path: pathOnly(path), Status: resp.StatusCode, Message: tracker.Clip(said, 300), Err: kind}
	return answer{status: resp.StatusCode, header: resp.Header, body: raw}, e
}

// clean makes an answer what PostgreSQL can hold once decoded (a NUL in
// an issue's title, bytes that are not UTF-8 from a proxy become U+FFFD):
// its titles, URLs and messages are stored, and a write refused for what
// they hold would be retried at every push for ever.
func clean(raw []byte) []byte {
	out, _ := domain.CleanJSON(raw)
	return out
}

// pathOnly drops the query: an error names the endpoint, and the query
// (paging, the login) adds nothing a reader needs.
func pathOnly(p string) string {
	path, _, _ := strings.Cut(p, "?")
	return path
}

var (
	secondaryMsg = regexp.MustCompile(`(?i)secondary rate limit|abuse detection`)
	primaryMsg   = regexp.MustCompile(`(?i)api rate limit exceeded`)
	// archivedMsg is GitHub's 403 to a write in an archived repository:
	// "Repository was archived so is read-only."
	archivedMsg = regexp.MustCompile(`(?i)\barchived\b`)
	// tooQuicklyMsg is GitHub's content-creation throttle worded as a
	// validation error ("was submitted too quickly"): a limit, which
	// passes, not something wrong with the task.
	tooQuicklyMsg = regexp.MustCompile(`(?i)submitted too quickly`)
)

// classify maps a refusal to what the worker acts on, nil for transient,
// and holds the Client when it is a limit. msg is GitHub's message, said
// the message with its errors' words.
func (c *Client) classify(status int, h http.Header, msg, said string) error {
	now := c.now()
	switch status {
	case http.StatusUnauthorized:
		return tasks.ErrAccess
	case http.StatusNotFound:
		return fmt.Errorf("repository or issue not found, or the token cannot see it: %w", tasks.ErrGone)
	case http.StatusGone:
		// The repository's issues are off (or one issue deleted): the
		// destination's, whatever the task holds, so gone, not refused.
		return fmt.Errorf("%s: %w", cmp.Or(msg, "gone"), tasks.ErrGone)
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		// About the request itself: sent again, it is refused again.
		if !tooQuicklyMsg.MatchString(said) {
			return tasks.ErrRefused
		}
	case http.StatusForbidden, http.StatusTooManyRequests:
	default:
		return nil
	}
	var reset time.Time
	exhausted := h.Get("X-RateLimit-Remaining") == "0"
	if epoch, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		reset = time.Unix(epoch, 0)
	}
	retry, hasRetry := tracker.RetryAfter(h, now)
	var rl *tasks.RateLimited
	switch {
	case hasRetry || secondaryMsg.MatchString(msg) || tooQuicklyMsg.MatchString(said):
		if !hasRetry {
			retry = now.Add(tracker.DefaultRetryAfter)
		}
		// GitHub's guidance: with Retry-After wait that long; with the
		// primary limit spent as well, until its reset too.
		if exhausted && reset.After(retry) {
			retry = reset
		}
		rl = &tasks.RateLimited{Until: retry, Secondary: true}
	case exhausted || primaryMsg.MatchString(msg):
		if reset.IsZero() {
			reset = now.Add(tracker.DefaultRetryAfter)
		}
		rl = &tasks.RateLimited{Until: reset}
	case status == http.StatusTooManyRequests:
		rl = &tasks.RateLimited{Until: now.Add(tracker.DefaultRetryAfter), Secondary: true}
	case archivedMsg.MatchString(msg):
		// Our token is fine, this one repository takes no writes: as
		// ErrAccess it would hold every destination's pushes and send the
		// admins to check the token; as gone only its own wait, and they
		// are told to pick another destination or unarchive it.
		return fmt.Errorf("repository archived, read-only: %w", tasks.ErrGone)
	default:
		return tasks.ErrAccess
	}
	c.mu.Lock()
	if c.hold == nil || rl.Until.After(c.hold.Until) {
		c.hold = rl
	}
	c.mu.Unlock()
	return rl
}

// held is the RateLimited still in force, if any.
func (c *Client) held() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold == nil {
		return nil
	}
	if !c.now().Before(c.hold.Until) {
		c.hold = nil
		return nil
	}
	rl := *c.hold
	return &rl
}

// repoPath checks a target and returns its API path "/repos/owner/repo".
func repoPath(target string) (string, error) {
	owner, name, ok := strings.Cut(strings.TrimSpace(target), "/")
	if !ok || !validOwner.MatchString(owner) || !validRepo.MatchString(name) || name == "." || name == ".." {
		return "", fmt.Errorf("github: target %q is not owner/repo: %w", target, tasks.ErrGone)
	}
	return "/repos/" + owner + "/" + name, nil
}

// GitHub's names: an owner of letters, digits and hyphens; a repository
// of those, '.' and '_'. Checked so that a target cannot reach another
// endpoint through '/', '?' or "..".
var (
	validOwner = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)
	validRepo  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// user learns the token's login once.
func (c *Client) user(ctx context.Context) (string, error) {
	c.mu.Lock()
	login := c.login
	c.mu.Unlock()
	if login != "" {
		return login, nil
	}
	a, err := c.do(ctx, http.MethodGet, "/user", nil, nil, http.StatusOK)
	if err != nil {
		return "", err
	}
	var u struct {
		Login string `json:"login"`
	}
	if err := json.Unmarshal(a.body, &u); err != nil || u.Login == "" {
		return "", &Error{Method: http.MethodGet, Path: "/user", Status: a.status, Message: "no login in the answer", Err: err}
	}
	c.mu.Lock()
	c.login = u.Login
	c.mu.Unlock()
	return u.Login, nil
}
