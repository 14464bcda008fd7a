package domain

import "time"

// LLMCall is one prompt to the model as a workflow makes it. It lives here
// so that a workflow's port and the llm package's client take one type
// (memory.Call and llm.Request are its names there) and nothing copies it
// field by field on the way.
type LLMCall struct {
	System string
	Prompt string
	// Strong selects the stronger model the client is configured with, for
	// the few tasks worth a bigger (slower) model.
	Strong bool
	// Temperature is sent as is. langchaingo always sends a temperature, so
	// there is no "provider default": the zero value means deterministic
	// sampling, which suits classification and extraction.
	Temperature float64
	// MaxTokens caps the answer (Ollama num_predict, OpenAI max_tokens);
	// zero takes the client's default for a JSON or a text answer.
	MaxTokens int
	// Timeout overrides the client's timeout for this call.
	Timeout time.Duration
	// Label names the call site in metrics and errors, e.g.
	// "vacancy_relevance". Keep it low-cardinality.
	Label string
	// Partial, on a Text call, streams the answer: it is called with the
	// answer so far, reasoning removed, each time it grows (not at all
	// while the model is still reasoning). It runs on the goroutine reading
	// the stream, so it must return at once. The call's result is the same
	// as without it.
	Partial func(text string)
}
