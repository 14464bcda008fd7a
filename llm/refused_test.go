package llm_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// A model the server lacks is a refusal: the breaker opens at once, not
// after five failures, and every call after carries the server's reason
// without reaching it. The breaker stays open for an hour, so a stalled test
// machine cannot let a probe through before the checks; the probes are
// TestModelNotFoundProbes'.
func TestModelNotFoundRefuses(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := llmtest.Start(t, llmtest.WithAPIKey(testKey), llmtest.WithModels("other"))
		srv.On().Reply("hello")
		c, reg := newClient(t, srv, provider, nil, llm.WithBreaker(5, time.Hour))
		port := llm.Port{Client: c, Label: "vacancy_relevance"}
		ctx := context.Background()
		assert.Equal(t, llm.Health{State: llm.BreakerClosed, Since: c.Health().Since}, c.Health())
		assert.False(t, port.Open())

		before := time.Now()
		_, err := c.Text(ctx, llm.Request{Prompt: "p", Label: "probe"})
		require.ErrorIs(t, err, llm.ErrRefused)
		assert.NotErrorIs(t, err, llm.ErrBreakerOpen, "the refusal itself came from the server")
		var re *llm.RefusedError
		require.ErrorAs(t, err, &re)
		assert.Equal(t, 404, re.Status)
		assert.Equal(t, "small", re.Model)
		if provider == llm.ProviderOllama {
			assert.Equal(t, `model "small" not found: run "ollama pull small"`, re.Reason)
		} else {
			assert.Contains(t, re.Reason, `model "small" not found`)
			assert.Contains(t, re.Reason, "LLM_MODEL")
		}

		assert.Equal(t, llm.BreakerOpen, c.BreakerState())
		assert.True(t, port.Open(), "Port.Open is true while refused")
		assert.True(t, port.Refused())
		h := c.Health()
		assert.Equal(t, llm.BreakerOpen, h.State)
		assert.Contains(t, h.Reason, re.Reason)
		assert.False(t, h.Since.Before(before), "open since the refusal")
		assert.False(t, h.Since.After(time.Now()))
		assertGauge(t, reg, "llm_breaker_state", 2)

		// Fast failures carry the same refusal.
		var v verdict
		err = c.JSON(ctx, llm.Request{Prompt: "p", Label: "probe"}, &v)
		require.ErrorIs(t, err, llm.ErrBreakerOpen)
		require.ErrorIs(t, err, llm.ErrRefused)
		require.ErrorAs(t, err, &re)
		assert.Contains(t, err.Error(), re.Reason)
		assert.Len(t, srv.Requests(), 1, "no request while refused")
		assertCalls(t, reg, "probe", "small", map[string]float64{"refused": 1, "breaker_open": 1})
	})
}

// After a refusal the breaker probes like after any failure: while the model
// is still missing the probe is refused and the breaker opens again; once it
// is there, the next probe closes it.
func TestModelNotFoundProbes(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := llmtest.Start(t, llmtest.WithAPIKey(testKey), llmtest.WithModels("other"))
		srv.On().Reply("hello")
		c, reg := newClient(t, srv, provider, nil, llm.WithBreaker(5, 50*time.Millisecond))
		port := llm.Port{Client: c, Label: "vacancy_relevance"}
		ctx := context.Background()
		_, err := c.Text(ctx, llm.Request{Prompt: "p"})
		var re *llm.RefusedError
		require.ErrorAs(t, err, &re)
		assert.False(t, c.Answered())

		// Still missing at the probe: open again (the gauge says so
		// whatever the time: nothing reads the state in between), still
		// refused.
		waitBreaker(t, c, llm.BreakerHalfOpen)
		assert.Contains(t, c.Health().Reason, re.Reason, "half-open keeps the reason")
		_, err = c.Text(ctx, llm.Request{Prompt: "p"})
		require.ErrorIs(t, err, llm.ErrRefused)
		assert.NotErrorIs(t, err, llm.ErrBreakerOpen, "the probe reached the server")
		assertGauge(t, reg, "llm_breaker_state", 2)
		assert.Len(t, srv.Requests(), 2)

		// The model appears: the next probe succeeds and all is well.
		srv.ServeModels("small", "big", "embedder")
		waitBreaker(t, c, llm.BreakerHalfOpen)
		out, err := c.Text(ctx, llm.Request{Prompt: "p"})
		require.NoError(t, err)
		assert.Equal(t, "hello", out)
		assert.True(t, c.Answered(), "what ends a refusal another replica told")
		assert.Equal(t, llm.BreakerClosed, c.Health().State)
		assert.Empty(t, c.Health().Reason)
		assert.False(t, port.Open())
		assert.False(t, port.Refused())
	})
}

