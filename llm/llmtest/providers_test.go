package llmtest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"switchboard/llm/llmtest"
)

func TestOllamaGenerate(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.SystemContains("ARCHIVIST")).Named("archivist").Reply("The archive is sorted by date.")
	m := ollamaLLM(t, srv, "llama3")

	resp, err := m.GenerateContent(context.Background(), msgs("You are an archivist.", "Sort the files"),
		llms.WithTemperature(0.3), llms.WithMaxTokens(64))
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	c := resp.Choices[0]
	assert.Equal(t, "The archive is sorted by date.", c.Content)
	assert.Equal(t, 7, c.GenerationInfo["PromptTokens"], "words in system + user message")
	assert.Equal(t, 6, c.GenerationInfo["CompletionTokens"])

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, llmtest.Ollama, r.Provider)
	assert.Equal(t, llmtest.KindChat, r.Kind)
	assert.Equal(t, "/api/chat", r.Endpoint)
	assert.Equal(t, "llama3", r.Model)
	assert.Equal(t, []llmtest.Message{
		{Role: "system", Content: "You are an archivist."},
		{Role: "user", Content: "Sort the files"},
	}, r.Messages)
	assert.Equal(t, "You are an archivist.", r.System)
	assert.Equal(t, "Sort the files", r.Prompt)
	assert.False(t, r.Stream)
	assert.False(t, r.JSON)
	require.NotNil(t, r.Temperature)
	assert.InDelta(t, 0.3, *r.Temperature, 1e-6)
	assert.Equal(t, 64, r.MaxTokens)
	assert.Equal(t, "archivist", r.Rule)
	assert.Empty(t, r.Fault)
	assert.WithinDuration(t, time.Now(), r.Time, 5*time.Second)
	assert.Equal(t, 1, srv.Calls("archivist"))
}

func TestOllamaStreamingChunksInOrder(t *testing.T) {
	srv := llmtest.Start(t)
	const reply = "alpha beta  gamma\ndelta epsilon"
	// Four gaps of 100 ms between the five chunks: a reader has to stall
	// for 300 ms to see them closer than one gap, where chunks buffered
	// into one write arrive together on any host (at 5 ms gaps a loaded
	// CI host read the first late and the spread came to 14 ms).
	srv.On().Named("stream").Reply(reply).ChunkDelay(100 * time.Millisecond)
	m := ollamaLLM(t, srv, "llama3")

	var chunks []string
	var at []time.Time
	resp, err := m.GenerateContent(context.Background(), msgs("", "stream please"),
		llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
			chunks = append(chunks, string(b))
			at = append(at, time.Now())
			return nil
		}))
	require.NoError(t, err)
	assert.Equal(t, reply, resp.Choices[0].Content)
	// langchaingo also hands the final (empty, done) object to the func.
	want := append(llmtest.Chunks(reply), "")
	assert.Equal(t, want, chunks)
	assert.Equal(t, []string{"alpha ", "beta  ", "gamma\n", "delta ", "epsilon"}, llmtest.Chunks(reply))
	for i := 1; i < len(at)-1; i++ {
		assert.False(t, at[i].Before(at[i-1]), "chunks arrive in order")
	}
	assert.GreaterOrEqual(t, at[len(at)-2].Sub(at[0]), 100*time.Millisecond,
		"chunks were flushed separately, not buffered into one write")
	assert.Equal(t, 5, resp.Choices[0].GenerationInfo["CompletionTokens"])

	r := srv.Requests()[0]
	assert.True(t, r.Stream)
}

// TestOllamaStreamingWire checks the NDJSON framing itself, which langchaingo
// would tolerate small deviations from.
func TestOllamaStreamingWire(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Reply("one two three")

	body := `{"model":"m","messages":[{"role":"user","content":"hi there"}],"stream":true,"format":"json"}`
	resp, err := httpClient(t).Post(srv.URL()+"/api/chat", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/x-ndjson", resp.Header.Get("Content-Type"))

	type line struct {
		Model   string `json:"model"`
		Message struct {
			Role, Content string
		} `json:"message"`
		Done            bool   `json:"done"`
		DoneReason      string `json:"done_reason"`
		PromptEvalCount int    `json:"prompt_eval_count"`
		EvalCount       int    `json:"eval_count"`
		TotalDuration   int64  `json:"total_duration"`
		EvalDuration    int64  `json:"eval_duration"`
	}
	var lines []line
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l), "every line is one JSON object: %q", sc.Text())
		lines = append(lines, l)
	}
	require.NoError(t, sc.Err())
	require.Len(t, lines, 4)
	var got string
	for _, l := range lines[:3] {
		assert.False(t, l.Done)
		assert.Equal(t, "assistant", l.Message.Role)
		assert.Equal(t, "m", l.Model)
		got += l.Message.Content
	}
	assert.Equal(t, "one two three", got)
	last := lines[3]
	assert.True(t, last.Done)
	assert.Equal(t, "stop", last.DoneReason)
	assert.Equal(t, 2, last.PromptEvalCount)
	assert.Equal(t, 3, last.EvalCount)
	assert.Positive(t, last.TotalDuration)
	assert.Empty(t, last.Message.Content)

	r := srv.Requests()[0]
	assert.True(t, r.JSON)
	assert.Equal(t, "json", r.Format)
}

