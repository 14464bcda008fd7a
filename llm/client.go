package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
	"golang.org/x/sync/semaphore"
)

// Request is one prompt to the model.
type Request struct {
	System string
	Prompt string
	// Strong selects Config.StrongModel, for the few tasks worth a bigger
	// (slower) model.
	Strong bool
	// Temperature is sent as is. langchaingo always sends a temperature, so
	// there is no "provider default": the zero value means deterministic
	// sampling, which suits classification and extraction.
	Temperature float64
	// MaxTokens caps the answer; zero leaves it to the provider.
	MaxTokens int
	// Timeout overrides Config.Timeout for this call.
	Timeout time.Duration
	// Label names the call site in metrics and errors, e.g.
	// "vacancy_relevance". Keep it low-cardinality.
	Label string
}

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
	chat    llms.Model
	embed   embedder // nil without Config.EmbedModel
	tr      *http.Transport
	sem     *semaphore.Weighted
	breaker *gobreaker.CircuitBreaker[struct{}]
	log     *slog.Logger
	m       *metrics
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
		cfg: cfg,
		tr:  tr,
		sem: semaphore.NewWeighted(int64(cfg.MaxConcurrency)),
		log: o.logger.With(slog.String("component", "llm"), slog.String("provider", cfg.Provider)),
		m:   m,
	}
	if err := c.initProvider(hc); err != nil {
		return nil, fmt.Errorf("llm: %s client: %w", cfg.Provider, err)
	}

	failures := o.breakerFailures
	c.breaker = gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "llm-" + cfg.Provider,
		MaxRequests: 1, // one probe decides whether the backend is back
		Timeout:     o.breakerOpenFor,
		ReadyToTrip: func(cnt gobreaker.Counts) bool { return cnt.ConsecutiveFailures >= failures },
		IsExcluded: func(err error) bool {
			var ce *callError
			return errors.As(err, &ce) && !ce.tripsBreaker
		},
		// Runs under the breaker's lock: only record, never call back.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			m.breaker.Set(breakerGaugeValue(to))
			c.log.Warn("llm circuit breaker state change", slog.String("from", from.String()), slog.String("to", to.String()))
		},
	})
	m.breaker.Set(0)
	return c, nil
}

