package tgfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"switchboard/e2e/internal/settle"
)

// DefaultToken is the bot token used unless WithToken is given. Like a real
// token it starts with the bot's user id.
const DefaultToken = "7000000001:AAFakeTokenForTgfakeTests000000000"

// Server is a fake Telegram Bot API server. All methods are safe for
// concurrent use.
type Server struct {
	t           testing.TB
	token       string
	bot         User
	readAll     bool // getMe's can_read_all_group_messages
	waitTimeout time.Duration
	now         func() time.Time // the server's clock
	http        *httptest.Server

	mu sync.Mutex
	// hub wakes the waiters (long polls, Wait* helpers) whenever
	// observable state changes, so they wake without polling, and releases
	// held getUpdates calls when the server closes.
	hub *settle.Hub

	users    map[int64]*Person
	chats    map[int64]*chatState
	files    map[string]*SentFile
	commands map[commandKey][]BotCommand
	failures map[string][]*APIError // injected failures by lower-case method

	updates      []Update // not yet confirmed by the bot, ascending ids
	nextUpdateID int
	poll         *pollWaiter // the getUpdates call currently held, if any
	hook         *webhook    // set by setWebhook; getUpdates is refused meanwhile
	// insecureHooks: setWebhook takes http:// URLs on any port (tests).
	insecureHooks bool

	// topicsOn and usersCreateTopics are the bot's forum topic mode in
	// private chats (SetTopics).
	topicsOn, usersCreateTopics bool
	// pollAllowed is the allowed_updates of the last getUpdates that
	// named them (empty: every kind).
	pollAllowed    map[string]bool
	callbacks      map[string]*callbackState
	nextCallbackID uint64
	nextRaw        int // SendRawText's stand-in texts
	nextFileID     int

	calls []Call
	// inflight is held (read) by every call but a long poll from its
	// start until it is in calls, so that Calls, taking it whole for a
	// moment, never misses a call whose effect (a message) a test has
	// already seen.
	inflight sync.RWMutex

	limiter   *limiter
	failUntil time.Time // FailFor: message-producing calls fail until then
	failCode  int
	lacking   map[Feature]bool // SetUnsupported
}

// Option configures a Server.
type Option func(*settings)

type settings struct {
	token       string
	username    string
	firstName   string
	waitTimeout time.Duration
	readAll     bool
	limits      Limits
	clock       func() time.Time
	// insecureHooks: setWebhook takes http:// URLs on any port.
	insecureHooks bool
}

// WithToken sets the bot token. The bot's user id is taken from the part
// before the colon, as in real tokens.
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithBotUser sets the bot's username (without '@') and first name, as
// returned by getMe and shown in the "from" of its messages.
func WithBotUser(username, firstName string) Option {
	return func(s *settings) { s.username, s.firstName = username, firstName }
}

// WithReadAllGroupMessages makes getMe report can_read_all_group_messages
// true, as for a bot whose privacy mode is disabled in @BotFather. Without
// it getMe reports false (privacy mode on, Telegram's default), though the
// fake delivers every group message either way.
func WithReadAllGroupMessages() Option { return func(s *settings) { s.readAll = true } }

// WithWaitTimeout sets how long the Wait* helpers wait before failing the
// test (default 5s).
func WithWaitTimeout(d time.Duration) Option { return func(s *settings) { s.waitTimeout = d } }

// WithLimits sets the flood limits the server enforces (default
// DefaultLimits()). A zero Bucket in it lifts that one limit.
func WithLimits(l Limits) Option { return func(s *settings) { s.limits = l } }

// WithoutLimits lifts all flood limits, for tests that measure something
// else and send faster than Telegram allows; say why where you use it.
func WithoutLimits() Option { return WithLimits(Limits{}) }

// WithClock sets the server's clock (default time.Now). The rate limiter,
// FailFor, the call log and message dates all read it, so a test can drive
// the limits without sleeping. Waiting (long polls, Wait* timeouts) still
// runs on real time. A nil clock keeps time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *settings) {
		if now != nil {
			s.clock = now
		}
	}
}

