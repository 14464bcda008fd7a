package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// /skills counts the key skills of the vacancies the model found relevant,
// each vacancy once, and marks those the profile does not name; in the
// user's language, and only in private.
func TestSkillsCountsMatchedVacancies(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	vs := golangVacancies(3, 7100)
	vs[0].KeySkills = []string{"Go", "PostgreSQL", "Docker"}
	vs[1].KeySkills = []string{"Golang", "Docker", "Kafka"}
	vs[2].KeySkills = []string{"Go", "docker", "<b>gRPC</b>"}
	env.HH.Add(vs...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})

	ann := env.TG.User(611, "Ann", "en")
	empty := ask(t, env, ann, ann.ID(), "/skills")
	require.Contains(t, empty.Text, "No vacancy has been found relevant for you in the last 30 days")

	subscribe(t, env, ann, "golang")
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 3 })
	got := ask(t, env, ann, ann.ID(), "/skills")
	t.Log(got.Text)
	lines := strings.Split(got.Text, "\n")
	require.Contains(t, got.Text, "Vacancies found relevant for you: 3; with key skills listed on hh.ru: 3.")
	// Docker: three vacancies (one wrote "docker"); "Golang" is another
	// skill on HH's side, so Go counts 2.
	require.Equal(t, []string{
		"1. Docker — 3 (100%) · not in your profile",
		"2. Go — 2 (67%)",
		"3. <b>gRPC</b> — 1 (33%) · not in your profile", // HH's text arrives literally
		"4. Golang — 1 (33%)",                            // the profile's "Go" through its alias
		"5. Kafka — 1 (33%) · not in your profile",
		"6. PostgreSQL — 1 (33%)",
	}, lines[3:9])
	require.Contains(t, got.Text, "Skills not in your profile: 3.")

	// In Russian, as a Russian speaker reads it.
	boris := env.TG.User(612, "Борис", "ru")
	for _, step := range [][2]string{
		{"/profile Бэкенд на Go, 5 лет, PostgreSQL", "Профиль сохранён"},
		{"/search golang", "Сохранено"},
	} {
		sent := boris.SendText(boris.ID(), step[0])
		env.TG.WaitMessageAfter(t, boris.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
			return strings.Contains(m.Text, step[1])
		})
	}
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, boris.ID())) == 3 })
	ru := ask(t, env, boris, boris.ID(), "/skills")
	t.Log(ru.Text)
	require.Contains(t, ru.Text, "Подходящих вам вакансий: 3; с ключевыми навыками на hh.ru: 3.")
	require.Contains(t, ru.Text, "1. Docker — 3 (100%) · нет в профиле")

	// Never in a group: it would show the profile's gaps to everyone there.
	group := env.TG.Group(-6110, "Team")
	inGroup := ask(t, env, ann, group.ID, "/skills")
	t.Log(inGroup.Text)
	require.NotContains(t, inGroup.Text, "Docker")
	require.Empty(t, slices.DeleteFunc(env.TG.Messages(group.ID), func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "Docker")
	}), "no skill is shown in the group")
}
