package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

func commandNames(cs []tgfake.BotCommand) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.Command)
	}
	return out
}

// A team group member's private commands are answered in the group only
// with a pointer to the private chat, never with their data; the admin
// chat keeps its admin commands; the menus follow the same rule.
func TestGroupsGetNoPrivateData(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	team := env.TG.Supergroup(teamChat, "Team", "")
	env.Start(nil)
	ann := env.TG.User(7_300_001, "Ann", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	const secret = "private note: looking to leave my current team"
	require.Contains(t, ask(t, env, ann, ann.ID(), "/profile Senior Go developer, "+secret).Text, "Profile saved")
	ann.SendText(team.ID, "hello team, who takes the release?")

	// Another bot's command, an unknown one and admin commands from
	// someone who is not an admin: not a word in the group.
	for _, text := range []string{"/profile@otherbot", "/frobnicate now", "/runs", "/status", "/run_close 1"} {
		ann.SendText(team.ID, text)
	}
	private := []string{"/profile", "/vacancies", "/help", "/forget", "/memory", "/search golang", "/start", "/help@tgfake_bot"}
	for _, text := range private {
		sent := ann.SendText(team.ID, text)
		reply := env.TG.WaitMessageAfter(t, team.ID, sent.MessageID, nil)
		cmd, _, _ := strings.Cut(strings.Fields(text)[0], "@")
		require.Equal(t, "I answer "+cmd+" only in our private chat, so that nothing personal shows up here. Tap below to continue there.",
			reply.Text, text)
		require.Equal(t, sent.MessageID, reply.ReplyToID(), "a reply to the command, so the group sees whose it was")
		link := "https://t.me/tgfake_bot?start=" + strings.TrimPrefix(cmd, "/")
		if cmd == "/start" {
			link = "https://t.me/tgfake_bot"
		}
		buttons := reply.ReplyMarkup.Buttons()
		require.Len(t, buttons, 1)
		require.Equal(t, link, buttons[0].URL)
	}
	env.TG.WaitUpdatesConsumed(t)
	msgs := env.TG.Messages(team.ID)
	require.Len(t, msgs, len(private), "one pointer per private command, nothing else")
	for _, m := range msgs {
		require.NotContains(t, m.Text, secret)
		require.NotContains(t, m.Text, "Senior Go developer")
	}

	// The deep link runs the command in the private chat.
	require.Contains(t, ask(t, env, ann, ann.ID(), "/start profile").Text, secret)

	// The admin chat: admin commands work there, private ones do not.
	runs := ask(t, env, boss, adminGroup, "/runs")
	require.NotContains(t, runs.Text, "only in our private chat")
	require.Empty(t, runs.ReplyMarkup.Buttons())
	require.Contains(t, ask(t, env, boss, adminGroup, "/profile").Text, "I answer /profile only in our private chat")

	// Menus: private commands in private chats only; nothing in groups,
	// nor in the default list groups fall back to; the admin chat has the
	// commands that run there.
	adminChatCommands := []string{"status", "prompt", "order", "orders", "done", "cancel", "paid",
		"chats", "run_new", "run_start", "run_close", "runs", "run"}
	for _, lang := range []string{"", "ru", "uk"} {
		require.Empty(t, env.TG.Commands(tgfake.BotCommandScope{Type: "all_group_chats"}, lang), lang)
		require.Empty(t, env.TG.Commands(tgfake.BotCommandScope{Type: "default"}, lang), lang)
		inPrivate := commandNames(env.TG.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, lang))
		for _, c := range []string{"start", "help", "profile", "search", "vacancies", "memory", "forget", "master"} {
			require.Contains(t, inPrivate, c, lang)
		}
		require.NotContains(t, inPrivate, "status", lang)
		inAdminChat := commandNames(env.TG.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminGroup}, lang))
		require.ElementsMatch(t, adminChatCommands, inAdminChat, lang)
	}
	require.Equal(t, "закрыть проверенный прогон анализа", func() string {
		for _, c := range env.TG.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminGroup}, "ru") {
			if c.Command == "run_close" {
				return c.Description
			}
		}
		return ""
	}())
}

