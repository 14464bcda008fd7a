package domain

import (
	"errors"
	"time"
)

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

// The model's failures as the workflows tell them apart. The llm package's
// errors match them with errors.Is (its ErrBreakerOpen is an ErrLLMDown,
// its RefusedError an ErrLLMRefused, and so on), so a workflow reads why a
// call failed without importing llm, and no port translates one set of
// errors into another. An error may match more than one: a call the
// breaker turns away while a refusal holds it open is both down and
// refused.
var (
	// ErrLLMInvalidAnswer: the answer is not what was asked for (JSON that
	// does not decode or validate, a letter with no text).
	ErrLLMInvalidAnswer = errors.New("invalid LLM answer")
	// ErrLLMTimeout: the call ran past its own timeout.
	ErrLLMTimeout = errors.New("LLM timeout")
	// ErrLLMBusy: the provider rate-limited the call (429). The model's
	// load, not the work's fault: worth waiting for.
	ErrLLMBusy = errors.New("LLM is rate-limiting calls")
	// ErrLLMRefused: the provider refuses the model or the key (model not
	// found, 401/403, quota or credit spent). A misconfiguration no retry
	// fixes: work waits for the fix instead of failing.
	ErrLLMRefused = errors.New("LLM refuses the model or key")
	// ErrLLMDown: the breaker turned the call away unrun, open after
	// failures or probing with its one probe out. The error says so where
	// it happens: the breaker's state read afterwards may have moved on.
	ErrLLMDown = errors.New("LLM breaker turned the call away")
)

// PromptTime writes t for a model in loc, its reader's zone, with the
// offset and the zone's name beside it: "2026-12-01 10:15 Tue (+04:00,
// Asia/Tbilisi)". A bare time is read as whatever zone the model guesses,
// UTC as often as not, and "yesterday evening" then lands on another day
// than the reader's. A nil loc is UTC.
func PromptTime(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	l := t.In(loc)
	return l.Format("2006-01-02 15:04 Mon") + " (" + l.Format("-07:00") + ", " + loc.String() + ")"
}

// PromptStamp is PromptTime without the zone's name, for the many lines
// under one that names it: "2026-11-30 19:40 Mon +04:00". The offset stays
// on each, since a week's lines can straddle a change of the clocks.
func PromptStamp(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02 15:04 Mon -07:00")
}

// PromptDate is t's day in loc for a model, "2026-11-30": the day the
// reader lived it, which in UTC can be the one before or after.
func PromptDate(t time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	return t.In(loc).Format("2006-01-02")
}
