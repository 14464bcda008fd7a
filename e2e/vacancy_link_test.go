package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// Issue 39's "a vacancy by its link" through the built binary: a user with
// a profile and no saved search pastes a vacancy's link among words; its
// card arrives with Applied, which works; pasted again, the card comes
// again, as applied, and the model was asked once. A link HH answers 404
// for is told as gone, in English and in Russian. None of it reaches the
// memory chat.
func TestPastedVacancyLinkIsJudgedOnceAndShownAgain(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	relevantVacancies(env, 2, 8700)
	env.HH.DetailNotFound("8701")
	pool := startHourly(t, env)
	isCard := func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Score: 87/100") }

	ann := env.TG.User(871, "Ann", "en")
	reply(t, env, ann, "/profile Go developer, 5 years, PostgreSQL, remote", "Profile saved")
	sent := ann.SendText(ann.ID(), "what do you think of https://spb.hh.ru/vacancy/8700?from=share please")
	card := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, isCard)
	env.TG.WaitChatAction(t, ann.ID(), "typing")
	require.Contains(t, card.Text, "Golang developer 8700")
	require.Contains(t, card.Text, "Go <and> PostgreSQL match")
	require.Contains(t, describe(card), "✅ Applied")
	require.Contains(t, describe(card), "https://hh.ru/vacancy/8700")

	ans := ann.PressAndWait(t, card, "✅ Applied")
	require.False(t, ans.ShowAlert, ans.Text)
	var status string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT status FROM vacancy_matches WHERE user_id = $1 AND vacancy_id = 8700`, ann.ID()).Scan(&status))
	require.Equal(t, "APPLIED", status)

	sent = ann.SendText(ann.ID(), "https://hh.ru/vacancy/8700")
	again := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, isCard)
	require.Contains(t, again.Text, "Golang developer 8700")
	require.Contains(t, again.Text, "Applied", "shown as it stands")
	require.NotContains(t, describe(again), "Not interested")
	require.Equal(t, 1, env.LLM.Calls("relevance"), "judged once")

	gone := reply(t, env, ann, "hh.ru/vacancy/8701", "hh.ru has no such vacancy")
	require.Equal(t, "hh.ru has no such vacancy any more: it was removed or archived. Check the link.", gone.Text)

	ivan := env.TG.User(872, "Иван", "ru")
	reply(t, env, ivan, "/profile Go-разработчик", "Профиль сохранён")
	reply(t, env, ivan, "вот https://hh.ru/vacancy/8701", "Такой вакансии на hh.ru больше нет")

	require.Len(t, env.LLM.Requests(), 1, "the model was asked nothing else: no memory chat")
	var runs int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pipeline_runs`).Scan(&runs))
	require.Zero(t, runs, "no link went to the memory chat")
	require.Equal(t, map[string]int{"APPLIED": 1}, statuses(t, pool))
}
