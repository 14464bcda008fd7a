package bot_test

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/domaintest"
	"switchboard/e2e/tgfake"
	"switchboard/internal/testkit"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// teamChat is a group whose messages runs analyse.
const teamChat = -1002000000001

type anEnv struct {
	bundle
	st    *storage.Store
	svc   *analysis.Service
	llm   *llmtest.Server
	admin *tgfake.Person
}

// setupAnalysis is the bot with the analysis workflow over one database,
// the real service served (executors run), the scripted LLM behind it and
// the outbox's sender delivering what the workflow writes; the admin chat
// is adminChat, in English. The fake Telegram enforces Telegram's limits
// (20 messages a minute per group, in bursts of up to 20). The sender
// paces the groups at Telegram's rate with that same burst rather than
// the application's shallower one (3): a run tells the admin chat a dozen
// things within a second, which the application's pacing spreads over
// half a minute. The pacing itself is bot/delivery's, tested there.
func setupAnalysis(t *testing.T) anEnv {
	t.Helper()
	pace := delivery.DefaultLimits()
	pace.GroupBurst = 20
	return setupAnalysisWith(t, pace)
}

// teamAndAnn are the group teamChat, titled title, and Ann (42, English),
// who writes in it.
func (env anEnv) teamAndAnn(title string) (tgfake.Chat, *tgfake.Person) {
	return env.srv.Supergroup(teamChat, title, ""), env.srv.User(42, "Ann", "en")
}

// setupAnalysisWith is setupAnalysis with the sender pacing under pace and
// the fake Telegram built with opts.
func setupAnalysisWith(t *testing.T, pace delivery.Limits, opts ...tgfake.Option) anEnv {
	t.Helper()
	return setupAnalysisIn(t, nil, pace, opts...)
}

// setupAnalysisIn is setupAnalysisWith with the admin chat's clock in
// adminZone (nil: UTC).
func setupAnalysisIn(t *testing.T, adminZone *time.Location, pace delivery.Limits, opts ...tgfake.Option) anEnv {
	t.Helper()
	st := storagetest.New(t)
	model := llmtest.New()
	t.Cleanup(model.Close)
	client, err := llm.New(llm.Config{Provider: llm.ProviderOllama, URL: model.URL(), Model: "cheap", EmbedModel: "embed",
		Timeout: 5 * time.Second, MaxConcurrency: 2},
		llm.WithBreaker(1000, time.Second), llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	t.Cleanup(client.Close)
	rc := bot.RenderConfig{AdminChatID: adminChat, AdminLang: "en", AdminZone: adminZone, BoardEvery: testBoardEvery}
	svc, err := analysis.NewService(analysis.Config{}, analysis.Deps{
		Runs: st.Runs(), Chats: st.GroupChats(), LLM: llm.AnalysisPort{Client: client}, Publisher: st.Runs(),
		Notifier: testRenderer(rc), Log: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	tb := setupWith(t, bot.Config{RateLimit: 1000, RateBurst: 1000, RenderConfig: rc},
		st, bot.Deps{Analysis: svc}, nil, pace, opts...)
	tb.srv.Supergroup(adminChat, "Admins", "")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done }) // before the bot stops
	// Serve must have begun before /run_start can start anything.
	require.Eventually(t, func() bool {
		_, err := svc.Start(context.Background(), -1, false)
		return !strings.Contains(fmt.Sprint(err), "not running")
	}, 5*time.Second, time.Millisecond)
	return anEnv{bundle: tb, st: st, svc: svc, llm: model, admin: tb.srv.User(adminID, "Boss", "en")}
}

// testBoardEvery paces the board's edits in these tests: short, so that a
// press shows on the board soon (the application's default is 3 s).
const testBoardEvery = 100 * time.Millisecond

// eventually polls a database condition: the bot's handlers run
// concurrently, so nothing in the fake Telegram says when they are done.
// eventually waits for cond up to a bound no healthy system reaches, even
// on a loaded CI machine (5 s was reached there: ten group messages through
// the inbox while other suites ran beside).
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 5*time.Millisecond, msg)
}

// adminLines are the texts of the bot's messages in the admin chat.
func (env anEnv) adminLines() []string {
	var out []string
	for _, m := range env.srv.Messages(adminChat) {
		out = append(out, m.Text)
	}
	return out
}

func (env anEnv) waitAdminLine(t *testing.T, prefix string) tgfake.BotMessage {
	t.Helper()
	return env.srv.WaitMessage(t, adminChat, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, prefix) })
}

type groupMessage struct {
	AuthorID int64
	Author   string
	Text     string
	Date     time.Time
	Edited   bool
}

func storedMessage(t *testing.T, st *storage.Store, chatID int64, messageID int) (groupMessage, bool) {
	t.Helper()
	var m groupMessage
	err := st.Pool().QueryRow(context.Background(), `SELECT author_id, author, text, date, edited_at IS NOT NULL
FROM group_messages WHERE chat_id = $1 AND message_id = $2`, chatID, messageID).Scan(&m.AuthorID, &m.Author, &m.Text, &m.Date, &m.Edited)
	if err != nil {
		return groupMessage{}, false
	}
	return m, true
}

func canRead(t *testing.T, st *storage.Store, chatID int64) (title string, read, ok bool) {
	t.Helper()
	err := st.Pool().QueryRow(context.Background(), `SELECT title, can_read FROM group_chats WHERE id = $1`, chatID).Scan(&title, &read)
	return title, read, err == nil
}

