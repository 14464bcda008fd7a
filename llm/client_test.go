package llm_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/llm"
	"switchboard/llm/llmtest"
)

func TestText(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.SystemContains("archivist")).Named("archivist").Reply("Sorted by date.")
		c, _ := newClient(t, srv, provider, nil)

		out, err := c.Text(context.Background(), llm.Request{
			System: "You are an archivist.", Prompt: "Sort these files",
			Temperature: 0.2, MaxTokens: 50, Label: "archive",
		})
		require.NoError(t, err)
		assert.Equal(t, "Sorted by date.", out)

		r := srv.RequestsFor("archivist")[0]
		assert.Equal(t, llmtest.Provider(provider), r.Provider)
		assert.Equal(t, "small", r.Model)
		assert.Equal(t, []llmtest.Message{
			{Role: "system", Content: "You are an archivist."},
			{Role: "user", Content: "Sort these files"},
		}, r.Messages)
		require.NotNil(t, r.Temperature)
		assert.InDelta(t, 0.2, *r.Temperature, 1e-6)
		assert.Equal(t, 50, r.MaxTokens)
		assert.False(t, r.JSON)
		assert.False(t, r.Stream)

		_, err = c.Text(context.Background(), llm.Request{System: "archivist", Prompt: "hard one", Strong: true})
		require.NoError(t, err)
		assert.Equal(t, "big", srv.RequestsFor("archivist")[1].Model, "Strong selects StrongModel")
	})
}

func TestStrongModelDefaultsToModel(t *testing.T) {
	srv := newServer(t)
	srv.On().Reply("x")
	c, _ := newClient(t, srv, llm.ProviderOllama, func(cfg *llm.Config) { cfg.StrongModel = "" })
	_, err := c.Text(context.Background(), llm.Request{Prompt: "p", Strong: true})
	require.NoError(t, err)
	assert.Equal(t, "small", srv.Requests()[0].Model)
}

type verdict struct {
	Relevant bool `json:"relevant"`
	Score    int  `json:"score"`
}

func (v *verdict) Validate() error {
	if v.Score < 0 || v.Score > 10 {
		return errors.New("score out of range")
	}
	return nil
}

func TestJSON(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.PromptHasWords("good")).Reply(`{"relevant": true, "score": 8}`)
		srv.On(llmtest.PromptHasWords("fenced")).Reply("```json\n{\"relevant\": false, \"score\": 1}\n```")
		srv.On(llmtest.PromptHasWords("broken")).Fault(llmtest.InvalidJSON())
		srv.On(llmtest.PromptHasWords("range")).Reply(`{"relevant": true, "score": 99}`)
		srv.On(llmtest.PromptHasWords("trailing")).Reply(`{"score": 1} and more`)
		c, _ := newClient(t, srv, provider, nil)
		ctx := context.Background()
		req := func(p string) llm.Request { return llm.Request{Prompt: p, Label: "vacancy_relevance"} }

		var v verdict
		require.NoError(t, c.JSON(ctx, req("good vacancy"), &v))
		assert.Equal(t, verdict{Relevant: true, Score: 8}, v)
		assert.True(t, srv.Requests()[0].JSON, "JSON mode requested from the provider")

		var f verdict
		require.NoError(t, c.JSON(ctx, req("fenced"), &f), "markdown fences are tolerated")
		assert.Equal(t, verdict{Score: 1}, f)

		err := c.JSON(ctx, req("broken"), &v)
		require.ErrorIs(t, err, llm.ErrInvalidJSON)
		assert.Contains(t, err.Error(), "llm json vacancy_relevance: ")
		assert.Contains(t, err.Error(), "unterminated", "the offending content is quoted")

		err = c.JSON(ctx, req("range"), &v)
		require.ErrorIs(t, err, llm.ErrInvalidJSON, "Validate failures are invalid JSON too")
		assert.Contains(t, err.Error(), "score out of range")

		var tr verdict
		require.NoError(t, c.JSON(ctx, req("trailing"), &tr), "text after the first complete value is dropped")
		assert.Equal(t, verdict{Score: 1}, tr)

		n := len(srv.Requests())
		err = c.JSON(ctx, req("good"), v)
		require.Error(t, err)
		assert.NotErrorIs(t, err, llm.ErrInvalidJSON)
		assert.Len(t, srv.Requests(), n, "a non-pointer target is rejected before calling the model")
	})
}