func TestWrongAPIKeyRefuses(t *testing.T) {
	srv := newServer(t)
	srv.On().Reply("x")
	c, _ := newClient(t, srv, llm.ProviderOpenAI, func(cfg *llm.Config) { cfg.APIKey = "sk-wrong" })
	_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
	var re *llm.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 401, re.Status)
	assert.Equal(t, "401: check LLM_API_KEY", re.Reason)
	assert.Contains(t, err.Error(), "Incorrect API key", "the server's words are kept for the log")
	assert.Equal(t, llm.BreakerOpen, c.BreakerState())
	assert.Contains(t, c.Health().Reason, "check LLM_API_KEY")
	_, err = c.Embed(context.Background(), []string{"x"})
	require.ErrorIs(t, err, llm.ErrRefused, "one breaker guards the whole backend")
}

func TestForbiddenRefuses(t *testing.T) {
	srv := newServer(t)
	srv.On().Fault(llmtest.HTTPError(403))
	c, _ := newClient(t, srv, llm.ProviderOllama, nil)
	_, err := c.Text(context.Background(), llm.Request{Prompt: "p", Strong: true})
	var re *llm.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, 403, re.Status)
	assert.Equal(t, "big", re.Model)
	assert.Contains(t, re.Reason, "LLM_API_KEY")
}

func TestHealthAfterFailures(t *testing.T) {
	srv := newServer(t)
	srv.On().Fault(llmtest.ServerError())
	c, _ := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(2, time.Minute))
	for range 2 {
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
		require.Error(t, err)
		assert.NotErrorIs(t, err, llm.ErrRefused, "a 500 is a passing failure")
	}
	h := c.Health()
	assert.Equal(t, llm.BreakerOpen, h.State)
	assert.Contains(t, h.Reason, "circuit breaker open")
	assert.Contains(t, h.Reason, "HTTP 500")
	assert.False(t, c.Refused(), "an outage is not a refusal")
	_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
	require.ErrorIs(t, err, llm.ErrBreakerOpen)
	assert.NotErrorIs(t, err, llm.ErrRefused)
}

func TestCheckModels(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := llmtest.Start(t, llmtest.WithAPIKey(testKey), llmtest.WithModels("small", "other"))
		c, _ := newClient(t, srv, provider, nil)
		missing, err := c.CheckModels(context.Background())
		require.NoError(t, err)
		require.Len(t, missing, 2)
		assert.Equal(t, "big", missing[0].Model)
		assert.Equal(t, "LLM_STRONG_MODEL", missing[0].Setting)
		assert.Equal(t, "embedder", missing[1].Model)
		assert.Equal(t, "LLM_EMBED_MODEL", missing[1].Setting)
		if provider == llm.ProviderOllama {
			assert.Equal(t, "ollama pull big", missing[0].Fix)
		} else {
			assert.Contains(t, missing[0].Fix, `does not serve "big"`)
			assert.Contains(t, missing[0].Fix, "small, other")
		}
		assert.Empty(t, srv.Requests(), "listing is not a chat call")

		srv.ServeModels("small", "big", "embedder")
		missing, err = c.CheckModels(context.Background())
		require.NoError(t, err)
		assert.Empty(t, missing)
		assert.Equal(t, llm.BreakerClosed, c.BreakerState(), "checking never touches the breaker")
	})
}

func TestCheckModelsOllamaLatestTag(t *testing.T) {
	srv := llmtest.Start(t, llmtest.WithModels("small:latest", "big", "embedder:latest"))
	c, _ := newClient(t, srv, llm.ProviderOllama, nil)
	missing, err := c.CheckModels(context.Background())
	require.NoError(t, err)
	assert.Empty(t, missing, `"small" is "small:latest"`)
}

func TestCheckModelsWrongKey(t *testing.T) {
	srv := newServer(t)
	c, _ := newClient(t, srv, llm.ProviderOpenAI, func(cfg *llm.Config) { cfg.APIKey = "sk-wrong" })
	_, err := c.CheckModels(context.Background())
	require.ErrorIs(t, err, llm.ErrRefused)
	assert.Contains(t, err.Error(), "check LLM_API_KEY")
}