func TestAnalysisCommandsInMenu(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	// The answer to /help shows the bot has started, menus published.
	help := env.ask(t, env.admin, "/help").Text
	require.Equal(t, []string{"start", "help", "lang", "timezone"}, commandNames(env.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "")),
		"the analysis commands are the admins'")
	require.Contains(t, help, "/run_new — open an analysis run of group messages")
	adm := env.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminID}, "uk")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "status", "chats", "run_new", "run_start", "run_close", "runs", "run"},
		commandNames(adm))
	require.Equal(t, "список прогонів аналізу", adm[9].Description)
}

// Group text is stored with its author and date, edits replace it, and
// nothing is ever said in the group, not even to a command.
func TestAnalysisGroupMessagesAreRecorded(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	team, ann := env.teamAndAnn("Team <Dev> & Co")

	first := ann.SendText(team.ID, "Please deploy <b>billing</b> & docs by Friday")
	eventually(t, func() bool { _, ok := storedMessage(t, env.st, team.ID, first.MessageID); return ok }, "first message stored")
	got, _ := storedMessage(t, env.st, team.ID, first.MessageID)
	require.Equal(t, groupMessage{AuthorID: 42, Author: "Ann", Text: "Please deploy <b>billing</b> & docs by Friday",
		Date: time.Unix(first.Date, 0).UTC()}, groupMessage{AuthorID: got.AuthorID, Author: got.Author, Text: got.Text, Date: got.Date.UTC()})
	title, read, ok := canRead(t, env.st, team.ID)
	require.True(t, ok, "a message from an untracked group tracks it")
	require.Equal(t, "Team <Dev> & Co", title)
	require.True(t, read, "a plain message reached the bot, so it can read the group")

	ann.Edit(first, "Please deploy billing by Monday")
	eventually(t, func() bool {
		m, _ := storedMessage(t, env.st, team.ID, first.MessageID)
		return m.Text == "Please deploy billing by Monday" && m.Edited
	}, "the edit is applied")

	cmd := ann.SendText(team.ID, "/frobnicate now")
	second := ann.SendText(team.ID, "second thought")
	eventually(t, func() bool { _, ok := storedMessage(t, env.st, team.ID, second.MessageID); return ok }, "second message stored")
	_, stored := storedMessage(t, env.st, team.ID, cmd.MessageID)
	require.False(t, stored, "a command is not material")

	// Private text is not recorded (no memory chat here: the hint).
	require.Equal(t, "Send /help to see what I can do.", env.ask(t, ann, "hello").Text)
	// The admin chat's own talk is not material either.
	env.admin.SendText(adminChat, "let us review tomorrow")

	chats := env.ask(t, env.admin, "/chats").Text
	require.Regexp(t, `^Groups \(1\)\n• Team <Dev> & Co \(-1002000000001\): messages 2, last \d+ \w{3}(?: \d{4})?, \d\d:\d\d \(UTC\)$`, chats)

	env.srv.WaitUpdatesConsumed(t)
	require.Empty(t, env.srv.Messages(team.ID), "the bot never speaks in the group")
	require.Equal(t, 2, count(t, env.st, `SELECT count(*) FROM group_messages`))
}

// Added to a group it cannot read, the bot tells the admin chat how to
// fix it; as an admin it can read; a plain message proves it can too.
func TestAnalysisPrivacyCheck(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ann := env.srv.User(42, "Ann", "en")
	quiet := env.srv.Supergroup(-1003000000001, "Quiet <room>", "")
	open := env.srv.Group(-3000002, "Open")
	for _, id := range []int64{quiet.ID, open.ID} {
		env.srv.SetChatMember(id, env.srv.Bot().ID, tgfake.StatusLeft)
	}
	hint := "⚠️ I cannot read the ordinary messages of the group “Quiet <room>” (-1003000000001): privacy mode hides them " +
		"from bots that are not admins, so analysis runs would see nothing of it. To fix it, either:\n" +
		"• in @BotFather send /setprivacy, pick @tgfake_bot and choose Disable, then remove me from the group and add me again, or\n" +
		"• make me an admin of the group."

	ann.SetBotStatus(quiet.ID, tgfake.StatusMember)
	require.Equal(t, hint, env.waitAdminLine(t, "⚠️ I cannot read").Text)
	title, read, ok := canRead(t, env.st, quiet.ID)
	require.True(t, ok)
	require.Equal(t, "Quiet <room>", title)
	require.False(t, read)
	require.Equal(t, "Groups (1)\n• Quiet <room> (-1003000000001): messages 0, last none yet\n"+
		"  ⚠️ privacy mode hides ordinary messages from me here: disable it in @BotFather (/setprivacy) and add me again, or make me an admin",
		env.ask(t, env.admin, "/chats").Text)

	// Promoted to admin it reads everything; nothing to say about it.
	ann.SetBotStatus(quiet.ID, tgfake.StatusAdministrator)
	eventually(t, func() bool { _, read, _ := canRead(t, env.st, quiet.ID); return read }, "an admin reads the group")
	// Added straight as an admin.
	ann.SetBotStatus(open.ID, tgfake.StatusAdministrator)
	require.Equal(t, "👋 I was added to the group “Open” (-3000002); its messages are now material for analysis runs.",
		env.waitAdminLine(t, "👋").Text)
	// Demoted, it warns again.
	ann.SetBotStatus(quiet.ID, tgfake.StatusMember)
	env.srv.WaitFor(t, 5*time.Second, func() bool {
		n := 0
		for _, l := range env.adminLines() {
			if l == hint {
				n++
			}
		}
		return n == 2
	})
	_, read, _ = canRead(t, env.st, quiet.ID)
	require.False(t, read)
	// Yet a plain message reaches it (here the fake delivers everything),
	// which proves it can read after all.
	ann.SendText(quiet.ID, "hello team")
	eventually(t, func() bool { _, read, _ := canRead(t, env.st, quiet.ID); return read }, "a seen message proves reading")

	// Removed: nothing to say.
	ann.SetBotStatus(open.ID, tgfake.StatusLeft)
	env.srv.WaitUpdatesConsumed(t)
	require.Len(t, env.adminLines(), 3)
	require.Empty(t, env.srv.Messages(quiet.ID))
	require.Empty(t, env.srv.Messages(open.ID))
}

