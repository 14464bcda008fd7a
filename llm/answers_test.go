package llm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain/analysis"
	"switchboard/domain/memory"
	"switchboard/domain/vacancy"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// answerTarget is one workflow's answer type with a clean answer and the
// type-specific shapes real models send ("" where the type has no such
// field).
type answerTarget struct {
	name  string
	new   func() any
	clean string
	check func(t *testing.T, out any) // what the clean answer decodes to
	// A number sent as a string, a boolean sent as a string, a whole
	// number written as a float, a fraction where an integer belongs.
	numberString, boolString, wholeFloat, fraction string
}

var answerTargets = []answerTarget{
	{
		name:  "vacancy verdict",
		new:   func() any { return new(vacancy.Verdict) },
		clean: `{"is_relevant": true, "score": 80, "reasons": ["Go"], "matched_skills": ["go"]}`,
		check: func(t *testing.T, out any) {
			v := out.(*vacancy.Verdict)
			assert.True(t, v.Relevant())
			assert.Equal(t, 80, v.Score)
			assert.Equal(t, []string{"go"}, v.MatchedSkills)
		},
		numberString: `{"is_relevant": true, "score": "80", "reasons": ["Go"], "matched_skills": ["go"]}`,
		boolString:   `{"is_relevant": "true", "score": 80, "reasons": ["Go"], "matched_skills": ["go"]}`,
		wholeFloat:   `{"is_relevant": true, "score": 80.0, "reasons": ["Go"], "matched_skills": ["go"]}`,
		fraction:     `{"is_relevant": true, "score": 79.6, "reasons": ["Go"], "matched_skills": ["go"]}`,
	},
	{
		name: "analysis proposals",
		new:  analysis.NewAnswerTarget,
		clean: `{"proposals": [{"title": "Fix the login bug", "description": "Users cannot log in", ` +
			`"priority": "high", "assignee": "", "deadline": "", "source_message_ids": [101]}]}`,
		check: func(t *testing.T, out any) {
			// The type is the executor's own; its JSON shape is the check.
			assert.Contains(t, fmt.Sprintf("%+v", out), "Fix the login bug")
			assert.Contains(t, fmt.Sprintf("%+v", out), "[101]")
		},
		numberString: `{"proposals": [{"title": "Fix the login bug", "description": "Users cannot log in", ` +
			`"priority": "high", "assignee": "", "deadline": "", "source_message_ids": ["101"]}]}`,
		wholeFloat: `{"proposals": [{"title": "Fix the login bug", "description": "Users cannot log in", ` +
			`"priority": "high", "assignee": "", "deadline": "", "source_message_ids": [101.0]}]}`,
		fraction: `{"proposals": [{"title": "Fix the login bug", "description": "Users cannot log in", ` +
			`"priority": "high", "assignee": "", "deadline": "", "source_message_ids": [101.5]}]}`,
	},
	{
		name: "memory analysis",
		new:  func() any { return new(memory.Analysis) },
		clean: `{"needs_context": true, "context_type": "history", "time_scope": "week", ` +
			`"search_keywords": ["Deploy"], "context_found": false}`,
		check: func(t *testing.T, out any) {
			a := out.(*memory.Analysis)
			require.NotNil(t, a.NeedsContext)
			assert.True(t, *a.NeedsContext)
			assert.Equal(t, []string{"deploy"}, a.SearchKeywords)
		},
		boolString: `{"needs_context": "True", "context_type": "history", "time_scope": "week", ` +
			`"search_keywords": ["Deploy"], "context_found": "false"}`,
	},
}

// answerShape is one way a real server answers. reply builds the content
// from the target's clean JSON; rule adds what goes beside it. wantErr is
// "" for an accepted answer, else a phrase its error must hold; repair is
// the llm_answer_repairs_total kind an accepted answer must count.
type answerShape struct {
	name    string
	reply   func(tg answerTarget) string // "" skips the shape for this target
	rule    func(r *llmtest.Rule, tg answerTarget)
	wantErr string
	repair  string
}

