package ghfake

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"switchboard/e2e/internal/settle"
	"switchboard/internal/testkit"
)

// StatusClientClosedRequest is logged (nginx's convention) for a request
// whose client gave up while the fake held it (HangNext); nothing is sent.
const StatusClientClosedRequest = 499

// APIVersion is the REST API version the fake answers as; requests may
// name it, or the newer SupportedAPIVersions, in X-GitHub-Api-Version.
const APIVersion = "2022-11-28"

// SupportedAPIVersions are the versions X-GitHub-Api-Version may name.
var SupportedAPIVersions = []string{"2022-11-28", "2026-03-10"}

// maxBody bounds request bodies: GitHub's own bounds (65536 characters of
// issue body) are far below it.
const maxBody = 1 << 20

// Server is a fake GitHub REST API. All methods are safe for concurrent
// use, also while requests are in flight.
type Server struct {
	http        *httptest.Server
	now         func() time.Time
	waitTimeout time.Duration

	mu sync.Mutex
	// hub wakes the waiters on every change a test may wait on, and
	// releases them (and held requests) when the server closes.
	hub *settle.Hub

	repos      map[string]*repo // by lower-case "owner/name"
	tokens     map[string]*tokenState
	accounts   map[string]*account // by lower-case login
	nextID     int64               // ids of repos, issues and labels
	nextUserID int64
	nextReqID  int

	limits        Limits
	refuseStatus  int // 403 or 429, for the primary and secondary limits
	secondaryTill time.Time
	refuseLabels  bool    // unknown labels on a new issue are refused, not created
	timeScale     float64 // the limits' periods are divided by it (WithTimeScale)
	searchLag     time.Duration
	faults        testkit.Faults[Fault]

	log []Request
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the server's clock (default time.Now): rate-limit
// windows, Retry-After, holds and timestamps read it, so a test can pass
// an hour without sleeping. Waiting (WaitFor, HangNext) runs on real time.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithWaitTimeout sets how long the Wait* helpers wait (default 10s).
func WithWaitTimeout(d time.Duration) Option { return func(s *Server) { s.waitTimeout = d } }

// WithLimits replaces the rate limits (default DefaultLimits()).
func WithLimits(l Limits) Option { return func(s *Server) { s.limits = l } }

// WithRateLimitStatus makes limit refusals answer status (403, GitHub's
// usual answer, or 429, which the docs allow for both limits).
func WithRateLimitStatus(status int) Option { return func(s *Server) { s.refuseStatus = status } }

// WithSearchLag makes a change reach search results d after it happens,
// as GitHub's index does; the REST reads see it at once.
func WithSearchLag(d time.Duration) Option { return func(s *Server) { s.searchLag = d } }

// WithTimeScale makes the rate limits' periods k times shorter: the
// minute lasts 60s/k and the hour 3600s/k, so that a run that GitHub's
// hourly limits would hold for hours takes minutes, at the limits' counts.
// Everything else stays real time: X-RateLimit-Reset is the epoch second
// the shortened window ends, and Retry-After the real seconds until the
// user may come back, rounded up to whole seconds as HTTP requires (a
// wait of 0.2 s says 1). TripSecondaryLimit's duration is real time too.
// It panics unless k is positive.
func WithTimeScale(k float64) Option {
	if !(k > 0) {
		panic(fmt.Sprintf("ghfake: time scale %v is not positive", k))
	}
	return func(s *Server) { s.timeScale = k }
}

// RefuseUnknownLabels makes creating an issue with a label the repository
// lacks answer 422 instead of creating the label; see the package doc.
func RefuseUnknownLabels() Option { return func(s *Server) { s.refuseLabels = true } }

// NewOnClock is New on a clock the test moves by hand, started at
// 2026-03-01 12:00 UTC, with repo in it and token writing there as login:
// how a test of the fake or of a client against it starts.
func NewOnClock(t testing.TB, repo, token, login string, opts ...Option) (*Server, *clockwork.FakeClock) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	srv := New(t, append([]Option{WithClock(clk.Now)}, opts...)...)
	srv.AddRepo(repo)
	srv.AddToken(token, login, Write(repo))
	return srv, clk
}

// New starts a fake GitHub API on 127.0.0.1, closed when the test ends; if
// the test failed, the request log is printed.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := Start(opts...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("ghfake: requests:\n%s", s.RequestLog())
		}
		s.Close()
	})
	return s
}