// New starts a fake Bot API server on 127.0.0.1. It is closed when the test
// ends; if the test failed, the log of bot API calls is printed.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := settings{
		token: DefaultToken, username: "tgfake_bot", firstName: "Fake Bot", waitTimeout: 5 * time.Second,
		limits: DefaultLimits(), clock: time.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	idPart, _, ok := strings.Cut(cfg.token, ":")
	botID, err := strconv.ParseInt(idPart, 10, 64)
	if !ok || err != nil || botID <= 0 {
		t.Fatalf("tgfake: token %q is not of the form <bot id>:<secret>", cfg.token)
	}
	s := &Server{
		t:            t,
		token:        cfg.token,
		bot:          User{ID: botID, IsBot: true, FirstName: cfg.firstName, Username: cfg.username},
		readAll:      cfg.readAll,
		waitTimeout:  cfg.waitTimeout,
		now:          cfg.clock,
		users:        map[int64]*Person{},
		chats:        map[int64]*chatState{},
		files:        map[string]*SentFile{},
		commands:     map[commandKey][]BotCommand{},
		failures:     map[string][]*APIError{},
		callbacks:    map[string]*callbackState{},
		nextUpdateID: 1,
		limiter:      newLimiter(cfg.limits),

		insecureHooks: cfg.insecureHooks,
	}
	s.hub = settle.NewHub(&s.mu)
	// httptest listens on 127.0.0.1, so nothing is exposed beyond the host.
	s.http = httptest.NewServer(s)
	t.Cleanup(func() {
		if log := s.CallLog(); t.Failed() && log != "" {
			t.Logf("tgfake: bot API calls:\n%s", log)
		}
		s.Close()
	})
	return s
}

// URL is the base URL to give the bot (telebot's Settings.URL); requests go
// to URL()/bot<token>/<method>.
func (s *Server) URL() string { return s.http.URL }

// Token is the bot token the server accepts.
func (s *Server) Token() string { return s.token }

// Bot is the bot's own user, as getMe returns it.
func (s *Server) Bot() User { return s.bot }

// Close releases held long polls and shuts the server down. It is called
// automatically at the end of the test and may be called more than once.
func (s *Server) Close() { s.hub.Close(s.http.Close) }

// FailNext makes the next n calls of method (case-insensitive) fail with
// 429 Too Many Requests and parameters.retry_after, as Telegram's flood
// control does. These are one-off injections, independent of the rate
// limiter: they are not counted by RateLimited or EarlySends, and the fake
// does not hold the bot to their retry_after.
func (s *Server) FailNext(method string, n, retryAfter int) {
	for range n {
		s.FailNextWith(method, 1, tooManyRequests(retryAfter))
	}
}

// FailNextWith makes the next n calls of method fail with err, for
// simulating other server-side failures (e.g. 500 or 403).
func (s *Server) FailNextWith(method string, n int, err *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(method)
	for range n {
		cp := *err
		s.failures[key] = append(s.failures[key], &cp)
	}
}

func (s *Server) takeFailure(method string) *APIError {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.failures[method]
	if len(q) == 0 {
		return nil
	}
	s.failures[method] = q[1:]
	return q[0]
}

// ServeHTTP implements the Bot API's routing: /bot<token>/<method>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/file/bot") {
		s.serveFile(w, r)
		return
	}
	if !strings.EqualFold(path.Base(r.URL.Path), "getUpdates") {
		s.inflight.RLock()
		defer s.inflight.RUnlock()
	}
	call := Call{Start: s.now()}
	result, apiErr := s.serve(r, &call)
	call.End = s.now()
	if apiErr != nil {
		call.Err = apiErr
		writeJSON(w, apiErr)
	} else if body, err := json.Marshal(result); err != nil {
		call.Err = errDesc(500, "Internal Server Error: "+err.Error())
		writeJSON(w, call.Err)
	} else {
		call.Result = body
		writeJSON(w, json.RawMessage(`{"ok":true,"result":`+string(body)+`}`))
	}
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.hub.NotifyLocked()
	s.mu.Unlock()
}

