package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchboard/internal/clip"
	"switchboard/internal/testkit"
)

// DefaultEmbeddingDim is the vector size served unless WithEmbeddingDim or
// the request's "dimensions" says otherwise.
const DefaultEmbeddingDim = 256

// maxBody bounds request bodies; prompts in tests are far smaller.
const maxBody = 16 << 20

// Option configures a Server.
type Option func(*Server)

// WithAPIKey makes the OpenAI endpoints require "Authorization: Bearer key",
// answering 401 in OpenAI's error shape otherwise. Ollama has no auth.
func WithAPIKey(key string) Option { return func(s *Server) { s.apiKey = key } }

// WithEmbeddingDim sets the default embedding vector size.
func WithEmbeddingDim(n int) Option { return func(s *Server) { s.dim = n } }

// WithLatency sets the server-wide latency (see Server.SetLatency).
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency.Store(int64(d)) } }

// WithModels makes the server serve only the named models (see
// Server.ServeModels).
func WithModels(names ...string) Option { return func(s *Server) { s.ServeModels(names...) } }

// RefuseJSONSchema makes the OpenAI chat endpoint answer 400 to
// response_format json_schema, as servers without structured outputs do;
// json_object is still accepted.
func RefuseJSONSchema() Option { return func(s *Server) { s.refuseSchema = true } }

// WithoutRecording keeps only per-rule call counts, not the full request
// record, so long benchmarks do not grow memory.
func WithoutRecording() Option { return func(s *Server) { s.noRecord = true } }

// Server is a scripted Ollama + OpenAI compatible server. Create it with New
// and Close it when done.
type Server struct {
	hs       *httptest.Server
	apiKey   string
	dim      int
	noRecord bool
	latency  atomic.Int64

	refuseSchema bool
	// models is the list ServeModels set; nil serves any model.
	models atomic.Pointer[[]string]

	// rules is replaced wholesale on every On, so the request path reads
	// it without locking.
	rules   atomic.Pointer[[]*Rule]
	rulesMu sync.Mutex
	def     *Rule

	closing   chan struct{}
	closeOnce sync.Once

	recMu sync.Mutex
	reqs  []Request
	calls map[string]int
	// left is when the client went away in the middle of each streamed
	// answer, by the rule that answered it.
	left map[string][]time.Time

	// pendingN mirrors the sum of pending[i].n so the request path can skip
	// faultMu when no server-wide faults are queued (the common case).
	faultMu  sync.Mutex
	pending  []pendingFault
	pendingN atomic.Int64

	inFlight    atomic.Int64
	maxInFlight atomic.Int64
	seq         atomic.Uint64
}

type pendingFault struct {
	f Fault
	n int
}

// Start starts a server that is closed when the test ends.
func Start(t testing.TB, opts ...Option) *Server { return testkit.Closing(t, New(opts...)) }

// New starts a server on 127.0.0.1. Close it when done.
func New(opts ...Option) *Server {
	s := &Server{
		dim:     DefaultEmbeddingDim,
		closing: make(chan struct{}),
		calls:   make(map[string]int),
		def:     &Rule{name: "default"},
	}
	for _, o := range opts {
		o(s)
	}
	empty := []*Rule{}
	s.rules.Store(&empty)

	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/chat", serveJSON(s, ollamaBadRequest, s.ollamaChat))
	mux.HandleFunc("POST /api/embed", serveJSON(s, ollamaBadRequest, s.ollamaEmbed))
	mux.HandleFunc("POST /v1/chat/completions", serveJSON(s, openaiBadRequest, s.openaiChat))
	mux.HandleFunc("POST /v1/embeddings", serveJSON(s, openaiBadRequest, s.openaiEmbed))
	mux.HandleFunc("GET /api/tags", s.ollamaTags)
	mux.HandleFunc("GET /v1/models", s.openaiModels)
	s.hs = httptest.NewServer(mux)
	return s
}

// URL is the server's root, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.hs.URL }

// OllamaURL is the URL to give ollama.WithServerURL.
func (s *Server) OllamaURL() string { return s.hs.URL }

// OpenAIURL is the base URL to give openai.WithBaseURL ("<root>/v1").
func (s *Server) OpenAIURL() string { return s.hs.URL + "/v1" }

// Close releases every waiting handler and shuts the server down. It is safe
// to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		// Unblock hangs and latencies first: httptest's Close waits for
		// outstanding handlers.
		close(s.closing)
		s.hs.CloseClientConnections()
		s.hs.Close()
	})
}

