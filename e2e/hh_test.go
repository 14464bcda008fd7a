package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/hh/hhtest"
)

// The built binary while HH answers every request with a captcha, then
// again: the admin chat hears of it once (with the captcha's URL and how
// to be let in for good) and once when it ends, /vacancies shows the HH
// state meanwhile, only the breaker's probes reach HH, and the user's
// cards arrive after recovery.
func TestVacanciesWaitWhileHHRefuses(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	screening(env).ReplyJSON(relevantAnswer)
	env.HH.Add(golangVacancies(4, 7400)...)
	env.HH.SetCaptcha(true)
	env.Start(map[string]string{
		"FETCH_INTERVAL": "1s", "HH_BREAKER_OPEN_FOR": "1s", "HH_BREAKER_MAX_OPEN": "2s",
	})
	pool := db(t, env)
	ann := env.TG.User(641, "Ann", "en")
	subscribe(t, env, ann, "golang")

	notices := func(part string) int {
		n := 0
		for _, m := range env.TG.Messages(adminGroup) {
			if strings.Contains(m.Text, part) {
				n++
			}
		}
		return n
	}
	env.TG.WaitFor(t, 30*time.Second, func() bool { return notices("HH.ru refuses our requests") == 1 })
	for _, m := range env.TG.Messages(adminGroup) {
		if strings.Contains(m.Text, "HH.ru refuses our requests") {
			require.Contains(t, m.Text, hhtest.CaptchaURL)
			require.Contains(t, m.Text, "HH_CLIENT_ID")
		}
	}
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "hh.ru refuses our requests")
	before := len(env.HH.Requests())
	time.Sleep(6 * time.Second) // the window the probes are counted in
	probes := len(env.HH.Requests()) - before
	t.Logf("requests to HH in 6 s while it asked for a captcha: %d", probes)
	require.LessOrEqual(t, probes, 6, "a probe per hold (1 s, then 2 s), not a request per tick or match")
	require.Empty(t, vacancyMessages(env, ann.ID()))
	require.Zero(t, statuses(t, pool)["SKIPPED"])

	env.HH.SetCaptcha(false)
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 4 })
	env.TG.WaitFor(t, 30*time.Second, func() bool { return notices("HH.ru answers again") == 1 })
	require.Equal(t, 1, notices("HH.ru refuses our requests"), "told once")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "hh.ru is answering.")
	require.Equal(t, map[string]int{"SENT_TO_USER": 4}, statuses(t, pool))
}