func TestAnalysisCommandsAreForAdmins(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ann := env.srv.User(42, "Ann", "en")
	for _, cmd := range []string{"/chats", "/run_new", "/run_new 7d", "/run_start 1", "/run_close 1", "/runs", "/run 1"} {
		require.Equal(t, "This command is for admins only.", env.ask(t, ann, cmd).Text, cmd)
	}
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM analysis_runs`))
	require.Equal(t, "I am in no group yet. Add me to a team's group, and its messages become material for analysis runs.",
		env.ask(t, env.admin, "/chats").Text)
	require.Equal(t, "No analysis runs yet. Open one with /run_new.", env.ask(t, env.admin, "/runs").Text)
}

const usageRunNew = "Usage: /run_new [24h|7d] [chat=ID] [keywords=a,b] [min_len=N] [mentions]\n" +
	"• 24h or 7d — the messages of the last day or week (a day if not given)\n" +
	"• chat — only this group; /chats lists their ids\n" +
	"• keywords — only messages with any of these words\n" +
	"• min_len — only messages of at least N characters\n" +
	"• mentions — only messages with an @mention\n" +
	"Example: /run_new 7d keywords=release,deploy mentions"

func TestAnalysisRunNewRefusals(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ask := func(text string) string { return env.ask(t, env.admin, text).Text }

	for in, want := range map[string]string{
		"/run_new 12h":                         "12h: the window is 24h or 7d, given once.",
		"/run_new 24h 7d":                      "7d: the window is 24h or 7d, given once.",
		"/run_new chat=5":                      "chat=5: a chat is a group's id, a negative number; /chats lists them.",
		"/run_new min_len=x":                   "min_len=x: the minimum length is a whole number from 0 to 4000.",
		"/run_new keywords=,":                  "keywords=,: give 1 to 20 keywords separated by commas, each at most 50 characters.",
		"/run_new <b>x</b>":                    "<b>x</b>: unknown parameter.",
		"/run_new " + strings.Repeat("я", 200): strings.Repeat("я", 79) + "…: unknown parameter.",
	} {
		require.Equal(t, want+"\n\n"+usageRunNew, ask(in), in)
	}
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM analysis_runs`))

	created := ask("/run_new 7d chat=-100123 keywords=Deploy,release min_len=10 mentions")
	require.Regexp(t, `^🆕 Run #1 created: 7 days, \d+ \w{3}(?: \d{4})?, \d\d:\d\d \(UTC\) — \d+ \w{3}(?: \d{4})?, \d\d:\d\d \(UTC\); chat -100123; `+
		`keywords: deploy, release; at least 10 characters; only with @mentions\.\n`+
		`Start it with /run_start 1, or /run_start 1 rag to show the model similar proposals approved in earlier runs\.$`, created)
	require.Regexp(t, `^🆕 Run #1 created: 7 days, .*; only with @mentions$`, env.waitAdminLine(t, "🆕").Text, "the admin chat hears of it")

	require.Equal(t, "Only one run may be open at a time. Not closed yet:\n• run #1 (pending)\n"+
		"Start it, decide its proposals and close it with /run_close first; /run ID shows where it stands.", ask("/run_new"))
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM analysis_runs`))

	require.Equal(t, "Run #1 is in the “pending” state; only a completed run can be closed.", ask("/run_close 1"))
	require.Equal(t, "There is no run #99.", ask("/run_close 99"))
	require.Equal(t, "Usage: /run_close ID", ask("/run_close"))
	const usageStart = "Usage: /run_start ID [rag] — with rag the model also sees similar proposals approved in earlier runs."
	require.Equal(t, usageStart, ask("/run_start"))
	require.Equal(t, "After the run number only rag may follow, not “please”.\n"+usageStart, ask("/run_start 1 please"))
	require.Equal(t, "“x” is not a run number: /runs lists them.\n"+usageStart, ask("/run_start x"))
	require.Equal(t, "Only the run number goes after the command, not “now please”.\nUsage: /run_close ID", ask("/run_close 1 now please"))
	require.Equal(t, "“"+strings.Repeat("9", 40)+"…” is not a run number: /runs lists them.\nUsage: /run ID; /runs lists the runs.",
		ask("/run "+strings.Repeat("9", 60)), "a number too big for a run is not one, and is echoed short")
	require.Equal(t, "There is no run #99.", ask("/run_start 99"))
	require.Equal(t, "There is no run #7.", ask("/run #7"))
	require.Equal(t, "Usage: /run ID; /runs lists the runs.", ask("/run"))

	detail := ask("/run 1")
	require.Regexp(t, `^Run #1 — pending\nCreated: \d+ \w{3}(?: \d{4})?, \d\d:\d\d \(UTC\) by Boss\n`+
		`Messages: 7 days, .* \(UTC\); chat -100123; keywords: deploy, release; at least 10 characters; only with @mentions\n`+
		`Context of earlier runs: off\n`+
		`In the window: 0; after the filters: 0; processed: 0\n`+
		`Batches: 0 of 0\n`+
		`Proposals: 0 — ✅ 0 approved, ❌ 0 rejected, ⏳ 0 pending$`, detail)
}

