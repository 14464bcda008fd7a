package llmtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"

	"switchboard/llm/llmtest"
)

// TestFaultsThroughRealClients pins down what each fault looks like to
// langchaingo's clients, since that is what code under test will see.
func TestFaultsThroughRealClients(t *testing.T) {
	type outcome struct {
		errContains string // "" means no error expected
		content     string
	}
	cases := []struct {
		fault  llmtest.Fault
		ollama outcome
		openai outcome
	}{
		{llmtest.ServerError(),
			outcome{errContains: "llmtest: injected HTTP 500"},
			outcome{errContains: "status code: 500: llmtest: injected HTTP 500"}},
		{llmtest.HTTPError(503),
			outcome{errContains: "injected HTTP 503"},
			outcome{errContains: "503"}},
		{llmtest.RateLimit(2 * time.Second),
			outcome{errContains: "rate limit"},
			outcome{errContains: "429"}},
		// An empty 200 body is no error to the ollama client (it just sees
		// no lines), while the openai client fails to decode it.
		{llmtest.EmptyBody(),
			outcome{content: ""},
			outcome{errContains: "EOF"}},
		{llmtest.EmptyContent(),
			outcome{content: ""},
			outcome{content: ""}},
		{llmtest.InvalidJSON(),
			outcome{content: `{"answer": "unterminated`},
			outcome{content: `{"answer": "unterminated`}},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			name := c.fault.String()
			if stream {
				name += "/stream"
			}
			t.Run(name, func(t *testing.T) {
				srv := llmtest.Start(t)
				srv.On().Named("f").Reply("healthy answer").Fault(c.fault)
				for p, m := range models(t, srv, "m") {
					want := c.ollama
					if p == llmtest.OpenAI {
						want = c.openai
						// The SSE parser treats an empty body as a stream
						// that ended before any chunk.
						if stream && c.fault == llmtest.EmptyBody() {
							want = outcome{}
						}
					}
					var opts []llms.CallOption
					if stream {
						opts = append(opts, llms.WithStreamingFunc(func(context.Context, []byte) error { return nil }))
					}
					out, err := generate(context.Background(), m, "", "q", append(opts, llms.WithJSONMode())...)
					if want.errContains != "" {
						require.Error(t, err, p)
						assert.Contains(t, err.Error(), want.errContains, p)
						continue
					}
					require.NoError(t, err, p)
					assert.Equal(t, want.content, out, p)
				}
				for _, r := range srv.Requests() {
					assert.Equal(t, c.fault.String(), r.Fault)
					assert.Equal(t, "f", r.Rule)
				}
			})
		}
	}
	assert.False(t, json.Valid([]byte(`{"answer": "unterminated`)))
}

func TestRateLimitWire(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Fault(llmtest.RateLimit(1500 * time.Millisecond))
	for _, path := range []string{"/api/chat", "/v1/chat/completions"} {
		resp, err := httpClient(t).Post(srv.URL()+path, "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		require.NoError(t, err)
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		resp.Body.Close()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, path)
		assert.Equal(t, "2", resp.Header.Get("Retry-After"), "rounded up to whole seconds")
		if path == "/api/chat" {
			assert.IsType(t, "", body["error"], "ollama: {\"error\": string}")
		} else {
			e := body["error"].(map[string]any)
			assert.Equal(t, "rate_limit_exceeded", e["code"])
			assert.NotEmpty(t, e["message"])
			assert.Contains(t, e, "type")
		}
	}
}

