package llm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
	"golang.org/x/sync/semaphore"

	"switchboard/domain"
)

// Request is one prompt to the model (Config.StrongModel for Strong;
// Config.MaxTokensJSON or MaxTokensText where MaxTokens is zero).
type Request = domain.LLMCall

// BreakerState is the circuit breaker's state as reported by BreakerState.
type BreakerState string

const (
	BreakerClosed   BreakerState = "closed"
	BreakerHalfOpen BreakerState = "half-open"
	BreakerOpen     BreakerState = "open"
)

type embedder interface {
	CreateEmbedding(ctx context.Context, texts []string) ([][]float32, error)
}

// Client is the LLM port. It is safe for concurrent use; create one per
// backend and share it.
type Client struct {
	cfg     Config
	chat    chatModel
	embed   embedder // nil without Config.EmbedModel
	tr      *http.Transport
	hc      *http.Client
	sem     *semaphore.Weighted
	breaker *gobreaker.CircuitBreaker[struct{}]
	log     *slog.Logger
	m       *metrics

	// tripNow makes the breaker's next ReadyToTrip say yes: a refusal
	// opens it at once instead of after Config's consecutive failures.
	tripNow atomic.Bool
	// answered: a call has succeeded since the client was built (Answered).
	answered atomic.Bool

	// stMu guards what Health reports. It is taken inside the breaker's
	// state-change callback (under the breaker's lock), so code holding it
	// must never call into the breaker.
	stMu        sync.Mutex
	refusal     *RefusedError // why the breaker is open, if a refusal opened it
	lastFailure string        // the last failure that counts against the breaker
	stateSince  time.Time
}

// New builds a Client. It does not contact the provider.
func New(cfg Config, opts ...Option) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	o := options{
		breakerFailures: DefaultBreakerFailures,
		breakerOpenFor:  DefaultBreakerOpenFor,
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.registry == nil {
		o.registry = prometheus.NewRegistry()
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	m, err := newMetrics(o.registry)
	if err != nil {
		return nil, err
	}

	// A transport of our own: keep-alive slots sized to our concurrency,
	// idle connections closable by Close, and statuses observable (see
	// observingTransport). No http.Client.Timeout: deadlines come from the
	// call context, so they can be told apart from the caller's.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = cfg.MaxConcurrency
	hc := &http.Client{Transport: observingTransport{base: tr}}

	c := &Client{
		cfg:        cfg,
		tr:         tr,
		hc:         hc,
		sem:        semaphore.NewWeighted(int64(cfg.MaxConcurrency)),
		log:        o.logger.With(slog.String("component", "llm"), slog.String("provider", cfg.Provider)),
		m:          m,
		stateSince: time.Now(),
	}
	if err := c.initProvider(hc); err != nil {
		return nil, fmt.Errorf("llm: %s client: %w", cfg.Provider, err)
	}

	failures := o.breakerFailures
	c.breaker = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "llm-" + cfg.Provider,
		MaxRequests: 1, // one probe decides whether the backend is back
		Timeout:     o.breakerOpenFor,
		ReadyToTrip: func(cnt gobreaker.Counts) bool {
			return c.tripNow.Swap(false) || cnt.ConsecutiveFailures >= failures
		},
		IsExcluded: func(err error) bool {
			var ce *callError
			return errors.As(err, &ce) && !ce.tripsBreaker
		},
		// Runs under the breaker's lock: only record, never call back.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			m.breaker.Set(breakerGaugeValue(to))
			c.stMu.Lock()
			c.stateSince = time.Now()
			if to == gobreaker.StateClosed {
				c.refusal, c.lastFailure = nil, ""
			}
			c.stMu.Unlock()
			if to == gobreaker.StateOpen {
				c.tripNow.Store(false)
			}
			c.log.Warn("llm circuit breaker state change", slog.String("from", from.String()), slog.String("to", to.String()))
		},
	})
	m.breaker.Set(0)
	return c, nil
}