func TestInvalidJSONDoesNotTripBreaker(t *testing.T) {
	srv := newServer(t)
	srv.On().Named("bad").Fault(llmtest.InvalidJSON())
	c, _ := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(3, time.Minute))
	var v verdict
	for range 6 {
		require.ErrorIs(t, c.JSON(context.Background(), llm.Request{Prompt: "p"}, &v), llm.ErrInvalidJSON)
	}
	assert.Equal(t, llm.BreakerClosed, c.BreakerState(), "the model answered; it is not down")
	assert.Equal(t, 6, srv.Calls("bad"))
}

func TestEmbed(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		c, _ := newClient(t, srv, provider, nil)
		texts := []string{"senior golang developer", "golang developer remote", "chocolate cake"}
		vecs, err := c.Embed(context.Background(), texts)
		require.NoError(t, err)
		require.Len(t, vecs, 3)
		assert.Equal(t, llmtest.Embedding(texts[2], llmtest.DefaultEmbeddingDim), vecs[2])
		assert.Greater(t, dot(vecs[0], vecs[1]), dot(vecs[0], vecs[2]))
		for _, r := range srv.Requests() {
			assert.Equal(t, "embedder", r.Model)
			assert.Equal(t, llmtest.KindEmbed, r.Kind)
		}

		vecs, err = c.Embed(context.Background(), nil)
		require.NoError(t, err)
		assert.Nil(t, vecs)
	})
}

func TestEmbedWithoutModel(t *testing.T) {
	srv := newServer(t)
	c, _ := newClient(t, srv, llm.ProviderOpenAI, func(cfg *llm.Config) { cfg.EmbedModel = "" })
	_, err := c.Embed(context.Background(), []string{"x"})
	require.ErrorContains(t, err, "EmbedModel")
	assert.Empty(t, srv.Requests())
}

func TestEmbedFaults(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.Embed()).FaultNext(1, llmtest.EmptyContent())
		c, _ := newClient(t, srv, provider, nil)
		_, err := c.Embed(context.Background(), []string{"x"})
		require.ErrorIs(t, err, llm.ErrEmpty)
		assert.Contains(t, err.Error(), "llm embed: ")

		srv.FailNext(1, llmtest.ServerError())
		_, err = c.Embed(context.Background(), []string{"x"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "HTTP 500")
	})
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func TestEmpty(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.PromptHasWords("fault")).Fault(llmtest.EmptyContent())
		srv.On(llmtest.PromptHasWords("blank")).Reply(" \n\t")
		c, _ := newClient(t, srv, provider, nil)
		for _, p := range []string{"fault", "blank"} {
			_, err := c.Text(context.Background(), llm.Request{Prompt: p, Label: "summary"})
			require.ErrorIs(t, err, llm.ErrEmpty, p)
			assert.Contains(t, err.Error(), "llm text summary: ")
			var v verdict
			require.ErrorIs(t, c.JSON(context.Background(), llm.Request{Prompt: p}, &v), llm.ErrEmpty, p)
		}
	})
}

func TestEmptyPromptRejected(t *testing.T) {
	srv := newServer(t)
	c, _ := newClient(t, srv, llm.ProviderOllama, nil)
	_, err := c.Text(context.Background(), llm.Request{System: "s", Prompt: "  "})
	require.ErrorContains(t, err, "empty prompt")
	assert.Empty(t, srv.Requests())
}

