package e2e_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
)

const (
	teamChat   = -1002000000001
	adminGroup = -1002000000099
)

var msgIDRx = regexp.MustCompile(`\[id=(\d+) [^\]]*\] [^:]+: (.*)`)

// proposeTasks scripts the LLM: one proposal per message that says
// "please", citing it and titled with its text.
func proposeTasks(env *e2e.Env) *llmtest.Rule {
	return env.LLM.On(llmtest.SystemContains("propose the tasks")).Named("proposals").ReplyFunc(func(r llmtest.Request) string {
		var ps []string
		for _, line := range strings.Split(r.Prompt, "\n") {
			m := msgIDRx.FindStringSubmatch(line)
			if m == nil || !strings.Contains(m[2], "please") {
				continue
			}
			ps = append(ps, fmt.Sprintf(`{"title":%q,"description":"from the chat","priority":"medium","assignee":"","deadline":"","source_message_ids":[%s]}`,
				strings.TrimSpace(m[2]), m[1]))
		}
		return `{"proposals":[` + strings.Join(ps, ",") + `]}`
	})
}

func adminLines(env *e2e.Env) []tgfake.BotMessage { return env.TG.Messages(adminGroup) }

func proposalMessages(env *e2e.Env) []tgfake.BotMessage {
	var out []tgfake.BotMessage
	for _, m := range adminLines(env) {
		if strings.HasPrefix(originalText(m), "💡 Proposal") {
			out = append(out, m)
		}
	}
	return out
}

// The scenario: users talk in a group; an admin opens and starts a
// run, sees progress and proposals, approves some and rejects the rest,
// and /run_close posts the metrics; a non-admin is refused; a second
// /run_new before closing is refused with the id.
func TestAnalysisRunEndToEnd(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Supergroup(adminGroup, "Admins", "")
	team := env.TG.Supergroup(teamChat, "Team", "")
	proposeTasks(env)
	env.Start(map[string]string{"ADMIN_CHAT_ID": fmt.Sprint(adminGroup)})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(801, "Ann", "en")
	bob := env.TG.User(802, "Bob", "en")

	ann.SendText(team.ID, "Bob, please fix the login page")
	bob.SendText(team.ID, "sure")
	ann.SendText(team.ID, "and please update the release notes")
	bob.SendText(team.ID, "Ann, please review my <b>PR</b> & merge")
	eventually(t, 10*time.Second, func() bool { return scalar[int](t, pool, `SELECT count(*) FROM group_messages`) == 4 })
	require.Empty(t, env.TG.Messages(team.ID), "the bot never speaks in the group")

	// A non-admin's command is refused and creates nothing.
	require.NotContains(t, ask(t, env, ann, ann.ID(), "/run_new 24h").Text, "created")
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM analysis_runs`))

	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "Run #1 created")
	second := ask(t, env, boss, boss.ID(), "/run_new 7d").Text
	require.Contains(t, second, "#1", "the run in the way is named")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM analysis_runs`))

	ask(t, env, boss, boss.ID(), "/run_start 1")
	env.TG.WaitFor(t, 20*time.Second, func() bool { return len(proposalMessages(env)) == 3 })
	eventually(t, 10*time.Second, func() bool {
		return scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`) == "completed"
	})
	var progress *tgfake.BotMessage
	// The edits go out through the outbox at the group's pace.
	env.TG.WaitFor(t, 60*time.Second, func() bool {
		for _, m := range adminLines(env) {
			if strings.Contains(m.Text, "▓") || strings.Contains(m.Text, "░") {
				progress = &m
				return len(m.Edits) > 0
			}
		}
		return false
	})
	require.NotNil(t, progress, "a progress message")
	require.NotEmpty(t, progress.Edits, "edited as batches finish")
	ps := proposalMessages(env)
	require.Contains(t, ps[2].Text, "review my <b>PR</b> & merge", "the LLM's and users' text arrives literally")

	// A non-admin's press changes nothing.
	q, err := ann.PressButton(ps[0], "✅ Approve")
	require.NoError(t, err)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, q.ID).Text)
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_close 1").Text, "3", "three still pending")

	for i, label := range []string{"✅ Approve", "✅ Approve", "❌ Reject"} {
		q, err := boss.PressButton(ps[i], label)
		require.NoError(t, err)
		require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert)
	}
	// A second press on a decided proposal changes nothing.
	again := boss.PressRaw(ps[2], ps[2].ReplyMarkup.Buttons()[0].CallbackData)
	require.True(t, env.TG.WaitCallbackAnswer(t, again.ID).ShowAlert)
	require.Equal(t, 2, scalar[int](t, pool, `SELECT proposals_approved FROM analysis_runs WHERE id = 1`))

	closed := ask(t, env, boss, boss.ID(), "/run_close 1").Text
	require.Contains(t, closed, "66.7", "approval rate of 2 of 3")
	require.Equal(t, "closed", scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`))
	require.InDelta(t, 0.6667, scalar[float64](t, pool, `SELECT (accuracy_metrics->>'approval_rate')::float8 FROM analysis_runs WHERE id = 1`), 0.0001)
	env.TG.WaitFor(t, 10*time.Second, func() bool {
		for _, m := range adminLines(env) {
			if strings.Contains(m.Text, "closed") && strings.Contains(m.Text, "66.7") {
				return true
			}
		}
		return false
	})
	// (A refused /run_new used up a sequence value, so the id may skip.)
	require.Regexp(t, `Run #\d+ created`, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "a closed run blocks nothing")
}

// A replica killed mid-run: the next start finds the run by its expired
// lease and fails it as interrupted, so a new run can be opened.
func TestAnalysisKilledExecutorIsInterrupted(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Supergroup(adminGroup, "Admins", "")
	team := env.TG.Supergroup(teamChat, "Team", "")
	proposeTasks(env).Latency(time.Hour) // the executor hangs on the LLM
	over := map[string]string{"ADMIN_CHAT_ID": fmt.Sprint(adminGroup), "ANALYSIS_LEASE": "2s"}
	p := env.Start(over)
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(811, "Ann", "en")
	ann.SendText(team.ID, "please fix the build")
	eventually(t, 10*time.Second, func() bool { return scalar[int](t, pool, `SELECT count(*) FROM group_messages`) == 1 })
	ask(t, env, boss, boss.ID(), "/run_new 24h")
	ask(t, env, boss, boss.ID(), "/run_start 1")
	eventually(t, 10*time.Second, func() bool { return env.LLM.Calls("proposals") == 1 })
	p.Kill()

	env.Start(over)
	eventually(t, 20*time.Second, func() bool {
		return scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`) == "failed"
	})
	require.Equal(t, "interrupted", scalar[string](t, pool, `SELECT error_log->>'step' FROM analysis_runs WHERE id = 1`))
	// A reply the killed replica had claimed holds the admin's chat until
	// its outbox lease (10 s) runs out, so the answer may wait that long.
	sent := boss.SendText(boss.ID(), "/run_new 24h")
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		for _, m := range env.TG.Messages(boss.ID()) {
			if m.MessageID > sent.MessageID && regexp.MustCompile(`Run #\d+ created`).MatchString(m.Text) {
				return true
			}
		}
		return false
	})
}