// /start greets by role with a first step as buttons, and honours deep
// links; /help groups the commands of the roles the user has.
func TestStartAndHelpByRole(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	ann := env.TG.User(7_300_011, "Ann", "en")
	olga := env.TG.User(7_300_012, "Olga", "ru")
	max := env.TG.User(7_300_013, "Max", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")

	start := ask(t, env, ann, ann.ID(), "/start")
	require.True(t, strings.HasPrefix(start.Text, "Hello, Ann!\n\nI find vacancies on hh.ru that fit you"), start.Text)
	require.NotContains(t, start.Text, "operations assistant")
	require.NotContains(t, start.Text, "/searches", "a first step, not the command list")
	require.Less(t, strings.Count(start.Text, "\n"), 12)
	var labels []string
	for _, b := range start.ReplyMarkup.Buttons() {
		labels = append(labels, b.Text)
	}
	require.Equal(t, []string{"👤 Set my profile", "🔎 Add a search", "🛠 Become a master"}, labels)

	// Each button shows how to take the step.
	for label, want := range map[string]string{
		"👤 Set my profile":  "You have no profile yet. Send /profile followed by a few lines about yourself",
		"🔎 Add a search":    "/search",
		"🛠 Become a master": "You are not registered as a master yet.",
	} {
		before := len(env.TG.Messages(ann.ID()))
		q, err := ann.PressButton(start, label)
		require.NoError(t, err)
		require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert, label)
		env.TG.WaitFor(t, 10*time.Second, func() bool { return len(env.TG.Messages(ann.ID())) > before })
		require.Contains(t, env.TG.Messages(ann.ID())[before].Text, want, label)
	}

	// Deep links: a command's name runs it; anything else is a plain
	// /start, its payload logged as the source.
	require.Contains(t, ask(t, env, ann, ann.ID(), "/start search").Text, "/search")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/start help").Text, "What I can do for you")
	require.True(t, strings.HasPrefix(ask(t, env, ann, ann.ID(), "/start ref_hh_channel").Text, "Hello, Ann!"))
	p.WaitLog(`"source":"ref_hh_channel"`, 10*time.Second)

	// Russian, and no "operations assistant" either.
	ru := ask(t, env, olga, olga.ID(), "/start")
	require.True(t, strings.HasPrefix(ru.Text, "Здравствуйте, Olga!"), ru.Text)
	require.NotContains(t, ru.Text, "операционный")

	// /help: a job seeker sees their sections and how to become a master,
	// not a master's or an admin's commands.
	help := ask(t, env, ann, ann.ID(), "/help").Text
	for _, s := range []string{"General\n/start", "Job search\n/profile", "Memory chat", "/master registers you as a master"} {
		require.Contains(t, help, s)
	}
	for _, s := range []string{"/pause", "/resume", "Admin", "/status", "/order"} {
		require.NotContains(t, help, s)
	}

	// A master sees the master's section and a card button.
	require.Contains(t, ask(t, env, max, max.ID(), "/master Oslo Center plumbing").Text, "registered as a master")
	help = ask(t, env, max, max.ID(), "/help").Text
	require.Contains(t, help, "Master\n/master")
	require.Contains(t, help, "/pause")
	require.NotContains(t, help, "/master registers you")
	start = ask(t, env, max, max.ID(), "/start")
	require.Contains(t, start.Text, "You are registered as a master")
	_, err := max.PressButton(start, "🛠 My master card")
	require.NoError(t, err)

	// An admin: a pointer to the admin commands, grouped in /help.
	start = ask(t, env, boss, boss.ID(), "/start")
	require.Contains(t, start.Text, "You are an admin")
	require.NotContains(t, start.Text, "/run_close")
	help = ask(t, env, boss, boss.ID(), "/help").Text
	for _, s := range []string{"Admin · orders\n/order", "Admin · group analysis\n/chats", "Admin · system\n/status"} {
		require.Contains(t, help, s)
	}
	before := len(env.TG.Messages(boss.ID()))
	q, err := boss.PressButton(start, "🗂 Admin commands")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	env.TG.WaitFor(t, 10*time.Second, func() bool { return len(env.TG.Messages(boss.ID())) > before })
	require.Equal(t, help, env.TG.Messages(boss.ID())[before].Text)
}

// Errors name the problem and echo at most a short prefix of the input.
func TestLangAndUnknownCommandSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	ann := env.TG.User(7_300_021, "Ann", "en")
	olena := env.TG.User(7_300_022, "Olena", "uk")

	require.Equal(t, "I don't speak “de”. Languages I speak: en, ru, uk. Example: /lang en", ask(t, env, ann, ann.ID(), "/lang de").Text)
	require.Equal(t, "Мови «de» я не знаю. Доступні мови: en, ru, uk. Приклад: /lang uk", ask(t, env, olena, olena.ID(), "/lang de").Text)

	junk := "/" + strings.Repeat("&", 4000)
	reply := ask(t, env, ann, ann.ID(), junk)
	require.Equal(t, "I don't know the command /"+strings.Repeat("&", 39)+"…. Send /help to see what I can do.", reply.Text)
	next := ask(t, env, ann, ann.ID(), "/help")
	n := 0
	for _, m := range env.TG.Messages(ann.ID()) {
		if m.MessageID > reply.MessageID && m.MessageID < next.MessageID {
			n++
		}
	}
	require.Zero(t, n, "the echo is one message")
}
