package bot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/e2e/tgfake"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// cannedLLM stands in for the model: the analyzer and the archivist get
// fixed JSON, the assembler fixed text, the responder answer (or, with
// answerTo set, what it makes of the user's message).
type cannedLLM struct {
	answer   string
	answerTo func(query string) string
}

func (l *cannedLLM) Text(_ context.Context, c memory.Call) (string, error) {
	switch c.Label {
	case "memory_assembler":
		return "No relevant memory.", nil
	case "memory_responder":
		if l.answerTo != nil {
			_, q, _ := strings.Cut(c.Prompt, "## The user's message\n")
			return l.answerTo(strings.TrimSpace(q)), nil
		}
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
	return setupMemoryLLM(t, run, &cannedLLM{answer: "Start with <b>the tour</b> & write code daily."})
}

// setupMemoryLLM is setupMemory with a model of the test's own.
func setupMemoryLLM(t *testing.T, run bool, model memory.LLM) memEnv {
	t.Helper()
	st := storagetest.New(t)
	// The pipeline renews "typing" through the bot's own client here: the
	// fake Telegram the bot talks to exists only once setup made it.
	var tb bundle
	svc, err := memory.NewService(memory.Config{}, memory.Deps{
		Runs: st.PipelineRuns(), Memories: st.Memories(), Prompts: st.Prompts(), Outbox: st.Outbox(), Users: st.Users(), LLM: model, Notifier: testRenderer(bot.RenderConfig{}), Log: slog.New(slog.DiscardHandler),
		Typist: typistFunc(func(ctx context.Context, chatID int64) error { return tb.bot.Typing(ctx, chatID) }),
	})
	require.NoError(t, err)
	tb = setupDeps(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, st, bot.Deps{Memory: svc}, nil)
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
	return queryOne[int](t, st, query, args...)
}

func runOf(t *testing.T, st *storage.Store, userID int64, messageID int) memory.PipelineRun {
	t.Helper()
	var id int64
	require.NoError(t, st.Pool().QueryRow(context.Background(),
		`SELECT id FROM pipeline_runs WHERE user_id = $1 AND message_id = $2`, userID, messageID).Scan(&id))
	r, err := st.PipelineRuns().Get(context.Background(), id)
	require.NoError(t, err)
	return r
}

// asked has p write text to the bot in private and returns the message
// and its run, once the bot shows it is typing the answer.
func (env memEnv) asked(t *testing.T, p *tgfake.Person, text string) (tgfake.Message, memory.PipelineRun) {
	t.Helper()
	q := p.SendText(p.ID(), text)
	env.srv.WaitChatAction(t, p.ID(), "typing")
	return q, runOf(t, env.st, p.ID(), q.MessageID)
}

func TestMemoryCommandsInMenu(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	require.Contains(t, env.ask(t, ann, "/help").Text, "/memory — what I remember about you")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "memory", "forget", "export", "incognito"},
		commandNames(env.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "")))

	admin := env.srv.User(adminID, "Boss", "en")
	help := env.ask(t, admin, "/help").Text
	require.True(t, strings.HasSuffix(help, "Admin · system\n/status — replicas, jobs and queues\n/prompt — show or replace a system prompt of the memory chat"), help)
	adm := env.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminID}, "ru")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "memory", "forget", "export", "incognito", "status", "prompt"}, commandNames(adm))
	require.Equal(t, "удалить всё ваше, что я храню", adm[5].Description)
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
	require.Equal(t, "Got it. Messages of yours ahead of this one in the queue: 1. I answer in the order you sent them.", note.Text)
	require.Equal(t, second.MessageID, note.ReplyToID())
	third := ann.SendText(ann.ID(), "Thanks!")
	note = env.srv.WaitMessageAfter(t, ann.ID(), third.MessageID, nil)
	require.Contains(t, note.Text, "ahead of this one in the queue: 2.")
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