// The whole story through Telegram: messages in a group, a run started,
// its board (progress, then the proposals) edited into one message, the
// proposals decided on it by admins only, and the run closed with its
// rates.
func TestAnalysisRunThroughTelegram(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	team, ann := env.teamAndAnn("Team")
	m1 := ann.SendText(team.ID, "The login page is broken, I will fix it by 2099-01-05")
	m2 := ann.SendText(team.ID, "Users cannot log in since the release")
	m3 := ann.SendText(team.ID, "Somebody should update the docs")
	eventually(t, func() bool { return count(t, env.st, `SELECT count(*) FROM group_messages`) == 3 }, "messages stored")
	env.llm.On(llmtest.Chat()).Named("proposals").Reply(fmt.Sprintf(`{"proposals":[
{"title":"Fix <login> & deploy","description":"Users cannot log in.\nSee the thread.","priority":"high","assignee":"Ann","deadline":"2099-01-05","source_message_ids":[%d,%d]},
{"title":"Update the docs","description":"","priority":"low","assignee":"","deadline":"","source_message_ids":[%d]}]}`,
		m1.MessageID, m2.MessageID, m3.MessageID))

	require.Regexp(t, `^🆕 Run #1 created`, env.ask(t, env.admin, "/run_new 24h").Text)
	require.Equal(t, "▶️ Run #1 started. Progress and proposals go to the admin chat; /run 1 shows where it stands.",
		env.ask(t, env.admin, "/run_start #1").Text)

	env.waitAdminLine(t, "✅ Run #1 completed:")
	env.settle(t)
	board := env.board(t, 1)
	const head = "✅ Run #1 completed\n▓▓▓▓▓▓▓▓▓▓ 100%\nBatches: 1 of 1\n" +
		"Messages processed: 3 of 3 (3 in the window)\nProposals: 2\n\n"
	require.Equal(t, head+"Proposals 1–2 of 2 · ✅ 0 · ❌ 0 · ⏳ 2\n\n"+
		"1. ⏳ Fix <login> & deploy · high · Ann · due 2099-01-05\nUsers cannot log in. See the thread.\n\n"+
		"2. ⏳ Update the docs · low", board.Text)
	require.Equal(t, [][]string{{"1 ✅", "1 ❌", "2 ✅", "2 ❌"}, {"✅ Approve the rest (2)"}}, rowTexts(board))
	ids := proposalIDs(t, env.st)
	require.Equal(t, []string{data(t, "pa", ids[0]), data(t, "pj", ids[0]), data(t, "pa", ids[1]), data(t, "pj", ids[1]),
		data(t, "ba", 1)}, board.ReplyMarkup.Data())
	// The board's first state may already be its last: a send still
	// queued when an edit is written takes the edit's text. Whatever was
	// shown before the end was the run in progress.
	for _, e := range board.Edits {
		require.True(t, strings.HasPrefix(e.Text, "⏳ Run #1 in progress\n"), e.Text)
	}
	require.Equal(t, []int64{1, 2}, column(t, env.st, `SELECT ordinal FROM analysis_proposals ORDER BY id`))
	require.Equal(t, []int64{0, 0}, column(t, env.st, `SELECT COALESCE(message_id, 0) FROM analysis_proposals ORDER BY id`),
		"no proposal has a message of its own")
	require.Equal(t, []string{
		"🆕 Run #1 created",
		"▶️ Run #1 started",
		"✅ Run #1 completed: proposals 2. Decide them on the run's board, then /run_close 1",
	}, eventLines(env.adminLines()))
	require.Len(t, env.srv.Messages(adminChat), 4, "three lines and the board: no message per proposal")

	// Not an admin: refused, and nothing changes.
	a := press(t, env.srv, ann, board, data(t, "pa", ids[0]))
	require.Equal(t, "This button is not for you.", refusedInGroup(t, env.srv, adminChat, ann, a))
	require.Equal(t, 2, count(t, env.st, `SELECT count(*) FROM analysis_proposals WHERE decision = 'pending'`))
	a = pressRaw(t, env.srv, ann, board, data(t, "rp", 1))
	require.Equal(t, "This button is not for you.", refusedInGroup(t, env.srv, adminChat, ann, a), "nor may they page /runs")

	require.Equal(t, "Run #1 still has proposals awaiting a decision: 2. Approve or reject them first.",
		env.ask(t, env.admin, "/run_close 1").Text)

	a = env.pressBoard(t, env.admin, data(t, "pa", ids[0]))
	requireToast(t, a, "✅ #1 approved.")
	board = env.board(t, 1)
	require.Equal(t, head+"Proposals 1–2 of 2 · ✅ 1 · ❌ 0 · ⏳ 1\n\n"+
		"1. ✅ Fix <login> & deploy · high · Ann · due 2099-01-05\n\n"+
		"2. ⏳ Update the docs · low", board.Text, "decided: marked, its description folded away")
	require.Equal(t, [][]string{{"2 ✅", "2 ❌"}, {"✅ Approve the rest (1)"}}, rowTexts(board), "decided: no buttons of its own")
	// A stale press (another admin's client had the old buttons).
	a = pressRaw(t, env.srv, env.admin, board, data(t, "pj", ids[0]))
	requireAlert(t, a, "This proposal has already been approved.")

	a = press(t, env.srv, env.admin, board, data(t, "pj", ids[1]))
	require.Equal(t, "❌ #2 rejected.", a.Text)
	a = env.pressBoardRaw(t, env.admin, data(t, "pa", ids[1]))
	requireAlert(t, a, "This proposal has already been rejected.")
	board = env.board(t, 1)
	require.Equal(t, head+"Proposals 1–2 of 2 · ✅ 1 · ❌ 1 · ⏳ 0\n\n"+
		"1. ✅ Fix <login> & deploy · high · Ann · due 2099-01-05\n\n"+
		"2. ❌ Update the docs · low\n\n"+
		"Nothing left to decide: close the run with /run_close 1.", board.Text)
	require.Empty(t, board.ReplyMarkup.Buttons(), "all decided: no buttons left")
	require.Equal(t, []string{"approved by 1", "rejected by 1"}, domaintest.Column[string](t, context.Background(), env.st.Pool(),
		`SELECT decision || ' by ' || decided_by FROM analysis_proposals ORDER BY id`))

	require.Equal(t, "🏁 Run #1 closed.\nProposals: 2\nApproved: 50%\nRejected: 50%", env.ask(t, env.admin, "/run_close 1").Text)
	require.Equal(t, "Run #1 is in the “closed” state; only a completed run can be closed.", env.ask(t, env.admin, "/run_close 1").Text)
	env.settle(t)
	closed := env.board(t, 1)
	_, review, _ := strings.Cut(strings.TrimSuffix(board.Text, "\n\nNothing left to decide: close the run with /run_close 1."), "\n\n")
	require.Equal(t, "🏁 Run #1 closed\n▓▓▓▓▓▓▓▓▓▓ 100%\nMessages processed: 3 of 3 (3 in the window)\n"+
		"Proposals: 2 — ✅ 1 approved (50%), ❌ 1 rejected (50%)\n\n"+review, closed.Text,
		"the board ends showing the run closed with its decisions, its review as it was")
	require.Len(t, env.srv.Messages(adminChat), 4, "the close is the board's edit alone: no line beside it, the board never posted again")

	detail := env.ask(t, env.admin, "/run 1").Text
	require.Regexp(t, `^Run #1 — closed\nCreated: .* by Boss\nMessages: 24 hours, .*; all groups\n`+
		`Context of earlier runs: off\nIn the window: 3; after the filters: 3; processed: 3\nBatches: 1 of 1\n`+
		`Proposals: 2 — ✅ 1 approved, ❌ 1 rejected, ⏳ 0 pending\n`+
		`Started: .* \(UTC\)\nCompleted: .* \(UTC\)\nClosed: .* \(UTC\)\n`+
		`Metrics: proposals 2, approved 50%, rejected 50%$`, detail)

	env.srv.WaitUpdatesConsumed(t)
	require.Empty(t, env.srv.Messages(team.ID), "the bot never speaks in the group")
}

