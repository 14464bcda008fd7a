package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
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
}

// String redacts the API key, so logging a Config cannot leak it.
func (c Config) String() string {
	return fmt.Sprintf("{Provider:%s URL:%s APIKey:%s Model:%s StrongModel:%s EmbedModel:%s Timeout:%s MaxConcurrency:%d}",
		c.Provider, c.URL, redact(c.APIKey), c.Model, c.StrongModel, c.EmbedModel, c.Timeout, c.MaxConcurrency)
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
		if c.URL == "" {
			c.URL = DefaultOllamaURL
		}
	case ProviderOpenAI:
		if c.URL == "" {
			c.URL = DefaultOpenAIURL
		}
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
	if c.StrongModel == "" {
		c.StrongModel = c.Model
	}
	if c.Timeout < 0 || c.MaxConcurrency < 0 {
		errs = append(errs, errors.New("Timeout and MaxConcurrency must not be negative"))
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxConcurrency == 0 {
		c.MaxConcurrency = DefaultMaxConcurrency
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