// On adds a rule matching requests for which every matcher holds (all
// requests if there are none). Rules are tried in the order added.
func (s *Server) On(ms ...Matcher) *Rule {
	s.rulesMu.Lock()
	defer s.rulesMu.Unlock()
	old := *s.rules.Load()
	r := &Rule{matchers: ms, name: "rule" + strconv.Itoa(len(old)+1)}
	rules := make([]*Rule, len(old), len(old)+1)
	copy(rules, old)
	rules = append(rules, r)
	s.rules.Store(&rules)
	return r
}

// Default returns the rule that serves requests no other rule matches. It
// starts without a reply, so unmatched chat requests get HTTP 500 "llmtest:
// no rule matches"; give it a reply to make the server lenient. Its name is
// "default".
func (s *Server) Default() *Rule { return s.def }

// ServeModels sets the models the server has, as a real one does: the
// listings (GET /api/tags, GET /v1/models) name them, and a chat or
// embedding request for any other model gets 404 "model not found" in the
// provider's shape. It may be called while serving, e.g. to make a model
// "appear" after a pull. ServeModels() with no names serves no model.
// A name without a tag also matches its ":latest", as in Ollama.
func (s *Server) ServeModels(names ...string) {
	list := append([]string{}, names...)
	s.models.Store(&list)
}

// ServeAnyModel restores the default: any model is served, and the
// listings are empty.
func (s *Server) ServeAnyModel() { s.models.Store(nil) }

// serves reports whether model may be asked for.
func (s *Server) serves(model string) bool {
	list := s.models.Load()
	if list == nil {
		return true
	}
	for _, m := range *list {
		if m == model || (!strings.Contains(model, ":") && m == model+":latest") ||
			(!strings.Contains(m, ":") && m+":latest" == model) {
			return true
		}
	}
	return false
}

func (s *Server) modelList() []string {
	if list := s.models.Load(); list != nil {
		return *list
	}
	return []string{}
}

// SetLatency delays every request by d unless its rule sets its own latency.
func (s *Server) SetLatency(d time.Duration) { s.latency.Store(int64(d)) }

// FailNext makes the next n requests (chat or embedding, whatever rule they
// match) fail with f. Calls queue up: FailNext(2, a); FailNext(1, b) fails
// two requests with a, then one with b.
func (s *Server) FailNext(n int, f Fault) {
	if n <= 0 {
		return
	}
	s.faultMu.Lock()
	s.pending = append(s.pending, pendingFault{f: f, n: n})
	s.pendingN.Add(int64(n))
	s.faultMu.Unlock()
}

