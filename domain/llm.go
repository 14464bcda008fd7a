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
