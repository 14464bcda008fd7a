package llm

import (
	"errors"
	"testing"
)

// fuzzAnswer has a field of each kind the workflows' answers use.
type fuzzAnswer struct {
	Score    int      `json:"score"`
	Relevant bool     `json:"relevant"`
	Reason   string   `json:"reason"`
	Skills   []string `json:"skills"`
	Tasks    []struct {
		Title    string  `json:"title"`
		Sources  []int64 `json:"sources"`
		Priority *string `json:"priority"`
	} `json:"tasks"`
	Extra map[string]float64 `json:"extra"`
}

// Whatever a model answers in JSON mode, decodeAnswer returns a value or one
// of the errors the callers turn into SKIPPED and a retry; it never panics,
// whatever the repairs make of the text.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{
		`{"score": 80, "relevant": true, "reason": "Go", "skills": ["Go"], "tasks": [{"title": "x", "sources": [1]}]}`,
		"```json\n{\"score\": \"80\", \"relevant\": \"TRUE\"}\n```", `<think>hmm</think>{'score': 80.0,}`, `{"score": 79.6}`,
		`Here: {"tasks": [{"sources": ["1", 2.0]}]} done`, `{"score": 1e400}`, `{"extra": {"a": "x"}}`, `{}`, `[]`, `null`,
		`{"score": 80`, "<think>never closed", `{"a": "}{"} trailing`, "\uFEFF{\"score\": 1}", `{"skills": "Go"}`,
	} {
		f.Add(s, "", "")
	}
	f.Add("", "the JSON is {\"score\": 1}", "")
	f.Add(`{"score": 80`, "", "length")
	f.Fuzz(func(t *testing.T, content, reasoning, stop string) {
		var out fuzzAnswer
		var rep repairs
		err := decodeAnswer(answerText{content: content, reasoning: reasoning, stopReason: stop}, &out, "LLM_MAX_TOKENS", &rep)
		if err != nil && !errors.Is(err, ErrInvalidJSON) && !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrReasoningOnly) {
			t.Fatalf("%q answered with %v, which no caller expects", content, err)
		}
	})
}
