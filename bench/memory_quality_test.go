package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The evaluation set through the real pipeline with the scripted reader:
// every remembered fact reached the responder, a superseded one did not,
// and the table and the JSON line say so.
func TestMemoryQualitySmoke(t *testing.T) {
	out, _, rep := smoke[memoryQualityReport](t, "memory-quality")
	require.Equal(t, "memory-quality", rep.Scenario)
	require.Equal(t, "scripted", rep.Model)
	require.Equal(t, 17, rep.Questions)
	for _, k := range questionKinds {
		require.Contains(t, rep.ByKind, k)
	}
	require.Contains(t, out, "kind           questions  correct  accuracy")
	require.Contains(t, out, "first text of the answer")
	require.Positive(t, rep.AnswerP50MS)
	require.Positive(t, rep.FirstTextP50MS, "answers streamed")
	require.Equal(t, 1.0, rep.ByKind["single-hop"], out)
	require.Equal(t, 1.0, rep.ByKind["multi-hop"], out)
	require.Equal(t, 1.0, rep.ByKind["temporal"], out)
	require.Equal(t, 1.0, rep.ByKind["contradiction"], "the replaced fact never reaches the responder:\n%s", out)
	require.True(t, rep.GoalsMet)
}

func TestKeywordsJudge(t *testing.T) {
	q := evalQuestion{Kind: "contradiction", Q: "Where do I live now?", Expect: []string{"lviv|львів"}, Reject: []string{"live in kyiv"}}
	require.True(t, keywordsJudge(q, "You live in LVIV now."))
	require.True(t, keywordsJudge(q, "Ви живете у Львові? Ні: у Львів."))
	require.False(t, keywordsJudge(q, "You live in Kyiv."))
	require.False(t, keywordsJudge(q, "Lviv, though you also live in Kyiv"), "a rejected claim makes it wrong")
	both := evalQuestion{Expect: []string{"dinosaur", "swimming"}}
	require.False(t, keywordsJudge(both, "dinosaurs"), "every expected fact")
	require.True(t, keywordsJudge(both, "Dinosaurs and swimming"))
}

func TestEvalSetRefusesWhatItCannotJudge(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"version":  `{"version": 2, "conversations": [{"id": "a", "language": "en"}]}`,
		"kind":     `{"version": 1, "conversations": [{"id": "a", "language": "en", "questions": [{"kind": "vague", "q": "?", "expect": ["x"]}]}]}`,
		"expect":   `{"version": 1, "conversations": [{"id": "a", "language": "en", "questions": [{"kind": "temporal", "q": "?"}]}]}`,
		"language": `{"version": 1, "conversations": [{"id": "a", "language": "de"}]}`,
	} {
		p := filepath.Join(dir, name+".json")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
		_, err := loadEvalSet(p)
		require.Error(t, err, name)
	}
	set, err := loadEvalSet("")
	require.NoError(t, err, "the shipped set")
	require.Len(t, set.Conversations, 4)
}