func (c *Client) initProvider(hc *http.Client) error {
	switch c.cfg.Provider {
	case ProviderOllama:
		chat, err := newOllamaChat(c.cfg.URL, hc, c.cfg)
		if err != nil {
			return err
		}
		c.chat = chat
		if c.cfg.EmbedModel != "" {
			// langchaingo's ollama embeds with the LLM's own model, not a
			// per-call one, hence an instance of its own.
			emb, err := ollama.New(ollama.WithServerURL(c.cfg.URL), ollama.WithModel(c.cfg.EmbedModel), ollama.WithHTTPClient(hc))
			if err != nil {
				return err
			}
			c.embed = emb
		}
	case ProviderOpenAI:
		c.chat = newOpenAIChat(c.cfg.URL, c.cfg.APIKey, hc, c.log)
		if c.cfg.EmbedModel != "" {
			emb, err := openai.New(
				openai.WithBaseURL(c.cfg.URL),
				openai.WithToken(c.cfg.APIKey),
				openai.WithModel(c.cfg.Model),
				openai.WithEmbeddingModel(c.cfg.EmbedModel),
				openai.WithHTTPClient(hc),
				// Explicit, so $OPENAI_ORGANIZATION cannot leak into requests.
				openai.WithOrganization(""),
			)
			if err != nil {
				return err
			}
			c.embed = emb
		}
	}
	return nil
}

// Close releases idle connections. Calls in flight are not interrupted;
// the Client remains usable.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// BreakerState reports the circuit breaker's state. An open breaker turns
// half-open once its open period has passed, as observed by this call.
func (c *Client) BreakerState() BreakerState {
	switch c.breaker.State() {
	case gobreaker.StateOpen:
		return BreakerOpen
	case gobreaker.StateHalfOpen:
		return BreakerHalfOpen
	}
	return BreakerClosed
}

// Text returns the model's answer to req, without the model's reasoning:
// a leading <think>…</think> block (or a lone closing tag) and a BOM are
// removed, so a user never sees them; otherwise the text is left as the
// model wrote it (trimming is the caller's call). An answer that is only
// reasoning is ErrEmpty; an answer cut off at the length limit is
// returned as it is, since a shortened reply is still a reply.
func (c *Client) Text(ctx context.Context, req Request) (string, error) {
	text, _, err := c.TextUsage(ctx, req)
	return text, err
}

// Usage is what the provider counted for one call (zero when it did not say).
type Usage struct{ Prompt, Completion int }

// TextUsage is Text with the tokens the provider counted, for callers that
// record them per answer.
func (c *Client) TextUsage(ctx context.Context, req Request) (string, Usage, error) {
	cl := c.callFor("text", req)
	a, err := c.generate(ctx, cl, req, nil)
	if err != nil {
		return "", Usage{}, c.finish(cl, err)
	}
	use := Usage{Prompt: a.promptTokens, Completion: a.completionTokens}
	var rep repairs
	text, ok := stripReasoning(a.content, &rep)
	if !ok {
		return "", use, c.finish(cl, &callError{outcomeEmpty, false, fmt.Errorf(
			"%w: the answer holds only the model's reasoning (set LLM_THINK=false, or raise %s)",
			ErrEmpty, c.limitHint(req, false))})
	}
	if len(rep) == 0 {
		text = a.content
	}
	c.m.addRepairs(cl.model, rep)
	c.finish(cl, nil)
	return text, use, nil
}

// JSON asks for a JSON answer and decodes it into out, which must be a
// non-nil pointer. The provider is given out's JSON schema (SchemaFor) as
// a structured-output constraint where it supports one. The answer goes
// through the extractor (see the package doc, "Answers as models really
// give them"); if out implements Validate() error, a validation failure is
// reported like malformed JSON: both wrap ErrInvalidJSON, and neither
// counts against the circuit breaker.
func (c *Client) JSON(ctx context.Context, req Request, out any) error {
	cl := c.callFor("json", req)
	if v := reflect.ValueOf(out); v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("llm json %s: out must be a non-nil pointer, got %T", cl.label, out)
	}
	a, err := c.generate(ctx, cl, req, out)
	if err != nil {
		return c.finish(cl, err)
	}
	var rep repairs
	if err := decodeAnswer(answerText{content: a.content, reasoning: a.reasoning, stopReason: a.stopReason},
		out, c.limitHint(req, true), &rep); err != nil {
		return c.finish(cl, &callError{outcomeInvalidJSON, false, err})
	}
	c.m.addRepairs(cl.model, rep)
	c.finish(cl, nil)
	return nil
}

// maxTokens is the answer budget of one call.
func (c *Client) maxTokens(req Request, json bool) int {
	switch {
	case req.MaxTokens > 0:
		return req.MaxTokens
	case json:
		return c.cfg.MaxTokensJSON
	}
	return c.cfg.MaxTokensText
}