// queue writes rendered messages to the outbox, as the pipeline's step
// does; the test's sender delivers them.
func queue(t *testing.T, st *storage.Store, msgs []domain.Message) {
	t.Helper()
	require.NoError(t, st.Outbox().Enqueue(context.Background(), msgs...))
}

// waitBotMessages waits until n bot messages follow afterID in chat, and
// returns them.
func waitBotMessages(t *testing.T, srv *tgfake.Server, chat int64, afterID, n int, timeout time.Duration) []tgfake.BotMessage {
	t.Helper()
	srv.WaitFor(t, timeout, func() bool { return len(botMessagesAfter(srv.Messages(chat), afterID)) >= n })
	return botMessagesAfter(srv.Messages(chat), afterID)
}

func TestMemoryAnswerIsAReplyRenderedFromMarkdown(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	q, r := env.asked(t, ann, "question")

	r.FinalAnswer = "Use <b>generics</b> & `iterators`: a < b"
	rendered := env.bot.Answer(r)
	require.Equal(t, []domain.Message{{ChatID: 42, Kind: domain.KindMemoryAnswer, Ref: r.ID,
		Text: "Use &lt;b&gt;generics&lt;/b&gt; &amp; <code>iterators</code>: a &lt; b", ReplyTo: q.MessageID}}, rendered)
	queue(t, env.st, rendered)
	msgs := waitBotMessages(t, env.srv, 42, q.MessageID, 1, 5*time.Second)
	require.Len(t, msgs, 1)
	require.Equal(t, "Use <b>generics</b> & iterators: a < b", msgs[0].Text, "the model's HTML arrives as literal text, its Markdown rendered")
	require.Equal(t, []tgfake.MessageEntity{{Type: "code", Offset: 22, Length: 9}}, msgs[0].Entities)
	require.Equal(t, "HTML", msgs[0].ParseMode)
	require.Equal(t, q.MessageID, msgs[0].ReplyToID())

	// 10 000 characters: three messages, the first a reply.
	last := msgs[0].MessageID
	r.FinalAnswer = strings.Repeat("word ", 2000)
	rendered = env.bot.Answer(r)
	require.Len(t, rendered, 3)
	queue(t, env.st, rendered)
	// The fake allows a private chat one message a second after a burst of
	// three: the sender paces the parts.
	msgs = waitBotMessages(t, env.srv, 42, last, 3, 15*time.Second)
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
	require.Equal(t, 2000, words, "the answer arrives whole, in order")

	// The user deleted their message: the answer still arrives.
	_, err := delivery.NewClient(env.srv.URL(), env.srv.Token(), nil).Call(context.Background(), "deleteMessage",
		map[string]any{"chat_id": 42, "message_id": q.MessageID})
	require.NoError(t, err)
	last = msgs[len(msgs)-1].MessageID
	r.FinalAnswer = "still here"
	queue(t, env.st, env.bot.Answer(r))
	msgs = waitBotMessages(t, env.srv, 42, last, 1, 15*time.Second)
	require.Len(t, msgs, 1)
	require.Equal(t, "still here", msgs[0].Text)
	require.Zero(t, msgs[0].ReplyToID())
}