// The breaker opens after five failures in a row and then turns calls away
// without contacting the provider. It stays open for an hour here, so a
// stalled test machine cannot let a probe through before the checks; how it
// recovers is TestBreakerRecovers'.
func TestBreakerOpensAfterFailures(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On().Named("r").Reply("back").FaultNext(5, llmtest.ServerError())
		c, reg := newClient(t, srv, provider, nil, llm.WithBreaker(5, time.Hour))
		ctx := context.Background()
		req := llm.Request{Prompt: "p", Label: "probe"}

		for i := range 5 {
			assert.Equal(t, llm.BreakerClosed, c.BreakerState(), "call %d", i)
			_, err := c.Text(ctx, req)
			require.Error(t, err)
			assert.NotErrorIs(t, err, llm.ErrBreakerOpen)
			assert.Contains(t, err.Error(), "HTTP 500")
		}
		assert.Equal(t, llm.BreakerOpen, c.BreakerState())

		_, err := c.Text(ctx, req)
		require.ErrorIs(t, err, llm.ErrBreakerOpen)
		_, err = c.Embed(ctx, []string{"x"})
		require.ErrorIs(t, err, llm.ErrBreakerOpen, "one breaker guards the whole backend")
		assert.Equal(t, 5, srv.Calls("r"), "rejected calls never reach the server")
		assert.Len(t, srv.Requests(), 5)
		assertGauge(t, reg, "llm_breaker_state", 2)
		assertCalls(t, reg, "probe", "small", map[string]float64{"server_error": 5, "breaker_open": 1})
	})
}

// Once the open time has passed, one probe goes through and its success
// closes the breaker.
func TestBreakerRecovers(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On().Named("r").Reply("back").FaultNext(5, llmtest.ServerError())
		c, reg := newClient(t, srv, provider, nil, llm.WithBreaker(5, 50*time.Millisecond))
		ctx := context.Background()
		req := llm.Request{Prompt: "p", Label: "probe"}
		for range 5 {
			_, err := c.Text(ctx, req)
			require.Error(t, err)
		}

		waitBreaker(t, c, llm.BreakerHalfOpen)
		out, err := c.Text(ctx, req)
		require.NoError(t, err)
		assert.Equal(t, "back", out)
		assert.Equal(t, llm.BreakerClosed, c.BreakerState(), "a successful probe closes it")
		assert.Equal(t, 6, srv.Calls("r"))
		assertGauge(t, reg, "llm_breaker_state", 0)
		assertCalls(t, reg, "probe", "small", map[string]float64{"server_error": 5, "ok": 1})
	})
}

// A probe that fails opens the breaker again. The gauge says so whatever
// the time: the breaker turns half-open only when its state is read, and
// nothing reads it between the probe and the check.
func TestBreakerFailedProbeReopens(t *testing.T) {
	srv := newServer(t)
	srv.On().Fault(llmtest.HTTPError(503))
	c, reg := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(2, 50*time.Millisecond))
	for range 2 {
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
		require.Error(t, err)
	}
	waitBreaker(t, c, llm.BreakerHalfOpen)
	assertGauge(t, reg, "llm_breaker_state", 1)
	_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
	require.Error(t, err)
	assert.NotErrorIs(t, err, llm.ErrBreakerOpen, "the probe itself reached the server")
	assertGauge(t, reg, "llm_breaker_state", 2)
	assert.Len(t, srv.Requests(), 3)
}

