package llm

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Providers accepted in Config.Provider.
const (
	ProviderOllama = "ollama"
	ProviderOpenAI = "openai"
)

// Defaults applied by New to zero Config fields and options.
const (
	DefaultOllamaURL       = "http://127.0.0.1:11434"
	DefaultOpenAIURL       = "https://api.openai.com/v1"
	DefaultTimeout         = 60 * time.Second
	DefaultMaxConcurrency  = 4
	DefaultBreakerFailures = 5
	DefaultBreakerOpenFor  = 30 * time.Second
	// DefaultNumCtx is Ollama's context window for every request. The
	// largest prompt the workflows build is the memory assembler's: up to
	// 8000 estimated tokens of context plus its instructions, and the
	// estimate (characters/4) runs low for Cyrillic text, which tokenizers
	// split finer; add the answer budget (up to 2000 for the memory
	// responder) and 16384 leaves room for a 50 % underestimate. Ollama's
	// own default is 4096 (2048 on older versions), and it silently drops
	// the front of a longer prompt.
	DefaultNumCtx = 16384
	// DefaultMaxTokensJSON is the answer budget of a JSON call: an
	// analysis batch can propose several tasks with descriptions; a
	// verdict needs a few hundred tokens.
	DefaultMaxTokensJSON = 2048
	// DefaultMaxTokensText is the answer budget of a text call that sets
	// none itself (the memory responder sets its own).
	DefaultMaxTokensText = 2048
)

// Config selects and addresses the model backend.
type Config struct {
	Provider string // ProviderOllama or ProviderOpenAI
	// URL: for ollama the server root; for openai the API base including
	// its version path (e.g. http://host:8000/v1), used as is.
	URL    string
	APIKey string // required for openai; never logged

	Model       string // used by default
	StrongModel string // used when Request.Strong; defaults to Model
	EmbedModel  string // used by Embed; Embed fails if empty

	Timeout        time.Duration // per call; DefaultTimeout if zero
	MaxConcurrency int           // calls in flight per Client; DefaultMaxConcurrency if zero

	// NumCtx is Ollama's options.num_ctx, sent with every chat request to
	// every model; DefaultNumCtx if zero. It is one value on purpose:
	// Ollama reloads a model whenever num_ctx changes. Ignored by openai
	// (the server fixes its window).
	NumCtx int
	// Think lets a reasoning model think (Ollama "think": true, reasoning
	// in its own field). False, the default, sends "think": false, so the
	// answer budget goes to the answer. Reasoning that arrives anyway is
	// removed from every answer either way.
	Think bool
	// KeepAlive is Ollama's keep_alive: how long the model stays loaded
	// after a request, as a Go duration ("30m", "-1m" for ever) or whole
	// seconds ("3600", "-1"). Empty leaves the server's default (5m).
	KeepAlive string
	// MaxTokensJSON and MaxTokensText are the answer budgets (Ollama
	// num_predict, OpenAI max_tokens) of JSON and text calls whose Request
	// sets no MaxTokens; DefaultMaxTokensJSON / DefaultMaxTokensText if
	// zero. An answer cut off at the budget is refused, not repaired.
	MaxTokensJSON int
	MaxTokensText int
}

// String redacts the API key, so logging a Config cannot leak it.
func (c Config) String() string {
	return fmt.Sprintf("{Provider:%s URL:%s APIKey:%s Model:%s StrongModel:%s EmbedModel:%s Timeout:%s MaxConcurrency:%d NumCtx:%d Think:%t KeepAlive:%s MaxTokensJSON:%d MaxTokensText:%d}",
		c.Provider, c.URL, redact(c.APIKey), c.Model, c.StrongModel, c.EmbedModel, c.Timeout, c.MaxConcurrency,
		c.NumCtx, c.Think, c.KeepAlive, c.MaxTokensJSON, c.MaxTokensText)
}

// GoString redacts the API key for %#v as well.
func (c Config) GoString() string { return "llm.Config" + c.String() }