// Start starts a fake GitHub API on 127.0.0.1 for a program that is no
// test (the bench); the caller closes it.
func Start(opts ...Option) *Server {
	s := &Server{
		now:          time.Now,
		waitTimeout:  10 * time.Second,
		repos:        map[string]*repo{},
		tokens:       map[string]*tokenState{},
		accounts:     map[string]*account{},
		limits:       DefaultLimits(),
		refuseStatus: http.StatusForbidden,
		nextUserID:   9000000,
		timeScale:    1,
	}
	s.hub = settle.NewHub(&s.mu)
	for _, o := range opts {
		o(s)
	}
	s.http = httptest.NewServer(s)
	return s
}

// URL is the API root, e.g. "http://127.0.0.1:34567"; it takes the place
// of https://api.github.com.
func (s *Server) URL() string { return s.http.URL }

// Close releases held requests and stops the server. Safe to call twice.
func (s *Server) Close() { s.hub.Close(s.http.Close) }

// Request is one request as the fake saw it and answered it.
type Request struct {
	ID       string // X-GitHub-Request-Id of the answer
	Method   string
	Path     string
	Query    url.Values
	Header   http.Header
	Body     []byte
	Login    string // the token's user; "" if it had none that worked
	Resource string // "core", "search" or "" (not counted)
	Status   int
	At       time.Time
	// Early: the request came while GitHub had told its user to wait
	// (Retry-After of a secondary limit, X-RateLimit-Reset of an
	// exhausted primary limit).
	Early bool
	// Fault: the answer was an injected fault, not the API's.
	Fault bool
}

func (r Request) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", r.At.Format("15:04:05.000"), r.Method, r.Path)
	if len(r.Query) > 0 {
		b.WriteString("?" + r.Query.Encode())
	}
	fmt.Fprintf(&b, " -> %d", r.Status)
	if r.Early {
		b.WriteString(" [early]")
	}
	if r.Fault {
		b.WriteString(" [fault]")
	}
	if len(r.Body) > 0 {
		body := string(r.Body)
		if len(body) > 200 {
			body = body[:200] + "…"
		}
		b.WriteString(" " + body)
	}
	return b.String()
}

// Requests returns every request answered so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// EarlyRequests returns the requests that came while their user had been
// told to wait. A client that honours Retry-After and X-RateLimit-Reset
// has none.
func (s *Server) EarlyRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Early {
			out = append(out, r)
		}
	}
	return out
}

// RequestLog renders the requests one per line.
func (s *Server) RequestLog() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// answer is what a handler returns: a status and a JSON document, or an
// apiError.
type answer struct {
	status int
	body   any
	header http.Header
}

// ServeHTTP answers one request in the order GitHub's stack would: the
// gateway (faults, the user agent), authentication, the route, the
// primary and secondary limits, then the endpoint itself.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	s.mu.Lock()
	s.nextReqID++
	reqID := fmt.Sprintf("F4KE:%04X:%06X:%06X:%08X", s.nextReqID%0x10000, s.nextReqID, s.nextReqID*7, s.nextReqID*13)
	s.mu.Unlock()
	rec := Request{
		ID: reqID, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Body: body, At: s.now(),
	}
	w.Header().Set("X-GitHub-Request-Id", reqID)
	defer func() {
		s.mu.Lock()
		s.log = append(s.log, rec)
		s.hub.NotifyLocked()
		s.mu.Unlock()
	}()

	if f, ok := s.takeFault(r); ok {
		rec.Fault = true
		if f.LoseAnswer {
			// The API answers into the void; the client waits for nothing.
			rec.Status = s.serveAPI(httptest.NewRecorder(), r, body, &rec)
			f.Hang = true
		}
		status := s.serveFault(w, r, f)
		if !f.LoseAnswer {
			rec.Status = status
		}
		return
	}
	if strings.TrimSpace(r.Header.Get("User-Agent")) == "" {
		// GitHub's gateway refuses it in plain text, before the API.
		rec.Status = http.StatusForbidden
		testkit.WriteBody(w, http.StatusForbidden, "text/plain; charset=utf-8",
			[]byte("Request forbidden by administrative rules. Please make sure your request has a User-Agent header (https://docs.github.com/en/rest/overview/resources-in-the-rest-api#user-agent-required). Check https://developer.github.com for other possible causes.\n"))
		return
	}
	rec.Status = s.serveAPI(w, r, body, &rec)
}

