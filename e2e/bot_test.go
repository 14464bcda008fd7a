package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/internal/testkit"
	"switchboard/storage/storagetest"
)

func TestMain(m *testing.M) {
	// An e2e test spends its time waiting on the binary it drives (timers,
	// Telegram's pacing in the fake), not on this process's CPU. Four at
	// once, unless -parallel says: the README's command runs this package
	// beside two others (-p 3), and a replica holds up to eight
	// connections (a pool of four, listeners, the leases). Sampled each
	// second through a whole run at four, the server held at most 46, room
	// beside two packages' tests under PostgreSQL's default limit of 100
	// (with pools of six it was not). Alone on a 2-vCPU host the package
	// took 557 s at three and 495 s at four; at three it outran CI's 12
	// minutes beside the other packages on a slow host.
	testkit.DefaultParallel(4)
	code := m.Run()
	e2e.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func ask(t *testing.T, env *e2e.Env, who *tgfake.Person, chatID int64, text string) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(chatID, text)
	return env.TG.WaitMessageAfter(t, chatID, sent.MessageID, nil)
}

func TestStartAndHelpDifferForUserAndAdmin(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	ann := env.TG.User(501, "Ann", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")

	start := ask(t, env, ann, ann.ID(), "/start")
	require.Contains(t, start.Text, "Hello, Ann!")
	userHelp := ask(t, env, ann, ann.ID(), "/help")
	adminHelp := ask(t, env, boss, boss.ID(), "/help")
	require.Contains(t, userHelp.Text, "/lang")
	require.NotContains(t, userHelp.Text, "/status")
	require.Contains(t, adminHelp.Text, "/status")
	// /start is a first step, not the list: the admin gets a pointer to
	// their commands, which /help lists.
	bossStart := ask(t, env, boss, boss.ID(), "/start")
	require.Contains(t, bossStart.Text, "You are an admin")
	require.NotContains(t, bossStart.Text, "/status")
	require.NotContains(t, start.Text, "You are an admin")
	var pointer bool
	for _, b := range bossStart.ReplyMarkup.Buttons() {
		pointer = pointer || b.Text == "🗂 Admin commands"
	}
	require.True(t, pointer, "the admin's /start points to the admin commands")

	// The process is ready: database reachable and schema current.
	resp, err := http.Get("http://" + p.HTTPAddr() + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{"postgres":"ok","migrations":"ok",
		"held_past_lease":{"pipeline_runs":0,"vacancy_matches":0,"outbox_rows":0,"inbox_updates":0}}`, string(body))
	resp, err = http.Get("http://" + p.HTTPAddr() + "/metrics")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "go_goroutines")
}

func TestLangUkThenHelpInUkrainian(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	ann := env.TG.User(502, "Ann", "en")
	require.Equal(t, "Мову змінено на українську.", ask(t, env, ann, ann.ID(), "/lang uk").Text)
	help := ask(t, env, ann, ann.ID(), "/help")
	require.Contains(t, help.Text, "Що я вмію")
	require.Contains(t, help.Text, "/lang — змінити мову")
}

func TestUnknownCommandAndRefusedAdminCommand(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	ann := env.TG.User(503, "Ann", "ru")
	require.Equal(t, "Я не знаю команду /teleport. Отправьте /help, чтобы увидеть, что я умею.",
		ask(t, env, ann, ann.ID(), "/teleport now").Text)
	require.Equal(t, "Эта команда только для администраторов.", ask(t, env, ann, ann.ID(), "/status").Text)
}

func TestGroupMessageGetsNoReply(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	team := env.TG.Group(-100500, "Team")
	ann := env.TG.User(504, "Ann", "en")

	ann.SendText(team.ID, "hello team, who takes the release?")
	// The first update of this test is the group message; wait until the
	// bot has finished handling it before looking for replies.
	p.WaitLog(`"msg":"update handled","update_id":1,`, 30*time.Second)
	require.Empty(t, env.TG.Messages(team.ID), "nothing said in the group")
	require.Empty(t, env.TG.Messages(ann.ID()), "nothing said in private")
	require.Empty(t, env.TG.CallsTo("sendMessage"))

	// The bot still answers her in private.
	require.Contains(t, ask(t, env, ann, ann.ID(), "/help").Text, "What I can do")
}

func TestSIGTERMStopsGracefully(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	ann := env.TG.User(505, "Ann", "en")
	ask(t, env, ann, ann.ID(), "/start")
	p.Signal(syscall.SIGTERM)
	require.Equal(t, 0, p.Wait(15*time.Second))
	require.True(t, p.HasLog(`"msg":"stopped"`))
}

func TestBadConfigurationNamesTheVariable(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	out, code := env.Run(map[string]string{"FETCH_INTERVAL": "soon", "TELEGRAM_API_URL": "::nope"})
	require.Equal(t, 2, code)
	require.Contains(t, out, "FETCH_INTERVAL")
	require.Contains(t, out, "TELEGRAM_API_URL")
	out, code = env.Run(map[string]string{"TELEGRAM_TOKEN": ""})
	require.Equal(t, 2, code)
	require.Contains(t, out, "TELEGRAM_TOKEN: required")
	require.NotContains(t, out, env.TG.Token())

	out, code = env.Run(nil, "-help")
	require.Equal(t, 0, code)
	for _, v := range []string{"TELEGRAM_TOKEN", "DATABASE_URL", "OFFER_SLA", "2m"} {
		require.Contains(t, out, v)
	}
}

func TestMigrateCreatesDatabaseAndIsRepeatable(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	name := "sbtest_e2e_migrate_" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()))
	t.Cleanup(func() { storagetest.Drop(t, name) })
	dbURL := storagetest.URLFor(name)
	for range 2 {
		out, code := env.Run(map[string]string{"DATABASE_URL": dbURL}, "migrate")
		require.Equal(t, 0, code, out)
	}
}

func TestPollingFailsOverWhenTheHolderDies(t *testing.T) {
	t.Parallel()
	// No Redis: the polling lease is a PostgreSQL session lock, so replicas
	// sharing only the database still poll one at a time.
	env := e2e.New(t)
	first, second := env.StartPair(nil)

	ann := env.TG.User(506, "Ann", "en")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/start").Text, "Hello, Ann!")
	// The answer is recorded as sent before the kill: a reply the holder
	// sent but had not marked would hold the chat's outbox lane for its
	// claim (10 s) and measure the outbox, not the polling failover.
	settled(t, db(t, env))

	first.Kill() // kill -9: no release; the server drops the lock with the connection
	died := time.Now()
	sent := ann.SendText(ann.ID(), "/help")
	// The bound only says the survivor never took over; how fast it does is
	// measured (docs/BENCHMARKS.md, "Polling failover").
	second.WaitLog("polling lease acquired", 90*time.Second)
	took := time.Since(died)
	help := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	answered := time.Since(died)
	t.Logf("failover: lease taken %s after kill -9, first answer %s after it",
		took.Round(time.Millisecond), answered.Round(time.Millisecond))
	require.Contains(t, help.Text, "What I can do", "the survivor answers a message sent after the kill")
	require.False(t, second.HasLog(`"level":"ERROR"`), "the survivor logged no error")
}

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
	// An admin command in another group points to both places it runs.
	require.Equal(t, "I answer /orders in our private chat or in the admin chat, so that nothing private shows up here. Tap below to continue in private.",
		ask(t, env, boss, team.ID, "/orders").Text)

	// Menus: private commands in private chats only; nothing in groups,
	// nor in the default list groups fall back to; the admin chat has the
	// commands that run there.
	adminChatCommands := []string{"status", "prompt", "order", "orders", "done", "cancel", "paid", "masters", "thread",
		"chats", "run_new", "run_start", "run_close", "runs", "run", "tracker", "tasks"}
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
		require.False(t, ann.PressAndWait(t, start, label).ShowAlert, label)
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
	boss.PressAndWait(t, start, "🗂 Admin commands")
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

// /status is a rich message where the Bot API server has them (Bot API
// 10.1): each section collapsible, open at first, the data's tables a
// table in a collapsed one. On an older server it is the text it always
// was, and once the server was seen to refuse rich messages /status says
// so.
func TestStatusIsRichAndPlainOnAnOlderServer(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")

	status := ask(t, env, boss, boss.ID(), "/status")
	require.NotNil(t, status.RichMessage, "sent by sendRichMessage: %q", status.Text)
	replicas, ok := tgfake.Find(status.RichMessage.Blocks, "details")
	require.True(t, ok, status.Shown())
	require.Equal(t, "Replicas", replicas.Summary.String())
	require.True(t, replicas.IsOpen)
	var summaries []string
	for _, b := range status.RichMessage.Blocks {
		if b.Type == "details" {
			summaries = append(summaries, b.Summary.String())
		}
	}
	require.Contains(t, summaries, "Jobs")
	require.Contains(t, status.Shown(), "AI model: answering")
	require.NotContains(t, status.Shown(), "lacks rich messages")

	env.TG.SetUnsupported(true, tgfake.FeatureRichMessages)
	status = ask(t, env, boss, boss.ID(), "/status")
	require.Nil(t, status.RichMessage)
	require.Contains(t, status.Text, "Replicas\n")
	require.Contains(t, status.Text, "AI model: answering")
	require.Len(t, env.TG.CallsTo("sendRichMessage"), 2, "the first and the refused second")
	status = ask(t, env, boss, boss.ID(), "/status")
	require.Nil(t, status.RichMessage)
	require.Contains(t, status.Text, "⚠️ This Bot API server lacks rich messages (Bot API 10.1): /applications, /status "+
		"and a closed run's figures come as plain text instead of tables and collapsible sections.")
	require.Len(t, env.TG.CallsTo("sendRichMessage"), 2, "believed: not asked again")
}
