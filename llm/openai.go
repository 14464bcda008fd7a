package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
)

// openaiChat is the chat model for OpenAI-compatible servers: one
// non-streaming POST <base>/chat/completions per call. (Embeddings still
// use langchaingo's client.) langchaingo's client fixes response_format
// per client, not per call, and its schema type cannot say "integer";
// every JSON call here carries its own target's schema.
type openaiChat struct {
	endpoint string
	header   http.Header
	hc       *http.Client
	log      *slog.Logger
	// noSchema remembers that this server refused response_format
	// json_schema: from then on JSON calls ask for json_object at once,
	// instead of paying a refused request on every call.
	noSchema atomic.Bool
}

func newOpenAIChat(base, apiKey string, hc *http.Client, log *slog.Logger) *openaiChat {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+apiKey)
	return &openaiChat{endpoint: base + "/chat/completions", header: h, hc: hc, log: log}
}

type openaiMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type openaiResponseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *openaiJSONSchema `json:"json_schema,omitempty"`
}

type openaiJSONSchema struct {
	Name   string         `json:"name"`
	Strict bool           `json:"strict"`
	Schema map[string]any `json:"schema"`
}

type openaiRequest struct {
	Model       string          `json:"model"`
	Messages    []openaiMessage `json:"messages"`
	Temperature float64         `json:"temperature"`
	// max_tokens rather than max_completion_tokens: every compatible
	// server (vLLM, llama.cpp, LM Studio, Ollama's /v1) reads it, and
	// OpenAI still accepts it for chat models.
	MaxTokens      int                   `json:"max_tokens,omitempty"`
	ResponseFormat *openaiResponseFormat `json:"response_format,omitempty"`
	Stream         bool                  `json:"stream"`
	StreamOptions  *openaiStreamOptions  `json:"stream_options,omitempty"`
}

// openaiStreamOptions asks a streamed answer to end with the token counts
// (a chunk with usage and no choices), which OpenAI, vLLM, llama.cpp and
// Ollama's /v1 send only when asked.
type openaiStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// openaiChunk is one server-sent event of a streamed answer.
type openaiChunk struct {
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openaiUsage       `json:"usage"`
	Error *openaiErrorDetail `json:"error"`
}

// openaiUsage is the token counts of an answer, whole or streamed.
type openaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// openaiErrorDetail is an error object in an answer, whole or streamed.
type openaiErrorDetail struct {
	Message string `json:"message"`
}

