package e2e_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
)

// think wraps an answer the way reasoning models (qwen3, deepseek-r1
// through Ollama) send it: their reasoning first, in a <think> block.
func think(answer string) string {
	return "<think>\nThe user wants JSON. Let me weigh <this> & that… {not: json}\n</think>\n\n" + answer
}

// A reasoning model behind Ollama, every answer opening with its
// reasoning (and some in a fence with prose around it): vacancy cards are
// delivered, an analysis run completes with its proposals, and the memory
// chat's answer arrives without the reasoning.
func TestReasoningModelAnswersEverywhere(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	team := env.TG.Supergroup(teamChat, "Team", "")
	verdict, err := json.Marshal(relevantAnswer)
	require.NoError(t, err)
	screening(env).
		Reply(think("Here is my verdict:\n```json\n" + string(verdict) + "\n```\nNote: the score is my own estimate."))
	env.LLM.On(llmtest.SystemContains("propose the tasks")).Named("proposals").
		ReplyFunc(func(r llmtest.Request) string { return think(proposals(r)) })
	env.LLM.On(llmtest.SystemContains("Decide whether answering needs that memory")).Named("analyzer").
		Reply(think(`{"needs_context": false, "context_type": "none", "time_scope": "recent", "search_keywords": [], "context_found": false}`))
	env.LLM.On(llmtest.SystemContains("You prepare the context")).Named("assembler").Reply(think("Notes for the mentor."))
	env.LLM.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").
		Reply(think("Start with three easy runs a week."))
	env.LLM.On(llmtest.SystemContains("You summarise one exchange")).Named("archivist").
		Reply(think(`{"summary": "The user asked about running.", "tags": ["sport"]}`))
	env.HH.Add(golangVacancies(3, 7400)...)
	pool := startHourly(t, env)
	ann := env.TG.User(641, "Ann", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")

	subscribe(t, env, ann, "golang")
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 3 })
	for _, m := range vacancyMessages(env, ann.ID()) {
		require.Contains(t, m.Text, "Score: 87")
		require.NotContains(t, m.Text, "think")
	}

	q := ann.SendText(ann.ID(), "How do I start running?")
	answer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q.MessageID })
	require.Equal(t, "Start with three easy runs a week.", answer.Text, "the reasoning is not the user's to read")

	firstWords(t, pool, ann, team.ID, "Bob, please fix the login page")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "Run #1 created")
	ask(t, env, boss, boss.ID(), "/run_start 1")
	eventually(t, 30*time.Second, func() bool {
		return scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`) == "completed"
	})
	require.Equal(t, 1, scalar[int](t, pool, `SELECT proposals_total FROM analysis_runs WHERE id = 1`))
	require.Equal(t, "Bob, please fix the login page", scalar[string](t, pool, `SELECT title FROM analysis_proposals`))
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM vacancy_matches WHERE status = 'SKIPPED'`))
}
