package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	return env.LLM.On(llmtest.SystemContains("propose the tasks")).Named("proposals").ReplyFunc(proposals)
}

// proposals is proposeTasks' answer to one batch's prompt.
func proposals(r llmtest.Request) string {
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
}

func adminLines(env *e2e.Env) []tgfake.BotMessage { return env.TG.Messages(adminGroup) }

// board is the admin chat's board of a run (the message with its
// progress bar) as it is now.
func board(env *e2e.Env, run int) (tgfake.BotMessage, bool) {
	for _, m := range adminLines(env) {
		if strings.Contains(m.Text, fmt.Sprintf("Run #%d ", run)) && (strings.Contains(m.Text, "▓") || strings.Contains(m.Text, "░")) {
			return m, true
		}
	}
	return tgfake.BotMessage{}, false
}

// teamEnv is an env with the admin group and the team's group, whose
// runs propose the tasks its messages ask for (proposeTasks); not started.
func teamEnv(t *testing.T) (*e2e.Env, tgfake.Chat) {
	t.Helper()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	team := env.TG.Supergroup(teamChat, "Team", "")
	proposeTasks(env)
	return env, team
}

// waitGroupMessages waits until the bot has stored n group messages.
func waitGroupMessages(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool { return scalar[int](t, pool, `SELECT count(*) FROM group_messages`) == n })
}

// firstWords has who open the talk in chat with texts and waits until the
// bot has stored them, the only group messages so far.
func firstWords(t *testing.T, pool *pgxpool.Pool, who *tgfake.Person, chat int64, texts ...string) {
	t.Helper()
	for _, text := range texts {
		who.SendText(chat, text)
	}
	waitGroupMessages(t, pool, len(texts))
}

