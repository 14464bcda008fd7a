package llmtest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Wire types for the OpenAI API, limited to the fields langchaingo v0.1.14
// sends and reads (llms/openai/internal/openaiclient).

type openaiChatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ResponseFormat *struct {
		Type       string          `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	} `json:"response_format"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
}

type openaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type openaiMessage struct {
	Role             string  `json:"role"`
	Content          *string `json:"content"`
	Refusal          *string `json:"refusal"`
	ReasoningContent string  `json:"reasoning_content,omitempty"`
}

type openaiModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type openaiModelList struct {
	Object string        `json:"object"`
	Data   []openaiModel `json:"data"`
}

type openaiChoice struct {
	Index        int           `json:"index"`
	Message      openaiMessage `json:"message"`
	Logprobs     *struct{}     `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type openaiChatResponse struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	Choices           []openaiChoice `json:"choices"`
	Usage             openaiUsage    `json:"usage"`
	SystemFingerprint string         `json:"system_fingerprint"`
}

type openaiDelta struct {
	Role             string `json:"role,omitempty"`
	Content          string `json:"content,omitempty"`
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type openaiChunkChoice struct {
	Index        int         `json:"index"`
	Delta        openaiDelta `json:"delta"`
	FinishReason *string     `json:"finish_reason"`
}

type openaiChunk struct {
	ID                string              `json:"id"`
	Object            string              `json:"object"`
	Created           int64               `json:"created"`
	Model             string              `json:"model"`
	SystemFingerprint string              `json:"system_fingerprint"`
	Choices           []openaiChunkChoice `json:"choices"`
	Usage             *openaiUsage        `json:"usage,omitempty"`
}

type openaiEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Dimensions int             `json:"dimensions"`
}

type openaiEmbedding struct {
	Object    string    `json:"object"`
	Embedding []float32 `json:"embedding"`
	Index     int       `json:"index"`
}

type openaiEmbedResponse struct {
	Object string            `json:"object"`
	Data   []openaiEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type openaiErrorBody struct {
	Error openaiErrorDetail `json:"error"`
}

type openaiErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func openaiFail(w http.ResponseWriter, f Fault, status int, msg string) {
	d := openaiErrorDetail{Message: msg, Type: "server_error", Code: "server_error"}
	switch {
	case f.kind == faultCredits || f.kind == faultFlagged:
		openrouterFail(w, f, status, msg)
		return
	case f.kind == faultQuota:
		d.Type, d.Code = "insufficient_quota", "insufficient_quota"
	case f.kind == faultRateLimit:
		w.Header().Set("Retry-After", f.retryAfterHeader())
		d.Type, d.Code = "requests", "rate_limit_exceeded"
	case f.kind == faultNoRule:
		d.Code = "llmtest_no_rule"
	case f.kind == faultNoReply:
		d.Code = "llmtest_no_reply"
	case f.kind == faultUnauthorized:
		d.Type, d.Code = "invalid_request_error", "invalid_api_key"
	case f.kind == faultNoModel:
		d.Type, d.Code = "invalid_request_error", "model_not_found"
	case status < 500:
		d.Type, d.Code = "invalid_request_error", "invalid_request"
	}
	writeJSON(w, status, openaiErrorBody{Error: d})
}

// openrouterErrorBody is OpenRouter's error document: its code is the
// HTTP status as a number, and a moderation refusal says why in metadata.
type openrouterErrorBody struct {
	Error struct {
		Code     int            `json:"code"`
		Message  string         `json:"message"`
		Metadata map[string]any `json:"metadata,omitempty"`
	} `json:"error"`
}

func openrouterFail(w http.ResponseWriter, f Fault, status int, msg string) {
	var b openrouterErrorBody
	b.Error.Code, b.Error.Message = status, msg
	if f.kind == faultFlagged {
		b.Error.Metadata = map[string]any{"reasons": flaggedReasons(f), "flagged_input": "…",
			"provider_name": "llmtest", "model_slug": "llmtest"}
	}
	writeJSON(w, status, b)
}

// authorized checks the bearer token when the server has a key; a refused
// request is still recorded, so tests can see the client reached us.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, req *Request) bool {
	if s.apiKey == "" || r.Header.Get("Authorization") == "Bearer "+s.apiKey {
		return true
	}
	f := Fault{kind: faultUnauthorized}
	req.Fault = f.String()
	req.Time = time.Now()
	s.record(req)
	openaiFail(w, f, http.StatusUnauthorized, "Incorrect API key provided.")
	return false
}

// openaiContent flattens a message content that may be a string or a list
// of parts; only text parts matter to rules.
func openaiContent(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

func openaiBadRequest(w http.ResponseWriter, msg string) {
	openaiFail(w, Fault{}, http.StatusBadRequest, msg)
}

func (s *Server) openaiChat(w http.ResponseWriter, r *http.Request, in openaiChatRequest) {
	msgs := make([]Message, len(in.Messages))
	for i, m := range in.Messages {
		msgs[i] = Message{Role: m.Role, Content: openaiContent(m.Content)}
	}
	// max_completion_tokens is OpenAI's newer name; compatible servers
	// still send max_tokens.
	req := chatRequest(OpenAI, r, in.Model, in.Stream, in.Temperature, cmp.Or(in.MaxCompletionTokens, in.MaxTokens), msgs)
	if in.ResponseFormat != nil {
		req.Format = in.ResponseFormat.Type
		req.JSON = req.Format == "json_object" || req.Format == "json_schema"
		if req.Format == "json_schema" {
			req.Schema = string(in.ResponseFormat.JSONSchema)
		}
	}
	if !s.authorized(w, r, &req) {
		return
	}

	p := s.decide(&req)
	ctx := r.Context()
	content, ok := s.scriptedContent(ctx, w, p, &req, openaiFail)
	if !ok {
		return
	}

	id := s.nextID("chatcmpl-llmtest-")
	created := time.Now().Unix()
	prompt := promptTokens(req.Messages)
	completion := countWords(content)
	usage := openaiUsage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}

	if !req.Stream {
		msg := openaiMessage{Role: "assistant", Content: &content, ReasoningContent: p.thinking}
		if p.refusal != "" {
			msg.Content, msg.Refusal = nil, &p.refusal
		}
		writeJSON(w, http.StatusOK, openaiChatResponse{
			ID:      id,
			Object:  "chat.completion",
			Created: created,
			Model:   req.Model,
			Choices: []openaiChoice{{
				Message:      msg,
				FinishReason: p.stopReason(),
			}},
			Usage:             usage,
			SystemFingerprint: "llmtest",
		})
		return
	}

	// Streaming, as OpenAI does it: a role-only first chunk, one chunk per
	// piece of content, a chunk carrying finish_reason, then (when asked via
	// stream_options) a usage-only chunk with no choices, then [DONE].
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	send := func(c openaiChunk) bool {
		c.ID, c.Object, c.Created, c.Model, c.SystemFingerprint = id, "chat.completion.chunk", created, req.Model, "llmtest"
		buf.Reset()
		buf.WriteString("data: ")
		b, _ := json.Marshal(c)
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		flush(w)
		return true
	}
	if !send(openaiChunk{Choices: []openaiChunkChoice{{Delta: openaiDelta{Role: "assistant"}}}}) {
		return
	}
	if p.thinking != "" && !send(openaiChunk{Choices: []openaiChunkChoice{{Delta: openaiDelta{ReasoningContent: p.thinking}}}}) {
		return
	}
	sent := s.streamChunks(ctx, content, p, func(c string) bool {
		return send(openaiChunk{Choices: []openaiChunkChoice{{Delta: openaiDelta{Content: c}}}})
	})
	if !sent {
		return
	}
	stop := p.stopReason()
	if !send(openaiChunk{Choices: []openaiChunkChoice{{FinishReason: &stop}}}) {
		return
	}
	if in.StreamOptions != nil && in.StreamOptions.IncludeUsage {
		if !send(openaiChunk{Choices: []openaiChunkChoice{}, Usage: &usage}) {
			return
		}
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	flush(w)
}

// openaiModels lists the models ServeModels set (none by default). Like
// the chat endpoints it wants the API key when the server has one.
func (s *Server) openaiModels(w http.ResponseWriter, r *http.Request) {
	if s.apiKey != "" && r.Header.Get("Authorization") != "Bearer "+s.apiKey {
		openaiFail(w, Fault{kind: faultUnauthorized}, http.StatusUnauthorized, "Incorrect API key provided.")
		return
	}
	out := openaiModelList{Object: "list", Data: []openaiModel{}}
	for _, m := range s.modelList() {
		out.Data = append(out.Data, openaiModel{ID: m, Object: "model", Created: time.Now().Unix(), OwnedBy: "llmtest"})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) openaiEmbed(w http.ResponseWriter, r *http.Request, in openaiEmbedRequest) {
	inputs, err := stringOrStrings(in.Input)
	if err != nil {
		openaiFail(w, Fault{}, http.StatusBadRequest, "llmtest: input must be a string or a list of strings")
		return
	}
	req := embedRequest(OpenAI, r, in.Model, inputs)
	if !s.authorized(w, r, &req) {
		return
	}
	p := s.decide(&req)
	answer, fill := s.scriptedEmbedding(r.Context(), w, p, &req, openaiFail, "application/json", `{"object": "list", "data": [{"embedding": [0.1,`)
	if !answer {
		return
	}
	out := openaiEmbedResponse{Object: "list", Model: req.Model, Data: []openaiEmbedding{}}
	if fill {
		dim := s.dim
		if in.Dimensions > 0 {
			dim = in.Dimensions
		}
		out.Data = make([]openaiEmbedding, len(inputs))
		for i, t := range inputs {
			out.Data[i] = openaiEmbedding{Object: "embedding", Embedding: Embedding(t, dim), Index: i}
			out.Usage.PromptTokens += countWords(t)
		}
		out.Usage.TotalTokens = out.Usage.PromptTokens
	}
	writeJSON(w, http.StatusOK, out)
}