type openaiResponse struct {
	Choices []struct {
		Message struct {
			Content          *string `json:"content"`
			Refusal          *string `json:"refusal"`
			ReasoningContent string  `json:"reasoning_content"`
			Reasoning        string  `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage openaiUsage        `json:"usage"`
	Error *openaiErrorDetail `json:"error"`
}

func (o *openaiChat) chat(ctx context.Context, r chatRequest) (chatAnswer, error) {
	req := openaiRequest{Model: r.model, Messages: make([]openaiMessage, 0, 2), Temperature: r.temperature, MaxTokens: r.maxTokens}
	if r.system != "" {
		req.Messages = append(req.Messages, openaiMessage{Role: "system", Content: r.system})
	}
	req.Messages = append(req.Messages, openaiMessage{Role: "user", Content: r.prompt})
	withSchema := false
	if r.json {
		req.ResponseFormat = &openaiResponseFormat{Type: "json_object"}
		if r.schema != nil && !o.noSchema.Load() {
			withSchema = true
			req.ResponseFormat = &openaiResponseFormat{Type: "json_schema", JSONSchema: &openaiJSONSchema{
				Name: r.schemaName, Strict: strictable(r.schema), Schema: r.schema}}
		}
	}
	if r.onDelta != nil {
		return o.stream(ctx, req, r.onDelta)
	}
	status, raw, err := postJSON(ctx, o.hc, o.endpoint, req, o.header, "openai")
	if err == nil && status == http.StatusBadRequest && withSchema {
		// Servers without structured outputs answer 400 to json_schema.
		// Ask again in plain JSON mode, once; only if that is accepted was
		// the schema the problem, and only then is it remembered, so a
		// request bad for another reason (too long a prompt) cannot switch
		// schemas off for good.
		first := raw
		req.ResponseFormat = &openaiResponseFormat{Type: "json_object"}
		status, raw, err = postJSON(ctx, o.hc, o.endpoint, req, o.header, "openai")
		if err == nil && status != http.StatusBadRequest {
			if !o.noSchema.Swap(true) {
				o.log.Warn("the OpenAI-compatible server refused response_format json_schema; JSON calls use json_object from now on",
					slog.String("server_said", serverSaid(openaiErrorText(first), 300)))
			}
		}
	}
	if err != nil {
		return chatAnswer{}, err
	}
	var out openaiResponse
	decodeErr := json.Unmarshal(raw, &out)
	if status >= http.StatusBadRequest {
		return chatAnswer{}, openaiStatusError(status, raw)
	}
	if decodeErr != nil {
		return chatAnswer{}, fmt.Errorf("openai answer: %w", decodeErr)
	}
	if out.Error != nil {
		return chatAnswer{}, fmt.Errorf("openai: %s", serverSaid(out.Error.Message, 300))
	}
	if len(out.Choices) == 0 {
		return chatAnswer{}, ErrEmpty
	}
	ch := out.Choices[0]
	a := chatAnswer{
		reasoning:        ch.Message.ReasoningContent,
		stopReason:       ch.FinishReason,
		promptTokens:     out.Usage.PromptTokens,
		completionTokens: out.Usage.CompletionTokens,
	}
	if a.reasoning == "" {
		a.reasoning = ch.Message.Reasoning
	}
	if ch.Message.Content != nil {
		a.content = *ch.Message.Content
	}
	if r := ch.Message.Refusal; r != nil && *r != "" && strings.TrimSpace(a.content) == "" {
		// This answer declined, the backend is well: as an empty answer
		// it would count against the breaker, and a few such inputs in a
		// row would open it for everyone.
		return chatAnswer{}, &callError{outcomeInvalidJSON, false,
			fmt.Errorf("%w: the model refused to answer: %s", ErrInvalidJSON, serverSaid(*r, 300))}
	}
	return a, nil
}

// stream asks for the answer as server-sent events: "data: <chunk>" lines,
// each chunk a piece of content (or reasoning), one carrying the
// finish_reason, then the usage chunk, then "data: [DONE]". A refusal is a
// plain JSON body as without streaming; an error can also arrive as a
// chunk of its own mid-stream. A stream that ends before [DONE] and
// without a finish_reason was cut off, not finished.
func (o *openaiChat) stream(ctx context.Context, req openaiRequest, onDelta func(string)) (chatAnswer, error) {
	req.Stream, req.StreamOptions = true, &openaiStreamOptions{IncludeUsage: true}
	var content, reasoning strings.Builder
	var a chatAnswer
	finished, done := false, false
	status, raw, err := postStream(ctx, o.hc, o.endpoint, req, o.header, "text/event-stream", "openai", func(line []byte) (bool, error) {
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			return true, nil // blank separators, ": keep-alive" comments, event: lines
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			done = true
			return false, nil
		}
		var c openaiChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return false, fmt.Errorf("openai stream: %w", err)
		}
		if c.Error != nil {
			return false, fmt.Errorf("openai: %s", serverSaid(c.Error.Message, 300))
		}
		if c.Usage != nil {
			a.promptTokens, a.completionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices[:min(len(c.Choices), 1)] {
			reasoning.WriteString(ch.Delta.ReasoningContent)
			reasoning.WriteString(ch.Delta.Reasoning)
			if ch.Delta.Content != "" {
				content.WriteString(ch.Delta.Content)
				onDelta(content.String())
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				a.stopReason, finished = *ch.FinishReason, true
			}
		}
		return true, nil
	})
	switch {
	case err != nil:
		return chatAnswer{}, err
	case status >= http.StatusBadRequest:
		return chatAnswer{}, openaiStatusError(status, raw)
	case !done && !finished:
		return chatAnswer{}, fmt.Errorf("openai stream ended before its finish: %w", io.ErrUnexpectedEOF)
	}
	a.content, a.reasoning = content.String(), reasoning.String()
	return a, nil
}

// openaiStatusError is the error for an answer of status (400 or more)
// with body raw. It marks what the status alone does not say: a spent
// quota (OpenAI's 429 insufficient_quota) and an input a moderation
// flagged (OpenRouter's 403 with the reasons in error.metadata), which
// classify must not take for a rate limit or a key refused.
func openaiStatusError(status int, raw []byte) error {
	said := serverSaid(openaiErrorText(raw), 300)
	var e struct {
		Error struct {
			Type     string `json:"type"`
			Code     any    `json:"code"`
			Metadata struct {
				Reasons      []string `json:"reasons"`
				FlaggedInput *string  `json:"flagged_input"`
			} `json:"metadata"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &e)
	switch {
	case status == http.StatusTooManyRequests && (e.Error.Type == "insufficient_quota" || e.Error.Code == "insufficient_quota"):
		return fmt.Errorf("openai HTTP %d: %w: %s", status, errQuotaSpent, said)
	case status == http.StatusForbidden && (len(e.Error.Metadata.Reasons) > 0 || e.Error.Metadata.FlaggedInput != nil):
		return fmt.Errorf("openai HTTP %d: %w (%s): %s", status, errFlagged,
			serverSaid(strings.Join(e.Error.Metadata.Reasons, ", "), 100), said)
	}
	return fmt.Errorf("openai HTTP %d: %s", status, said)
}

// openaiErrorText is the server's message from an OpenAI error body, or
// the body itself.
func openaiErrorText(raw []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.Error) > 0 {
		var d struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &d) == nil && d.Message != "" {
			return d.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	return strings.TrimSpace(string(raw))
}