func (s *Server) takePending() (Fault, bool) {
	if s.pendingN.Load() <= 0 {
		return Fault{}, false
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if len(s.pending) == 0 {
		return Fault{}, false
	}
	p := &s.pending[0]
	f := p.f
	p.n--
	if p.n == 0 {
		s.pending = s.pending[1:]
	}
	s.pendingN.Add(-1)
	return f, true
}

// Requests returns a copy of the record, oldest first.
func (s *Server) Requests() []Request {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// RequestsFor returns the recorded requests served by the named rule.
func (s *Server) RequestsFor(name string) []Request {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if r.Rule == name {
			out = append(out, r)
		}
	}
	return out
}

// Calls counts the requests the named rule received, including those it
// faulted and those whose client gave up. It works with WithoutRecording.
func (s *Server) Calls(name string) int {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	return s.calls[name]
}

// Reset clears the record, the call counts and MaxInFlight. Rules, queued
// faults and sequence positions are kept.
func (s *Server) Reset() {
	s.recMu.Lock()
	s.reqs = nil
	s.calls = make(map[string]int)
	s.recMu.Unlock()
	s.maxInFlight.Store(s.inFlight.Load())
}

// InFlight is the number of chat and embedding requests being handled now.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// MaxInFlight is the highest InFlight seen since New or Reset, for
// asserting client-side concurrency limits.
func (s *Server) MaxInFlight() int { return int(s.maxInFlight.Load()) }

func (s *Server) enter() {
	n := s.inFlight.Add(1)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (s *Server) leave() { s.inFlight.Add(-1) }

func (s *Server) record(r *Request) {
	// Drop the matcher caches so recorded values compare cleanly.
	r.sysLower, r.promLower, r.promTokens = nil, nil, nil
	s.recMu.Lock()
	if r.Rule != "" {
		s.calls[r.Rule]++
	}
	if !s.noRecord {
		s.reqs = append(s.reqs, *r)
	}
	s.recMu.Unlock()
}

// plan is what the handler will do with one request.
type plan struct {
	rule       *Rule // the matched rule, or Default() when none matched
	fault      Fault
	latency    time.Duration
	chunkDelay time.Duration
	cut        int
	length     bool
	thinking   string
	refusal    string
}

// stopReason is done_reason / finish_reason for the plan's answer.
func (p plan) stopReason() string {
	if p.length {
		return "length"
	}
	return "stop"
}

// decide matches, picks the fault and records the request. Recording
// happens before any waiting, so a test that sees its client time out can
// already find the request in the record.
func (s *Server) decide(req *Request) plan {
	var rule *Rule
	for _, r := range *s.rules.Load() {
		if r.matches(req) {
			rule = r
			break
		}
	}
	var p plan
	var snap ruleSnapshot
	switch {
	case rule != nil:
		snap = rule.take()
		p.rule = rule
		req.Rule = snap.name
		if !snap.hasReply && req.Kind == KindChat {
			p.fault = Fault{kind: faultNoReply}
		}
	default:
		snap = s.def.take()
		p.rule = s.def
		if snap.touched {
			req.Rule = snap.name
		}
		if !snap.hasReply && req.Kind == KindChat {
			p.fault = Fault{kind: faultNoRule}
		}
	}
	if !snap.fault.IsZero() {
		p.fault = snap.fault
	}
	if f, ok := s.takePending(); ok && !f.IsZero() {
		p.fault = f
	}
	if !s.serves(req.Model) {
		p.fault = Fault{kind: faultNoModel}
	} else if s.refuseSchema && req.Provider == OpenAI && req.Format == "json_schema" {
		p.fault = Fault{kind: faultSchema}
	}
	p.latency = snap.latency
	if p.latency <= 0 {
		p.latency = time.Duration(s.latency.Load())
	}
	p.chunkDelay = snap.chunkDelay
	p.cut, p.length, p.thinking, p.refusal = snap.cut, snap.length, snap.thinking, snap.refusal
	req.Fault = p.fault.String()
	req.Time = time.Now()
	s.record(req)
	return p
}

// wait sleeps d unless the client leaves or the server closes first; it
// reports whether the handler should go on.
func (s *Server) wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.closing:
		abort()
		return false
	}
}

// serveJSON is a POST endpoint: the request counts as in flight while
// serve answers the JSON body decoded into a T; a body that is not one is
// answered by bad, in the provider's error shape.
func serveJSON[T any](s *Server, bad func(w http.ResponseWriter, msg string), serve func(http.ResponseWriter, *http.Request, T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.enter()
		defer s.leave()
		var in T
		if err := readJSON(w, r, &in); err != nil {
			bad(w, err.Error())
			return
		}
		serve(w, r, in)
	}
}

// streamChunks sends content's chunks one by one, waiting delay between
// two; it reports whether all went out (false: the client left, or send
// failed).
func (s *Server) streamChunks(ctx context.Context, content string, p plan, send func(chunk string) bool) bool {
	chunks := Chunks(content)
	for i, c := range chunks {
		if p.fault.kind == faultStreamCut && i >= (len(chunks)+1)/2 {
			return false
		}
		if i > 0 && !s.wait(ctx, p.chunkDelay) {
			if ctx.Err() != nil {
				s.noteLeft(p)
			}
			return false
		}
		if !send(c) {
			return false
		}
	}
	return true
}

// noteLeft records that the client closed a streamed answer's connection
// before its last chunk.
func (s *Server) noteLeft(p plan) {
	name := ""
	if p.rule != nil {
		name = p.rule.name
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if s.left == nil {
		s.left = map[string][]time.Time{}
	}
	s.left[name] = append(s.left[name], time.Now())
}

// Left returns when the client closed the connection of a streamed answer
// the named rule was still writing, once per answer: a call the caller
// cancelled, which stops costing tokens there.
func (s *Server) Left(name string) []time.Time {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	return append([]time.Time(nil), s.left[name]...)
}

// flush pushes what w holds to the client, so that streamed chunks arrive
// separately.
func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) hang(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-s.closing:
		abort()
	}
}

// abort drops the connection of a request the server gives up on while
// closing. Merely returning would send an empty 200, which langchaingo's
// ollama client reads as a successful empty answer.
func abort() { panic(http.ErrAbortHandler) }

// readJSON decodes the request body into v.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return fmt.Errorf("llmtest: reading body: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("llmtest: decoding request: %w", err)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own response types reach here; failing to marshal them
		// is a bug in this package.
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// invalidJSONContent is what a model that ignores JSON mode might emit: a
// truncated object.
const invalidJSONContent = `{"answer": "unterminated`