// completedRun is boss opening run #1 over the last day and starting it:
// its board once the run has completed.
func completedRun(t *testing.T, env *e2e.Env, boss *tgfake.Person) tgfake.BotMessage {
	t.Helper()
	ask(t, env, boss, boss.ID(), "/run_new 24h")
	ask(t, env, boss, boss.ID(), "/run_start 1")
	return waitBoard(t, env, 1, 60*time.Second, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Run #1 completed") })
}

// pressEach has who press the buttons labelled labels on msg in turn, each
// answered without an alert.
func pressEach(t *testing.T, who *tgfake.Person, msg tgfake.BotMessage, labels ...string) {
	t.Helper()
	for _, label := range labels {
		require.False(t, who.PressAndWait(t, msg, label).ShowAlert, "%q", label)
	}
}

// waitBoard waits until the run's board shows what ok wants.
func waitBoard(t *testing.T, env *e2e.Env, run int, within time.Duration, ok func(tgfake.BotMessage) bool) tgfake.BotMessage {
	t.Helper()
	var b tgfake.BotMessage
	env.TG.WaitFor(t, within, func() bool {
		m, found := board(env, run)
		if found && ok(m) {
			b = m
			return true
		}
		return false
	})
	return b
}

// A run's model reads the messages' times on the admin chat's clock
// (ADMIN_CHAT_TIMEZONE), the zone its board and events are written in,
// named and with each time's offset, not in UTC.
func TestAnalysisPromptIsOnTheAdminChatsClock(t *testing.T) {
	t.Parallel()
	env, team := teamEnv(t)
	env.Start(map[string]string{"ADMIN_CHAT_TIMEZONE": "Asia/Tbilisi"})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(801, "Ann", "en")
	firstWords(t, pool, ann, team.ID, "Bob, please fix the login page")
	said := scalar[time.Time](t, pool, `SELECT date FROM group_messages`)
	completedRun(t, env, boss)

	tbilisi, err := time.LoadLocation("Asia/Tbilisi")
	require.NoError(t, err)
	prompt := env.LLM.RequestsFor("proposals")[0].Prompt
	require.Contains(t, prompt, "Every time below is local to Asia/Tbilisi", prompt)
	require.Contains(t, prompt, " "+said.In(tbilisi).Format("2006-01-02 15:04 Mon")+" +04:00] Ann: Bob, please fix the login page\n", prompt)
}

// The scenario: users talk in a group; an admin opens and starts a
// run, sees its board with the progress and the proposals, approves some
// and rejects the rest, and /run_close posts the metrics; a non-admin is
// refused; a second /run_new before closing is refused with the id.
func TestAnalysisRunEndToEnd(t *testing.T) {
	t.Parallel()
	env, team := teamEnv(t)
	env.Start(nil)
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(801, "Ann", "en")
	bob := env.TG.User(802, "Bob", "en")

	ann.SendText(team.ID, "Bob, please fix the login page")
	bob.SendText(team.ID, "sure")
	ann.SendText(team.ID, "and please update the release notes")
	bob.SendText(team.ID, "Ann, please review my <b>PR</b> & merge")
	waitGroupMessages(t, pool, 4)
	require.Empty(t, env.TG.Messages(team.ID), "the bot never speaks in the group")

	// A non-admin's command is refused and creates nothing.
	require.NotContains(t, ask(t, env, ann, ann.ID(), "/run_new 24h").Text, "created")
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM analysis_runs`))

	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "Run #1 created")
	second := ask(t, env, boss, boss.ID(), "/run_new 7d").Text
	require.Contains(t, second, "#1", "the run in the way is named")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM analysis_runs`))

	ask(t, env, boss, boss.ID(), "/run_start 1")
	b := waitBoard(t, env, 1, 60*time.Second, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Run #1 completed") && strings.Contains(m.Text, "Proposals 1–3 of 3")
	})
	require.Equal(t, "completed", scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`))
	require.Contains(t, b.Text, "review my <b>PR</b> & merge", "the LLM's and users' text arrives literally")
	require.Contains(t, describe(b), "Approve the rest (3)")
	for _, m := range adminLines(env) {
		require.NotContains(t, originalText(m), "💡", "no message per proposal")
	}

	// A non-admin's press changes nothing.
	require.Empty(t, ann.PressAndWait(t, b, "1 ✅").Text, "no alert: a message only Ann sees")
	require.Equal(t, "This button is not for you.", lastOnlyFor(t, env, adminGroup, ann, 1).Text)
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_close 1").Shown(), "3", "three still pending")

	for _, label := range []string{"1 ✅", "2 ✅", "3 ❌"} {
		q, err := boss.PressButton(b, label) // the buttons as the board showed them
		require.NoError(t, err)
		ans := env.TG.WaitCallbackAnswer(t, q.ID)
		require.False(t, ans.ShowAlert, ans.Text)
		require.Contains(t, ans.Text, "#"+label[:1])
	}
	// A second press on a decided proposal changes nothing.
	again, err := boss.PressButton(b, "3 ✅")
	require.NoError(t, err)
	require.Equal(t, "This proposal has already been rejected.", env.TG.WaitCallbackAnswer(t, again.ID).Text)
	require.Equal(t, 2, scalar[int](t, pool, `SELECT proposals_approved FROM analysis_runs WHERE id = 1`))
	b = waitBoard(t, env, 1, 30*time.Second, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "✅ 2 · ❌ 1 · ⏳ 0")
	})
	require.Empty(t, b.ReplyMarkup.Buttons(), "nothing left to press")

	closed := ask(t, env, boss, boss.ID(), "/run_close 1").Shown()
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
	final := waitBoard(t, env, 1, 30*time.Second, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Run #1 closed") })
	require.Contains(t, final.Text, "Proposals: 3 — ✅ 2 approved (66.7%), ❌ 1 rejected (33.3%)", "the board's final state")
	require.NotContains(t, final.Text, "so far")
	settled(t, pool)
	var closing []string
	for _, m := range adminLines(env) {
		if strings.Contains(m.Text, "closed") {
			closing = append(closing, m.Text)
		}
	}
	require.Len(t, closing, 1, "one message in the admin chat tells of the close: the board")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "Run #2 created",
		"a closed run blocks nothing, and the refused /run_new took no number")
}

// settled waits until the outbox has delivered everything (but edits a
// newer edit of their message superseded: a board's progress, a live
// location's moves): no message is on its way any more, and none failed.
func settled(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE state <> 'sent'
AND last_error IS DISTINCT FROM 'superseded by a newer edit'`) == 0
	})
}

