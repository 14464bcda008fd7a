package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// The wire format, byte for byte where it matters: Ollama streams unless
// "stream" is present and false, so the field must be sent.
func TestOllamaChatRequestAndAnswer(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/base/api/chat", r.URL.Path)
		body, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(body, &got))
		_, _ = io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"{\"ok\":true}"},"done":true,"prompt_eval_count":12,"eval_count":5}`)
	}))
	defer srv.Close()
	c, err := newOllamaChat(srv.URL+"/base", "small", srv.Client())
	require.NoError(t, err)

	resp, err := c.GenerateContent(context.Background(), []llms.MessageContent{
		llms.TextParts(llms.ChatMessageTypeSystem, "sys"),
		llms.TextParts(llms.ChatMessageTypeHuman, "hi"),
	}, llms.WithModel("big"), llms.WithTemperature(0.7), llms.WithMaxTokens(2000), llms.WithJSONMode())
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, `{"ok":true}`, resp.Choices[0].Content)
	assert.Equal(t, 12, resp.Choices[0].GenerationInfo["PromptTokens"])
	assert.Equal(t, 5, resp.Choices[0].GenerationInfo["CompletionTokens"])

	assert.Equal(t, false, got["stream"], "stream:false is sent, not omitted")
	assert.Equal(t, "big", got["model"])
	assert.Equal(t, "json", got["format"])
	assert.Equal(t, map[string]any{"temperature": 0.7, "num_predict": 2000.0}, got["options"])
	assert.Equal(t, []any{
		map[string]any{"role": "system", "content": "sys"},
		map[string]any{"role": "user", "content": "hi"},
	}, got["messages"])
}

func TestOllamaChatErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		status int
		body   string
		want   string
	}{
		"error body":        {500, `{"error":"model \"x\" not found"}`, `ollama HTTP 500: model "x" not found`},
		"plain body":        {502, "bad gateway", "ollama HTTP 502: bad gateway"},
		"error with 200":    {200, `{"error":"out of memory"}`, "ollama: out of memory"},
		"undecodable":       {200, `{"message":`, "ollama answer: unexpected end of JSON input"},
		"no message at all": {200, `{"done":true}`, ErrEmpty.Error()},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c, err := newOllamaChat(srv.URL, "m", srv.Client())
			require.NoError(t, err)
			_, err = c.GenerateContent(context.Background(), []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "hi")})
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestOllamaChatRefusesNonTextParts(t *testing.T) {
	c, err := newOllamaChat("http://127.0.0.1:1", "m", http.DefaultClient)
	require.NoError(t, err)
	_, err = c.GenerateContent(context.Background(), []llms.MessageContent{{Role: llms.ChatMessageTypeHuman,
		Parts: []llms.ContentPart{llms.BinaryContent{MIMEType: "image/png", Data: []byte{1}}}}})
	require.ErrorContains(t, err, "only text parts")
}

func TestTruncateKeepsRunes(t *testing.T) {
	assert.Equal(t, "ab", truncate("ab", 5))
	assert.Equal(t, "ж…", truncate("жж", 3), "a cut inside a rune backs off to its start")
}