func TestJSONModeRecorded(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.JSONMode()).Named("json").Reply(`{"ok":true}`)
	srv.On().Named("text").Reply("plain")
	for p, m := range models(t, srv, "m") {
		t.Run(string(p), func(t *testing.T) {
			srv.Reset()
			out, err := generate(context.Background(), m, "", "give json", llms.WithJSONMode())
			require.NoError(t, err)
			assert.JSONEq(t, `{"ok":true}`, out)
			out, err = generate(context.Background(), m, "", "give text")
			require.NoError(t, err)
			assert.Equal(t, "plain", out)

			reqs := srv.Requests()
			require.Len(t, reqs, 2)
			assert.True(t, reqs[0].JSON)
			assert.False(t, reqs[1].JSON)
			want := map[llmtest.Provider]string{llmtest.Ollama: "json", llmtest.OpenAI: "json_object"}[p]
			assert.Equal(t, want, reqs[0].Format)
		})
	}
}

func TestOpenAIGenerate(t *testing.T) {
	srv := llmtest.Start(t, llmtest.WithAPIKey("k"))
	srv.On(llmtest.ProviderIs(llmtest.OpenAI), llmtest.Model("gpt-4o-mini")).Named("oa").Reply("Hello from the fake.")
	m := openaiLLM(t, srv, "gpt-4o-mini")

	resp, err := m.GenerateContent(context.Background(), msgs("be brief", "say hello"), llms.WithMaxTokens(20))
	require.NoError(t, err)
	c := resp.Choices[0]
	assert.Equal(t, "Hello from the fake.", c.Content)
	assert.Equal(t, "stop", c.StopReason)
	assert.Equal(t, 4, c.GenerationInfo["PromptTokens"])
	assert.Equal(t, 4, c.GenerationInfo["CompletionTokens"])
	assert.Equal(t, 8, c.GenerationInfo["TotalTokens"])

	r := srv.Requests()[0]
	assert.Equal(t, llmtest.OpenAI, r.Provider)
	assert.Equal(t, "/v1/chat/completions", r.Endpoint)
	assert.Equal(t, "gpt-4o-mini", r.Model)
	assert.Equal(t, "be brief", r.System)
	assert.Equal(t, "say hello", r.Prompt)
	assert.Equal(t, 20, r.MaxTokens)
	assert.False(t, r.Stream)
	assert.Equal(t, "oa", r.Rule)
}

func TestOpenAIStreaming(t *testing.T) {
	srv := llmtest.Start(t)
	const reply = "streamed over server sent events"
	srv.On().Reply(reply)
	m := openaiLLM(t, srv, "gpt-4o-mini")

	var chunks []string
	resp, err := m.GenerateContent(context.Background(), msgs("", "stream"),
		llms.WithStreamingFunc(func(_ context.Context, b []byte) error {
			if len(b) > 0 { // role-only and finish chunks carry no text
				chunks = append(chunks, string(b))
			}
			return nil
		}))
	require.NoError(t, err)
	c := resp.Choices[0]
	assert.Equal(t, reply, c.Content)
	assert.Equal(t, llmtest.Chunks(reply), chunks)
	assert.Equal(t, "stop", c.StopReason)
	assert.Equal(t, 5, c.GenerationInfo["CompletionTokens"], "usage chunk parsed")
	assert.True(t, srv.Requests()[0].Stream)
}

func TestOpenAIStreamingWire(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On().Reply("a b")
	body := `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"multi part"}]}],"stream":true,"stream_options":{"include_usage":true}}`
	resp, err := httpClient(t).Post(srv.OpenAIURL()+"/chat/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			require.True(t, strings.HasPrefix(line, "data: "), line)
			events = append(events, strings.TrimPrefix(line, "data: "))
		}
	}
	// role, "a ", "b", finish, usage, [DONE]
	require.Len(t, events, 6)
	assert.Equal(t, "[DONE]", events[5])
	var usage struct {
		Choices []any `json:"choices"`
		Usage   struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.Unmarshal([]byte(events[4]), &usage))
	assert.Empty(t, usage.Choices)
	assert.Equal(t, 2, usage.Usage.PromptTokens)
	assert.Equal(t, 2, usage.Usage.CompletionTokens)
	assert.Equal(t, "multi part", srv.Requests()[0].Prompt, "array content flattened")
}