// The admin chat in Russian: /run_close typed there is answered by the
// board alone, edited to the run's final state (no line beside it, no
// reply); a /run_new refused while a run is open takes no run number; /run
// names the admin who opened the run; and nothing shows a Go duration.
func TestAnalysisAdminChatCloseIsTheBoard(t *testing.T) {
	t.Parallel()
	env, team := teamEnv(t)
	admins := env.AdminGroup
	env.Start(map[string]string{"ADMIN_CHAT_LANGUAGE": "ru"})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Борис", "ru")
	ann := env.TG.User(821, "Ann", "ru")
	firstWords(t, pool, ann, team.ID, "please fix the build", "please write the notes")

	var seen []string // every text the admin read, for the duration check
	say := func(chat int64, text string) tgfake.BotMessage {
		t.Helper()
		m := ask(t, env, boss, chat, text)
		seen = append(seen, m.Text)
		return m
	}
	require.Contains(t, say(boss.ID(), "/run_new 24h").Text, "Прогон #1 создан")
	require.Contains(t, say(boss.ID(), "/run_new 7d").Text, "#1", "refused: run #1 is open")
	say(boss.ID(), "/run_start 1")
	boardOf := func(ok func(string) bool) tgfake.BotMessage {
		t.Helper()
		var b tgfake.BotMessage
		env.TG.WaitFor(t, 60*time.Second, func() bool {
			for _, m := range adminLines(env) {
				if strings.Contains(m.Text, "Прогон #1") && strings.Contains(m.Text, "▓") && ok(m.Text) {
					b = m
					return true
				}
			}
			return false
		})
		return b
	}
	boardOf(func(s string) bool { return strings.Contains(s, "завершён") && strings.Contains(s, "⏳ 2") })
	for _, label := range []string{"1 ✅", "2 ❌"} {
		// The board as it is now: the first decision's edit may still be
		// on its way, and a press goes to the buttons the message has.
		var b tgfake.BotMessage
		env.TG.WaitFor(t, 60*time.Second, func() bool {
			for _, m := range adminLines(env) {
				if strings.Contains(m.Text, "Прогон #1") && hasLabel(m, label) {
					b = m
					return true
				}
			}
			return false
		})
		require.False(t, boss.PressAndWait(t, b, label).ShowAlert)
	}
	boardOf(func(s string) bool { return strings.Contains(s, "⏳ 0") })
	settled(t, pool)

	cmd := boss.SendText(admins.ID, "/run_close 1")
	final := boardOf(func(s string) bool { return strings.Contains(s, "закрыт") })
	require.True(t, strings.HasPrefix(final.Text, "🏁 Прогон #1 закрыт\n"), final.Text)
	require.Contains(t, final.Text, "Предложений: 2 — ✅ одобрено 1 (50%), ❌ отклонено 1 (50%)", "the board's final state")
	require.NotContains(t, final.Text, "пока", "not \"so far\" on a closed run")
	require.Equal(t, "closed", scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`))
	// Once the outbox is empty and a later command is answered, nothing
	// more about the close can come.
	settled(t, pool)
	say(admins.ID, "/runs")
	for _, m := range adminLines(env) {
		seen = append(seen, m.Text)
		if m.MessageID > cmd.MessageID {
			require.NotContains(t, m.Text, "🏁", "no reply nor event line besides the board")
		}
	}

	require.Contains(t, say(boss.ID(), "/run_new 24h").Text, "Прогон #2 создан", "the refused /run_new took no number")
	detail := say(boss.ID(), "/run 1").Text
	require.Contains(t, detail, "Борис", "the admin who opened the run, by name")
	require.NotContains(t, detail, fmt.Sprint(e2e.AdminID))
	for _, text := range seen {
		require.NotRegexp(t, goDuration, text)
	}
}

// A replica killed mid-run: the next start finds the run by its expired
// lease and fails it as interrupted, so a new run can be opened.
func TestAnalysisKilledExecutorIsInterrupted(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	team := env.TG.Supergroup(teamChat, "Team", "")
	proposeTasks(env).Latency(time.Hour) // the executor hangs on the LLM
	over := map[string]string{"ANALYSIS_LEASE": "2s"}
	p := env.Start(over)
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(811, "Ann", "en")
	firstWords(t, pool, ann, team.ID, "please fix the build")
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

// A 10 000-message run (200 batches, about 20 s with the model's 100 ms
// an answer) under ANALYSIS_BOARD_INTERVAL=2s: the board is edited as the
// batches go, never twice within the interval (the
// edits in between coalesce in the outbox, the latest state winning), and
// its last edit shows the run completed with every batch.
func TestAnalysisBoardCoalescesProgress(t *testing.T) {
	t.Parallel()
	const messages, every = 10_000, 2 * time.Second
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	proposeTasks(env).Latency(100 * time.Millisecond)
	env.Start(map[string]string{"ANALYSIS_BOARD_INTERVAL": every.String()})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	// A message every 8 s over the last 22 h (one batch of 50 each, as no
	// pause exceeds ANALYSIS_BATCH_GAP); every 500th asks for a task.
	_, err := pool.Exec(context.Background(), `INSERT INTO group_chats (id, title) VALUES ($1, 'Team')`, teamChat)
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `
INSERT INTO group_messages (chat_id, message_id, author_id, author, text, date)
SELECT $1, i, 801, 'Ann', CASE WHEN i % 500 = 0 THEN 'please do task ' || i ELSE 'chatter ' || i END,
       now() - interval '22 hours' + i * interval '7.9 seconds'
FROM generate_series(1, $2) AS i`, teamChat, messages)
	require.NoError(t, err)

	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_new 24h").Text, "Run #1 created")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/run_start 1").Text, "Run #1 started")
	eventually(t, 2*time.Minute, func() bool {
		return scalar[string](t, pool, `SELECT state FROM analysis_runs WHERE id = 1`) == "completed"
	})
	batches := scalar[int](t, pool, `SELECT batches FROM analysis_runs WHERE id = 1`)
	require.Equal(t, messages/50, batches)
	final := waitBoard(t, env, 1, 30*time.Second, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Run #1 completed") && strings.Contains(m.Text, fmt.Sprintf("Batches: %d of %d", batches, batches))
	})
	require.Contains(t, final.Text, "100%")
	require.Contains(t, final.Text, fmt.Sprintf("Proposals 1–8 of %d", messages/500))

	var edits []tgfake.Call
	// The call is logged just after the fake applies it: wait for the log
	// to hold the edit that showed the final state.
	env.TG.WaitFor(t, 10*time.Second, func() bool {
		edits = nil
		for _, c := range env.TG.CallsTo("editMessageText") {
			if c.Err == nil && c.Params["chat_id"] == fmt.Sprint(adminGroup) && c.Params["message_id"] == fmt.Sprint(final.MessageID) {
				edits = append(edits, c)
			}
		}
		return len(edits) > 0 && strings.Contains(edits[len(edits)-1].Params["text"], "completed")
	})
	started := scalar[time.Time](t, pool, `SELECT started_at FROM analysis_runs WHERE id = 1`)
	completed := scalar[time.Time](t, pool, `SELECT completed_at FROM analysis_runs WHERE id = 1`)
	t.Logf("board: %d batches in %s, %d edits of the board (one per %s at most)", batches,
		completed.Sub(started).Round(time.Millisecond), len(edits), every)
	require.GreaterOrEqual(t, len(edits), 2, "the board moved while the run ran")
	for i := 1; i < len(edits); i++ {
		gap := edits[i].Start.Sub(edits[i-1].Start)
		require.GreaterOrEqual(t, gap, every, "edits %d and %d of the board %s apart", i, i+1, gap)
	}
	require.Contains(t, edits[len(edits)-1].Params["text"], "completed", "the last edit is the final state")
	require.True(t, edits[len(edits)-1].Start.After(completed), "the last edit follows the completion")
}
