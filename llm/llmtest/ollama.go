package llmtest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Wire types for the Ollama API, limited to the fields langchaingo v0.1.14
// sends and reads (llms/ollama/internal/ollamaclient).

type ollamaChatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Think     *bool           `json:"think"`
	KeepAlive json.RawMessage `json:"keep_alive"`
	Options   struct {
		Temperature *float64 `json:"temperature"`
		NumPredict  int      `json:"num_predict"`
		NumCtx      int      `json:"num_ctx"`
	} `json:"options"`
}

type ollamaMessage struct {
	Role     string `json:"role"`
	Content  string `json:"content"`
	Thinking string `json:"thinking,omitempty"`
}

type ollamaTagsResponse struct {
	Models []ollamaTag `json:"models"`
}

type ollamaTag struct {
	Name       string `json:"name"`
	Model      string `json:"model"`
	ModifiedAt string `json:"modified_at"`
	Size       int64  `json:"size"`
	Digest     string `json:"digest"`
}

type ollamaChatResponse struct {
	Model              string         `json:"model"`
	CreatedAt          string         `json:"created_at"`
	Message            *ollamaMessage `json:"message,omitempty"`
	Done               bool           `json:"done"`
	DoneReason         string         `json:"done_reason,omitempty"`
	TotalDuration      int64          `json:"total_duration,omitempty"`
	LoadDuration       int64          `json:"load_duration,omitempty"`
	PromptEvalCount    int            `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64          `json:"prompt_eval_duration,omitempty"`
	EvalCount          int            `json:"eval_count,omitempty"`
	EvalDuration       int64          `json:"eval_duration,omitempty"`
}

type ollamaEmbedRequest struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

type ollamaEmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration,omitempty"`
	LoadDuration    int64       `json:"load_duration,omitempty"`
	PromptEvalCount int         `json:"prompt_eval_count,omitempty"`
}

type ollamaError struct {
	Error string `json:"error"`
}

func ollamaFail(w http.ResponseWriter, f Fault, status int, msg string) {
	if f.kind == faultRateLimit {
		w.Header().Set("Retry-After", f.retryAfterHeader())
	}
	writeJSON(w, status, ollamaError{Error: msg})
}

// ollamaFormat interprets "format": absent/null/"" means free text, "json"
// JSON mode, and an object a JSON schema (structured outputs).
func ollamaFormat(raw json.RawMessage) (isJSON bool, format string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false, ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s != "", s
	}
	return true, string(raw)
}

func ollamaBadRequest(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, ollamaError{Error: msg})
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request, in ollamaChatRequest) {
	start := time.Now()
	msgs := make([]Message, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = Message{Role: m.Role, Content: m.Content}
	}
	req := chatRequest(Ollama, r, in.Model, in.Stream != nil && *in.Stream, in.Options.Temperature, in.Options.NumPredict, msgs)
	req.NumCtx = in.Options.NumCtx
	req.Think = in.Think
	if ka := bytes.TrimSpace(in.KeepAlive); len(ka) > 0 && string(ka) != "null" {
		req.KeepAlive = string(ka)
	}
	req.JSON, req.Format = ollamaFormat(in.Format)
	if req.JSON && req.Format != "json" {
		req.Schema = req.Format
	}

	p := s.decide(&req)
	ctx := r.Context()
	content, ok := s.scriptedContent(ctx, w, p, &req, ollamaFail)
	if !ok {
		return
	}

	created := time.Now().UTC().Format(time.RFC3339Nano)
	prompt := promptTokens(req.Messages)
	final := ollamaChatResponse{
		Model:           req.Model,
		CreatedAt:       created,
		Message:         &ollamaMessage{Role: "assistant", Content: content, Thinking: p.thinking},
		Done:            true,
		DoneReason:      p.stopReason(),
		LoadDuration:    int64(time.Millisecond),
		PromptEvalCount: prompt,
		EvalCount:       countWords(content),
	}
	if !req.Stream {
		final.timed(start)
		writeJSON(w, http.StatusOK, final)
		return
	}

	// Streaming: one NDJSON line per chunk, flushed so the client sees them
	// arrive separately; the final line carries no content, only stats.
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	if p.thinking != "" {
		// Reasoning streams first, in its own field, before any content.
		if enc.Encode(ollamaChatResponse{Model: req.Model, CreatedAt: created,
			Message: &ollamaMessage{Role: "assistant", Thinking: p.thinking}}) != nil {
			return
		}
		flush(w)
	}
	sent := s.streamChunks(ctx, content, p, func(c string) bool {
		err := enc.Encode(ollamaChatResponse{
			Model:     req.Model,
			CreatedAt: created,
			Message:   &ollamaMessage{Role: "assistant", Content: c},
		})
		flush(w)
		return err == nil
	})
	if !sent {
		return
	}
	final.Message = &ollamaMessage{Role: "assistant", Content: ""}
	final.timed(start)
	_ = enc.Encode(final)
}