var answerShapes = []answerShape{
	{name: "clean", reply: func(tg answerTarget) string { return tg.clean }},
	{name: "think block", reply: func(tg answerTarget) string {
		return "<think>\nThe user wants JSON. {\"draft\": 1} Let me answer.\n</think>\n\n" + tg.clean
	}, repair: "think"},
	{name: "lone closing think", reply: func(tg answerTarget) string {
		return "Okay, weighing the skills first.\n</think>\n" + tg.clean
	}, repair: "think"},
	{name: "empty think", reply: func(tg answerTarget) string { return "<think>\n\n</think>\n\n" + tg.clean }, repair: "think"},
	{name: "prose around fence", reply: func(tg answerTarget) string {
		return "Here is the result:\n```json\n" + tg.clean + "\n```\nLet me know if you need more."
	}, repair: "fence"},
	{name: "fence only", reply: func(tg answerTarget) string { return "```json\n" + tg.clean + "\n```" }, repair: "fence"},
	{name: "trailing note", reply: func(tg answerTarget) string {
		return tg.clean + "\n\nNote: the score reflects the stated requirements."
	}, repair: "trailing"},
	{name: "prose before", reply: func(tg answerTarget) string { return "Sure! " + tg.clean }, repair: "prose"},
	{name: "BOM", reply: func(tg answerTarget) string { return "\uFEFF" + tg.clean }, repair: "bom"},
	{name: "number as string", reply: func(tg answerTarget) string { return tg.numberString }, repair: "coerce_number"},
	{name: "bool as string", reply: func(tg answerTarget) string { return tg.boolString }, repair: "coerce_bool"},
	{name: "whole float", reply: func(tg answerTarget) string { return tg.wholeFloat }, repair: "coerce_number"},
	{name: "single quotes", reply: func(tg answerTarget) string { return strings.ReplaceAll(tg.clean, `"`, `'`) }, repair: "jsonrepair"},
	{name: "fraction for an integer", reply: func(tg answerTarget) string { return tg.fraction }, wantErr: "not a whole number"},
	{name: "cut off at length", reply: func(tg answerTarget) string { return tg.clean },
		rule: func(r *llmtest.Rule, tg answerTarget) { r.CutAt(len(tg.clean) / 2) }, wantErr: "LLM_MAX_TOKENS_JSON"},
	{name: "JSON only in reasoning", reply: func(answerTarget) string { return " " },
		rule: func(r *llmtest.Rule, tg answerTarget) { r.Thinking(tg.clean) }, wantErr: "reasoning field"},
	{name: "unclosed think", reply: func(tg answerTarget) string { return "<think>\nFirst, " + tg.clean },
		wantErr: "unclosed <think>"},
	{name: "empty object", reply: func(answerTarget) string { return "{}" }, wantErr: "empty object {}"},
	{name: "plain prose", reply: func(answerTarget) string {
		return "I think this vacancy is a good match for the candidate."
	}, wantErr: "no JSON"},
}

// TestAnswerShapes sends every shape through the real client and the
// scripted server, for both providers, into each workflow's answer type.
func TestAnswerShapes(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		for _, tg := range answerTargets {
			t.Run(tg.name, func(t *testing.T) {
				for _, sh := range answerShapes {
					content := sh.reply(tg)
					if content == "" {
						continue
					}
					t.Run(sh.name, func(t *testing.T) {
						srv := newServer(t)
						r := srv.On().Reply(content)
						if sh.rule != nil {
							sh.rule(r, tg)
						}
						c, reg := newClient(t, srv, provider, nil)
						out := tg.new()
						err := c.JSON(context.Background(), llm.Request{Prompt: "judge", Label: "shapes"}, out)
						if sh.wantErr != "" {
							require.ErrorIs(t, err, llm.ErrInvalidJSON)
							assert.Contains(t, err.Error(), sh.wantErr)
							assert.Equal(t, llm.BreakerClosed, c.BreakerState())
							return
						}
						require.NoError(t, err)
						tg.check(t, out)
						if sh.repair != "" {
							assert.Equal(t, 1.0, metricValue(t, reg, "llm_answer_repairs_total",
								map[string]string{"model": "small", "kind": sh.repair}), "repair %s counted", sh.repair)
						}
					})
				}
			})
		}
	})
}

// The cut-off refusal names every setting that bounds the answer.
func TestCutOffNamesTheSetting(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On().Reply(`{"is_relevant": true, "score": 8`).CutAt(0)
		c, _ := newClient(t, srv, provider, nil)
		var v vacancy.Verdict
		err := c.JSON(context.Background(), llm.Request{Prompt: "p"}, &v)
		require.ErrorIs(t, err, llm.ErrTruncated)
		require.ErrorIs(t, err, llm.ErrInvalidJSON)
		if provider == llm.ProviderOllama {
			assert.Contains(t, err.Error(), "LLM_MAX_TOKENS_JSON (num_predict, now 2048) or LLM_NUM_CTX (now 16384)")
		} else {
			assert.Contains(t, err.Error(), "LLM_MAX_TOKENS_JSON (max_tokens, now 2048)")
		}
		err = c.JSON(context.Background(), llm.Request{Prompt: "p", MaxTokens: 300}, &v)
		assert.Contains(t, err.Error(), "the call's MaxTokens", "a budget set by the call is named as such")
	})
}

// The memory chat's reply never shows the model's reasoning.
func TestTextLosesReasoning(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On(llmtest.PromptHasWords("hello")).Reply("<think>\nThe user greets me. Be brief.\n</think>\n\nHi! How can I help?")
		srv.On(llmtest.PromptHasWords("plain")).Reply("  Plain answer.\n")
		srv.On(llmtest.PromptHasWords("only")).Reply("<think>still thinking when the budget ran out")
		c, reg := newClient(t, srv, provider, nil)
		ctx := context.Background()

		out, err := c.Text(ctx, memory.Call{Label: "memory_responder", Prompt: "hello", MaxTokens: 500})
		require.NoError(t, err)
		assert.Equal(t, "Hi! How can I help?", out)
		assert.Equal(t, 500, srv.Requests()[0].MaxTokens)
		assert.Equal(t, 1.0, metricValue(t, reg, "llm_answer_repairs_total", map[string]string{"model": "small", "kind": "think"}))

		out, err = c.Text(ctx, memory.Call{Label: "memory_responder", Prompt: "plain"})
		require.NoError(t, err)
		assert.Equal(t, "  Plain answer.\n", out, "an answer without reasoning is left as written")

		_, err = c.Text(ctx, llm.Request{Prompt: "only"})
		require.ErrorIs(t, err, llm.ErrEmpty)
		assert.Contains(t, err.Error(), "only the model's reasoning")
		assert.Equal(t, llm.BreakerClosed, c.BreakerState(), "the model did answer")
	})
}