// limitHint names the settings that bound a call's answer, for errors
// about an answer cut off or spent on reasoning.
func (c *Client) limitHint(req Request, json bool) string {
	field := "max_tokens"
	if c.cfg.Provider == ProviderOllama {
		field = "num_predict"
	}
	var s string
	switch {
	case req.MaxTokens > 0:
		s = fmt.Sprintf("the call's MaxTokens (%s, now %d)", field, req.MaxTokens)
	case json:
		s = fmt.Sprintf("LLM_MAX_TOKENS_JSON (%s, now %d)", field, c.cfg.MaxTokensJSON)
	default:
		s = fmt.Sprintf("LLM_MAX_TOKENS_TEXT (%s, now %d)", field, c.cfg.MaxTokensText)
	}
	if c.cfg.Provider == ProviderOllama {
		s += fmt.Sprintf(" or LLM_NUM_CTX (now %d)", c.cfg.NumCtx)
	}
	return s
}

// Embed returns one vector per text, in order, using Config.EmbedModel.
// The whole batch shares one timeout; with Ollama, which langchaingo calls
// once per text, size batches accordingly.
func (c *Client) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	cl := call{op: "embed", label: "embed", model: c.cfg.EmbedModel, timeout: c.cfg.Timeout}
	if c.embed == nil {
		return nil, errors.New("llm embed: Config.EmbedModel is not set")
	}
	if len(texts) == 0 {
		return nil, nil
	}
	var vecs [][]float32
	err := c.run(ctx, cl, func(ctx context.Context) error {
		v, err := c.embed.CreateEmbedding(ctx, texts)
		if err != nil {
			return err
		}
		if len(v) != len(texts) {
			return fmt.Errorf("%w: %d vectors for %d texts", ErrEmpty, len(v), len(texts))
		}
		for i := range v {
			if len(v[i]) == 0 {
				return fmt.Errorf("%w: no vector for text %d", ErrEmpty, i)
			}
		}
		vecs = v
		return nil
	})
	if err != nil {
		return nil, c.finish(cl, err)
	}
	c.finish(cl, nil)
	return vecs, nil
}

// call identifies one operation for timeouts, metrics, logs and errors.
type call struct {
	op, label, model string
	timeout          time.Duration
}

func (c *Client) callFor(op string, req Request) call {
	cl := call{op: op, label: req.Label, model: c.cfg.Model, timeout: c.cfg.Timeout}
	if cl.label == "" {
		cl.label = "unlabeled"
	}
	if req.Strong {
		cl.model = c.cfg.StrongModel
	}
	if req.Timeout > 0 {
		cl.timeout = req.Timeout
	}
	return cl
}

// generate makes one chat call; out, for a JSON call, is the target
// whose schema is sent.
func (c *Client) generate(ctx context.Context, cl call, req Request, out any) (chatAnswer, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return chatAnswer{}, &callError{outcomeClientError, false, errors.New("empty prompt")}
	}
	cr := chatRequest{model: cl.model, system: req.System, prompt: req.Prompt,
		temperature: req.Temperature, maxTokens: c.maxTokens(req, out != nil)}
	if out != nil {
		cr.json = true
		cr.schema = SchemaFor(out)
		cr.schemaName = schemaName(out)
	} else if req.Partial != nil {
		shown := ""
		cr.onDelta = func(content string) {
			if t := domain.CleanText(visibleSoFar(content)); t != shown {
				shown = t
				req.Partial(t)
			}
		}
	}
	var a chatAnswer
	err := c.run(ctx, cl, func(ctx context.Context) error {
		ans, err := c.chat.chat(ctx, cr)
		if err != nil {
			return err
		}
		c.m.addTokenCounts(cl.label, cl.model, ans.promptTokens, ans.completionTokens)
		if strings.TrimSpace(ans.content) == "" && strings.TrimSpace(ans.reasoning) == "" && ans.stopReason != "length" {
			return ErrEmpty
		}
		// Whatever the model wrote is stored somewhere (an answer, a
		// proposal, a letter): what PostgreSQL cannot hold becomes U+FFFD,
		// escaped in a JSON answer as well as written out.
		if out != nil {
			b, _ := domain.CleanJSON([]byte(ans.content))
			ans.content = string(b)
		}
		ans.content, ans.reasoning = domain.CleanText(ans.content), domain.CleanText(ans.reasoning)
		a = ans
		return nil
	})
	return a, err
}