// board is the run's board as the admin chat shows it now.
func (env anEnv) board(t *testing.T, runID int64) tgfake.BotMessage {
	t.Helper()
	var id int64
	require.NoError(t, env.st.Pool().QueryRow(context.Background(),
		`SELECT COALESCE(progress_message_id, 0) FROM analysis_runs WHERE id = $1`, runID).Scan(&id))
	require.NotZero(t, id, "run %d's board was delivered", runID)
	return mustMessage(t, env.srv, int(id))
}

// rowTexts are a message's buttons' texts, row by row.
func rowTexts(m tgfake.BotMessage) [][]string {
	if m.ReplyMarkup == nil {
		return nil
	}
	return testkit.MapRows(m.ReplyMarkup.InlineKeyboard, func(b tgfake.InlineKeyboardButton) string { return b.Text })
}

func proposalIDs(t *testing.T, st *storage.Store) []int64 {
	t.Helper()
	return column(t, st, `SELECT id FROM analysis_proposals ORDER BY id`)
}

// column reads a query's one bigint column.
func column(t *testing.T, st *storage.Store, query string) []int64 {
	t.Helper()
	return domaintest.Column[int64](t, context.Background(), st.Pool(), query)
}

// eventLines are the admin chat's event lines (not the board), the
// created line cut at its filters.
func eventLines(lines []string) []string {
	var out []string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "\n"):
		case strings.HasPrefix(l, "🆕"):
			out = append(out, strings.SplitN(l, ":", 2)[0])
		default:
			out = append(out, l)
		}
	}
	return out
}

// A run whose LLM answers garbage fails at the proposals step of its first
// batch; the admin chat and /run say where.
func TestAnalysisFailedRun(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	team, ann := env.teamAndAnn("Team")
	ann.SendText(team.ID, "Deploy on Friday")
	eventually(t, func() bool { return count(t, env.st, `SELECT count(*) FROM group_messages`) == 1 }, "message stored")
	env.llm.On(llmtest.Chat()).Fault(llmtest.InvalidJSON())

	env.ask(t, env.admin, "/run_new")
	require.Equal(t, "▶️ Run #1 started, with similar approved proposals of earlier runs as context. "+
		"Progress and proposals go to the admin chat; /run 1 shows where it stands.", env.ask(t, env.admin, "/run_start 1 RAG").Text)
	failed := env.waitAdminLine(t, "❌ Run #1 failed at step proposals, batch 1: ")
	require.Contains(t, failed.Text, "invalid JSON from model")
	progress := env.waitAdminLine(t, "❌ Run #1 failed\n")
	require.Contains(t, progress.Text, "░░░░░░░░░░ 0%\nBatches: 0 of 1")

	detail := env.ask(t, env.admin, "/run 1").Text
	require.Contains(t, detail, "Run #1 — failed\n")
	require.Contains(t, detail, "\nContext of earlier runs: on\n")
	require.Regexp(t, `\nFailed: .* \(UTC\)\nError at step proposals, batch 1: llm json analysis_proposals: llm: invalid JSON from model`, detail)
	require.Equal(t, "Run #1 is in the “failed” state; only a pending run can be started.", env.ask(t, env.admin, "/run_start 1").Text)
	// A failed run is closed for good: a new one may open.
	require.Regexp(t, `^🆕 Run #2 created`, env.ask(t, env.admin, "/run_new").Text)
}