func noRuleMessage(req *Request) string {
	return fmt.Sprintf("llmtest: no rule matches %s request (model=%q system=%q prompt=%q)",
		req.Provider, req.Model, clip.Clip(req.System, 80), clip.Clip(req.Prompt, 120))
}

func noReplyMessage(req *Request) string {
	return fmt.Sprintf("llmtest: rule %q has no reply configured", req.Rule)
}

// errorFor returns the status and message for an error-like fault, and
// false for faults that are not plain HTTP errors.
func errorFor(f Fault, req *Request) (int, string, bool) {
	switch f.kind {
	case faultHTTP:
		if f.message != "" {
			return f.status, f.message, true
		}
		return f.status, fmt.Sprintf("llmtest: injected HTTP %d", f.status), true
	case faultRateLimit:
		return http.StatusTooManyRequests, "llmtest: rate limit exceeded, retry later", true
	case faultNoRule:
		return http.StatusInternalServerError, noRuleMessage(req), true
	case faultNoReply:
		return http.StatusInternalServerError, noReplyMessage(req), true
	case faultNoModel:
		if req.Provider == OpenAI {
			return http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model), true
		}
		return http.StatusNotFound, fmt.Sprintf("model %q not found, try pulling it first", req.Model), true
	case faultSchema:
		return http.StatusBadRequest, "response_format json_schema is not supported", true
	case faultQuota:
		return f.status, "You exceeded your current quota, please check your plan and billing details. " +
			"For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.", true
	case faultCredits:
		return f.status, "Insufficient credits. Add more using https://openrouter.ai/credits", true
	case faultFlagged:
		return f.status, fmt.Sprintf("%s requires moderation on OpenRouter. Your input was flagged for %q. No credits were charged.",
			req.Model, strings.Join(flaggedReasons(f), ", ")), true
	}
	return 0, "", false
}

// flaggedReasons are the moderation categories a Flagged fault names.
func flaggedReasons(f Fault) []string {
	if f.message == "" {
		return []string{"harassment"}
	}
	return strings.Split(f.message, "\x00")
}

func (s *Server) nextID(prefix string) string {
	return prefix + strconv.FormatUint(s.seq.Add(1), 10)
}

// promptTokens approximates the prompt's token count by its words; stable
// counts are all token metrics tests need.
func promptTokens(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += countWords(m.Content)
	}
	return n
}

// failFunc writes an error in a provider's own shape.
type failFunc func(w http.ResponseWriter, f Fault, status int, msg string)

// answered waits out the plan's latency and writes the plan's fault where
// it leaves no answer to compose (an error, a hang, an empty body), the same
// way for every provider and endpoint. It reports whether the response is
// done: written, or the client left.
func (s *Server) answered(ctx context.Context, w http.ResponseWriter, p plan, req *Request, fail failFunc) bool {
	if !s.wait(ctx, p.latency) {
		return true
	}
	if status, msg, ok := errorFor(p.fault, req); ok {
		fail(w, p.fault, status, msg)
		return true
	}
	switch p.fault.kind {
	case faultHang:
		s.hang(ctx)
		return true
	case faultEmptyBody:
		w.WriteHeader(http.StatusOK)
		return true
	case faultStreamCut:
		if !req.Stream {
			w.WriteHeader(http.StatusOK)
			return true
		}
	}
	return false
}

// scriptedContent applies the plan to a chat request (see answered) and
// returns the reply's content, or false when the response is already done.
func (s *Server) scriptedContent(ctx context.Context, w http.ResponseWriter, p plan, req *Request, fail failFunc) (string, bool) {
	if s.answered(ctx, w, p, req, fail) {
		return "", false
	}
	switch p.fault.kind {
	case faultEmptyContent:
		return "", true
	case faultInvalidJSON:
		return invalidJSONContent, true
	default:
		c := p.rule.reply(*req)
		if p.length && p.cut > 0 && p.cut < len(c) {
			c = c[:p.cut]
		}
		return c, true
	}
}

// scriptedEmbedding applies the plan to an embedding request (see answered).
// It reports whether the handler answers, and whether with embeddings (false
// for an empty answer). An invalid-JSON fault writes broken, the provider's
// answer cut short, as contentType.
func (s *Server) scriptedEmbedding(ctx context.Context, w http.ResponseWriter, p plan, req *Request, fail failFunc,
	contentType, broken string) (answer, fill bool) {
	if s.answered(ctx, w, p, req, fail) {
		return false, false
	}
	switch p.fault.kind {
	case faultInvalidJSON:
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte(broken))
		return false, false
	case faultEmptyContent:
		return true, false
	}
	return true, true
}