// serve routes one request; call is filled in for the log. Requests that
// do not even reach a method (wrong token, unknown method) are logged too,
// because they are typical symptoms of a misconfigured bot.
func (s *Server) serve(r *http.Request, call *Call) (any, *APIError) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	call.Method = r.URL.Path
	if !ok {
		return nil, errDesc(404, DescNotFound)
	}
	token, method, ok := strings.Cut(rest, "/")
	if !ok || method == "" || strings.Contains(method, "/") {
		return nil, errDesc(404, DescNotFound)
	}
	call.Method = method
	if token != s.token {
		return nil, errDesc(401, DescUnauthorized)
	}
	key := strings.ToLower(method)
	m, ok := methods[key]
	if !ok {
		return nil, errDesc(404, DescNotFound)
	}
	call.Method = m.name
	req, err := parseRequest(r, key)
	if err == nil {
		call.Params = req.sortedArgs()
	}
	// The reverse proxy answers before the Bot API sees the request.
	if _, ok := limitedMethods[key]; ok {
		if apiErr := s.proxyFailure(); apiErr != nil {
			return nil, apiErr
		}
	}
	if errors.Is(err, errTooLarge) {
		return nil, errDesc(413, DescTooLarge)
	}
	if err != nil {
		return nil, badRequest("%s", err.Error())
	}
	if apiErr := s.takeFailure(key); apiErr != nil {
		return nil, apiErr
	}
	return m.handle(s, req)
}

func writeJSON(w http.ResponseWriter, v any) {
	if e, ok := v.(*APIError); ok && e.proxy {
		writeProxyError(w, e.Code)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	status := http.StatusOK
	if e, ok := v.(*APIError); ok {
		status = e.Code
		if e.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
		}
	}
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client may have gone away; nothing to do about it
}

// Call is one bot API call as the server saw it.
type Call struct {
	Method string            // canonical name, e.g. "sendMessage"
	Params map[string]string // flattened parameters; uploads appear as "<file ...>"
	Result json.RawMessage   // the "result" on success
	Err    *APIError         // the error on failure
	Start  time.Time
	End    time.Time
}

func (c Call) String() string {
	keys := make([]string, 0, len(c.Params))
	for k := range c.Params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s(", c.Start.Format("15:04:05.000"), c.Method)
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		v := c.Params[k]
		if utf8.RuneCountInString(v) > 120 {
			v = fmt.Sprintf("%s… (%d characters)", string([]rune(v)[:100]), utf8.RuneCountInString(v))
		}
		fmt.Fprintf(&b, "%s=%q", k, v)
	}
	b.WriteString(") -> ")
	if c.Err != nil {
		fmt.Fprintf(&b, "%d %s", c.Err.Code, c.Err.Description)
	} else {
		res := string(c.Result)
		if utf8.RuneCountInString(res) > 300 {
			res = string([]rune(res)[:300]) + "…"
		}
		b.WriteString(res)
	}
	return b.String()
}

// Calls returns every bot API call so far, oldest first. It waits for the
// calls in flight (but a held long poll) to be logged: a test that has seen
// a call's message finds the call here.
func (s *Server) Calls() []Call {
	s.inflight.Lock()
	s.inflight.Unlock() // a barrier, not a critical section
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the calls of one method (case-insensitive).
func (s *Server) CallsTo(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if strings.EqualFold(c.Method, method) {
			out = append(out, c)
		}
	}
	return out
}

// CallLog renders the calls one per line, leaving out empty long polls,
// which would drown everything else.
func (s *Server) CallLog() string {
	var b strings.Builder
	for _, c := range s.Calls() {
		if c.Method == "getUpdates" && c.Err == nil && string(c.Result) == "[]" {
			continue
		}
		b.WriteString(c.String())
		b.WriteByte('\n')
	}
	return b.String()
}