func TestAnalysisRunsPaging(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	_, err := env.st.Pool().Exec(context.Background(), `
INSERT INTO analysis_runs (created_by, filters, window_from, window_to, state, closed_at, accuracy_metrics)
SELECT 1, '{"window": 604800000000000}', now() - interval '7 days', now(), 'closed', now(),
       '{"proposals_total": 0, "approval_rate": 0, "rejection_rate": 0}'
FROM generate_series(1, 11)`)
	require.NoError(t, err)
	require.Regexp(t, `^🆕 Run #12 created`, env.ask(t, env.admin, "/run_new").Text)

	list := env.ask(t, env.admin, "/runs")
	lines := strings.Split(list.Text, "\n")
	require.Equal(t, "Analysis runs — page 1 of 2, 12 in all", lines[0])
	require.Len(t, lines, 1+analysis.PageSize)
	line := regexp.MustCompile(`^#(\d+) · (\w+) · \d+ \w{3}(?: \d{4})?, \d\d:\d\d \(UTC\) · ([\w ]+) · proposals 0 \(✅ 0 ❌ 0 ⏳ 0\)$`)
	require.Equal(t, []string{"#12 · pending", "#11 · closed", "#3 · closed"},
		[]string{runHead(t, line, lines[1]), runHead(t, line, lines[2]), runHead(t, line, lines[10])})
	require.Equal(t, "24 hours", line.FindStringSubmatch(lines[1])[3])
	require.Equal(t, "7 days", line.FindStringSubmatch(lines[2])[3])
	require.Equal(t, []string{"Older ▶"}, list.ReplyMarkup.Labels())

	a := press(t, env.srv, env.admin, list, data(t, "rp", 1))
	require.Empty(t, a.Text)
	page2, _ := env.srv.MessageByID(env.admin.ID(), list.MessageID)
	lines = strings.Split(page2.Text, "\n")
	require.Equal(t, "Analysis runs — page 2 of 2, 12 in all", lines[0])
	require.Equal(t, []string{"#2 · closed", "#1 · closed"}, []string{runHead(t, line, lines[1]), runHead(t, line, lines[2])})
	require.Len(t, lines, 3)
	require.Equal(t, []string{"◀ Newer"}, page2.ReplyMarkup.Labels())

	// A page past the end (a forged or stale press) shows the last one.
	pressRaw(t, env.srv, env.admin, page2, data(t, "rp", 40))
	again, _ := env.srv.MessageByID(env.admin.ID(), list.MessageID)
	require.Equal(t, page2.Text, again.Text)

	press(t, env.srv, env.admin, page2, data(t, "rp", 0))
	back, _ := env.srv.MessageByID(env.admin.ID(), list.MessageID)
	require.Equal(t, list.Text, back.Text)
}

func runHead(t *testing.T, rx *regexp.Regexp, line string) string {
	t.Helper()
	m := rx.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	return "#" + m[1] + " · " + m[2]
}