// timed fills in the durations of a chat that began at start, split
// between prompt evaluation and generation as Ollama reports them.
func (r *ollamaChatResponse) timed(start time.Time) {
	elapsed := int64(time.Since(start))
	r.TotalDuration = elapsed
	r.PromptEvalDuration = elapsed / 4
	r.EvalDuration = elapsed / 2
}

// ollamaTags lists the models ServeModels set (none by default).
func (s *Server) ollamaTags(w http.ResponseWriter, _ *http.Request) {
	out := ollamaTagsResponse{Models: []ollamaTag{}}
	for _, m := range s.modelList() {
		name := m
		if !strings.Contains(name, ":") {
			name += ":latest"
		}
		out.Models = append(out.Models, ollamaTag{Name: name, Model: name,
			ModifiedAt: time.Now().UTC().Format(time.RFC3339Nano), Size: 1 << 30, Digest: "llmtest"})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request, in ollamaEmbedRequest) {
	start := time.Now()
	inputs, err := stringOrStrings(in.Input)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, ollamaError{Error: "llmtest: input: " + err.Error()})
		return
	}
	req := embedRequest(Ollama, r, in.Model, inputs)
	p := s.decide(&req)
	answer, fill := s.scriptedEmbedding(r.Context(), w, p, &req, ollamaFail, "application/json; charset=utf-8", `{"embeddings": [[0.1, 0.2`)
	if !answer {
		return
	}
	out := ollamaEmbedResponse{Model: req.Model, Embeddings: [][]float32{}}
	if fill {
		out.Embeddings = make([][]float32, len(inputs))
		for i, t := range inputs {
			out.Embeddings[i] = Embedding(t, s.dim)
			out.PromptEvalCount += countWords(t)
		}
	}
	out.TotalDuration = int64(time.Since(start))
	writeJSON(w, http.StatusOK, out)
}

// chatRequest is what a chat call of provider's API for model asks: the
// fields both APIs have, each read by the caller from where its API puts
// it, and the prompt and system text the rules match, read from msgs.
func chatRequest(provider Provider, r *http.Request, model string, stream bool, temperature *float64, maxTokens int, msgs []Message) Request {
	req := Request{
		Provider:    provider,
		Kind:        KindChat,
		Endpoint:    r.URL.Path,
		Model:       model,
		Messages:    msgs,
		Stream:      stream,
		Temperature: temperature,
		MaxTokens:   maxTokens,
	}
	req.fillDerived()
	return req
}

// embedRequest is what an embedding call of provider's API for model
// asks, its inputs joined as the prompt the rules match.
func embedRequest(provider Provider, r *http.Request, model string, inputs []string) Request {
	return Request{
		Provider: provider,
		Kind:     KindEmbed,
		Endpoint: r.URL.Path,
		Model:    model,
		Input:    inputs,
		Prompt:   strings.Join(inputs, "\n"),
	}
}

// stringOrStrings decodes an "input" that may be one string or a list.
func stringOrStrings(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	return many, nil
}
