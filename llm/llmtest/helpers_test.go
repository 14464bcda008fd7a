package llmtest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
	"go.uber.org/goleak"

	"switchboard/llm/llmtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// httpClient gives each test its own transport, so idle keep-alive
// connections are closed with the test instead of outliving it in
// langchaingo's shared default client (which goleak would report).
func httpClient(t testing.TB) *http.Client {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func ollamaLLM(t testing.TB, srv *llmtest.Server, model string) *ollama.LLM {
	t.Helper()
	l, err := ollama.New(
		ollama.WithServerURL(srv.OllamaURL()),
		ollama.WithModel(model),
		ollama.WithHTTPClient(httpClient(t)),
	)
	require.NoError(t, err)
	return l
}

func openaiLLM(t testing.TB, srv *llmtest.Server, model string, opts ...openai.Option) *openai.LLM {
	t.Helper()
	base := []openai.Option{
		openai.WithBaseURL(srv.OpenAIURL()),
		openai.WithToken("k"),
		openai.WithModel(model),
		openai.WithHTTPClient(httpClient(t)),
	}
	l, err := openai.New(append(base, opts...)...)
	require.NoError(t, err)
	return l
}

// models returns one real langchaingo client per provider, for tests that
// must behave the same on both.
func models(t testing.TB, srv *llmtest.Server, model string) map[llmtest.Provider]llms.Model {
	return map[llmtest.Provider]llms.Model{
		llmtest.Ollama: ollamaLLM(t, srv, model),
		llmtest.OpenAI: openaiLLM(t, srv, model),
	}
}

func msgs(system, prompt string) []llms.MessageContent {
	var out []llms.MessageContent
	if system != "" {
		out = append(out, llms.TextParts(llms.ChatMessageTypeSystem, system))
	}
	return append(out, llms.TextParts(llms.ChatMessageTypeHuman, prompt))
}

func generate(ctx context.Context, m llms.Model, system, prompt string, opts ...llms.CallOption) (string, error) {
	resp, err := m.GenerateContent(ctx, msgs(system, prompt), opts...)
	if err != nil {
		return "", err
	}
	return resp.Choices[0].Content, nil
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 5*time.Second, 5*time.Millisecond, msg)
}