// LogValue redacts the API key when a Config is passed to slog.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("provider", c.Provider),
		slog.String("url", c.URL),
		slog.String("api_key", redact(c.APIKey)),
		slog.String("model", c.Model),
		slog.String("strong_model", c.StrongModel),
		slog.String("embed_model", c.EmbedModel),
		slog.Duration("timeout", c.Timeout),
		slog.Int("max_concurrency", c.MaxConcurrency),
		slog.Int("num_ctx", c.NumCtx),
		slog.Bool("think", c.Think),
		slog.String("keep_alive", c.KeepAlive),
		slog.Int("max_tokens_json", c.MaxTokensJSON),
		slog.Int("max_tokens_text", c.MaxTokensText),
	)
}

func redact(key string) string {
	if key == "" {
		return ""
	}
	return "[redacted]"
}

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	switch c.Provider {
	case ProviderOllama:
		c.URL = cmp.Or(c.URL, DefaultOllamaURL)
	case ProviderOpenAI:
		c.URL = cmp.Or(c.URL, DefaultOpenAIURL)
		if c.APIKey == "" {
			// langchaingo refuses to build a client without a token (and
			// would silently fall back to $OPENAI_API_KEY). Servers without
			// auth accept any placeholder.
			errs = append(errs, errors.New("openai provider needs APIKey (any placeholder for servers without auth)"))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown provider %q (want %q or %q)", c.Provider, ProviderOllama, ProviderOpenAI))
	}
	c.URL = strings.TrimRight(c.URL, "/")
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// Checked here because langchaingo's ollama.WithServerURL calls
		// log.Fatal on a URL it cannot parse.
		errs = append(errs, fmt.Errorf("invalid URL %q: want http(s)://host[:port][/path]", c.URL))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("Model is required"))
	}
	c.StrongModel = cmp.Or(c.StrongModel, c.Model)
	if c.Timeout < 0 || c.MaxConcurrency < 0 {
		errs = append(errs, errors.New("Timeout and MaxConcurrency must not be negative"))
	}
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxConcurrency = cmp.Or(c.MaxConcurrency, DefaultMaxConcurrency)
	if c.NumCtx < 0 || c.MaxTokensJSON < 0 || c.MaxTokensText < 0 {
		errs = append(errs, errors.New("NumCtx, MaxTokensJSON and MaxTokensText must not be negative"))
	}
	c.NumCtx = cmp.Or(c.NumCtx, DefaultNumCtx)
	c.MaxTokensJSON = cmp.Or(c.MaxTokensJSON, DefaultMaxTokensJSON)
	c.MaxTokensText = cmp.Or(c.MaxTokensText, DefaultMaxTokensText)
	if c.KeepAlive != "" {
		if _, err := strconv.Atoi(c.KeepAlive); err != nil {
			if _, err := time.ParseDuration(c.KeepAlive); err != nil {
				errs = append(errs, fmt.Errorf("invalid KeepAlive %q: want a duration (30m) or seconds (3600)", c.KeepAlive))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("llm config: %w", err)
	}
	return c, nil
}

// Option tunes a Client beyond its Config.
type Option func(*options)

type options struct {
	registry        prometheus.Registerer
	logger          *slog.Logger
	breakerFailures uint32
	breakerOpenFor  time.Duration
}

// WithRegistry registers the Client's metrics on r (typically
// prometheus.DefaultRegisterer). Without it they go to a private registry.
func WithRegistry(r prometheus.Registerer) Option { return func(o *options) { o.registry = r } }

// WithLogger sets the logger for breaker transitions and failed calls
// (slog.Default() otherwise).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithBreaker sets how many consecutive failures open the circuit breaker
// and how long it stays open before letting a probe through (defaults
// DefaultBreakerFailures, DefaultBreakerOpenFor). Zero keeps a default.
func WithBreaker(consecutiveFailures int, openFor time.Duration) Option {
	return func(o *options) {
		if consecutiveFailures > 0 {
			o.breakerFailures = uint32(consecutiveFailures)
		}
		if openFor > 0 {
			o.breakerOpenFor = openFor
		}
	}
}
