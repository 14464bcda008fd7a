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
)

// The wire format, byte for byte where it matters: Ollama streams unless
// "stream" is present and false, so the field must be sent; num_ctx and
// think go with every request.
func TestOllamaChatRequestAndAnswer(t *testing.T) {
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		assert.Equal(t, "/base/api/chat", r.URL.Path)
		body, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(body, &got))
		_, _ = io.WriteString(w, `{"model":"m","message":{"role":"assistant","content":"{\"ok\":true}","thinking":"hm"},"done":true,"done_reason":"stop","prompt_eval_count":12,"eval_count":5}`)
	}))
	defer srv.Close()
	c, err := newOllamaChat(srv.URL+"/base", srv.Client(), Config{NumCtx: 8192, KeepAlive: "-1"})
	require.NoError(t, err)

	a, err := c.chat(context.Background(), chatRequest{model: "big", system: "sys", prompt: "hi",
		temperature: 0.7, maxTokens: 2000, json: true})
	require.NoError(t, err)
	assert.Equal(t, chatAnswer{content: `{"ok":true}`, reasoning: "hm", stopReason: "stop", promptTokens: 12, completionTokens: 5}, a)

	assert.Equal(t, false, got["stream"], "stream:false is sent, not omitted")
	assert.Equal(t, false, got["think"], "think:false is sent, not omitted")
	assert.Equal(t, -1.0, got["keep_alive"], "whole seconds go as a number")
	assert.Equal(t, "big", got["model"])
	assert.Equal(t, "json", got["format"])
	assert.Equal(t, map[string]any{"temperature": 0.7, "num_predict": 2000.0, "num_ctx": 8192.0}, got["options"])
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
			c, err := newOllamaChat(srv.URL, srv.Client(), Config{})
			require.NoError(t, err)
			_, err = c.chat(context.Background(), chatRequest{model: "m", prompt: "hi"})
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestOllamaKeepAliveEncoding(t *testing.T) {
	assert.Nil(t, ollamaKeepAlive(""))
	assert.JSONEq(t, `3600`, string(ollamaKeepAlive("3600")))
	assert.JSONEq(t, `"30m"`, string(ollamaKeepAlive("30m")))
}