func (c *Client) initProvider(hc *http.Client) error {
	switch c.cfg.Provider {
	case ProviderOllama:
		chat, err := newOllamaChat(c.cfg.URL, c.cfg.Model, hc)
		if err != nil {
			return err
		}
		c.chat = chat
		if c.cfg.EmbedModel != "" {
			// langchaingo's ollama embeds with the LLM's own model, not a
			// per-call one, hence a second instance.
			emb, err := ollama.New(ollama.WithServerURL(c.cfg.URL), ollama.WithModel(c.cfg.EmbedModel), ollama.WithHTTPClient(hc))
			if err != nil {
				return err
			}
			c.embed = emb
		}
	case ProviderOpenAI:
		opts := []openai.Option{
			openai.WithBaseURL(c.cfg.URL),
			openai.WithToken(c.cfg.APIKey),
			openai.WithModel(c.cfg.Model),
			openai.WithHTTPClient(hc),
			// Explicit, so $OPENAI_ORGANIZATION cannot leak into requests.
			openai.WithOrganization(""),
		}
		if c.cfg.EmbedModel != "" {
			opts = append(opts, openai.WithEmbeddingModel(c.cfg.EmbedModel))
		}
		chat, err := openai.New(opts...)
		if err != nil {
			return err
		}
		c.chat = chat
		if c.cfg.EmbedModel != "" {
			c.embed = chat
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

// Text returns the model's answer to req.
func (c *Client) Text(ctx context.Context, req Request) (string, error) {
	cl := c.callFor("text", req)
	content, err := c.generate(ctx, cl, req, false)
	if err == nil {
		// Leave the text as the model wrote it; trimming is the caller's call.
		c.finish(cl, nil)
		return content, nil
	}
	return "", c.finish(cl, err)
}

// JSON asks for a JSON answer (provider JSON mode) and decodes it into out,
// which must be a non-nil pointer. If out implements Validate() error, a
// validation failure is reported like malformed JSON: both wrap
// ErrInvalidJSON, and neither counts against the circuit breaker.
func (c *Client) JSON(ctx context.Context, req Request, out any) error {
	cl := c.callFor("json", req)
	if v := reflect.ValueOf(out); v.Kind() != reflect.Pointer || v.IsNil() {
		return fmt.Errorf("llm json %s: out must be a non-nil pointer, got %T", cl.label, out)
	}
	content, err := c.generate(ctx, cl, req, true)
	if err != nil {
		return c.finish(cl, err)
	}
	if err := decodeJSON(content, out); err != nil {
		return c.finish(cl, &callError{outcomeInvalidJSON, false, err})
	}
	c.finish(cl, nil)
	return nil
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

func (c *Client) generate(ctx context.Context, cl call, req Request, jsonMode bool) (string, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return "", &callError{outcomeClientError, false, errors.New("empty prompt")}
	}
	msgs := make([]llms.MessageContent, 0, 2)
	if req.System != "" {
		msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeSystem, req.System))
	}
	msgs = append(msgs, llms.TextParts(llms.ChatMessageTypeHuman, req.Prompt))
	opts := []llms.CallOption{llms.WithModel(cl.model), llms.WithTemperature(req.Temperature)}
	if req.MaxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(req.MaxTokens))
	}
	if jsonMode {
		opts = append(opts, llms.WithJSONMode())
	}

	var content string
	err := c.run(ctx, cl, func(ctx context.Context) error {
		resp, err := c.chat.GenerateContent(ctx, msgs, opts...)
		if err != nil {
			return err
		}
		if len(resp.Choices) == 0 {
			return ErrEmpty
		}
		ch := resp.Choices[0]
		c.m.addTokens(cl.label, cl.model, ch.GenerationInfo)
		if strings.TrimSpace(ch.Content) == "" {
			return ErrEmpty
		}
		content = ch.Content
		return nil
	})
	return content, err
}

// run executes fn under the breaker, the concurrency limit and the per-call
// timeout, and returns its error classified. The order matters: an open
// breaker fails fast without queueing; queueing is bounded by the caller's
// ctx only; the timeout covers just the provider call.
func (c *Client) run(ctx context.Context, cl call, fn func(context.Context) error) error {
	if c.breaker.State() == gobreaker.StateOpen {
		return &callError{outcomeBreakerOpen, false, ErrBreakerOpen}
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
		return struct{}{}, classify(fn(callCtx), callCtx, obs, cl.timeout)
	})
	if executed {
		c.m.duration.WithLabelValues(cl.label, cl.model).Observe(time.Since(start).Seconds())
	}
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		// Opened while we queued, or half-open with its probe already out.
		return &callError{outcomeBreakerOpen, false, ErrBreakerOpen}
	}
	return err
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

// decodeJSON decodes a JSON-mode answer. Markdown fences are tolerated
// because OpenAI-compatible servers that ignore response_format, and some
// models even in JSON mode, wrap the object in ```json ... ```.
func decodeJSON(content string, out any) error {
	body := strings.TrimSpace(content)
	if strings.HasPrefix(body, "```") {
		body = strings.TrimPrefix(body, "```")
		if i := strings.IndexByte(body, '\n'); i >= 0 {
			body = body[i+1:] // drop the info string ("json")
		}
		body = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(body), "```"))
	}
	// Unmarshal rather than a Decoder: it also rejects trailing garbage.
	if err := json.Unmarshal([]byte(body), out); err != nil {
		return fmt.Errorf("%w: %v (content %q)", ErrInvalidJSON, err, snippet(content))
	}
	if v, ok := out.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("%w: validation: %w", ErrInvalidJSON, err)
		}
	}
	return nil
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