// TestBreakerIgnores covers failures that say nothing about the backend's
// health: they must not open the breaker however many there are.
func TestBreakerIgnores(t *testing.T) {
	cases := map[string]struct {
		setup func(*llmtest.Server)
		ctx   func() (context.Context, context.CancelFunc)
		check func(*testing.T, error)
	}{
		"caller cancellation": {
			setup: func(s *llmtest.Server) { s.On().Latency(5 * time.Second).Reply("late") },
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 30*time.Millisecond)
			},
			check: func(t *testing.T, err error) {
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.NotErrorIs(t, err, llm.ErrTimeout, "the caller's deadline is not our timeout")
			},
		},
		"already cancelled": {
			setup: func(s *llmtest.Server) { s.On().Reply("x") },
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			check: func(t *testing.T, err error) { require.ErrorIs(t, err, context.Canceled) },
		},
		"bad request": {
			setup: func(s *llmtest.Server) { s.On().Fault(llmtest.HTTPError(400)) },
			check: func(t *testing.T, err error) { require.ErrorContains(t, err, "HTTP 400") },
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t)
			tc.setup(srv)
			c, _ := newClient(t, srv, llm.ProviderOpenAI, nil, llm.WithBreaker(2, time.Minute))
			for range 4 {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if tc.ctx != nil {
					ctx, cancel = tc.ctx()
				}
				_, err := c.Text(ctx, llm.Request{Prompt: "p"})
				cancel()
				tc.check(t, err)
			}
			assert.Equal(t, llm.BreakerClosed, c.BreakerState())
		})
	}
}

func TestBreakerCountsConsecutiveOnly(t *testing.T) {
	srv := newServer(t)
	rule := srv.On().Reply("ok")
	c, _ := newClient(t, srv, llm.ProviderOllama, nil, llm.WithBreaker(3, time.Minute))
	for range 3 {
		rule.FaultNext(2, llmtest.ServerError())
		for range 3 {
			_, _ = c.Text(context.Background(), llm.Request{Prompt: "p"})
		}
	}
	assert.Equal(t, llm.BreakerClosed, c.BreakerState(), "a success in between resets the count")
	rule.FaultNext(3, llmtest.ServerError())
	for range 3 {
		_, _ = c.Text(context.Background(), llm.Request{Prompt: "p"})
	}
	assert.Equal(t, llm.BreakerOpen, c.BreakerState())
}

func TestTimeout(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On().Named("hang").Fault(llmtest.Hang())
		c, reg := newClient(t, srv, provider, func(cfg *llm.Config) { cfg.Timeout = 100 * time.Millisecond },
			llm.WithBreaker(2, time.Minute))

		start := time.Now()
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p", Label: "slow"})
		require.ErrorIs(t, err, llm.ErrTimeout)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// The fake hangs until the client gives up: far longer than a
		// loaded host's lag past the 100 ms.
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.Contains(t, err.Error(), "llm text slow: ")
		assert.Equal(t, 1, srv.Calls("hang"))
		assertCalls(t, reg, "slow", "small", map[string]float64{"timeout": 1})

		// Per-request override, and timeouts count towards the breaker.
		start = time.Now()
		var v verdict
		err = c.JSON(context.Background(), llm.Request{Prompt: "p", Timeout: 50 * time.Millisecond}, &v)
		require.ErrorIs(t, err, llm.ErrTimeout)
		assert.Less(t, time.Since(start), 10*time.Second)
		assert.Equal(t, llm.BreakerOpen, c.BreakerState())
		require.Eventually(t, func() bool { return srv.InFlight() == 0 }, 5*time.Second, 5*time.Millisecond,
			"server handlers released after the client gave up")
	})
}

func TestRequestTimeoutOverridesLonger(t *testing.T) {
	srv := newServer(t)
	srv.On().Latency(300 * time.Millisecond).Reply("slow but fine")
	c, _ := newClient(t, srv, llm.ProviderOllama, func(cfg *llm.Config) { cfg.Timeout = 50 * time.Millisecond })
	out, err := c.Text(context.Background(), llm.Request{Prompt: "p", Timeout: 5 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, "slow but fine", out)
}

func TestRateLimited(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On().Fault(llmtest.RateLimit(3 * time.Second))
		c, _ := newClient(t, srv, provider, nil)
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
		require.ErrorIs(t, err, llm.ErrRateLimited)
		var rl *llm.RateLimitError
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, 3*time.Second, rl.RetryAfter)
	})
}

func TestConnectionRefused(t *testing.T) {
	srv := llmtest.New()
	srv.Close() // nothing listens on its address any more
	cfg := configFor(srv, llm.ProviderOllama)
	c, err := llm.New(cfg, llm.WithBreaker(2, time.Minute))
	require.NoError(t, err)
	defer c.Close()
	for range 2 {
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
		require.Error(t, err)
	}
	assert.Equal(t, llm.BreakerOpen, c.BreakerState(), "transport errors count")
}

