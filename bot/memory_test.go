package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"

	"switchboard/bot"
	"switchboard/domain/memory"
	"switchboard/e2e/tgfake"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// cannedLLM stands in for the model: the analyzer and the archivist get
// fixed JSON, the assembler and the responder fixed text.
type cannedLLM struct{ answer string }

func (l *cannedLLM) Text(_ context.Context, c memory.Call) (string, error) {
	switch c.Label {
	case "memory_assembler":
		return "No relevant memory.", nil
	case "memory_responder":
		return l.answer, nil
	}
	return "", fmt.Errorf("canned LLM: no text for %s", c.Label)
}

func (*cannedLLM) JSON(_ context.Context, c memory.Call, out any) error {
	var js string
	switch c.Label {
	case "memory_analyzer":
		js = `{"needs_context": false, "context_type": "none", "time_scope": "none", "search_keywords": [], "context_found": false}`
	case "memory_archivist":
		js = `{"summary": "Asked how to learn <Go> & got a plan.", "tags": ["go", "learning"]}`
	default:
		return fmt.Errorf("canned LLM: no JSON for %s", c.Label)
	}
	return json.Unmarshal([]byte(js), out)
}

type memEnv struct {
	bundle
	st  *storage.Store
	svc *memory.Service
}

// setupMemory is setup with the memory chat over the bot's own database.
// The orchestrator does not run unless run is set: most tests look at
// intake and at the Notifier methods alone.
func setupMemory(t *testing.T, run bool) memEnv {
	t.Helper()
	st := storagetest.New(t)
	svc, err := memory.NewService(memory.Config{}, memory.Deps{
		Repo: st, LLM: &cannedLLM{answer: "Start with <b>the tour</b> & write code daily."}, Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	tb := setupStore(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, st, func(b *bot.Bot) { b.RegisterMemory(svc) })
	svc.SetNotifier(tb.bot)
	if run {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { svc.Run(ctx, nil); close(done) }()
		t.Cleanup(func() { cancel(); <-done }) // before the bot stops
	}
	return memEnv{bundle: tb, st: st, svc: svc}
}

func count(t *testing.T, st *storage.Store, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func runOf(t *testing.T, st *storage.Store, userID int64, messageID int) memory.Run {
	t.Helper()
	var id int64
	require.NoError(t, st.Pool().QueryRow(context.Background(),
		`SELECT id FROM pipeline_runs WHERE user_id = $1 AND message_id = $2`, userID, messageID).Scan(&id))
	r, err := st.PipelineRun(context.Background(), id)
	require.NoError(t, err)
	return r
}

func TestMemoryCommandsInMenu(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	require.Contains(t, env.ask(t, ann, "/help").Text, "/memory — what I remember about you")
	require.Equal(t, []string{"start", "help", "lang", "memory", "forget"},
		commandNames(env.srv.Commands(tgfake.BotCommandScope{Type: "default"}, "")))

	admin := env.srv.User(adminID, "Boss", "en")
	help := env.ask(t, admin, "/help").Text
	require.True(t, strings.HasSuffix(help, "Admin\n/status — replicas, jobs and queues\n/prompt — show or replace a system prompt of the memory chat"), help)
	adm := env.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminID}, "ru")
	require.Equal(t, []string{"start", "help", "lang", "memory", "forget", "status", "prompt"}, commandNames(adm))
	require.Equal(t, "удалить всё, что я о вас помню", adm[4].Description)
}

func TestMemoryPrivateTextBecomesARun(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	team := env.srv.Group(-100, "Team")

	ann.SendText(team.ID, "group chatter is not for the memory chat")
	first := ann.SendText(ann.ID(), "How do I learn <Go> & Rust?")
	env.srv.WaitChatAction(t, ann.ID(), "typing")
	require.Empty(t, env.srv.Messages(ann.ID()), "the first message is not queued: no note, only typing")

	r := runOf(t, env.st, 42, first.MessageID)
	require.Equal(t, memory.New, r.Status)
	require.EqualValues(t, 42, r.ChatID)
	require.Equal(t, "How do I learn <Go> & Rust?", r.Query)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM raw_logs
WHERE user_id = 42 AND log_type = 'query' AND log_data->>'text' = $1 AND (log_data->>'run_id')::bigint = $2`, r.Query, r.ID))

	// No orchestrator runs here, so the first run stays unfinished and
	// the next ones wait for it.
	second := ann.SendText(ann.ID(), "And what about generics?")
	note := env.srv.WaitMessageAfter(t, ann.ID(), second.MessageID, nil)
	require.Equal(t, "Got it. Earlier messages of yours still waiting for an answer: 1. I will answer this one after them, in order.", note.Text)
	require.Equal(t, second.MessageID, note.ReplyToID())
	third := ann.SendText(ann.ID(), "Thanks!")
	note = env.srv.WaitMessageAfter(t, ann.ID(), third.MessageID, nil)
	require.Contains(t, note.Text, "waiting for an answer: 2.")
	require.Equal(t, third.MessageID, note.ReplyToID())
	require.Equal(t, 3, count(t, env.st, `SELECT count(*) FROM pipeline_runs WHERE user_id = 42 AND status = 'NEW'`))

	tooLong := ann.SendText(ann.ID(), strings.Repeat("я", memory.MaxQuery+1))
	reply := env.srv.WaitMessageAfter(t, ann.ID(), tooLong.MessageID, nil)
	require.Equal(t, "This message is too long for me: at most 4096 characters, please.", reply.Text)
	require.Equal(t, 3, count(t, env.st, `SELECT count(*) FROM pipeline_runs`), "refused, nothing stored")
	// Polled in the test's own goroutine: require.Never's condition may
	// still run after the test ends, on a closed pool.
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		require.Equal(t, 3, count(t, env.st, `SELECT count(*) FROM pipeline_runs`), "group text is not a run")
	}
	require.Empty(t, env.srv.Messages(team.ID), "nothing is said in the group")
}

// Quick messages are stored, and so answered, in the order they were
// sent: telebot alone would handle them on racing goroutines.
func TestMemoryQuickMessagesAreStoredInOrder(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	var sent []int
	for i := range 20 {
		sent = append(sent, ann.SendText(ann.ID(), fmt.Sprintf("message %d", i)).MessageID)
	}
	require.Eventually(t, func() bool {
		return count(t, env.st, `SELECT count(*) FROM pipeline_runs WHERE user_id = 42`) == 20
	}, 10*time.Second, 20*time.Millisecond)
	rows, err := env.st.Pool().Query(context.Background(), `SELECT message_id FROM pipeline_runs WHERE user_id = 42 ORDER BY id`)
	require.NoError(t, err)
	stored, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.Equal(t, sent, stored)
}

func TestMemoryAnswerIsAReplyShownLiterally(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ctx := context.Background()
	ann := env.srv.User(42, "Ann", "en")
	q := ann.SendText(ann.ID(), "question")
	env.srv.WaitChatAction(t, ann.ID(), "typing")
	r := runOf(t, env.st, 42, q.MessageID)

	r.FinalAnswer = "Use <b>generics</b> & `iterators`: a < b"
	require.NoError(t, env.bot.Answer(ctx, r))
	msgs := botMessagesAfter(env.srv.Messages(42), q.MessageID)
	require.Len(t, msgs, 1)
	require.Equal(t, r.FinalAnswer, msgs[0].Text, "the model's markup arrives as literal text")
	require.Empty(t, msgs[0].Entities)
	require.Equal(t, "HTML", msgs[0].ParseMode)
	require.Equal(t, q.MessageID, msgs[0].ReplyToID())

	// 10 000 characters: three messages, the first a reply.
	before := len(env.srv.Messages(42))
	r.FinalAnswer = strings.Repeat("word ", 2000)
	require.NoError(t, env.bot.Answer(ctx, r))
	msgs = env.srv.Messages(42)[before:]
	require.Len(t, msgs, 3)
	words := 0
	for i, m := range msgs {
		require.LessOrEqual(t, len([]rune(m.Text)), bot.MaxMessageLen)
		words += strings.Count(m.Text, "word")
		if i == 0 {
			require.Equal(t, q.MessageID, m.ReplyToID())
		} else {
			require.Zero(t, m.ReplyToID(), "only the first part is a reply")
		}
	}
	require.Equal(t, 2000, words, "the answer arrives whole")

	// The user deleted their message: the answer still arrives.
	require.NoError(t, env.bot.Telegram().Delete(&tele.Message{ID: q.MessageID, Chat: &tele.Chat{ID: 42}}))
	before = len(env.srv.Messages(42))
	r.FinalAnswer = "still here"
	require.NoError(t, env.bot.Answer(ctx, r))
	msgs = env.srv.Messages(42)[before:]
	require.Len(t, msgs, 1)
	require.Equal(t, "still here", msgs[0].Text)
	require.Zero(t, msgs[0].ReplyToID())
}

func TestMemoryFailedInUsersLanguage(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	anna := env.srv.User(42, "Анна", "ru")
	q := anna.SendText(anna.ID(), "Как выучить Go?")
	env.srv.WaitChatAction(t, anna.ID(), "typing")
	r := runOf(t, env.st, 42, q.MessageID)
	require.Equal(t, "ru", r.Lang)

	require.NoError(t, env.bot.Failed(context.Background(), r))
	msgs := botMessagesAfter(env.srv.Messages(42), q.MessageID)
	require.Len(t, msgs, 1)
	require.Equal(t, "Извините, не получилось ответить на это сообщение. Написанное вами сохранено; отправьте его ещё раз, чтобы повторить.", msgs[0].Text)
	require.Equal(t, q.MessageID, msgs[0].ReplyToID())
}

func TestMemoryAnswerToUnreachableUser(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ctx := context.Background()

	env.srv.User(44, "Ghost", "en") // never wrote to the bot
	for _, chat := range []int64{44, 4242 /* no such chat */} {
		r := memory.Run{ID: 1, UserID: chat, ChatID: chat, MessageID: 1, FinalAnswer: "hello", Lang: "en"}
		require.NoError(t, env.bot.Answer(ctx, r), "logged; the run still finishes")
		require.NoError(t, env.bot.Failed(ctx, r))
	}
	require.Empty(t, env.srv.Messages(44))

	ann := env.srv.User(42, "Ann", "en")
	q := ann.SendText(ann.ID(), "hi")
	env.srv.WaitChatAction(t, 42, "typing")
	ann.Block()
	r := memory.Run{ID: 2, UserID: 42, ChatID: 42, MessageID: q.MessageID, FinalAnswer: "hello", Lang: "en"}
	require.NoError(t, env.bot.Answer(ctx, r))
	require.Error(t, env.bot.Typing(ctx, 42), "reported, though the pipeline ignores it")

	ann.Unblock()
	env.srv.FailNextWith("sendMessage", 1, &tgfake.APIError{Code: 500, Description: "Internal Server Error"})
	require.Error(t, env.bot.Answer(ctx, r), "a Telegram outage is retried by the orchestrator")
	require.NoError(t, env.bot.Answer(ctx, r))
	require.Len(t, botMessagesAfter(env.srv.Messages(42), q.MessageID), 1)
}

func TestMemoryPipelineAnswersAndRemembers(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, true)
	ann := env.srv.User(42, "Ann", "en")

	q := ann.SendText(ann.ID(), "How do I learn Go?")
	answer := env.srv.WaitMessageAfter(t, ann.ID(), q.MessageID, nil)
	require.Equal(t, "Start with <b>the tour</b> & write code daily.", answer.Text)
	require.Equal(t, q.MessageID, answer.ReplyToID())
	require.Contains(t, env.srv.ChatActions(42), "typing")
	require.Eventually(t, func() bool {
		return count(t, env.st, `SELECT count(*) FROM pipeline_runs WHERE user_id = 42 AND archived_at IS NOT NULL`) == 1
	}, 10*time.Second, 20*time.Millisecond)

	mem := env.ask(t, ann, "/memory").Text
	require.Contains(t, mem, " · go, learning\nAsked how to learn <Go> & got a plan.")
}

// insertSummary puts a row where the archivist would have.
func insertSummary(t *testing.T, st *storage.Store, userID int64, week string, tags []string, summary string) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), `INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary)
VALUES ($1, $2::timestamptz, $2::timestamptz + interval '7 days', $3, $4)`, userID, week, tags, summary)
	require.NoError(t, err)
}

func TestMemoryListAndForget(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	bob := env.srv.User(43, "Bob", "en")
	require.Equal(t, "I remember nothing about you yet.", env.ask(t, ann, "/memory").Text)

	q := ann.SendText(ann.ID(), "remember me")
	env.srv.WaitChatAction(t, 42, "typing")
	insertSummary(t, env.st, 42, "2025-03-03T00:00:00Z", []string{"go", "career"}, "Wants to move from <PHP> & Perl to Go.")
	insertSummary(t, env.st, 42, "2025-03-10T00:00:00Z", []string{}, "Asked about\ngenerics.")
	list := env.ask(t, ann, "/memory")
	require.Equal(t, "What I remember about you, newest first:\n\n"+
		"Week of 2025-03-10\nAsked about\ngenerics.\n\n"+
		"Week of 2025-03-03 · go, career\nWants to move from <PHP> & Perl to Go.\n\n"+
		"To delete all of it, together with your messages and my answers, send /forget.", list.Text)
	require.Equal(t, "I remember nothing about you yet.", env.ask(t, bob, "/memory").Text, "each user sees their own")

	team := env.srv.Group(-100, "Team")
	sent := ann.SendText(team.ID, "/memory")
	require.Equal(t, "I talk about what I remember only in our private chat.",
		env.srv.WaitMessageAfter(t, team.ID, sent.MessageID, nil).Text)

	ask := env.ask(t, ann, "/forget")
	require.Equal(t, "Delete everything I remember about you: your messages, my answers and the summaries? This cannot be undone.", ask.Text)
	buttons := ask.ReplyMarkup.Buttons()
	require.Len(t, buttons, 2)
	require.Equal(t, "Forget everything", buttons[0].Text)
	require.Equal(t, data(t, "mf", 42), buttons[0].CallbackData)
	require.Equal(t, "Cancel", buttons[1].Text)
	require.Equal(t, data(t, "mc", 42), buttons[1].CallbackData)

	remembered := func() int {
		return count(t, env.st, `SELECT (SELECT count(*) FROM pipeline_runs WHERE user_id = 42)
 + (SELECT count(*) FROM raw_logs WHERE user_id = 42) + (SELECT count(*) FROM lsm_storage WHERE user_id = 42)`)
	}
	require.Equal(t, 4, remembered())

	// Bob's client forges Ann's id on his own confirmation.
	bobAsk := env.ask(t, bob, "/forget")
	for _, forged := range []string{data(t, "mf", 42), data(t, "mc", 42)} {
		a := answer(t, env.srv, bob.PressRaw(bobAsk, forged))
		require.Equal(t, "This button is not for you.", a.Text)
		require.True(t, a.ShowAlert)
	}
	require.Equal(t, 4, remembered())
	bobNow, _ := env.srv.MessageByID(bob.ID(), bobAsk.MessageID)
	require.Empty(t, bobNow.Edits)

	answer(t, env.srv, mustPress(t, ann, ask, data(t, "mc", 42)))
	cancelled, _ := env.srv.MessageByID(42, ask.MessageID)
	require.Equal(t, "Nothing was deleted.", cancelled.Text)
	require.Empty(t, cancelled.ReplyMarkup.Buttons())
	require.Equal(t, 4, remembered())

	ask = env.ask(t, ann, "/forget")
	answer(t, env.srv, mustPress(t, ann, ask, data(t, "mf", 42)))
	done, _ := env.srv.MessageByID(42, ask.MessageID)
	require.Equal(t, "Done, I forgot everything about you. Deleted: 1 requests, 1 messages and answers, 2 summaries.", done.Text)
	require.Empty(t, done.ReplyMarkup.Buttons())
	require.Zero(t, remembered())
	require.Equal(t, "I remember nothing about you yet.", env.ask(t, ann, "/memory").Text)
	_, ok := env.srv.MessageByID(42, q.MessageID)
	require.True(t, ok, "the chat itself is the user's; only what the bot stored is deleted")

	// A stale press forgets again, harmlessly.
	answer(t, env.srv, ann.PressRaw(ask, data(t, "mf", 42)))
	done, _ = env.srv.MessageByID(42, ask.MessageID)
	require.Equal(t, "Done, I forgot everything about you. Deleted: 0 requests, 0 messages and answers, 0 summaries.", done.Text)
	require.Empty(t, env.srv.UnansweredCallbacks())
}

type promptRow struct {
	Version  int
	Active   bool
	Template string
}

func prompts(t *testing.T, st *storage.Store, role string) []promptRow {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(),
		`SELECT version, is_active, prompt_template FROM system_prompts WHERE role_name = $1 ORDER BY version`, role)
	require.NoError(t, err)
	defer rows.Close()
	var out []promptRow
	for rows.Next() {
		var p promptRow
		require.NoError(t, rows.Scan(&p.Version, &p.Active, &p.Template))
		out = append(out, p)
	}
	require.NoError(t, rows.Err())
	return out
}

func TestPromptShowAndSet(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	admin := env.srv.User(adminID, "Boss", "en")
	ask := func(text string) tgfake.BotMessage { return env.ask(t, admin, text) }

	require.Equal(t, "This command is for admins only.", env.ask(t, ann, "/prompt mentor hijacked").Text)
	require.Len(t, prompts(t, env.st, "mentor"), 1)

	for _, in := range []string{"/prompt", "/prompt nobody", "/prompt nobody new text"} {
		require.Contains(t, ask(in).Text, "Roles: analyzer, assembler, mentor, archivist.", in)
	}

	shown := ask("/prompt mentor")
	require.True(t, strings.HasPrefix(shown.Text, "mentor, version 1, updated "), shown.Text)
	require.Contains(t, shown.Text, "\nYou are a patient, practical mentor who remembers the user's earlier conversations.\n")
	require.Equal(t, "pre", shown.Entities[len(shown.Entities)-1].Type)

	text := "Be <brief> & kind.\nAlways answer in two lines."
	require.Equal(t, "Saved: mentor version 2 is active now; earlier versions are kept.", ask("/prompt mentor "+text).Text)
	got := prompts(t, env.st, "mentor")
	require.Len(t, got, 2)
	require.Equal(t, 1, got[0].Version)
	require.False(t, got[0].Active)
	require.Equal(t, promptRow{Version: 2, Active: true, Template: text}, got[1])

	shown = ask("/prompt MENTOR")
	require.True(t, strings.HasPrefix(shown.Text, "mentor, version 2, updated "), shown.Text)
	require.True(t, strings.HasSuffix(shown.Text, ":\n"+text), shown.Text)

	require.Equal(t, "The prompt is too long: at most 8000 characters.",
		ask("/prompt mentor "+strings.Repeat("я", memory.MaxPrompt+1)).Text)
	require.Len(t, prompts(t, env.st, "mentor"), 2)

	// A long prompt takes several messages, each with a whole <pre>.
	_, err := env.svc.SetPrompt(context.Background(), "archivist", strings.Repeat("<tag> & line\n", 600))
	require.NoError(t, err)
	sent := admin.SendText(admin.ID(), "/prompt archivist")
	lines := func() int {
		n := 0
		for _, m := range botMessagesAfter(env.srv.Messages(admin.ID()), sent.MessageID) {
			n += strings.Count(m.Text, "<tag> & line")
		}
		return n
	}
	env.srv.WaitFor(t, 5*time.Second, func() bool { return lines() == 600 })
	msgs := botMessagesAfter(env.srv.Messages(admin.ID()), sent.MessageID)
	require.Greater(t, len(msgs), 1)
	require.True(t, strings.HasPrefix(msgs[0].Text, "archivist, version 2, updated "))
	for _, m := range msgs {
		require.LessOrEqual(t, len([]rune(m.Text)), bot.MaxMessageLen)
		last := m.Entities[len(m.Entities)-1]
		require.Equal(t, "pre", last.Type)
		require.True(t, strings.HasPrefix(utf16Slice(m.Text, last.Offset, last.Length), "<tag> & line"))
	}
}
