package llm

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExtractJSONEdges(t *testing.T) {
	for name, tc := range map[string]struct {
		in, want string
		kinds    []string
	}{
		"bracketed aside before": {`Here it is [as JSON]: {"a": 1}`, `{"a": 1}`, []string{repairProse}},
		"nested array not taken": {`{'a': [1, 2]}`, `{'a': [1, 2]}`, nil},
		"braces inside strings":  {`{"a": "}{"} trailing`, `{"a": "}{"}`, []string{repairTrailing}},
		"fence with info string": {"```JSON\n{\"a\": 1}\n```", `{"a": 1}`, []string{repairFence}},
		"one-line fence":         {"```{\"a\": 1}```", `{"a": 1}`, []string{repairProse, repairTrailing}},
	} {
		t.Run(name, func(t *testing.T) {
			var rep repairs
			got, err := extractJSON(tc.in, &rep)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, repairs(tc.kinds), rep)
		})
	}
	var rep repairs
	_, err := extractJSON(`{"a": [1, 2`, &rep)
	require.ErrorIs(t, err, ErrInvalidJSON)
	assert.Contains(t, err.Error(), "not complete", "an unbalanced value is refused, not completed")
}

func TestStripReasoning(t *testing.T) {
	var rep repairs
	s, ok := stripReasoning("<think>a</think><think></think>\n\nanswer", &rep)
	assert.True(t, ok)
	assert.Equal(t, "answer", s)
	_, ok = stripReasoning("\uFEFF<thinking>never closed", &rep)
	assert.False(t, ok)
}

type benchVerdict struct {
	IsRelevant *bool    `json:"is_relevant"`
	Score      int      `json:"score"`
	Reasons    []string `json:"reasons"`
}

// The extractor is on the path of every call; a clean answer must stay
// cheap (one validity check and one strict decode).
func BenchmarkDecodeCleanAnswer(b *testing.B) {
	a := answerText{content: `{"is_relevant": true, "score": 80, "reasons": ["Go", "PostgreSQL", "remote"]}`, stopReason: "stop"}
	b.ReportAllocs()
	for b.Loop() {
		var v benchVerdict
		var rep repairs
		if err := decodeAnswer(a, &v, "x", &rep); err != nil {
			b.Fatal(err)
		}
	}
}