func TestMemoryFailedInUsersLanguage(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	anna := env.srv.User(42, "Анна", "ru")
	q, r := env.asked(t, anna, "Как выучить Go?")
	require.Equal(t, "ru", r.Lang)

	rendered := env.bot.Failed(r)
	require.Len(t, rendered, 1)
	require.Equal(t, domain.KindMemoryAnswer, rendered[0].Kind)
	require.Equal(t, r.ID, rendered[0].Ref)
	queue(t, env.st, rendered)
	msgs := waitBotMessages(t, env.srv, 42, q.MessageID, 1, 5*time.Second)
	require.Len(t, msgs, 1)
	require.Equal(t, "Извините, не получилось ответить на это сообщение. Написанное вами сохранено; отправьте его ещё раз, и я попробую снова.", msgs[0].Text)
	require.Equal(t, q.MessageID, msgs[0].ReplyToID())

	r.FinalAnswer = "  "
	require.Equal(t, rendered, env.bot.Answer(r), "an empty answer would fail for ever: the user is told instead")

	// An incognito run's text is erased with it: its notice promises no
	// saved text, and ends with the incognito line.
	r.Incognito = true
	incognito := env.bot.Failed(r)
	require.Len(t, incognito, 1)
	require.Equal(t, "Извините, не получилось ответить на это сообщение. Отправьте его ещё раз, и я попробую снова.\n\n"+
		"<i>🕶 Инкогнито: этот обмен сообщениями я не запомню.</i>", incognito[0].Text)
	require.True(t, incognito[0].Ephemeral)
}

// The answers of a user who blocked the bot, or never wrote to it, are
// dropped by the outbox (the run is finished already); a Telegram outage
// is the outbox's to retry, and the answer arrives once.
func TestMemoryAnswerToUnreachableUser(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ctx := context.Background()
	state := func(ref int64) []string {
		rows, err := env.st.Pool().Query(ctx, `SELECT state FROM outbox WHERE ref = $1 ORDER BY id`, ref)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}

	env.srv.User(44, "Ghost", "en") // never wrote to the bot
	queue(t, env.st, env.bot.Answer(memory.PipelineRun{ID: 1, UserID: 44, ChatID: 44, MessageID: 1, Change: memory.Change{FinalAnswer: "hello"}, Lang: "en"}))
	env.srv.WaitFor(t, 5*time.Second, func() bool { return slices.Equal(state(1), []string{"dropped"}) })
	require.Empty(t, env.srv.Messages(44))

	ann := env.srv.User(42, "Ann", "en")
	q := ann.SendText(ann.ID(), "hi")
	env.srv.WaitChatAction(t, 42, "typing")
	ann.Block()
	queue(t, env.st, env.bot.Answer(memory.PipelineRun{ID: 2, UserID: 42, ChatID: 42, MessageID: q.MessageID, Change: memory.Change{FinalAnswer: "hello"}, Lang: "en"}))
	env.srv.WaitFor(t, 5*time.Second, func() bool { return slices.Equal(state(2), []string{"dropped"}) })
	require.Error(t, env.bot.Typing(ctx, 42), "reported, though the pipeline ignores it")
	require.Empty(t, botMessagesAfter(env.srv.Messages(42), q.MessageID))

	ann.Unblock()
	require.NoError(t, env.st.Outbox().ClearUnreachable(ctx, 42)) // the bot does this when the user writes again
	env.srv.FailNextWith("sendMessage", 1, &tgfake.APIError{Code: 500, Description: "Internal Server Error"})
	queue(t, env.st, env.bot.Answer(memory.PipelineRun{ID: 3, UserID: 42, ChatID: 42, MessageID: q.MessageID, Change: memory.Change{FinalAnswer: "hello again"}, Lang: "en"}))
	msgs := waitBotMessages(t, env.srv, 42, q.MessageID, 1, 10*time.Second)
	require.Equal(t, "hello again", msgs[0].Text)
	env.srv.WaitFor(t, 5*time.Second, func() bool { return slices.Equal(state(3), []string{"sent"}) })
	require.Len(t, botMessagesAfter(env.srv.Messages(42), q.MessageID), 1, "once")
}

