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
	"strconv"
	"strings"
)

// ollamaChat is the chat model for Ollama: one non-streaming POST
// /api/chat per call.
//
// It replaces langchaingo's own Ollama chat client (llms/ollama, v0.1.14)
// for two reasons. Measured: that client allocates and zeroes a 512 KB line
// buffer for every call (ollamaclient.stream, maxBufferSize), whether or
// not the answer streams; at the hundreds of calls a second the memory
// pipeline makes, that buffer and the garbage collection it triggers take
// a large share of the process's CPU (docs/BENCHMARKS.md, "Memory chat").
// Functional: it cannot send num_ctx, think, keep_alive or a JSON schema
// in format, and it drops done_reason and the thinking field.
// Embeddings still go through langchaingo's client (one request per text,
// no such buffer on that path).
type ollamaChat struct {
	endpoint string // …/api/chat
	hc       *http.Client
	// Sent on every request, never varied per call: Ollama reloads the
	// model whenever num_ctx changes, so a per-call window would turn every
	// other call into a model load.
	numCtx    int
	think     bool
	keepAlive json.RawMessage // nil: the server's default
}

func newOllamaChat(serverURL string, hc *http.Client, cfg Config) (*ollamaChat, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("ollama URL: %w", err)
	}
	return &ollamaChat{endpoint: u.JoinPath("api", "chat").String(), hc: hc,
		numCtx: cfg.NumCtx, think: cfg.Think, keepAlive: ollamaKeepAlive(cfg.KeepAlive)}, nil
}

// ollamaKeepAlive encodes Config.KeepAlive the way Ollama parses it: a
// bare number is seconds (negative: forever), anything else a Go duration
// string. Config validation has already checked it is one of the two.
func ollamaKeepAlive(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		return json.RawMessage(strconv.Itoa(n))
	}
	b, _ := json.Marshal(s)
	return b
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ollamaOptions are the options the client sets. Temperature is always
// sent (zero means deterministic), num_ctx always (see ollamaChat).
type ollamaOptions struct {
	Temperature float64 `json:"temperature"`
	NumPredict  int     `json:"num_predict,omitempty"`
	NumCtx      int     `json:"num_ctx,omitempty"`
}

type ollamaRequest struct {
	Model    string          `json:"model"`
	Messages []ollamaMessage `json:"messages"`
	// Stream is sent explicitly: Ollama streams when the field is missing.
	Stream bool `json:"stream"`
	// Format is "json" or a JSON schema (structured outputs).
	Format    any             `json:"format,omitempty"`
	Think     *bool           `json:"think,omitempty"`
	KeepAlive json.RawMessage `json:"keep_alive,omitempty"`
	Options   ollamaOptions   `json:"options"`
}

type ollamaResponse struct {
	Message *struct {
		Content  string `json:"content"`
		Thinking string `json:"thinking"`
	} `json:"message"`
	Done            bool   `json:"done"`
	DoneReason      string `json:"done_reason"`
	PromptEvalCount int    `json:"prompt_eval_count"`
	EvalCount       int    `json:"eval_count"`
	Error           string `json:"error"`
}

func (o *ollamaChat) chat(ctx context.Context, r chatRequest) (chatAnswer, error) {
	req := ollamaRequest{
		Model:     r.model,
		Messages:  make([]ollamaMessage, 0, 2),
		KeepAlive: o.keepAlive,
		Options:   ollamaOptions{Temperature: r.temperature, NumPredict: r.maxTokens, NumCtx: o.numCtx},
	}
	// think is sent on every call: false keeps a reasoning model from
	// spending the answer budget on a hidden monologue (and a
	// non-reasoning model ignores false); true, where the operator asked
	// for it, makes Ollama return the reasoning in its own field. Ollama
	// refuses only think:true for a model that cannot think.
	think := o.think
	req.Think = &think
	if r.json {
		req.Format = "json"
		if r.schema != nil {
			req.Format = r.schema
		}
	}
	if r.system != "" {
		req.Messages = append(req.Messages, ollamaMessage{Role: "system", Content: r.system})
	}
	req.Messages = append(req.Messages, ollamaMessage{Role: "user", Content: r.prompt})

	if r.onDelta != nil {
		return o.stream(ctx, req, r.onDelta)
	}
	status, raw, err := postJSON(ctx, o.hc, o.endpoint, req, nil, "ollama")
	if err != nil {
		return chatAnswer{}, err
	}
	return ollamaAnswer(status, raw)
}

// ollamaAnswer reads a whole (non-streamed) answer, or a refusal.
func ollamaAnswer(status int, raw []byte) (chatAnswer, error) {
	var out ollamaResponse
	decodeErr := json.Unmarshal(raw, &out)
	if status >= http.StatusBadRequest {
		// The status itself is classified by the observing transport; this
		// only carries Ollama's own words.
		msg := out.Error
		if decodeErr != nil || msg == "" {
			msg = strings.TrimSpace(string(raw))
		}
		return chatAnswer{}, fmt.Errorf("ollama HTTP %d: %s", status, serverSaid(msg, 300))
	}
	if decodeErr != nil {
		return chatAnswer{}, fmt.Errorf("ollama answer: %w", decodeErr)
	}
	if out.Error != "" {
		return chatAnswer{}, errors.New("ollama: " + serverSaid(out.Error, 300))
	}
	if out.Message == nil {
		return chatAnswer{}, ErrEmpty
	}
	return chatAnswer{
		content:          out.Message.Content,
		reasoning:        out.Message.Thinking,
		stopReason:       out.DoneReason,
		promptTokens:     out.PromptEvalCount,
		completionTokens: out.EvalCount,
	}, nil
}

// stream asks for the answer as NDJSON, one line per piece: content and
// thinking arrive in pieces, the last line (done) carries the stop reason
// and the counts. A refusal is a plain JSON body, as without streaming; an
// error can also arrive as a line of its own mid-stream (the model
// unloaded, the runner crashed), and a stream that ends before its done
// line is cut off, not finished.
func (o *ollamaChat) stream(ctx context.Context, req ollamaRequest, onDelta func(string)) (chatAnswer, error) {
	req.Stream = true
	var content, thinking strings.Builder
	var a chatAnswer
	done := false
	status, raw, err := postStream(ctx, o.hc, o.endpoint, req, nil, "application/x-ndjson", "ollama", func(line []byte) (bool, error) {
		if len(bytes.TrimSpace(line)) == 0 {
			return true, nil
		}
		var part ollamaResponse
		if err := json.Unmarshal(line, &part); err != nil {
			return false, fmt.Errorf("ollama stream: %w", err)
		}
		if part.Error != "" {
			return false, errors.New("ollama: " + serverSaid(part.Error, 300))
		}
		if part.Message != nil {
			thinking.WriteString(part.Message.Thinking)
			if part.Message.Content != "" {
				content.WriteString(part.Message.Content)
				onDelta(content.String())
			}
		}
		if part.Done {
			done = true
			a.stopReason, a.promptTokens, a.completionTokens = part.DoneReason, part.PromptEvalCount, part.EvalCount
			return false, nil
		}
		return true, nil
	})
	switch {
	case err != nil:
		return chatAnswer{}, err
	case status >= http.StatusBadRequest:
		return ollamaAnswer(status, raw)
	case !done:
		return chatAnswer{}, fmt.Errorf("ollama stream ended before its last line: %w", io.ErrUnexpectedEOF)
	}
	a.content, a.reasoning = content.String(), thinking.String()
	return a, nil
}
