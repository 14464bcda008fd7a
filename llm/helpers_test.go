package llm_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/internal/testkit"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

func TestMain(m *testing.M) {
	// Every test closes its Client (idle connections) and server, so no
	// transport goroutine may outlive it.
	goleak.VerifyTestMain(m)
}

var providers = []string{llm.ProviderOllama, llm.ProviderOpenAI}

const testKey = "sk-test-secret-key"

// newServer is a fake that wants the test API key.
func newServer(t *testing.T) *llmtest.Server {
	t.Helper()
	return llmtest.Start(t, llmtest.WithAPIKey(testKey))
}

func configFor(srv *llmtest.Server, provider string) llm.Config {
	cfg := llm.Config{
		Provider:    provider,
		Model:       "small",
		StrongModel: "big",
		EmbedModel:  "embedder",
		Timeout:     5 * time.Second,
	}
	switch provider {
	case llm.ProviderOllama:
		cfg.URL = srv.OllamaURL()
	case llm.ProviderOpenAI:
		cfg.URL = srv.OpenAIURL()
		cfg.APIKey = testKey
	}
	return cfg
}

// newClient builds a Client on srv with its own registry; mutate adjusts
// the config first.
func newClient(t *testing.T, srv *llmtest.Server, provider string, mutate func(*llm.Config), opts ...llm.Option) (*llm.Client, *prometheus.Registry) {
	t.Helper()
	cfg := configFor(srv, provider)
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	c, err := llm.New(cfg, append([]llm.Option{llm.WithRegistry(reg)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, reg
}

func forEachProvider(t *testing.T, fn func(t *testing.T, provider string)) {
	for _, p := range providers {
		t.Run(p, func(t *testing.T) { fn(t, p) })
	}
}

// waitBreaker polls until the breaker reaches want, failing after a
// generous deadline; fixed sleeps would be either slow or flaky.
func waitBreaker(t *testing.T, c *llm.Client, want llm.BreakerState) {
	t.Helper()
	require.Eventually(t, func() bool { return c.BreakerState() == want }, 5*time.Second, 5*time.Millisecond,
		"breaker never became %s (is %s)", want, c.BreakerState())
}

// histogramCount returns how many observations the histogram series with
// exactly these labels holds. (Counters and gauges are checked with
// testutil; it cannot read a histogram whose bucket contents depend on
// timing.)
func histogramCount(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) uint64 {
	t.Helper()
	return testkit.Series(t, reg, name, labels).GetHistogram().GetSampleCount()
}

// metricValue returns the counter or gauge value of the series with exactly
// these label values (0 if absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m := testkit.Series(t, reg, name, labels)
	return m.GetCounter().GetValue() + m.GetGauge().GetValue()
}

func assertGauge(t *testing.T, reg *prometheus.Registry, name string, want float64) {
	t.Helper()
	assert.Equal(t, want, metricValue(t, reg, name, nil), name)
}

// assertCalls checks llm_calls_total per outcome for one label and model.
func assertCalls(t *testing.T, reg *prometheus.Registry, label, model string, want map[string]float64) {
	t.Helper()
	for outcome, n := range want {
		got := metricValue(t, reg, "llm_calls_total", map[string]string{"label": label, "model": model, "outcome": outcome})
		assert.Equal(t, n, got, "llm_calls_total{label=%q,model=%q,outcome=%q}", label, model, outcome)
	}
}