func TestMaxConcurrency(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		var mu sync.Mutex
		var cur, peak int
		srv.On().Latency(100 * time.Millisecond).ReplyFunc(func(llmtest.Request) string {
			mu.Lock()
			cur++
			peak = max(peak, cur)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // overlap the reply funcs too
			mu.Lock()
			cur--
			mu.Unlock()
			return "done"
		})
		c, reg := newClient(t, srv, provider, func(cfg *llm.Config) { cfg.MaxConcurrency = 2 })

		start := time.Now()
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				out, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
				assert.NoError(t, err)
				assert.Equal(t, "done", out)
			})
		}
		wg.Wait()
		assert.Equal(t, 2, srv.MaxInFlight(), "the server never sees more than MaxConcurrency at once")
		assert.LessOrEqual(t, peak, 2)
		assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "6 calls in 3 waves of 2")
		assertGauge(t, reg, "llm_in_flight", 0)
	})
}

func TestQueueWaitBoundedByCallerNotTimeout(t *testing.T) {
	srv := newServer(t)
	srv.On().Latency(100 * time.Millisecond).Reply("ok")
	c, _ := newClient(t, srv, llm.ProviderOllama, func(cfg *llm.Config) {
		cfg.MaxConcurrency = 1
		cfg.Timeout = 250 * time.Millisecond
	})
	// The third call queues ~200ms and then needs ~100ms, more than the
	// 250ms call timeout in total; queueing must not eat into it.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	// A caller that gives up while queued gets its own context error.
	wg.Go(func() {
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p"})
		assert.NoError(t, err)
	})
	require.Eventually(t, func() bool { return srv.InFlight() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Text(ctx, llm.Request{Prompt: "p"})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, llm.ErrTimeout)
	assert.Contains(t, err.Error(), "free slot")
	wg.Wait()
	assert.Len(t, srv.Requests(), 4, "the abandoned call never reached the server")
}

func TestConfigValidation(t *testing.T) {
	ok := llm.Config{Provider: "ollama", Model: "m"}
	_, err := llm.New(ok)
	require.NoError(t, err, "URL defaults for ollama")

	for name, cfg := range map[string]llm.Config{
		"unknown provider": {Provider: "anthropic", Model: "m"},
		"no model":         {Provider: "ollama"},
		"openai no key":    {Provider: "openai", Model: "m", URL: "http://x/v1"},
		"bad url":          {Provider: "ollama", Model: "m", URL: "localhost:11434"},
		"negative timeout": {Provider: "ollama", Model: "m", Timeout: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := llm.New(cfg)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "llm config: ")
		})
	}
}

func TestSharedRegistry(t *testing.T) {
	srv := newServer(t)
	srv.On().Reply("x")
	a, reg := newClient(t, srv, llm.ProviderOllama, nil)
	b, err := llm.New(configFor(srv, llm.ProviderOpenAI), llm.WithRegistry(reg))
	require.NoError(t, err, "a second Client adopts the registered collectors")
	defer b.Close()
	_, err = a.Text(context.Background(), llm.Request{Prompt: "p", Label: "l"})
	require.NoError(t, err)
	_, err = b.Text(context.Background(), llm.Request{Prompt: "p", Label: "l"})
	require.NoError(t, err)
	assertCalls(t, reg, "l", "small", map[string]float64{"ok": 2})
}

func TestLatencyIsMeasured(t *testing.T) {
	srv := newServer(t)
	srv.On().Latency(20 * time.Millisecond).Reply("x")
	c, reg := newClient(t, srv, llm.ProviderOllama, nil)
	for range 3 {
		_, err := c.Text(context.Background(), llm.Request{Prompt: "p", Label: "timed"})
		require.NoError(t, err)
	}
	assert.Equal(t, uint64(3), histogramCount(t, reg, "llm_call_duration_seconds", map[string]string{"label": "timed", "model": "small"}))
}

