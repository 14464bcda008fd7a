package llm_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

func schemaProps(t *testing.T, raw string) map[string]any {
	t.Helper()
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &s), raw)
	if inner, ok := s["schema"].(map[string]any); ok { // OpenAI's json_schema wrapper
		s = inner
	}
	props, ok := s["properties"].(map[string]any)
	require.True(t, ok, "schema has properties: %s", raw)
	return props
}

func TestOllamaRequestSettings(t *testing.T) {
	srv := newServer(t)
	srv.On(llmtest.JSONMode()).Reply(`{"is_relevant": false, "score": 3, "reasons": [], "matched_skills": []}`)
	srv.On().Reply("text")
	c, _ := newClient(t, srv, llm.ProviderOllama, func(cfg *llm.Config) { cfg.KeepAlive = "10m" })
	ctx := context.Background()

	var v vacancy.Verdict
	require.NoError(t, c.JSON(ctx, llm.Request{Prompt: "a"}, &v))
	require.NoError(t, c.JSON(ctx, llm.Request{Prompt: "b", Strong: true, MaxTokens: 77}, &v))
	_, err := c.Text(ctx, llm.Request{Prompt: "c"})
	require.NoError(t, err)
	_, err = c.Text(ctx, llm.Request{Prompt: "d", MaxTokens: 500, Strong: true})
	require.NoError(t, err)

	reqs := srv.Requests()
	require.Len(t, reqs, 4)
	for i, r := range reqs {
		assert.Equal(t, llm.DefaultNumCtx, r.NumCtx, "request %d: the same num_ctx on every request to every model", i)
		require.NotNil(t, r.Think, "request %d: think is sent", i)
		assert.False(t, *r.Think, "request %d", i)
		assert.Equal(t, `"10m"`, r.KeepAlive, "request %d", i)
	}
	assert.Equal(t, []int{llm.DefaultMaxTokensJSON, 77, llm.DefaultMaxTokensText, 500},
		[]int{reqs[0].MaxTokens, reqs[1].MaxTokens, reqs[2].MaxTokens, reqs[3].MaxTokens}, "num_predict per call")

	// JSON calls carry the target's schema in format.
	assert.True(t, reqs[0].JSON)
	props := schemaProps(t, reqs[0].Schema)
	assert.Equal(t, map[string]any{"type": "boolean"}, props["is_relevant"])
	assert.Equal(t, map[string]any{"type": "integer"}, props["score"])
	assert.Equal(t, reqs[0].Schema, reqs[0].Format)
	assert.False(t, reqs[2].JSON, "text calls ask for no format")
}

func TestOllamaSettingsConfigured(t *testing.T) {
	srv := newServer(t)
	srv.On().Reply(`{"is_relevant": true, "score": 1, "reasons": [], "matched_skills": []}`)
	c, _ := newClient(t, srv, llm.ProviderOllama, func(cfg *llm.Config) {
		cfg.NumCtx, cfg.Think, cfg.MaxTokensJSON = 32768, true, 900
	})
	var v vacancy.Verdict
	require.NoError(t, c.JSON(context.Background(), llm.Request{Prompt: "p"}, &v))
	r := srv.Requests()[0]
	assert.Equal(t, 32768, r.NumCtx)
	require.NotNil(t, r.Think)
	assert.True(t, *r.Think, "LLM_THINK=true lets the model think")
	assert.Empty(t, r.KeepAlive, "no keep_alive unless configured: the server's default")
	assert.Equal(t, 900, r.MaxTokens)
}

func TestOpenAIRequestSettings(t *testing.T) {
	srv := newServer(t)
	srv.On(llmtest.JSONMode()).Reply(`{"is_relevant": false, "score": 3, "reasons": [], "matched_skills": []}`)
	srv.On().Reply("text")
	c, _ := newClient(t, srv, llm.ProviderOpenAI, func(cfg *llm.Config) { cfg.MaxTokensText = 640 })
	ctx := context.Background()
	var v vacancy.Verdict
	require.NoError(t, c.JSON(ctx, llm.Request{Prompt: "a"}, &v))
	_, err := c.Text(ctx, llm.Request{Prompt: "b"})
	require.NoError(t, err)
	_, err = c.Text(ctx, llm.Request{Prompt: "c", MaxTokens: 50})
	require.NoError(t, err)

	reqs := srv.Requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, "json_schema", reqs[0].Format)
	var rf struct {
		Name   string         `json:"name"`
		Strict bool           `json:"strict"`
		Schema map[string]any `json:"schema"`
	}
	require.NoError(t, json.Unmarshal([]byte(reqs[0].Schema), &rf))
	assert.Equal(t, "Verdict", rf.Name)
	assert.True(t, rf.Strict, "every field required, no extras: strict mode applies")
	assert.Contains(t, schemaProps(t, reqs[0].Schema), "matched_skills")
	assert.Equal(t, []int{llm.DefaultMaxTokensJSON, 640, 50}, []int{reqs[0].MaxTokens, reqs[1].MaxTokens, reqs[2].MaxTokens})
	assert.Empty(t, reqs[1].Format)
	assert.Zero(t, reqs[0].NumCtx, "num_ctx is Ollama's")
}

