package domaintest

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// LLM is a client of the scripted server srv as the workflows' tests use
// it: Ollama's API, model "cheap", a 5 s timeout, its metrics on a registry
// of its own and its log discarded; cfg adds models and limits, opts a
// breaker. It is closed when the test ends.
func LLM(t testing.TB, srv *llmtest.Server, cfg llm.Config, opts ...llm.Option) *llm.Client {
	t.Helper()
	cfg.Provider, cfg.URL, cfg.Model, cfg.Timeout = llm.ProviderOllama, srv.URL(), "cheap", 5*time.Second
	opts = append([]llm.Option{llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	c, err := llm.New(cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