// serveAPI answers as the API proper and returns the status.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, body []byte, rec *Request) int {
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && !slices.Contains(SupportedAPIVersions, v) {
		return writeAnswer(w, errAnswer(newError(http.StatusBadRequest,
			fmt.Sprintf("API version %s is not supported. (ghfake)", v), "https://docs.github.com/rest/about-the-rest-api/api-versions")))
	}
	w.Header().Set("X-GitHub-Api-Version-Selected", cmpOr(r.Header.Get("X-GitHub-Api-Version"), APIVersion))
	login, apiErr := s.authenticate(r)
	if apiErr != nil {
		s.anonymousRateHeaders(w)
		return writeAnswer(w, errAnswer(apiErr))
	}
	rec.Login = login
	route := s.route(r)
	resource := route.resource
	now := s.now()

	s.mu.Lock()
	acct := s.accountLocked(login)
	rec.Early = now.Before(acct.holdUntil)
	win := s.windowLocked(acct, resource, now)
	if resource != "" && win.used >= win.limit {
		// Primary limit: refused, not counted; the user must wait for the
		// reset.
		acct.holdUntil = maxTime(acct.holdUntil, win.reset)
		s.rateHeadersLocked(w, win, resource)
		s.mu.Unlock()
		rec.Resource = resource
		e := newError(s.refuseStatus, fmt.Sprintf("%s%d. If you reach out to GitHub Support for help, please include the request ID %s and timestamp %s.",
			MsgPrimaryPrefix, acct.id, rec.ID, now.UTC().Format("2006-01-02 15:04:05 MST")), docPrimary)
		return writeAnswer(w, errAnswer(e))
	}
	if route.creates || isMutation(r.Method) && route.known {
		if wait, ok := s.secondaryLocked(acct, route.creates, now); !ok {
			acct.holdUntil = maxTime(acct.holdUntil, now.Add(wait))
			s.rateHeadersLocked(w, win, resource)
			s.mu.Unlock()
			e := newError(s.refuseStatus, MsgSecondaryPrefix+" Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID "+rec.ID+".", docSecondary)
			e.header = http.Header{"Retry-After": {strconv.Itoa(ceilSeconds(wait))}}
			return writeAnswer(w, errAnswer(e))
		}
	}
	s.mu.Unlock()

	ans := route.handle(request{Request: r, body: body, login: login})

	s.mu.Lock()
	defer s.mu.Unlock()
	notModified := false
	if r.Method == http.MethodGet && ans.status == http.StatusOK {
		etag := etagOf(login, ans.body)
		w.Header().Set("ETag", etag)
		w.Header().Set("Cache-Control", "private, max-age=60, s-maxage=60")
		w.Header().Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
		notModified = etagMatches(r.Header.Get("If-None-Match"), etag)
	}
	// A conditional request answered 304 while authorized does not count
	// against the primary limit, as documented.
	if resource != "" && !notModified {
		win.used++
		rec.Resource = resource
	}
	if route.creates && ans.status == http.StatusCreated {
		acct.created = append(acct.created, now)
	}
	if resource != "" {
		s.rateHeadersLocked(w, win, resource)
	} else {
		s.rateHeadersLocked(w, s.windowLocked(acct, "core", now), "core")
	}
	if notModified {
		w.WriteHeader(http.StatusNotModified)
		return http.StatusNotModified
	}
	return writeAnswer(w, ans)
}

func isMutation(method string) bool {
	return method == http.MethodPost || method == http.MethodPatch || method == http.MethodPut || method == http.MethodDelete
}

// authenticate returns the login of the request's token. GitHub takes
// "Bearer" and the older "token" scheme alike.
func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		return "", newError(http.StatusUnauthorized, MsgRequiresAuth, docRest)
	}
	scheme, tok, _ := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token") || tok == "" {
		return "", newError(http.StatusUnauthorized, MsgBadCredentials, docRest)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tokens[tok]
	if t == nil || t.revoked {
		return "", newError(http.StatusUnauthorized, MsgBadCredentials, docRest)
	}
	return t.login, nil
}

func errAnswer(e *apiError) answer {
	return answer{status: e.status, body: e.body, header: e.header}
}

func writeAnswer(w http.ResponseWriter, a answer) int {
	for k, vs := range a.header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	// '<' and '&' in issue bodies stay as they are, as GitHub sends them.
	return testkit.WriteBody(w, a.status, "application/json; charset=utf-8", testkit.JSON("ghfake", a.body))
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ceilSeconds is d in whole seconds, rounded up, at least 1.
func ceilSeconds(d time.Duration) int {
	n := int((d + time.Second - 1) / time.Second)
	return max(n, 1)
}