// Three users each send three questions at once; every answer (two
// messages each) arrives, each user's in the order asked, the first part a
// reply to its question. The fake enforces Telegram's limits (a private
// chat: a burst of three, then one a second), so the sender paces them.
func TestMemoryQuickQuestionsOfThreeUsersAllAnswered(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("more ", 900) // the answer takes two messages
	env := setupMemoryLLM(t, true, &cannedLLM{answerTo: func(q string) string { return "Answer to " + q + ". " + long + "end of " + q }})
	users := []*tgfake.Person{env.srv.User(42, "Ann", "en"), env.srv.User(43, "Bob", "en"), env.srv.User(44, "Cid", "en")}
	asked := map[int64][]int{}
	for i := range 3 {
		for _, u := range users {
			asked[u.ID()] = append(asked[u.ID()], u.SendText(u.ID(), fmt.Sprintf("question %d of %d", i, u.ID())).MessageID)
		}
	}
	for _, u := range users {
		var answers []tgfake.BotMessage
		env.srv.WaitFor(t, 60*time.Second, func() bool {
			answers = answers[:0]
			for _, m := range env.srv.Messages(u.ID()) {
				if !strings.HasPrefix(m.Text, "Got it.") { // the queue notes, sent at once
					answers = append(answers, m)
				}
			}
			return len(answers) >= 6
		})
		require.Len(t, answers, 6, "user %d", u.ID())
		for i := range 3 {
			first, second := answers[2*i], answers[2*i+1]
			q := fmt.Sprintf("question %d of %d", i, u.ID())
			require.True(t, strings.HasPrefix(first.Text, "Answer to "+q+". "), "user %d answer %d: %.40q", u.ID(), i, first.Text)
			require.Equal(t, asked[u.ID()][i], first.ReplyToID(), "the first part replies to its question")
			require.True(t, strings.HasSuffix(second.Text, "end of "+q), "user %d answer %d, part 2: …%q", u.ID(), i,
				second.Text[max(0, len(second.Text)-30):])
			require.Zero(t, second.ReplyToID())
		}
	}
	require.Eventually(t, func() bool {
		return count(t, env.st, `SELECT count(*) FROM pipeline_runs WHERE archived_at IS NOT NULL`) == 9
	}, 10*time.Second, 20*time.Millisecond)
	// The last row is marked sent just after Telegram took it.
	require.Eventually(t, func() bool {
		return count(t, env.st, `SELECT count(*) FROM outbox WHERE state <> 'sent'`) == 0
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, 18, count(t, env.st, `SELECT count(*) FROM outbox WHERE kind = 'memory_answer'`),
		"each part queued once, and sent")
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM outbox WHERE kind = 'memory_answer' AND body->>'text' LIKE 'Got it.%'`),
		"the queue notes have a kind of their own")
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
	exec(t, st, `INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary)
VALUES ($1, $2::timestamptz, $2::timestamptz + interval '7 days', $3, $4)`, userID, week, tags, summary)
}

func TestMemoryListAndForget(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann, bob := env.annAndBob()
	require.Equal(t, "I remember nothing about you yet.", env.ask(t, ann, "/memory").Text)

	q := ann.SendText(ann.ID(), "remember me")
	env.srv.WaitChatAction(t, 42, "typing")
	insertSummary(t, env.st, 42, "2025-03-03T00:00:00Z", []string{"go", "career"}, "Wants to move from <PHP> & Perl to Go.")
	insertSummary(t, env.st, 42, "2025-03-10T00:00:00Z", []string{}, "Asked about\ngenerics.")
	// Each summary says when it was remembered, in the reader's zone.
	insertSummary(t, env.st, 42, "2025-03-10T00:00:00Z", []string{"go"}, "Likes channels.")
	exec(t, env.st, `UPDATE lsm_storage SET created_at = '2025-03-12T09:30:00Z'`)
	list := env.ask(t, ann, "/memory")
	require.Equal(t, "What I remember about you, newest first (1–3 of 3):\n\n"+
		"1. 12 Mar 2025, 09:30 (UTC) · go\nLikes channels.\n\n2. 12 Mar 2025, 09:30 (UTC)\nAsked about\ngenerics.\n\n"+
		"3. 12 Mar 2025, 09:30 (UTC) · go, career\nWants to move from <PHP> & Perl to Go.\n\n"+
		"Delete or correct a memory with the buttons of its number. You can also write “forget what I told you about …”; /forget deletes everything.", list.Text)
	// In Russian, on Moscow time until another zone is chosen.
	require.NoError(t, env.st.Users().SetLanguage(context.Background(), 42, "ru"))
	list = env.ask(t, ann, "/memory")
	require.Contains(t, list.Text, "1. 12 мар. 2025, 12:30 (Москва) · go\nLikes channels.", list.Text)
	require.NoError(t, env.st.Users().SetLanguage(context.Background(), 42, "en"))
	exec(t, env.st, `DELETE FROM lsm_storage WHERE summary = 'Likes channels.'`)
	require.Equal(t, "I remember nothing about you yet.", env.ask(t, bob, "/memory").Text, "each user sees their own")

	team := env.srv.Group(-100, "Team")
	sent := ann.SendText(team.ID, "/memory")
	require.Equal(t, "I answer /memory only in our private chat, so that nothing personal shows up here. Tap below to continue there.",
		env.srv.WaitMessageAfter(t, team.ID, sent.MessageID, nil).Text)

	// The confirmation names what Ann has: memory, nothing of the job
	// search, the groups or a master's.
	ask := env.ask(t, ann, "/forget")
	require.Equal(t, "Forget you? I will delete what I keep that is yours alone:\n"+
		"• your messages to me, my answers and everything I remember about you;\n"+
		"• your language and settings, and my messages to you.\n"+
		"This cannot be undone.", ask.Text)
	buttons := ask.ReplyMarkup.Buttons()
	require.Len(t, buttons, 2)
	created := queryOne[time.Time](t, env.st, `SELECT created_at FROM users WHERE id = 42`)
	yes, err := bot.Encode(bot.Action{Name: "mf", IDs: 2}, 42, created.UnixMicro())
	require.NoError(t, err)
	no, err := bot.Encode(bot.Action{Name: "mc", IDs: 2}, 42, created.UnixMicro())
	require.NoError(t, err)
	require.Equal(t, "Forget everything", buttons[0].Text)
	require.Equal(t, yes, buttons[0].CallbackData)
	require.Equal(t, "Cancel", buttons[1].Text)
	require.Equal(t, no, buttons[1].CallbackData)

	remembered := func() int {
		return count(t, env.st, `SELECT (SELECT count(*) FROM pipeline_runs WHERE user_id = 42)
 + (SELECT count(*) FROM raw_logs WHERE user_id = 42) + (SELECT count(*) FROM lsm_storage WHERE user_id = 42)`)
	}
	require.Equal(t, 4, remembered())

	// Bob's client forges Ann's id on his own confirmation.
	bobAsk := env.ask(t, bob, "/forget")
	for _, forged := range []string{yes, no} {
		a := pressRaw(t, env.srv, bob, bobAsk, forged)
		requireAlert(t, a, "This button is not for you.")
	}
	require.Equal(t, 4, remembered())
	bobNow, _ := env.srv.MessageByID(bob.ID(), bobAsk.MessageID)
	require.Empty(t, bobNow.Edits)

	press(t, env.srv, ann, ask, no)
	cancelled, _ := env.srv.MessageByID(42, ask.MessageID)
	require.Equal(t, "Nothing was deleted.", cancelled.Text)
	require.Empty(t, cancelled.ReplyMarkup.Buttons())
	require.Equal(t, 4, remembered())

	ask = env.ask(t, ann, "/forget")
	press(t, env.srv, ann, ask, yes)
	done, _ := env.srv.MessageByID(42, ask.MessageID)
	require.True(t, strings.HasPrefix(done.Text, "Done, I forgot you. Deleted: conversations: 1, messages and answers: 1, memory versions: 2, my messages to you: "), done.Text)
	require.NotContains(t, done.Text, "master record", "Ann was no master")
	require.Empty(t, done.ReplyMarkup.Buttons())
	require.Zero(t, remembered())
	require.Equal(t, "I remember nothing about you yet.", env.ask(t, ann, "/memory").Text)
	_, ok := env.srv.MessageByID(42, q.MessageID)
	require.True(t, ok, "the chat itself is the user's; only what the bot stored is deleted")

	// A stale press of either button changes nothing: the message keeps
	// the counts of the real forgetting.
	for _, stale := range []string{yes, no} {
		a := pressRaw(t, env.srv, ann, ask, stale)
		require.Equal(t, "Already done: I forgot you. The message shows what was deleted.", a.Text)
	}
	again, _ := env.srv.MessageByID(42, ask.MessageID)
	require.Equal(t, done.Text, again.Text)
	require.Equal(t, done.Edits, again.Edits)
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
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[promptRow])
	require.NoError(t, err)
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

	require.Contains(t, ask("/prompt").Text, "Roles: analyzer, assembler, mentor, archivist.")
	for _, in := range []string{"/prompt nobody", "/prompt nobody new text"} {
		require.Equal(t, "nobody is not a role of the memory chat. Roles: analyzer, assembler, mentor, archivist; "+
			"e.g. /prompt analyzer shows its prompt.", ask(in).Text, in)
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
	_, err := env.svc.SetPrompt(context.Background(), "archivist", strings.Repeat("<tag> & line\n", 600), domain.MessageRef{})
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
	require.True(t, strings.HasPrefix(msgs[0].Text, "archivist, version 3, updated "), "version 2 is the one that supersedes")
	for _, m := range msgs {
		require.LessOrEqual(t, len([]rune(m.Text)), bot.MaxMessageLen)
		last := m.Entities[len(m.Entities)-1]
		require.Equal(t, "pre", last.Type)
		require.True(t, strings.HasPrefix(utf16Slice(m.Text, last.Offset, last.Length), "<tag> & line"))
	}
}

// A summary's tags render inside one <i>. With 5000 characters of them
// the list once took three messages, its cut falling inside the element;
// the page is edited in place by its buttons, so the tags are cut to a
// budget instead: one message, the italics closed after the ellipsis.
func TestMemoryListWithLongItalicIsOneMessage(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann := env.srv.User(42, "Ann", "en")
	var tags []string
	for i := 0; len(strings.Join(tags, ", ")) < 5000; i++ {
		tags = append(tags, fmt.Sprintf("r&d-%03d", i)) // escaped, "&" takes five characters of HTML
	}
	ann.SendText(ann.ID(), "remember me") // registers Ann; only "typing" is shown
	env.srv.WaitChatAction(t, 42, "typing")
	insertSummary(t, env.st, 42, "2025-03-03T00:00:00Z", tags, "Wants <b>all</b> of it.")

	const footer = "Delete or correct a memory with the buttons of its number. You can also write “forget what I told you about …”; /forget deletes everything."
	page := env.ask(t, ann, "/memory")
	require.Equal(t, "HTML", page.ParseMode)
	require.True(t, strings.HasPrefix(page.Text, "What I remember about you, newest first (1–1 of 1):\n\n1. "), page.Text)
	require.True(t, strings.HasSuffix(page.Text, "\nWants <b>all</b> of it.\n\n"+footer), page.Text)
	require.Len(t, page.ReplyMarkup.Buttons(), 2, "Delete and Correct")
	var italics []string
	for _, e := range page.Entities {
		if e.Type == "italic" {
			italics = append(italics, utf16Slice(page.Text, e.Offset, e.Length))
		}
	}
	require.Len(t, italics, 1, page.Text)
	require.True(t, strings.HasPrefix(italics[0], "r&d-000, r&d-001, "), italics[0])
	require.True(t, strings.HasSuffix(italics[0], "…"), italics[0])
	require.Less(t, len([]rune(italics[0])), 200)
}