// Whatever the LLM writes, a board of eight proposals is one message of
// valid HTML that shows them literally, clipped, with their buttons; the
// board is posted once and edited after (in its own paced lane), survives
// "not modified", and is posted anew when someone deleted it; a run's end
// also ends its board.
func TestAnalysisNotifierClipsAndEscapes(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ctx := context.Background()

	big := analysis.Run{ID: 9, State: analysis.Running, Batches: 4, BatchesDone: 1, Messages: 90, Filtered: 40, Processed: 12,
		ProposalsTotal: 8, ProposalsPending: 8}
	rv := analysis.Review{Run: big}
	for i := range analysis.ReviewPageSize {
		p := analysis.Proposal{
			ID: int64(91 + i), RunID: 9, Ordinal: i + 1, Title: strings.Repeat("<&>", 200), Description: strings.Repeat("&\"'<", 1000),
			Priority: "medium", Assignee: strings.Repeat("<b>", 100), Deadline: "2099-01-05 <i>", Decision: analysis.Undecided,
		}
		for j := range 50 {
			p.Sources = append(p.Sources, analysis.Ref{ChatID: teamChat, MessageID: int64(j + 1)})
		}
		rv.Proposals = append(rv.Proposals, p)
	}
	rendered := env.bot.Board(rv, true)
	require.Len(t, rendered, 1, "one message, edited in place")
	require.Equal(t, domain.KindProgress, rendered[0].Kind)
	require.NoError(t, env.st.Outbox().Enqueue(ctx, rendered...))
	msg := env.waitAdminLine(t, "⏳ Run #9 in progress")
	require.LessOrEqual(t, utf8.RuneCountInString(msg.Text), bot.MaxMessageLen)
	lines := strings.Split(msg.Text, "\n")
	require.Equal(t, "Proposals 1–8 of 8 · ✅ 0 · ❌ 0 · ⏳ 8", lines[6])
	title := "<&>"
	for range 8 {
		title += "<&>"
	}
	require.Equal(t, "1. ⏳ "+title+"… · medium · <b><b><b><b>… · due 2099-01-05 <i>", lines[8],
		"the LLM's text is shown literally, clipped")
	require.True(t, strings.HasPrefix(lines[9], "&\"'<&\"'<"), lines[9])
	require.True(t, strings.HasSuffix(lines[9], "…"), lines[9])
	require.Len(t, lines, 7+3*analysis.ReviewPageSize, "eight proposals of two lines each, a blank line before each")
	require.Equal(t, "8. ⏳ "+title+"… · medium · <b><b><b><b>… · due 2099-01-05 <i>", lines[len(lines)-2])
	for _, e := range msg.Entities {
		require.Contains(t, []string{"bold", "italic"}, e.Type, "no markup was injected")
	}
	require.Len(t, msg.ReplyMarkup.InlineKeyboard, 4, "two proposals a row; no paging, no approve-all while running")
	require.Equal(t, []string{data(t, "pa", 91), data(t, "pj", 91), data(t, "pa", 92), data(t, "pj", 92)}, msg.ReplyMarkup.Data()[:4])

	run := analysis.Run{ID: 7, State: analysis.Running, Batches: 4, BatchesDone: 1, Messages: 90, Filtered: 40, Processed: 12}
	first := env.bot.Board(analysis.Review{Run: run}, true)
	require.Len(t, first, 1)
	require.Equal(t, domain.Message{ChatID: adminChat, Kind: domain.KindProgress, Ref: 7, Key: "progress:7", Text: first[0].Text}, first[0],
		"a message later edits name by its key; its delivery records it on run 7")
	require.NoError(t, env.st.Outbox().Enqueue(ctx, first...))
	shown := env.waitAdminLine(t, "⏳ Run #7 in progress")
	require.Equal(t, "⏳ Run #7 in progress\n▓▓░░░░░░░░ 25%\nBatches: 1 of 4\nMessages processed: 12 of 40 (90 in the window)\nProposals so far: 0", shown.Text)
	require.Empty(t, shown.ReplyMarkup.Buttons(), "no proposals yet: no buttons")
	edit := env.bot.Board(analysis.Review{Run: run}, false)
	require.Len(t, edit, 1)
	require.True(t, edit[0].Edit)
	require.Equal(t, "progress:7", edit[0].Key)
	require.Equal(t, domain.IfGoneSend, edit[0].IfGone)
	require.Equal(t, "progress:7", edit[0].Lane, "the board's edits have a lane of their own")
	require.Equal(t, testBoardEvery, edit[0].Every, "paced by Config.BoardEvery")
	require.NoError(t, env.st.Outbox().Enqueue(ctx, edit...))
	env.settle(t)
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM outbox WHERE state <> 'sent'`), "an edit that changes nothing is no error")
	require.Len(t, env.srv.Messages(adminChat), 2, "edited, not posted again")

	// Someone deleted it: the next edit posts it anew.
	_, err := delivery.NewClient(env.srv.URL(), env.srv.Token(), nil).Call(ctx, "deleteMessage",
		map[string]any{"chat_id": adminChat, "message_id": shown.MessageID})
	require.NoError(t, err)
	run.BatchesDone, run.Processed = 2, 20
	require.NoError(t, env.st.Outbox().Enqueue(ctx, env.bot.Board(analysis.Review{Run: run}, false)...))
	again := env.srv.WaitMessageAfter(t, adminChat, shown.MessageID, func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, "⏳ Run #7 in progress\n▓▓▓▓▓░░░░░ 50%")
	})
	require.False(t, again.Deleted)

	run.State, run.ErrorLog = analysis.Failed, &analysis.ErrorLog{Step: "save", Error: "db <down> & out"}
	require.Empty(t, env.bot.Event(analysis.Event{Kind: analysis.EventProgress, Run: run}), "progress_updated is the board's")
	require.Empty(t, env.bot.Event(analysis.Event{Kind: analysis.EventProposalsCreated, Run: run,
		Proposals: []analysis.Proposal{{ID: 1, Ordinal: 1, Title: "x"}}}), "proposals_created is the board's too")
	failed := env.bot.Event(analysis.Event{Kind: analysis.EventFailed, Run: run})
	require.Len(t, failed, 2, "the line, and the end of the board")
	require.Equal(t, domain.KindRunEvent, failed[0].Kind)
	require.Empty(t, failed[0].Lane, "the line keeps the admin chat's order")
	require.True(t, failed[1].Edit)
	require.Equal(t, "progress:7", failed[1].Lane)
	require.NoError(t, env.st.Outbox().Enqueue(ctx, failed...))
	require.NoError(t, env.st.Outbox().Enqueue(ctx, env.bot.Event(analysis.Event{Kind: "run_reviewed", Run: run})...))
	env.settle(t)
	lines = env.adminLines()
	require.Equal(t, []string{"❌ Run #7 failed at step save: db <down> & out", "❌ Run #7 failed\n▓▓▓▓▓░░░░░ 50%\nBatches: 2 of 4\nMessages processed: 20 of 40 (90 in the window)\nProposals: 0", "run_reviewed: run #7"},
		[]string{lines[len(lines)-2], mustMessage(t, env.srv, again.MessageID).Text, lines[len(lines)-1]},
		"the edit of the board finds the one posted anew")

	// A run that failed before its counts has no board to end.
	early := analysis.Run{ID: 8, State: analysis.Failed, ErrorLog: &analysis.ErrorLog{Step: analysis.StepFetch, Error: "db down"}}
	require.Len(t, env.bot.Event(analysis.Event{Kind: analysis.EventFailed, Run: early}), 1)

	// The end of a run shows its board as the change left it: the page
	// the event carries; without one (another run's), the run alone.
	big.State, big.BatchesDone, big.Processed = analysis.Completed, 4, 40
	rv.Run = big
	done := env.bot.Event(analysis.Event{Kind: analysis.EventCompleted, Run: big, Board: rv})
	require.Len(t, done, 2)
	require.Contains(t, done[1].Text, "<b>Proposals 1–8 of 8</b>")
	require.Equal(t, "✅ Approve the rest (8)", done[1].Buttons[len(done[1].Buttons)-1][0].Text)
	bare := env.bot.Event(analysis.Event{Kind: analysis.EventCompleted, Run: big, Board: analysis.Review{Run: run}})
	require.Len(t, bare, 2)
	require.NotContains(t, bare[1].Text, "Proposals 1–8")
	require.Contains(t, bare[1].Text, "✅ <b>Run #9</b> completed")

	// A run that found nothing: no board to decide on, only the run to close.
	empty := analysis.Run{ID: 10, State: analysis.Completed, Batches: 1, BatchesDone: 1, Messages: 5, Filtered: 5, Processed: 5}
	none := env.bot.Event(analysis.Event{Kind: analysis.EventCompleted, Run: empty, Board: analysis.Review{Run: empty}})
	require.Len(t, none, 2)
	require.Equal(t, "✅ Run #10 completed with no proposals: nothing to decide. Close it with /run_close 10", none[0].Text)
	require.True(t, strings.HasSuffix(none[1].Text, "\nProposals: 0\n\nNothing left to decide: close the run with /run_close 10."), none[1].Text)
	require.Empty(t, none[1].Buttons)
}

func mustMessage(t *testing.T, srv *tgfake.Server, id int) tgfake.BotMessage {
	t.Helper()
	m, ok := srv.MessageByID(adminChat, id)
	require.True(t, ok)
	return m
}

// Without an admin chat the workflow's notices go nowhere, quietly.
func TestAnalysisNotifierWithoutAdminChat(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{}, nil)
	run := analysis.Run{ID: 1, State: analysis.Completed, Batches: 1, ProposalsTotal: 1, ProposalsPending: 1}
	rv := analysis.Review{Run: run, Proposals: []analysis.Proposal{{ID: 1, Ordinal: 1, Title: "x", Priority: "low"}}}
	require.Empty(t, tb.bot.Event(analysis.Event{Kind: analysis.EventStarted, Run: run}))
	require.Empty(t, tb.bot.Event(analysis.Event{Kind: analysis.EventCompleted, Run: run, Board: rv}))
	require.Empty(t, tb.bot.Board(rv, true))
	require.Empty(t, tb.bot.Board(rv, false))
}

// The bug the outbox fixes: a proposal whose post met a 429 was lost, and
// /run_close then refused for ever because it was pending. Here Telegram
// refuses more than the bot paces for (the fake's admin group takes one
// message a second, no burst, while the sender does
// not pace groups at all, as when Telegram's real limits are tighter than
// the published ones), so the run's posts and the board's edits meet
// 429s. Every proposal still reaches the admin chat on the board, in
// order, with buttons that work; each is decided there, the board shows
// every decision, and the run closes. Six proposals keep it to a few
// seconds.
func TestAnalysisProposalsSurviveFloodControl(t *testing.T) {
	t.Parallel()
	limits := tgfake.DefaultLimits()
	// The run's four posts (created, started, its board, completed) come
	// within a second however busy the machine: at least one meets a 429.
	limits.Group = tgfake.Bucket{Burst: 1, Every: time.Second}
	pace := delivery.DefaultLimits()
	pace.Group, pace.GroupBurst = 1000, 1000
	env := setupAnalysisWith(t, pace, tgfake.WithLimits(limits), tgfake.WithWaitTimeout(30*time.Second))
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	const n = 6
	pids := env.completedRun(t, n)
	require.Positive(t, env.srv.RateLimitedIn(adminChat), "the admin chat's posts met Telegram's flood control")
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM outbox WHERE state <> 'sent'
AND NOT (kind = 'progress' AND last_error = 'superseded by a newer edit')`),
		"nothing dropped or failed but board edits a newer one superseded")

	board := env.board(t, 1)
	for i := range n {
		require.Contains(t, board.Text, fmt.Sprintf("\n\n%d. ⏳ Task %d · %s", i+1, i+1, taskPriority(i)), "every proposal reached the admin chat")
	}
	var want []string
	for _, id := range pids {
		want = append(want, data(t, "pa", id), data(t, "pj", id))
	}
	require.Equal(t, append(want, data(t, "ba", 1)), board.ReplyMarkup.Data())
	for _, m := range env.srv.Messages(adminChat) {
		require.False(t, strings.HasPrefix(m.Text, "💡 Proposal"), "no proposal has a message of its own")
	}
	require.Equal(t, "Run #1 still has proposals awaiting a decision: 6. Approve or reject them first.",
		env.ask(t, env.admin, "/run_close 1").Text)

	for i, id := range pids {
		action, toast, mark := "pa", fmt.Sprintf("✅ #%d approved.", i+1), "✅"
		if i%2 == 1 {
			action, toast, mark = "pj", fmt.Sprintf("❌ #%d rejected.", i+1), "❌"
		}
		require.Equal(t, toast, press(t, env.srv, env.admin, board, data(t, action, id)).Text)
		line := fmt.Sprintf("\n\n%d. %s Task %d · %s", i+1, mark, i+1, taskPriority(i))
		env.srv.WaitFor(t, 30*time.Second, func() bool {
			board = env.board(t, 1)
			return strings.Contains(board.Text, line)
		})
	}
	env.settle(t)
	board = env.board(t, 1)
	require.Contains(t, board.Text, "Proposals 1–6 of 6 · ✅ 3 · ❌ 3 · ⏳ 0")
	require.Empty(t, board.ReplyMarkup.Buttons())
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM analysis_proposals WHERE decision = 'pending'`))
	require.Equal(t, "🏁 Run #1 closed.\nProposals: 6\nApproved: 50%\nRejected: 50%", env.ask(t, env.admin, "/run_close 1").Text)
	env.waitAdminLine(t, "🏁 Run #1 closed\n")
}
