package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// Through the built binary: a seeker hides an employer from its card; the
// card is marked Not interested, /bans lists the employer, the next fetch
// brings the other employer's new vacancy and not the hidden one's; shown
// again, the hidden employer's next vacancy arrives.
func TestHideEmployerThroughTheBinary(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	vs := golangVacancies(5, 7600)
	for i := range vs {
		vs[i].Employer.Name = "Other Co"
	}
	vs[0].Employer.Name = "ООО «Рога & Копыта»"
	vs[2].Employer.Name = vs[0].Employer.Name
	env.HH.Add(vs[0], vs[1])
	env.Start(map[string]string{"FETCH_INTERVAL": "2s"})
	pool := db(t, env)

	ann := seeker(t, env, 611)
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 2 })
	hidden := card(t, env, ann.ID(), "7600")
	require.Contains(t, describe(hidden), "🙈 Hide this employer")

	ans := ann.PressAndWait(t, hidden, "🙈 Hide this employer")
	require.True(t, ans.ShowAlert)
	require.Equal(t, "Vacancies from ООО «Рога & Копыта» will not be sent to you any more. /bans lists hidden employers and shows them again.", ans.Text)
	edited, _ := env.TG.MessageByID(ann.ID(), hidden.MessageID)
	require.Contains(t, edited.Text, "Not interested")
	require.NotContains(t, describe(edited), "Hide this employer")

	sent := ann.SendText(ann.ID(), "/bans")
	list := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Hidden employers")
	})
	require.Equal(t, "You have no ban words. Add one: /ban 1C\n\nHidden employers (1):\n• ООО «Рога & Копыта»", list.Text)

	// The next fetch: the other employer's comes, the hidden one's not.
	env.HH.Add(vs[2], vs[3])
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 3 })
	card(t, env, ann.ID(), "7603")
	var n int
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT count(*) FROM search_hits WHERE vacancy_id = 7602`).Scan(&n))
		return n == 1
	}, func() string { return "vacancy 7602 never discovered" })
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM vacancy_matches WHERE vacancy_id = 7602`).Scan(&n))
	require.Zero(t, n, "discovery passed the hidden employer's vacancy by")

	require.Equal(t, "Vacancies from ООО «Рога & Копыта» will be sent to you again.", ann.PressAndWait(t, list, "👁 Show ООО «Рога & Копыта» again").Text)
	vs[4].Employer.Name = vs[0].Employer.Name
	env.HH.Add(vs[4])
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 4 })
	card(t, env, ann.ID(), "7604")
}