// A spent quota (OpenAI's 429 insufficient_quota) or spent credits
// (OpenRouter's 402) is no rate limit: no wait brings it back, only
// billing does. It refuses as a wrong key does, so that work waits for
// the fix instead of being retried, failed and skipped meanwhile, and the
// admins read what to fix.
func TestSpentQuotaRefuses(t *testing.T) {
	for _, c := range []struct {
		fault  llmtest.Fault
		status int
	}{
		{llmtest.QuotaExceeded(), 429},
		{llmtest.CreditsSpent(), 402},
	} {
		t.Run(c.fault.String(), func(t *testing.T) {
			srv := newServer(t)
			srv.On().Reply("x").Fault(c.fault)
			cl, _ := newClient(t, srv, llm.ProviderOpenAI, nil, llm.WithBreaker(5, time.Hour))
			port := llm.Port{Client: cl, Label: "vacancy_relevance"}
			_, err := cl.Text(context.Background(), llm.Request{Prompt: "p"})
			require.ErrorIs(t, err, llm.ErrRefused)
			assert.NotErrorIs(t, err, llm.ErrRateLimited, "a rate limit is retried; a spent quota is not")
			var re *llm.RefusedError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, c.status, re.Status)
			assert.Contains(t, re.Reason, "billing")
			assert.Equal(t, llm.BreakerOpen, cl.BreakerState(), "at once, not after five calls")
			assert.True(t, port.Refused())
			assert.Contains(t, cl.Health().Reason, "billing")
			assert.Equal(t, 1, srv.Calls("rule1"), "the calls after fail fast")
			_, err = cl.Text(context.Background(), llm.Request{Prompt: "p"})
			require.ErrorIs(t, err, llm.ErrRefused)
			assert.Equal(t, 1, srv.Calls("rule1"))
		})
	}
}

// The embeddings go through langchaingo's client, whose errors carry the
// body's message only: a spent quota refuses there too.
func TestSpentQuotaRefusesEmbeddings(t *testing.T) {
	srv := newServer(t)
	srv.On(llmtest.Embed()).Fault(llmtest.QuotaExceeded())
	cl, _ := newClient(t, srv, llm.ProviderOpenAI, nil, llm.WithBreaker(5, time.Hour))
	_, err := cl.Embed(context.Background(), []string{"x"})
	require.ErrorIs(t, err, llm.ErrRefused)
	assert.NotErrorIs(t, err, llm.ErrRateLimited)
	assert.Equal(t, llm.BreakerOpen, cl.BreakerState())
}

// OpenRouter answers 403 when the model requires moderation and this
// input was flagged: one prompt refused, not the key. It must not open
// the breaker (every user's calls would fail fast and wait, the admins
// told to check LLM_API_KEY) nor count against it; other prompts go on.
func TestFlaggedInputRefusesThatCallOnly(t *testing.T) {
	srv := newServer(t)
	srv.On(llmtest.PromptContains("insult")).Named("flagged").Reply("x").Fault(llmtest.Flagged("harassment"))
	srv.On().Named("fine").Reply(`{"relevant":true,"score":80,"reason":"ok"}`)
	cl, _ := newClient(t, srv, llm.ProviderOpenAI, nil, llm.WithBreaker(1, time.Hour))
	port := llm.Port{Client: cl, Label: "vacancy_relevance"}
	for range 3 {
		_, err := cl.Text(context.Background(), llm.Request{Prompt: "an insult"})
		require.Error(t, err)
		assert.NotErrorIs(t, err, llm.ErrRefused, "the key is fine")
		assert.NotErrorIs(t, err, llm.ErrBreakerOpen)
		assert.Contains(t, err.Error(), "flagged")
		assert.Contains(t, err.Error(), "harassment")
	}
	assert.Equal(t, 3, srv.Calls("flagged"))
	assert.Equal(t, llm.BreakerClosed, cl.BreakerState())
	assert.False(t, port.Refused())
	got, err := cl.Text(context.Background(), llm.Request{Prompt: "a vacancy"})
	require.NoError(t, err)
	assert.Contains(t, got, "relevant")
}

// An OpenAI model that declines under structured outputs answers 200 with
// content null and the reason in message.refusal. That is this answer
// refused, not a sick backend: it is an invalid answer naming the
// model's words, which callers retry once or skip, and it does not count
// against the breaker, so a few such inputs in a row cannot open it for
// everyone.
func TestModelRefusalIsAnInvalidAnswer(t *testing.T) {
	srv := newServer(t)
	srv.On(llmtest.PromptContains("insult")).Named("declines").Reply("x").Refusal("I'm sorry, I can't help with that.")
	srv.On().Named("fine").Reply(`{"relevant":true,"score":8,"reason":"ok"}`)
	cl, _ := newClient(t, srv, llm.ProviderOpenAI, nil, llm.WithBreaker(2, time.Hour))
	for range 3 {
		var v verdict
		err := cl.JSON(context.Background(), llm.Request{Prompt: "an insult"}, &v)
		require.ErrorIs(t, err, llm.ErrInvalidJSON)
		assert.Contains(t, err.Error(), "I'm sorry, I can't help with that.")
	}
	assert.Equal(t, llm.BreakerClosed, cl.BreakerState())
	var v verdict
	require.NoError(t, cl.JSON(context.Background(), llm.Request{Prompt: "a vacancy"}, &v))
}
