package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/tmc/langchaingo/llms"
)

// ollamaChat is the chat model for Ollama: an llms.Model that makes one
// non-streaming POST /api/chat per call.
//
// It replaces langchaingo's own Ollama chat client (llms/ollama, v0.1.14)
// for one measured reason: that client allocates and zeroes a 512 KB line
// buffer for every call (ollamaclient.stream, maxBufferSize), whether or
// not the answer streams. At the hundreds of calls a second the memory
// pipeline makes, that buffer and the garbage collection it triggers took
// about 40 % of the process's CPU (docs/BENCHMARKS.md, "Memory chat").
// Embeddings still go through langchaingo's client (one request per text,
// no such buffer on that path), and so does everything about OpenAI.
type ollamaChat struct {
	endpoint string // …/api/chat
	model    string
	hc       *http.Client
}

var _ llms.Model = (*ollamaChat)(nil)

func newOllamaChat(serverURL, model string, hc *http.Client) (*ollamaChat, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("ollama URL: %w", err)
	}
	return &ollamaChat{endpoint: u.JoinPath("api", "chat").String(), model: model, hc: hc}, nil
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ollamaOptions are the sampling options the client sets. Temperature is
// always sent, as langchaingo does (zero means deterministic).
type ollamaOptions struct {
	Temperature float64  `json:"temperature"`
	NumPredict  int      `json:"num_predict,omitempty"`
	Seed        int      `json:"seed,omitempty"`
	TopK        int      `json:"top_k,omitempty"`
	TopP        float64  `json:"top_p,omitempty"`
	Stop        []string `json:"stop,omitempty"`
}

type ollamaRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	// Stream is sent explicitly: Ollama streams when the field is missing.
	Stream  bool          `json:"stream"`
	Format  string        `json:"format,omitempty"`
	Options ollamaOptions `json:"options"`
}

type ollamaResponse struct {
	Message *struct {
		Content string `json:"content"`
	} `json:"message"`
	PromptEvalCount int    `json:"prompt_eval_count"`
	EvalCount       int    `json:"eval_count"`
	Error           string `json:"error"`
}

// maxAnswer bounds what is read of one answer: far more than any
// num_predict we ask for, small enough that a broken server cannot
// exhaust memory.
const maxAnswer = 8 << 20

// GenerateContent sends the messages (text parts only) and returns the
// answer, with token counts in GenerationInfo under langchaingo's names.
func (o *ollamaChat) GenerateContent(ctx context.Context, msgs []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, opt := range options {
		opt(&opts)
	}
	req := ollamaRequest{
		Model:    o.model,
		Messages: make([]ollamaMessage, 0, len(msgs)),
		Options: ollamaOptions{Temperature: opts.Temperature, NumPredict: opts.MaxTokens, Seed: opts.Seed,
			TopK: opts.TopK, TopP: opts.TopP, Stop: opts.StopWords},
	}
	if opts.Model != "" {
		req.Model = opts.Model
	}
	if opts.JSONMode {
		req.Format = "json"
	}
	for _, mc := range msgs {
		var text strings.Builder
		for _, p := range mc.Parts {
			t, ok := p.(llms.TextContent)
			if !ok {
				return nil, fmt.Errorf("ollama: only text parts are supported, got %T", p)
			}
			text.WriteString(t.Text)
		}
		req.Messages = append(req.Messages, ollamaMessage{Role: ollamaRole(mc.Role), Content: text.String()})
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("ollama request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, o.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("ollama request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	resp, err := o.hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("ollama answer: %w", err)
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("ollama answer over %d bytes", maxAnswer)
	}
	var out ollamaResponse
	decodeErr := json.Unmarshal(raw, &out)
	if resp.StatusCode >= http.StatusBadRequest {
		// The status itself is classified by the observing transport; this
		// only carries Ollama's own words.
		msg := out.Error
		if decodeErr != nil || msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return nil, fmt.Errorf("ollama HTTP %d: %s", resp.StatusCode, truncate(msg, 300))
	}
	if decodeErr != nil {
		return nil, fmt.Errorf("ollama answer: %w", decodeErr)
	}
	if out.Error != "" {
		return nil, errors.New("ollama: " + truncate(out.Error, 300))
	}
	if out.Message == nil {
		return nil, ErrEmpty
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content: out.Message.Content,
		GenerationInfo: map[string]any{
			"CompletionTokens": out.EvalCount,
			"PromptTokens":     out.PromptEvalCount,
			"TotalTokens":      out.EvalCount + out.PromptEvalCount,
		},
	}}}, nil
}

// Call is llms.Model's single-prompt form.
func (o *ollamaChat) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, o, prompt, options...)
}

func ollamaRole(t llms.ChatMessageType) string {
	switch t {
	case llms.ChatMessageTypeSystem:
		return "system"
	case llms.ChatMessageTypeAI:
		return "assistant"
	case llms.ChatMessageTypeTool:
		return "tool"
	}
	return "user"
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
