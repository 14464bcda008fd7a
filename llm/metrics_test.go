package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/llm"
	"switchboard/llm/llmtest"
)

func TestMetrics(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.PromptHasWords("ok")).Reply("four words of answer")
		srv.On(llmtest.PromptHasWords("empty")).Fault(llmtest.EmptyContent())
		srv.On(llmtest.PromptHasWords("json")).Fault(llmtest.InvalidJSON())
		c, reg := newClient(t, srv, provider, nil)
		ctx := context.Background()

		for range 2 {
			_, err := c.Text(ctx, llm.Request{System: "be brief", Prompt: "say ok", Label: "greet"})
			require.NoError(t, err)
		}
		_, err := c.Text(ctx, llm.Request{Prompt: "empty", Label: "greet", Strong: true})
		require.Error(t, err)
		var v verdict
		require.Error(t, c.JSON(ctx, llm.Request{Prompt: "json", Label: "judge"}, &v))

		// Token counts come from the provider (the fake counts words):
		// 2 calls x (2+2 prompt, 4 completion); the empty answer still
		// reports its 1 prompt word; the invalid JSON call 1 + 2.
		const want = `
# HELP llm_calls_total LLM calls by caller label, model and outcome.
# TYPE llm_calls_total counter
llm_calls_total{label="greet",model="big",outcome="empty"} 1
llm_calls_total{label="greet",model="small",outcome="ok"} 2
llm_calls_total{label="judge",model="small",outcome="invalid_json"} 1
# HELP llm_tokens_total Tokens reported by the provider, by kind (prompt, completion).
# TYPE llm_tokens_total counter
llm_tokens_total{kind="completion",label="greet",model="small"} 8
llm_tokens_total{kind="completion",label="judge",model="small"} 2
llm_tokens_total{kind="prompt",label="greet",model="big"} 1
llm_tokens_total{kind="prompt",label="greet",model="small"} 8
llm_tokens_total{kind="prompt",label="judge",model="small"} 1
# HELP llm_breaker_state Circuit breaker state: 0 closed, 1 half-open, 2 open.
# TYPE llm_breaker_state gauge
llm_breaker_state 0
# HELP llm_in_flight LLM calls currently being executed against the provider.
# TYPE llm_in_flight gauge
llm_in_flight 0
`
		require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
			"llm_calls_total", "llm_tokens_total", "llm_breaker_state", "llm_in_flight"))
		n, err := testutil.GatherAndCount(reg, "llm_call_duration_seconds")
		require.NoError(t, err)
		assert.Equal(t, 3, n, "one histogram series per label+model")
		assert.Equal(t, uint64(2), histogramCount(t, reg, "llm_call_duration_seconds",
			map[string]string{"label": "greet", "model": "small"}))
	})
}

func TestAPIKeyNeverLogged(t *testing.T) {
	srv := newServer(t)
	srv.On().Fault(llmtest.ServerError())
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, _ := newClient(t, srv, llm.ProviderOpenAI, nil, llm.WithLogger(logger), llm.WithBreaker(2, time.Minute))
	for range 3 {
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
		require.Error(t, err)
		assert.NotContains(t, err.Error(), testKey)
	}
	wrong, _ := newClient(t, srv, llm.ProviderOpenAI, func(cfg *llm.Config) { cfg.APIKey = testKey + "-wrong" },
		llm.WithLogger(logger))
	_, err := wrong.Text(context.Background(), llm.Request{Prompt: "p"})
	require.ErrorContains(t, err, "HTTP 401")
	assert.NotContains(t, err.Error(), testKey)

	cfg := configFor(srv, llm.ProviderOpenAI)
	logger.Info("config", "cfg", cfg)
	fmt.Fprintf(&buf, "%v %+v %#v %s\n", cfg, cfg, cfg, cfg)

	out := buf.String()
	assert.Contains(t, out, "circuit breaker state change", "something was logged")
	assert.Contains(t, out, "llm call failed")
	assert.Contains(t, out, "[redacted]")
	assert.NotContains(t, out, testKey)
}