// The account and moderation refusals have the shapes OpenAI and
// OpenRouter give them: what the client must tell from a rate limit and
// from a key refused.
func TestAccountRefusalsWire(t *testing.T) {
	post := func(srv *llmtest.Server) (int, http.Header, map[string]any) {
		resp, err := httpClient(t).Post(srv.OpenAIURL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var body map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
		return resp.StatusCode, resp.Header, body["error"].(map[string]any)
	}

	srv := llmtest.Start(t)
	srv.On().Reply("ok").Fault(llmtest.QuotaExceeded())
	status, h, e := post(srv)
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Empty(t, h.Get("Retry-After"), "waiting does not bring a quota back")
	assert.Equal(t, "insufficient_quota", e["code"])
	assert.Equal(t, "insufficient_quota", e["type"])
	assert.Contains(t, e["message"], "You exceeded your current quota")

	srv = llmtest.Start(t)
	srv.On().Reply("ok").Fault(llmtest.CreditsSpent())
	status, _, e = post(srv)
	assert.Equal(t, http.StatusPaymentRequired, status)
	assert.EqualValues(t, 402, e["code"], "OpenRouter's code is the status, a number")
	assert.Contains(t, e["message"], "Insufficient credits")

	srv = llmtest.Start(t)
	srv.On().Reply("ok").Fault(llmtest.Flagged("harassment", "violence"))
	status, _, e = post(srv)
	assert.Equal(t, http.StatusForbidden, status)
	assert.EqualValues(t, 403, e["code"])
	md := e["metadata"].(map[string]any)
	assert.Equal(t, []any{"harassment", "violence"}, md["reasons"])
	assert.Contains(t, md, "flagged_input")
	assert.Equal(t, []string{"flagged"}, faultsOf(srv.Requests()))
}

// A model that declines under structured outputs: 200, content null,
// the reason in message.refusal.
func TestRefusalWire(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Reply("x").Refusal("I can't help with that.")
	resp, err := httpClient(t).Post(srv.OpenAIURL()+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	var body struct {
		Choices []struct {
			Message      map[string]any `json:"message"`
			FinishReason string         `json:"finish_reason"`
		} `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.Len(t, body.Choices, 1)
	m := body.Choices[0].Message
	assert.Contains(t, m, "content")
	assert.Nil(t, m["content"])
	assert.Equal(t, "I can't help with that.", m["refusal"])
	assert.Equal(t, "stop", body.Choices[0].FinishReason)
}

func faultsOf(rs []llmtest.Request) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Fault)
	}
	return out
}

// clientsGiveUp asks through each provider's client with a deadline of
// timeout, which the server must outlast: the client gives up soon after,
// and the server's handler returns (why says what is wrong if it does not).
func clientsGiveUp(t *testing.T, srv *llmtest.Server, timeout time.Duration, why string) {
	t.Helper()
	for p, m := range models(t, srv, "m") {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		start := time.Now()
		_, err := generate(ctx, m, "", "q")
		cancel()
		require.Error(t, err, p)
		// The server outlasts any healthy lag past timeout: it holds
		// until the client goes.
		assert.Less(t, time.Since(start), 10*time.Second, p)
		eventually(t, func() bool { return srv.InFlight() == 0 }, why)
	}
}

func TestHangEndsWhenClientGivesUp(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Named("hang").Fault(llmtest.Hang())
	// The handler notices the client left and returns: nothing leaks.
	clientsGiveUp(t, srv, 100*time.Millisecond, "handler still blocked")
	assert.Equal(t, 2, srv.Calls("hang"), "recorded before hanging")
	assert.Equal(t, "hang", srv.Requests()[0].Fault)
}

func TestHangEndsWhenServerCloses(t *testing.T) {
	srv := llmtest.New()
	srv.On().Fault(llmtest.Hang())
	m := ollamaLLM(t, srv, "m")
	errc := make(chan error, 1)
	go func() {
		_, err := generate(context.Background(), m, "", "q")
		errc <- err
	}()
	eventually(t, func() bool { return srv.InFlight() == 1 }, "request never arrived")
	srv.Close()
	select {
	case err := <-errc:
		assert.Error(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not release the hanging request")
	}
}

// The global latency is long enough that no stall of a healthy machine
// makes a call without it look as slow.
func TestLatency(t *testing.T) {
	const global = 2 * time.Second
	srv := llmtest.Start(t, llmtest.WithLatency(global))
	srv.On(llmtest.Model("slow")).Named("slow").Latency(80 * time.Millisecond).Reply("late")
	srv.On().Named("other").Reply("soon")

	start := time.Now()
	out, err := generate(context.Background(), ollamaLLM(t, srv, "slow"), "", "q")
	require.NoError(t, err)
	assert.Equal(t, "late", out)
	elapsed := time.Since(start)
	assert.GreaterOrEqual(t, elapsed, 80*time.Millisecond, "rule latency")
	assert.Less(t, elapsed, global, "rule latency replaces the global one")

	start = time.Now()
	_, err = generate(context.Background(), openaiLLM(t, srv, "x"), "", "q")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), global, "global latency")

	srv.SetLatency(0)
	start = time.Now()
	_, err = generate(context.Background(), openaiLLM(t, srv, "x"), "", "q")
	require.NoError(t, err)
	assert.Less(t, time.Since(start), global)
}

func TestLatencyRespectsCancellation(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Latency(10 * time.Second).Reply("too late")
	clientsGiveUp(t, srv, 50*time.Millisecond, "latency wait not cancelled")
}

func TestTimeoutMidStream(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Reply("a b c d e f g h").ChunkDelay(time.Second)
	for p, m := range models(t, srv, "m") {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		var got int
		_, err := m.GenerateContent(ctx, msgs("", "q"), llms.WithStreamingFunc(func(context.Context, []byte) error {
			got++
			return nil
		}))
		cancel()
		// The first chunk(s) arrive before the deadline; then the client
		// gives up mid-stream. langchaingo's ollama client reports the
		// cut-off as a read error, the openai one may swallow it.
		_ = err
		assert.Positive(t, got, p)
		eventually(t, func() bool { return srv.InFlight() == 0 }, "stream handler not cancelled")
	}
}

func TestFailNext(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.Model("a")).Named("a").Reply("A")
	srv.On(llmtest.Model("b")).Named("b").Reply("B")
	srv.FailNext(2, llmtest.ServerError())
	srv.FailNext(1, llmtest.EmptyContent())
	a, b := ollamaLLM(t, srv, "a"), openaiLLM(t, srv, "b")

	_, err := generate(context.Background(), a, "", "q")
	require.Error(t, err)
	_, err = generate(context.Background(), b, "", "q")
	require.Error(t, err, "server-wide faults apply whatever rule matches")
	out, err := generate(context.Background(), a, "", "q")
	require.NoError(t, err)
	assert.Empty(t, out, "queued faults apply in order")
	out, err = generate(context.Background(), b, "", "q")
	require.NoError(t, err)
	assert.Equal(t, "B", out)

	var faults []string
	for _, r := range srv.Requests() {
		faults = append(faults, r.Fault)
	}
	assert.Equal(t, []string{"http_500", "http_500", "empty_content", ""}, faults)
}

func TestRuleFaultNext(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Named("r").Reply("ok").FaultNext(2, llmtest.HTTPError(502))
	m := openaiLLM(t, srv, "m")
	for i := range 2 {
		_, err := generate(context.Background(), m, "", "q")
		require.Error(t, err, i)
		assert.Contains(t, err.Error(), "502")
	}
	out, err := generate(context.Background(), m, "", "q")
	require.NoError(t, err)
	assert.Equal(t, "ok", out)
	srv.On() // unrelated
	srv.Requests()
	assert.Equal(t, 3, srv.Calls("r"))
}

func TestEmbeddingFaults(t *testing.T) {
	for _, f := range []llmtest.Fault{
		llmtest.ServerError(), llmtest.RateLimit(time.Second), llmtest.EmptyBody(),
		llmtest.EmptyContent(), llmtest.InvalidJSON(),
	} {
		t.Run(f.String(), func(t *testing.T) {
			srv := llmtest.Start(t)
			srv.On(llmtest.Embed()).Fault(f)
			for p, m := range models(t, srv, "e") {
				em := m.(interface {
					CreateEmbedding(context.Context, []string) ([][]float32, error)
				})
				_, err := em.CreateEmbedding(context.Background(), []string{"text"})
				assert.Error(t, err, p)
			}
		})
	}
}