func TestOpenAIAuth(t *testing.T) {
	srv := llmtest.Start(t, llmtest.WithAPIKey("secret"))
	srv.On().Reply("never")
	m := openaiLLM(t, srv, "m", openai.WithToken("wrong"))
	_, err := generate(context.Background(), m, "", "hi")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
	assert.Contains(t, err.Error(), "Incorrect API key")
	r := srv.Requests()[0]
	assert.Equal(t, "unauthorized", r.Fault)
	assert.Empty(t, r.Rule)

	// Ollama has no auth; the key does not apply there.
	_, err = generate(context.Background(), ollamaLLM(t, srv, "m"), "", "hi")
	require.NoError(t, err)
}

func cosine(a, b []float32) float64 {
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	return dot / math.Sqrt(na*nb)
}

func TestEmbeddings(t *testing.T) {
	texts := []string{"Senior Golang developer, remote", "golang developer wanted", "chocolate cake recipe"}
	check := func(t *testing.T, vecs [][]float32, dim int) {
		t.Helper()
		require.Len(t, vecs, 3)
		for _, v := range vecs {
			require.Len(t, v, dim)
			assert.InDelta(t, 1, cosine(v, v), 1e-5)
		}
		assert.Greater(t, cosine(vecs[0], vecs[1]), 0.3, "shared words make texts close")
		assert.Greater(t, cosine(vecs[0], vecs[1]), cosine(vecs[0], vecs[2]))
		assert.Equal(t, llmtest.Embedding(texts[0], dim), vecs[0], "deterministic and reproducible in tests")
	}

	t.Run("ollama", func(t *testing.T) {
		srv := llmtest.Start(t, llmtest.WithEmbeddingDim(64))
		vecs, err := ollamaLLM(t, srv, "nomic-embed-text").CreateEmbedding(context.Background(), texts)
		require.NoError(t, err)
		check(t, vecs, 64)
		reqs := srv.Requests()
		require.Len(t, reqs, 3, "langchaingo's ollama client embeds one text per request")
		assert.Equal(t, llmtest.KindEmbed, reqs[0].Kind)
		assert.Equal(t, "/api/embed", reqs[0].Endpoint)
		assert.Equal(t, "nomic-embed-text", reqs[0].Model)
		assert.Equal(t, []string{texts[0]}, reqs[0].Input)
		assert.Empty(t, reqs[0].Rule, "embeddings need no rule")
	})
	t.Run("openai", func(t *testing.T) {
		srv := llmtest.Start(t)
		m := openaiLLM(t, srv, "m", openai.WithEmbeddingModel("text-embedding-3-small"), openai.WithEmbeddingDimensions(32))
		vecs, err := m.CreateEmbedding(context.Background(), texts)
		require.NoError(t, err)
		check(t, vecs, 32)
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, "/v1/embeddings", reqs[0].Endpoint)
		assert.Equal(t, "text-embedding-3-small", reqs[0].Model)
		assert.Equal(t, texts, reqs[0].Input)
	})
	t.Run("edge cases", func(t *testing.T) {
		assert.Equal(t, float32(1), llmtest.Embedding("", 8)[0], "no words: first unit vector, never zero")
		assert.Equal(t, llmtest.Embedding("Hello, WORLD!", 16), llmtest.Embedding("hello world", 16))
		assert.Len(t, llmtest.Embedding("x", 0), llmtest.DefaultEmbeddingDim)
	})
}

func TestConcurrentUse(t *testing.T) {
	srv := llmtest.Start(t)
	srv.On(llmtest.PromptHasWords("even")).Named("even").Replies("e1", "e2")
	srv.On().Named("odd").ReplyFunc(func(r llmtest.Request) string { return "echo " + r.Prompt })
	ms := models(t, srv, "m")

	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := ms[llmtest.Ollama]
			if i%4 < 2 {
				m = ms[llmtest.OpenAI]
			}
			prompt := "odd call"
			if i%2 == 0 {
				prompt = "even call"
			}
			out, err := generate(context.Background(), m, "", prompt)
			assert.NoError(t, err)
			if i%2 == 0 {
				assert.Contains(t, []string{"e1", "e2"}, out)
			} else {
				assert.Equal(t, "echo odd call", out)
			}
		}()
		if i%3 == 0 {
			srv.Requests() // readers race with writers under -race
		}
	}
	wg.Wait()
	assert.Equal(t, 20, srv.Calls("even"))
	assert.Equal(t, 20, srv.Calls("odd"))
	assert.Len(t, srv.Requests(), 40)
	assert.LessOrEqual(t, srv.MaxInFlight(), 40)
	assert.Positive(t, srv.MaxInFlight())
}