// run executes fn under the breaker, the concurrency limit and the per-call
// timeout, and returns its error classified. The order matters: an open
// breaker fails fast without queueing; queueing is bounded by the caller's
// ctx only; the timeout covers just the provider call.
func (c *Client) run(ctx context.Context, cl call, fn func(context.Context) error) error {
	if c.breaker.State() == gobreaker.StateOpen {
		return c.openError()
	}
	if err := c.sem.Acquire(ctx, 1); err != nil {
		return &callError{outcomeCanceled, false, fmt.Errorf("waiting for a free slot: %w", context.Cause(ctx))}
	}
	defer c.sem.Release(1)
	c.m.inFlight.Inc()
	defer c.m.inFlight.Dec()

	callCtx, cancel := context.WithTimeoutCause(ctx, cl.timeout, errCallTimeout)
	defer cancel()
	obs := &observation{}
	callCtx = context.WithValue(callCtx, observationKey{}, obs)

	start := time.Now()
	executed := false
	_, err := c.breaker.Execute(func() (struct{}, error) {
		executed = true
		err := classify(fn(callCtx), callCtx, obs, cl, c.cfg.Provider)
		c.noteOutcome(err)
		return struct{}{}, err
	})
	if executed {
		c.m.duration.WithLabelValues(cl.label, cl.model).Observe(time.Since(start).Seconds())
	}
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		// Opened while we queued, or half-open with its probe already out.
		return c.openError()
	}
	return err
}

// noteOutcome records what Health reports about a call that reached the
// provider. A refusal also arms tripNow, before the breaker sees the
// error, so that this very failure opens it.
func (c *Client) noteOutcome(err error) {
	var re *RefusedError
	var ce *callError
	c.stMu.Lock()
	switch {
	case errors.As(err, &re):
		c.refusal, c.lastFailure = re, re.Error()
	case errors.As(err, &ce) && ce.tripsBreaker:
		c.refusal, c.lastFailure = nil, err.Error()
	case err == nil:
		c.refusal = nil
	}
	c.stMu.Unlock()
	if err == nil {
		c.answered.Store(true)
	}
	if re != nil {
		c.tripNow.Store(true)
		c.log.Error("the LLM provider refused the call; calls fail fast until it is fixed",
			slog.Int("status", re.Status), slog.String("model", re.Model), slog.String("reason", re.Reason))
	}
}

// openError is the fast failure of a call the open breaker rejects: the
// refusal that opened it, if one did, so every caller sees what to fix.
func (c *Client) openError() error {
	c.stMu.Lock()
	re := c.refusal
	c.stMu.Unlock()
	if re != nil {
		return &callError{outcomeBreakerOpen, false, fmt.Errorf("%w: %w", ErrBreakerOpen, re)}
	}
	return &callError{outcomeBreakerOpen, false, ErrBreakerOpen}
}

// finish counts the call, logs failures and adds context to the error.
func (c *Client) finish(cl call, err error) error {
	outcome := outcomeOf(err)
	c.m.calls.WithLabelValues(cl.label, cl.model, outcome).Inc()
	if err == nil {
		return nil
	}
	prefix := "llm " + cl.op
	if cl.op != "embed" {
		prefix += " " + cl.label
	}
	err = fmt.Errorf("%s: %w", prefix, err)
	// Debug, not Warn: callers decide what a failure means (a retry, a
	// skipped item); sustained trouble shows as breaker transitions.
	c.log.Debug("llm call failed",
		slog.String("op", cl.op), slog.String("label", cl.label), slog.String("model", cl.model),
		slog.String("outcome", outcome), slog.Any("error", err))
	return err
}

// visibleSoFar is the part of a growing answer a reader may see: what
// stripReasoning leaves of it (nothing while a leading reasoning block is
// still open), and nothing while its start may yet become a reasoning
// tag ("<thi…").
func visibleSoFar(content string) string {
	t := strings.TrimLeft(content, " \t\r\n\uFEFF")
	if strings.HasPrefix("<think>", t) || strings.HasPrefix("<thinking>", t) {
		return ""
	}
	var rep repairs
	shown, ok := stripReasoning(content, &rep)
	if !ok {
		return ""
	}
	return strings.TrimSpace(shown)
}

// snippet bounds model output quoted in errors.
func snippet(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