// A server without structured outputs refuses json_schema with a 400:
// the client asks again with json_object, once, and remembers.
func TestOpenAISchemaFallback(t *testing.T) {
	srv := llmtest.Start(t, llmtest.WithAPIKey(testKey), llmtest.RefuseJSONSchema())
	srv.On().Reply(`{"is_relevant": true, "score": 9, "reasons": [], "matched_skills": []}`)
	c, _ := newClient(t, srv, llm.ProviderOpenAI, nil)
	ctx := context.Background()

	var v vacancy.Verdict
	require.NoError(t, c.JSON(ctx, llm.Request{Prompt: "p"}, &v))
	assert.Equal(t, 9, v.Score)
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "json_schema", reqs[0].Format)
	assert.Equal(t, "schema_refused", reqs[0].Fault)
	assert.Equal(t, "json_object", reqs[1].Format)

	for range 3 {
		require.NoError(t, c.JSON(ctx, llm.Request{Prompt: "p"}, &v))
	}
	reqs = srv.Requests()
	require.Len(t, reqs, 5, "one request per call once the refusal is known")
	for _, r := range reqs[2:] {
		assert.Equal(t, "json_object", r.Format)
	}
	assert.Equal(t, llm.BreakerClosed, c.BreakerState())
}

// A 400 for some other reason does not switch schemas off.
func TestOpenAIOther400KeepsSchemas(t *testing.T) {
	srv := newServer(t)
	srv.On(llmtest.PromptHasWords("bad")).Fault(llmtest.HTTPError(400))
	srv.On().Reply(`{"is_relevant": true, "score": 9, "reasons": [], "matched_skills": []}`)
	c, _ := newClient(t, srv, llm.ProviderOpenAI, nil)
	var v vacancy.Verdict
	err := c.JSON(context.Background(), llm.Request{Prompt: "bad"}, &v)
	require.ErrorContains(t, err, "HTTP 400")
	require.NoError(t, c.JSON(context.Background(), llm.Request{Prompt: "good"}, &v))
	reqs := srv.Requests()
	require.Len(t, reqs, 3, "the bad call was tried with json_object once")
	assert.Equal(t, "json_schema", reqs[2].Format)
}

type withOwnSchema struct {
	Level string `json:"level"`
}

func (withOwnSchema) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{
		"level": map[string]any{"type": "string", "enum": []string{"low", "high"}}}, "required": []string{"level"}}
}

func TestSchemaFor(t *testing.T) {
	type inner struct {
		N  float64 `json:"n"`
		At string  `json:"at,omitempty"`
	}
	type target struct {
		Name    string            `json:"name"`
		IDs     []int64           `json:"ids"`
		Inner   *inner            `json:"inner"`
		Tags    map[string]string `json:"tags,omitempty"`
		Skipped string            `json:"-"`
		hidden  int
	}
	_ = target{}.hidden
	s := llm.SchemaFor(&target{})
	assert.Equal(t, []string{"name", "ids", "inner"}, s["required"])
	assert.Equal(t, false, s["additionalProperties"])
	props := s["properties"].(map[string]any)
	assert.Len(t, props, 4)
	assert.Equal(t, map[string]any{"type": "array", "items": map[string]any{"type": "integer"}}, props["ids"])
	assert.Equal(t, []string{"n"}, props["inner"].(map[string]any)["required"])

	own := llm.SchemaFor(&withOwnSchema{})
	assert.Contains(t, own["properties"].(map[string]any)["level"], "enum", "a type's own JSONSchema wins")
}

func TestConfigRejectsBadKeepAlive(t *testing.T) {
	_, err := llm.New(llm.Config{Provider: "ollama", Model: "m", KeepAlive: "forever"})
	require.ErrorContains(t, err, "KeepAlive")
	for _, ok := range []string{"30m", "-1m", "3600", "-1"} {
		c, err := llm.New(llm.Config{Provider: "ollama", Model: "m", KeepAlive: ok})
		require.NoError(t, err, ok)
		c.Close()
	}
}
