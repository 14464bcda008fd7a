package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// chatModel is one provider's chat endpoint, called by Client.generate.
// Both implementations are our own small HTTP clients rather than
// langchaingo's: they must send fields langchaingo's call options cannot
// carry per call (Ollama's num_ctx, think, keep_alive and a JSON schema in
// format; OpenAI's response_format json_schema) and read fields it drops
// or flattens (Ollama's done_reason and thinking, OpenAI's finish_reason
// and reasoning_content next to an HTTP status we must act on).
type chatModel interface {
	chat(ctx context.Context, req chatRequest) (chatAnswer, error)
}

// chatRequest is what Client.generate asks of a provider.
type chatRequest struct {
	model       string
	system      string
	prompt      string
	temperature float64
	maxTokens   int // the answer budget; always set by generate
	json        bool
	// schema is the target's JSON schema for a JSON call (nil: plain JSON
	// mode); schemaName names it where the API wants a name.
	schema     map[string]any
	schemaName string
	// onDelta, when set, makes the call stream: it is called with the
	// content received so far each time more arrives (never with the
	// reasoning the server sends apart). It runs on the reading goroutine,
	// so it must return at once.
	onDelta func(content string)
}

// chatAnswer is a provider's answer before extraction.
type chatAnswer struct {
	content string
	// reasoning is what the server split off as the model's reasoning
	// (Ollama message.thinking, OpenAI-compatible reasoning_content or
	// reasoning); never part of the answer.
	reasoning string
	// stopReason is done_reason / finish_reason as sent ("stop",
	// "length", ...); "length" means the answer was cut off.
	stopReason       string
	promptTokens     int
	completionTokens int
	// schemaFallback is set when the OpenAI-compatible server refused
	// json_schema and the call was answered in json_object mode.
	schemaFallback bool
}

// maxAnswer bounds what is read of one answer: far more than any
// num_predict we ask for, small enough that a broken server cannot
// exhaust memory.
const maxAnswer = 8 << 20

// readBody reads a bounded response body.
func readBody(resp *http.Response, what string) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("%s answer: %w", what, err)
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("%s answer over %d bytes", what, maxAnswer)
	}
	return raw, nil
}

// postJSON sends body as JSON and returns the status and the bounded body.
func postJSON(ctx context.Context, hc *http.Client, url string, body any, header http.Header, what string) (int, []byte, error) {
	resp, err := post(ctx, hc, url, body, header, "application/json", what)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := readBody(resp, what)
	return resp.StatusCode, raw, err
}

// post sends body as JSON and returns the response, whose body the caller
// reads (a stream) and closes.
func post(ctx context.Context, hc *http.Client, url string, body any, header http.Header, accept, what string) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", what, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s request: %w", what, err)
	}
	for k, v := range header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", accept)
	return hc.Do(hreq)
}

// postStream sends body as JSON and reads the streamed answer, a line at a
// time (NDJSON or server-sent events), bounded by maxAnswer like a whole
// one; a line returning false ends the reading. A refusal (a status of 400
// or more) is not a stream: its status and bounded body are returned for
// the caller to read as without streaming.
func postStream(ctx context.Context, hc *http.Client, url string, body any, header http.Header, accept, what string,
	line func([]byte) (bool, error)) (int, []byte, error) {
	resp, err := post(ctx, hc, url, body, header, accept, what)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= http.StatusBadRequest {
		raw, err := readBody(resp, what)
		return resp.StatusCode, raw, err
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, maxAnswer+1))
	sc.Buffer(make([]byte, 0, 4096), maxAnswer)
	read := 0
	for sc.Scan() {
		read += len(sc.Bytes()) + 1
		if read > maxAnswer {
			return resp.StatusCode, nil, fmt.Errorf("%s answer over %d bytes", what, maxAnswer)
		}
		more, err := line(sc.Bytes())
		if err != nil || !more {
			return resp.StatusCode, nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s answer: %w", what, err)
	}
	return resp.StatusCode, nil, nil
}