// partials records what a streamed call showed, in order.
type partials struct {
	mu   sync.Mutex
	seen []string
}

func (p *partials) add(s string) { p.mu.Lock(); p.seen = append(p.seen, s); p.mu.Unlock() }

func (p *partials) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.seen...)
}

func TestTextStreamsWhenAskedForPartials(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		const answer = "Lviv is **lovely** in spring.\n\nTake the train."
		srv.On(llmtest.SystemContains("mentor")).Named("mentor").Reply(answer).ChunkDelay(5 * time.Millisecond)
		c, reg := newClient(t, srv, provider, nil)

		var p partials
		out, err := c.Text(context.Background(), llm.Request{System: "mentor", Prompt: "Where?", Label: "memory_responder", Partial: p.add})
		require.NoError(t, err)
		assert.Equal(t, answer, out, "a streamed answer is the same answer")

		r := srv.RequestsFor("mentor")[0]
		assert.True(t, r.Stream, "the request asked for a stream")
		seen := p.all()
		require.Greater(t, len(seen), 3, "the answer arrived in pieces: %q", seen)
		for i := 1; i < len(seen); i++ {
			assert.True(t, len(seen[i]) > len(seen[i-1]) && seen[i][:len(seen[i-1])] == seen[i-1],
				"each partial extends the one before: %q then %q", seen[i-1], seen[i])
		}
		assert.Equal(t, answer, seen[len(seen)-1])
		assertCalls(t, reg, "memory_responder", "small", map[string]float64{"ok": 1})
		if provider == llm.ProviderOpenAI {
			assert.Positive(t, metricValue(t, reg, "llm_tokens_total",
				map[string]string{"label": "memory_responder", "model": "small", "kind": "completion"}),
				"the usage chunk was asked for and counted")
		}
	})
}

func TestStreamHidesReasoning(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		// A model that writes its reasoning inline, and one whose server
		// splits it off (Ollama's thinking, OpenAI's reasoning_content).
		srv.On(llmtest.PromptContains("inline")).Reply("<think>the user wants a city</think>Lviv.").ChunkDelay(time.Millisecond)
		srv.On(llmtest.PromptContains("split")).Reply("Kyiv.").Thinking("pondering the map").ChunkDelay(time.Millisecond)
		c, _ := newClient(t, srv, provider, nil)

		for prompt, want := range map[string]string{"inline": "Lviv.", "split": "Kyiv."} {
			var p partials
			out, err := c.Text(context.Background(), llm.Request{Prompt: prompt, Partial: p.add})
			require.NoError(t, err)
			assert.Equal(t, want, out)
			for _, s := range p.all() {
				assert.NotContains(t, s, "think", "no reasoning is ever shown")
				assert.NotContains(t, s, "pondering")
				assert.NotEmpty(t, s)
			}
			assert.Equal(t, want, p.all()[len(p.all())-1])
		}
	})
}

func TestStreamCutOffIsAnErrorNotAnAnswer(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.Chat()).Reply("one two three four five six").Fault(llmtest.StreamCut())
		c, _ := newClient(t, srv, provider, nil)

		var p partials
		_, err := c.Text(context.Background(), llm.Request{Prompt: "hi", Partial: p.add})
		require.Error(t, err, "half an answer is not an answer")
		assert.NotEmpty(t, p.all(), "its first half was shown while it came")
		assert.False(t, errors.Is(err, llm.ErrInvalidJSON))
	})
}

func TestStreamRefusedLikeAWholeAnswer(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.Chat()).Reply("never").Fault(llmtest.RateLimit(time.Second))
		c, _ := newClient(t, srv, provider, nil)
		_, err := c.Text(context.Background(), llm.Request{Prompt: "hi", Partial: func(string) { t.Error("nothing to show") }})
		require.ErrorIs(t, err, llm.ErrRateLimited)
	})
}
