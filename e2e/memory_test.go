package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/internal/testkit"
	"switchboard/llm/llmtest"
)

// scriptMemory answers the four memory-chat roles (matched by the seeded
// prompts): the responder echoes the message, the archivist summarises it.
func scriptMemory(env *e2e.Env) (responder *llmtest.Rule) {
	env.LLM.On(llmtest.SystemContains("Decide whether answering needs that memory")).Named("analyzer").
		ReplyJSON(map[string]any{"needs_context": true, "context_type": "facts", "time_scope": "recent",
			"search_keywords": []string{"marathon"}, "context_found": true})
	env.LLM.On(llmtest.SystemContains("You prepare the context")).Named("assembler").Reply("Notes for the mentor.")
	responder = env.LLM.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").
		ReplyFunc(func(r llmtest.Request) string {
			lines := strings.Split(strings.TrimSpace(r.Prompt), "\n")
			return "Mentor says: " + lines[len(lines)-1]
		})
	env.LLM.On(llmtest.SystemContains("You summarise one exchange")).Named("archivist").
		ReplyFunc(func(r llmtest.Request) string {
			_, rest, _ := strings.Cut(r.Prompt, "## The user wrote\n")
			q, _, _ := strings.Cut(rest, "\n")
			return fmt.Sprintf(`{"summary": "The user said: %s", "tags": ["sport"]}`, q)
		})
	return responder
}

// A user writes twice: each message is answered as a reply, and the second
// prompt the final responder receives carries the summary of the first
// exchange.
func TestMemoryChatRemembersTheFirstExchange(t *testing.T) {
	t.Parallel()
	env, _ := memoryEnv(t)
	ann := env.TG.User(701, "Ann", "en")

	first := ann.SendText(ann.ID(), "I am training for a marathon in <April> & need a plan")
	a1 := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == first.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	require.Contains(t, a1.Text, "Mentor says: I am training for a marathon in <April> & need a plan", "literal, escaped on the way")

	second := ann.SendText(ann.ID(), "What should I eat before the race?")
	// If the first exchange is still being archived, a "queued" note comes
	// first; the answer follows once it is.
	a2 := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == second.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	require.Contains(t, a2.Text, "What should I eat before the race?")

	prompts := env.LLM.RequestsFor("responder")
	require.Len(t, prompts, 2)
	require.Contains(t, prompts[1].Prompt, "The user said: I am training for a marathon in <April> & need a plan")
	require.NotContains(t, prompts[0].Prompt, "The user said:", "nothing was remembered before the first exchange")

	mem := ask(t, env, ann, ann.ID(), "/memory")
	require.Contains(t, mem.Text, "The user said: I am training for a marathon")
}

// Every model of the memory chat reads times on its user's clock, the zone
// named: Ann chose Tbilisi, Иван chose none and reads his language's,
// Moscow's. A stage given UTC would take "yesterday evening" for another
// evening than theirs.
func TestMemoryPromptsAreOnTheUsersClock(t *testing.T) {
	t.Parallel()
	env, _ := memoryEnv(t)
	ann := env.TG.User(711, "Ann", "en")
	ivan := env.TG.User(712, "Иван", "ru")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/timezone Asia/Tbilisi").Text, "Time zone set")
	for who, zone := range map[*tgfake.Person]string{ann: "(+04:00, Asia/Tbilisi)", ivan: "(+03:00, Europe/Moscow)"} {
		text := fmt.Sprintf("%d: what did I say yesterday evening?", who.ID())
		q := who.SendText(who.ID(), text)
		env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
			return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
		})
		for _, rule := range []string{"analyzer", "assembler", "responder", "archivist"} {
			var prompt string
			require.Eventually(t, func() bool {
				for _, r := range env.LLM.RequestsFor(rule) {
					if strings.Contains(r.Prompt, text) {
						prompt = r.Prompt
						return true
					}
				}
				return false
			}, 10*time.Second, 10*time.Millisecond, "%s prompt of %q", rule, text)
			require.Regexp(t, `## When\nThe user wrote at \d{4}-\d\d-\d\d \d\d:\d\d \w{3} `+regexp.QuoteMeta(zone)+`, their local time`, prompt, rule)
		}
	}
}

// Invalid JSON from the analyzer twice fails the run, and the user is told
// in their language that they may resend.
func TestMemoryChatFailureIsReported(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.LLM.On(llmtest.SystemContains("Decide whether answering needs that memory")).Named("analyzer").Reply("not json at all")
	scriptMemory(env)
	env.Start(nil)
	ivan := env.TG.User(702, "Иван", "ru")
	msg := ivan.SendText(ivan.ID(), "Привет!")
	reply := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == msg.MessageID })
	require.NotEmpty(t, reply.Text)
	require.NotContains(t, reply.Text, "Mentor says")
	require.Equal(t, 2, env.LLM.Calls("analyzer"), "one retry")
	require.Zero(t, env.LLM.Calls("responder"))
	pool := db(t, env)
	var status, errMsg string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status, error_message FROM pipeline_runs`).Scan(&status, &errMsg))
	require.Equal(t, "FAILED", status)
	require.Contains(t, errMsg, "analyzer")
}

// A replica killed with kill -9 while its responder call hangs: another
// replica sees its liveness lock gone, ends the stage's lease and wakes its
// reaper, which returns the run, and the run is finished. MEMORY_LEASE and
// the reaper's interval are ten minutes here, past the wait's bound: only
// the dead replica's lock can have told.
func TestMemoryChatKilledReplicaIsReaped(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	responder := scriptMemory(env)
	responder.FaultNext(1, llmtest.Hang())
	over := map[string]string{"MEMORY_LEASE": "10m", "MEMORY_REAPER_INTERVAL": "10m", "LLM_TIMEOUT": "1m"}
	first := env.Start(over)
	ann := env.TG.User(703, "Ann", "en")
	msg := ann.SendText(ann.ID(), "Finish me, whoever you are")
	eventually(t, 30*time.Second, func() bool { return env.LLM.Calls("responder") == 1 })
	first.Kill()

	env.Start(over)
	reply := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == msg.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	require.Contains(t, reply.Text, "Mentor says: Finish me, whoever you are")
	pool := db(t, env)
	var attempts int
	var archived bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT attempts, archived_at IS NOT NULL FROM pipeline_runs`).Scan(&attempts, &archived))
	require.Equal(t, 1, attempts, "returned by the reaper once")
	eventually(t, 10*time.Second, func() bool {
		_ = pool.QueryRow(context.Background(), `SELECT archived_at IS NOT NULL FROM pipeline_runs`).Scan(&archived)
		return archived
	})
	require.Equal(t, 2, env.LLM.Calls("responder"))
}

// A real model answers in Markdown: the user reads it formatted (bold,
// bullets, a heading, code, a link) as valid Telegram HTML, never the raw
// asterisks, and the <script> and & the model wrote arrive as text.
func TestMemoryChatAnswerRendersMarkdown(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	responder := scriptMemory(env)
	responder.Reply("## Plan\n\n**Got it.** You wrote about the *race*.\n\n" +
		"- I will keep this in mind.\n- Read [the guide](https://example.com/run?a=1&b=2).\n\n" +
		"```go\nfmt.Println(a < b)\n```\n\nTom & Jerry say <script>alert(1)</script> `x := 1`")
	env.Start(nil)
	ann := env.TG.User(704, "Ann", "en")
	msg := ann.SendText(ann.ID(), "I run a marathon in April")
	reply := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == msg.MessageID && strings.Contains(m.Text, "Got it.")
	})
	require.Equal(t, "HTML", reply.ParseMode)
	require.Equal(t, "Plan\n\nGot it. You wrote about the race.\n\n"+
		"• I will keep this in mind.\n• Read the guide.\n\n"+
		"fmt.Println(a < b)\n\nTom & Jerry say <script>alert(1)</script> x := 1", reply.Text)
	var got []string
	for _, e := range reply.Entities {
		got = append(got, e.Type+" "+utf16Slice(reply.Text, e.Offset, e.Length)+" "+e.URL+e.Language)
	}
	require.ElementsMatch(t, []string{
		"bold Plan ", // the heading: a bold line
		"bold Got it. ",
		"italic race ",
		"text_link the guide https://example.com/run?a=1&b=2",
		"pre fmt.Println(a < b) go",
		"code x := 1 ",
	}, got)
}

// utf16Slice is the text at a Telegram entity's offset and length.
func utf16Slice(s string, off, n int) string {
	u := utf16.Encode([]rune(s))
	return string(utf16.Decode(u[off : off+n]))
}

// streamedAnswer is a Markdown answer the scripted responder writes a word
// every 100 ms: about three seconds, long enough to be shown as it grows
// at the default MEMORY_STREAM_EVERY of one second. streamedText is how
// the user reads it.
const streamedAnswer = "Lviv is **lovely** in spring. Walk the old town early, before the tour groups, " +
	"then take the tram to Stryiskyi park and finish with coffee on Rynok square."

var streamedText = strings.ReplaceAll(streamedAnswer, "**", "")

// streamingChat is a bot whose responder writes streamedAnswer slowly, on
// a Bot API server with message drafts or (draftsRefused) without, and a
// user of it.
func streamingChat(t *testing.T, id int64, name, lang string, draftsRefused bool) (*e2e.Env, *tgfake.Person) {
	t.Helper()
	env := e2e.New(t)
	env.LLM.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").
		Reply(streamedAnswer).ChunkDelay(100 * time.Millisecond)
	scriptMemory(env)
	env.TG.SetUnsupported(draftsRefused, tgfake.FeatureDrafts)
	env.Start(nil)
	return env, env.TG.User(id, name, lang)
}

// streamedAnswerTo waits for the whole answer to q and checks that every
// earlier showing (a draft, or a version of the placeholder) was the answer
// so far, saying more is coming.
func streamedAnswerTo(t *testing.T, env *e2e.Env, who *tgfake.Person, q tgfake.Message, shown []string) tgfake.BotMessage {
	t.Helper()
	answer := env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && m.Text == streamedText
	})
	assert.Contains(t, entityTypes(answer.Entities), "bold", "rendered from the model's Markdown")
	for i, s := range shown {
		text, more := strings.CutSuffix(s, " …")
		assert.True(t, more && strings.HasPrefix(streamedText, text), "showing %d is the answer so far: %q", i, s)
	}
	return answer
}

func draftTexts(ds []tgfake.Draft) []string {
	return testkit.Map(ds, func(d tgfake.Draft) string { return d.Text })
}

// The answer grows in the chat as message drafts while the model writes,
// then arrives once as a message, formatted from the model's Markdown.
func TestMemoryAnswerStreamsAsDraftsThenIsSentOnce(t *testing.T) {
	t.Parallel()
	env, ann := streamingChat(t, 711, "Ann", "en", false)
	q := ann.SendText(ann.ID(), "What should I see in Lviv?")
	env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q.MessageID })

	drafts := env.TG.Drafts(ann.ID())
	require.GreaterOrEqual(t, len(drafts), 2, "a three-second answer shown every second: %+v", drafts)
	answer := streamedAnswerTo(t, env, ann, q, draftTexts(drafts))
	assert.Empty(t, answer.Edits, "sent once, never edited")
	assert.Len(t, env.TG.Messages(ann.ID()), 1, "one message from the bot")
	for i, d := range drafts[1:] {
		assert.Equal(t, drafts[0].DraftID, d.DraftID, "one draft, animated")
		assert.Greater(t, len(d.Text), len(drafts[i].Text), "drafts grow")
		assert.GreaterOrEqual(t, d.Time.Sub(drafts[i].Time), 900*time.Millisecond, "within the chat's pace")
	}
	_, shown := env.TG.ShownDraft(ann.ID())
	assert.False(t, shown, "the answer took the draft's place")
	assert.Zero(t, env.TG.RateLimitedIn(ann.ID()), "drafts and answer within Telegram's limits")
}

// A Bot API server without sendMessageDraft: the answer grows in one
// placeholder message, edited at most once a second, which becomes the
// answer.
func TestMemoryAnswerStreamsIntoAnEditedMessageWhereDraftsAreRefused(t *testing.T) {
	t.Parallel()
	env, ivan := streamingChat(t, 712, "Иван", "ru", true)
	q := ivan.SendText(ivan.ID(), "Что посмотреть во Львове?")
	answer := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && m.Text == streamedText
	})
	require.NotEmpty(t, answer.Edits, "the placeholder showed the answer as it grew")
	var versions []string
	for _, e := range answer.Edits {
		versions = append(versions, e.Text)
	}
	streamedAnswerTo(t, env, ivan, q, versions)
	assert.Len(t, env.TG.Messages(ivan.ID()), 1, "one message: the placeholder became the answer")
	assert.Empty(t, env.TG.Drafts(ivan.ID()))
	assert.Zero(t, env.TG.RateLimitedIn(ivan.ID()), "edits within the chat's pace")
}

// A second message while the first answer streams waits its turn, as
// before streaming: the first answer is sent whole before the second one's
// drafts begin, each answer replies to its own question, and every draft is
// its own run's.
func TestMemoryMessageWhileAnAnswerStreamsKeepsItsTurn(t *testing.T) {
	t.Parallel()
	env, ann := streamingChat(t, 713, "Ann", "en", false)
	q1 := ann.SendText(ann.ID(), "What should I see in Lviv?")
	eventually(t, 30*time.Second, func() bool { return len(env.TG.Drafts(ann.ID())) > 0 })
	q2 := ann.SendText(ann.ID(), "And where should I eat?")

	var first, second []tgfake.Draft
	a2 := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q2.MessageID && m.Text == streamedText })
	for _, d := range env.TG.Drafts(ann.ID()) {
		if d.DraftID == env.TG.Drafts(ann.ID())[0].DraftID {
			first = append(first, d)
		} else {
			second = append(second, d)
		}
	}
	a1 := streamedAnswerTo(t, env, ann, q1, draftTexts(first))
	streamedAnswerTo(t, env, ann, q2, draftTexts(second))
	assert.Less(t, a1.MessageID, a2.MessageID, "answered in the order asked")
	require.NotEmpty(t, second, "the second answer streamed too, as a draft of its own")
	assert.True(t, first[len(first)-1].Time.Before(second[0].Time), "one answer streams at a time")
}

func entityTypes(es []tgfake.MessageEntity) []string {
	return testkit.Map(es, func(e tgfake.MessageEntity) string { return e.Type })
}

// Memories the user sees, corrects and deletes.

// noID is an id no row has: holding then looks for the marker alone.
const noID = 987_654_321_987

var rememberedID = regexp.MustCompile(`(?m)^- (\d+): (.*)$`)

// scriptContradiction makes the archivist supersede, when the user says
// they moved, the remembered memories that mention Kyiv: it reads their
// ids from the list it is shown, as a model would.
func scriptContradiction(env *e2e.Env) {
	env.LLM.On(llmtest.SystemContains("You summarise one exchange"), llmtest.PromptContains("I moved")).Named("contradiction").
		ReplyFunc(func(r llmtest.Request) string {
			_, list, _ := strings.Cut(r.Prompt, "## Remembered about the user now")
			var ids []string
			for _, m := range rememberedID.FindAllStringSubmatch(list, -1) {
				if strings.Contains(m[2], "Kyiv") {
					ids = append(ids, m[1])
				}
			}
			return fmt.Sprintf(`{"summary": "The user now lives in Lviv", "tags": ["home"], "supersedes": [%s]}`, strings.Join(ids, ", "))
		})
}

// chatWith has who write text to the bot and waits for the answer.
func chatWith(t *testing.T, env *e2e.Env, who *tgfake.Person, text string) tgfake.BotMessage {
	t.Helper()
	q := who.SendText(who.ID(), text)
	return env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
}

func waitArchived(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE archived_at IS NOT NULL`) == n
	})
}

// edited waits until the message's text satisfies ok and returns it.
func edited(t *testing.T, env *e2e.Env, chat int64, id int, ok func(string) bool) tgfake.BotMessage {
	t.Helper()
	var m tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		m, _ = env.TG.MessageByID(chat, id)
		return ok(m.Text)
	})
	return m
}

// A memory deleted with its button is gone from every table, together
// with the exchange it was made from and the copies a later run's context
// made of it; the other memory stays. Bob cannot press Ann's buttons; a
// second press finds the memory gone.
func TestMemoryDeletedByButtonLeavesNoCopy(t *testing.T) {
	t.Parallel()
	const marker = "walrus-quartz-7400"
	env, pool := memoryEnv(t)
	ann := env.TG.User(7_400_001, "Ann", "en")
	bob := env.TG.User(7_400_002, "Bob", "en")

	chatWith(t, env, ann, "I live in Kyiv by the river "+marker)
	waitArchived(t, pool, 1)
	chatWith(t, env, ann, "I train for a marathon")
	waitArchived(t, pool, 2)
	require.Positive(t, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE strpos(draft_context, $1) > 0`, marker),
		"the second run's context quoted the first exchange")

	page := ask(t, env, ann, ann.ID(), "/memory")
	t.Logf("page: %q buttons %v", page.Text, page.ReplyMarkup.Buttons())
	require.Contains(t, page.Text, "1. ")
	require.Contains(t, page.Text, "2. ")
	require.Contains(t, page.Text, "The user said: I live in Kyiv by the river "+marker)

	// Bob forges Ann's delete on his own /memory message.
	var data string
	for _, b := range page.ReplyMarkup.Buttons() {
		if b.Text == "🗑 Delete 2" {
			data = b.CallbackData
		}
	}
	require.NotEmpty(t, data)
	bobPage := ask(t, env, bob, bob.ID(), "/memory")
	require.Equal(t, "I remember nothing about you yet.", bobPage.Text)
	forged := bob.PressRaw(bobPage, data)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)

	q, err := ann.PressButton(page, "🗑 Delete 2")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	confirm := edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "Delete this memory?") })
	t.Logf("confirmation: %q", confirm.Text)
	require.Contains(t, confirm.Text, "The user said: I live in Kyiv by the river "+marker)
	require.Contains(t, confirm.Text, "the conversations it was made from (your message and my answer)")
	q, err = ann.PressButton(confirm, "Delete")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert)
	after := edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "Deleted:") })
	t.Logf("after: %q", after.Text)
	require.True(t, strings.HasPrefix(after.Text, "Deleted: memory versions: 1, conversations: 1.\n\nWhat I remember about you, newest first (1–1 of 1):"), after.Text)
	require.Contains(t, after.Text, "The user said: I train for a marathon")
	require.NotContains(t, after.Text, marker)

	// The same press again: the memory is gone.
	again := ann.PressRaw(confirm, confirm.ReplyMarkup.Buttons()[0].CallbackData)
	a := env.TG.WaitCallbackAnswer(t, again.ID)
	require.True(t, a.ShowAlert)
	require.Equal(t, "This memory is no longer here: it was deleted or replaced. Send /memory for the current list.", a.Text)

	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, noID), "no table holds the deleted memory, its exchange or a copy")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`))
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`), "the marathon exchange stays")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM raw_logs`))
}

// "Forget what I told you about X", in Russian: the message is no chat
// message (no run, nothing logged); the bot lists what matches and
// deletes it once confirmed, leaving no copy anywhere. A topic it knows
// nothing of is said so; an ordinary sentence with "забудь" is chatted with.
func TestMemoryForgottenByPlainWords(t *testing.T) {
	t.Parallel()
	const marker = "зебра-кварц-7400"
	env, pool := memoryEnv(t)
	ivan := env.TG.User(7_400_011, "Иван", "ru")

	chatWith(t, env, ivan, "Я живу в Киеве, "+marker)
	waitArchived(t, pool, 1)
	chatWith(t, env, ivan, "Я пью чай по утрам")
	waitArchived(t, pool, 2)

	none := ask(t, env, ivan, ivan.ID(), "Забудь, что я говорил про Марс")
	t.Logf("none: %q", none.Text)
	require.Equal(t, "В том, что я о вас помню, ничего такого нет — забывать нечего.", none.Text)
	found := ask(t, env, ivan, ivan.ID(), "забудь, пожалуйста, что я говорил про Киев")
	t.Logf("found: %q buttons %v", found.Text, found.ReplyMarkup.Buttons())
	require.True(t, strings.HasPrefix(found.Text, "Нашёл подходящие записи: 1."), found.Text)
	require.Contains(t, found.Text, "The user said: Я живу в Киеве, "+marker)
	require.Contains(t, found.Text, "разговорами, из которых составлена (ваши сообщения и мои ответы)")
	require.NotContains(t, found.Text, "Киев\n", "the topic itself is not repeated")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`), "neither request became a run")
	require.Equal(t, 4, scalar[int](t, pool, `SELECT count(*) FROM raw_logs`))

	q, err := ivan.PressButton(found, "Удалить (1)")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert)
	done := edited(t, env, ivan.ID(), found.MessageID, func(s string) bool { return strings.HasPrefix(s, "Забыто.") })
	t.Logf("done: %q", done.Text)
	require.Equal(t, "Забыто. Удалено: версий записей — 1, разговоров — 1.", done.Text)
	require.Empty(t, done.ReplyMarkup.Buttons())

	// "Забудь" in an ordinary sentence goes to the chat.
	chatWith(t, env, ivan, "Не забудь напомнить мне про Киев")
	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, noID), "no table holds the forgotten memory, its exchange or a copy")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`))
}

// A contradiction: "I moved from Kyiv to Lviv" makes the archivist
// supersede the memory about Kyiv, which stays as history; the next
// answer's prompt has Lviv as what is remembered and no longer Kyiv.
// /memory shows the history with when each version was true, and a
// correction (the user's next text after Correct) supersedes again
// without becoming a chat message.
func TestContradictionSupersedesAndCorrection(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	scriptContradiction(env)
	scriptMemory(env)
	env.Start(nil)
	pool := db(t, env)
	ann := env.TG.User(7_400_021, "Ann", "en")

	chatWith(t, env, ann, "I live in Kyiv")
	waitArchived(t, pool, 1)
	chatWith(t, env, ann, "I moved from Kyiv to Lviv")
	waitArchived(t, pool, 2)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage WHERE invalid_at IS NOT NULL
AND summary = 'The user said: I live in Kyiv' AND superseded_by = (SELECT id FROM lsm_storage WHERE summary = 'The user now lives in Lviv')`))
	chatWith(t, env, ann, "Where should I go running?")
	prompts := env.LLM.RequestsFor("responder")
	last := prompts[len(prompts)-1].Prompt
	require.Contains(t, last, "The user now lives in Lviv")
	require.NotContains(t, last, "The user said: I live in Kyiv", "the superseded memory is not current")
	waitArchived(t, pool, 3)

	page := ask(t, env, ann, ann.ID(), "/memory")
	t.Logf("page: %q buttons %v", page.Text, page.ReplyMarkup.Buttons())
	require.NotContains(t, page.Text, "The user said: I live in Kyiv")
	q, err := ann.PressButton(page, "🕘 History 2")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	history := edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "History of this memory") })
	t.Logf("history: %q", history.Text)
	require.Regexp(t, `Now, since \d+ \w+, \d\d:\d\d \(UTC\):\nThe user now lives in Lviv\n\nFrom \d+ \w+, \d\d:\d\d \(UTC\) until \d+ \w+, \d\d:\d\d \(UTC\):\nThe user said: I live in Kyiv`, history.Text)
	ann.PressAndWait(t, history, "‹ Back")
	page = edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "What I remember") })

	q, err = ann.PressButton(page, "✏️ Correct 2")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	askFix := env.TG.WaitMessageAfter(t, ann.ID(), page.MessageID, func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, "Send me the corrected text")
	})
	t.Logf("ask: %q", askFix.Text)
	fixed := ask(t, env, ann, ann.ID(), "Ann lives in Lviv, near Rynok Square")
	t.Logf("fixed: %q", fixed.Text)
	require.Equal(t, "Corrected. I remember now:\n\nAnn lives in Lviv, near Rynok Square\n\nThe old text is in the memory's history (/memory).", fixed.Text)
	require.Equal(t, 3, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`), "the correction is no chat message")
	require.Equal(t, []string{"Ann lives in Lviv, near Rynok Square", "The user said: Where should I go running?"},
		strings.Split(scalar[string](t, pool, `SELECT string_agg(summary, '|' ORDER BY summary) FROM lsm_storage WHERE invalid_at IS NULL`), "|"))
	require.Equal(t, 4, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`), "Kyiv and the first Lviv kept as history")
	// Its Cancel, pressed late, changes nothing.
	late := ann.PressRaw(askFix, askFix.ReplyMarkup.Buttons()[0].CallbackData)
	require.Equal(t, "I am no longer waiting for this correction: it was made, cancelled or timed out.", env.TG.WaitCallbackAnswer(t, late.ID).Text)
}

// Export and incognito.

// exportedFile is the JSON export as a reader's program decodes it.
type exportedFile struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	ExportedAt    string `json:"exported_at"`
	User          struct {
		ID       int64  `json:"id"`
		Language string `json:"language"`
		TimeZone string `json:"time_zone"`
	} `json:"user"`
	Memories []struct {
		ID           int64    `json:"id"`
		Summary      string   `json:"summary"`
		Tags         []string `json:"tags"`
		RememberedAt string   `json:"remembered_at"`
		State        string   `json:"state"`
		SupersededAt *string  `json:"superseded_at"`
		SourceRunIDs []int64  `json:"source_run_ids"`
	} `json:"memories"`
	Conversation []struct {
		Role  string `json:"role"`
		Text  string `json:"text"`
		At    string `json:"at"`
		RunID int64  `json:"run_id"`
	} `json:"conversation"`
	ConversationOmitted int `json:"conversation_omitted"`
}

// exportFiles waits for the two documents an /export sends after the
// command's message, Markdown first.
func exportFiles(t *testing.T, env *e2e.Env, who *tgfake.Person, after int) (md, js tgfake.BotMessage) {
	t.Helper()
	docs := func() []tgfake.BotMessage {
		var out []tgfake.BotMessage
		for _, m := range env.TG.Messages(who.ID()) {
			if m.MessageID > after && m.File != nil && m.File.Kind == "document" {
				out = append(out, m)
			}
		}
		return out
	}
	eventually(t, 30*time.Second, func() bool { return len(docs()) >= 2 })
	got := docs()
	require.Len(t, got, 2)
	return got[0], got[1]
}

// memoryEnv is a started binary whose memory chat answers with the
// scripted model (scriptMemory), and a pool on its database.
func memoryEnv(t *testing.T) (*e2e.Env, *pgxpool.Pool) {
	t.Helper()
	env := e2e.New(t)
	scriptMemory(env)
	env.Start(nil)
	return env, db(t, env)
}

// chatRemembered writes text to the memory chat as who and waits until it is
// answered and the exchange summarised.
func chatRemembered(t *testing.T, env *e2e.Env, pool *pgxpool.Pool, who *tgfake.Person, text string) {
	t.Helper()
	const sums = `SELECT count(*) FROM lsm_storage WHERE user_id = $1`
	before := scalar[int](t, pool, sums, who.ID())
	q := who.SendText(who.ID(), text)
	env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	eventually(t, 20*time.Second, func() bool { return scalar[int](t, pool, sums, who.ID()) == before+1 })
}

// The model failing, then down: the message whose call fails is answered
// with the failure notice, but one sent while the breaker is open waits for
// the model instead of failing too, its sender told so once in their
// language, and is answered once the model is back, as the README
// promises.
func TestMemoryChatWaitsWhileTheModelIsDown(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	analyzer := env.LLM.On(llmtest.SystemContains("Decide whether answering needs that memory")).Named("analyzer-down").
		Fault(llmtest.ServerError())
	scriptMemory(env) // behind the failing analyzer: the rule first added answers
	env.Start(map[string]string{"LLM_BREAKER_FAILURES": "1", "LLM_BREAKER_OPEN_FOR": "10s"})
	pool := db(t, env)
	ann := env.TG.User(7_300_031, "Ann", "en")
	bob := env.TG.User(7_300_032, "Bob", "en")

	first := ann.SendText(ann.ID(), "Does the model answer?")
	env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == first.MessageID && strings.HasPrefix(m.Text, "Sorry, I could not answer")
	})
	// The breaker opened at that failure and holds for 10 s: Bob's run is
	// captured meanwhile and turned away unrun.
	q := bob.SendText(bob.ID(), "Is anyone there?")
	ivan := env.TG.User(7_300_033, "Иван", "ru")
	iq := ivan.SendText(ivan.ID(), "Кто-нибудь здесь?")
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE user_id = ANY ($1)`, []int64{bob.ID(), ivan.ID()}) == 2
	})
	analyzer.Fault(llmtest.Fault{}).ReplyJSON(map[string]any{"needs_context": false, "context_type": "none",
		"time_scope": "all", "search_keywords": []string{}, "context_found": false})
	answer := env.TG.WaitMessage(t, bob.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	require.Equal(t, "Mentor says: Is anyone there?", answer.Text)
	var replies []string
	for _, m := range env.TG.Messages(bob.ID()) {
		t.Logf("to Bob: %s", m.Text)
		require.NotContains(t, m.Text, "Sorry", "Bob's message waited for the model")
		if m.ReplyToID() == q.MessageID {
			replies = append(replies, m.Text)
		}
	}
	require.Equal(t, []string{"⏳ The AI model is not answering right now. I will answer this message as soon as it is back; " +
		"there is no need to send it again.", "Mentor says: Is anyone there?"}, replies, "told once that it waits, then answered")
	env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == iq.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	replies = nil
	for _, m := range env.TG.Messages(ivan.ID()) {
		t.Logf("to Ivan: %s", m.Text)
		replies = append(replies, m.Text)
	}
	require.Equal(t, []string{"⏳ ИИ-модель сейчас не отвечает. Я отвечу на это сообщение, как только она вернётся; " +
		"отправлять его ещё раз не нужно.", "Mentor says: Кто-нибудь здесь?"}, replies, "in his language")
	require.Equal(t, "FAILED", scalar[string](t, pool, `SELECT status FROM pipeline_runs WHERE user_id = $1`, ann.ID()),
		"a call that reached the model and failed still fails its run")
}

// mustRFC3339UTC parses a JSON export's time, which is RFC 3339 in UTC.
func mustRFC3339UTC(t *testing.T, s string) time.Time {
	t.Helper()
	require.True(t, strings.HasSuffix(s, "Z"), "UTC: %s", s)
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// /export sends the user's memories and conversation as a Markdown file to
// read (times in their zone) and a JSON file for programs (RFC 3339 UTC,
// a schema and its version), built when they are sent; the first answers
// the command. Asking again within a minute is refused, with the wait; a
// user with nothing to export is told so, in their language.
func TestExportSendsMemoriesAndConversation(t *testing.T) {
	t.Parallel()
	const annID = 7_300_001
	env, pool := memoryEnv(t)
	ann := env.TG.User(annID, "Ann", "en")
	ivan := env.TG.User(7_300_002, "Иван", "ru")

	empty := ask(t, env, ivan, ivan.ID(), "/export")
	t.Logf("ru, nothing to export: %s", empty.Text)
	require.Equal(t, "Экспортировать пока нечего: я ничего о вас не помню, и переписки у нас ещё не было.", empty.Text)
	require.Nil(t, empty.File)

	require.Contains(t, ask(t, env, ann, ann.ID(), "/timezone Asia/Tokyo").Text, "Time zone set")
	chatRemembered(t, env, pool, ann, "I run a marathon in <April> & swim")

	// Telegram's 429 and a 500 on the way cost a retry each, never a file.
	env.TG.FailNext("sendDocument", 1, 1)
	env.TG.FailNextWith("sendDocument", 1, &tgfake.APIError{Code: 500, Description: "Internal Server Error"})
	cmd := ann.SendText(ann.ID(), "/export")
	md, js := exportFiles(t, env, ann, cmd.MessageID)
	t.Logf("en captions: %q, %q", md.Caption, js.Caption)
	require.Equal(t, "📄 What I remember about you and our conversation, to read.", md.Caption)
	require.Equal(t, "🗂 The same as JSON, for other apps.", js.Caption)
	require.Equal(t, cmd.MessageID, md.ReplyToID(), "the first file answers the command")
	today := time.Now().In(tokyo(t)).Format("2006-01-02")
	require.Equal(t, "memory-export-"+today+".md", md.File.FileName)
	require.Equal(t, "memory-export-"+today+".json", js.File.FileName)
	require.Equal(t, "application/json", js.File.MimeType)

	var f exportedFile
	require.NoError(t, json.Unmarshal(js.File.Data, &f), string(js.File.Data))
	require.Equal(t, bot.ExportSchema, f.Schema)
	require.Equal(t, 1, f.SchemaVersion)
	require.EqualValues(t, annID, f.User.ID)
	require.Equal(t, "en", f.User.Language)
	require.Equal(t, "Asia/Tokyo", f.User.TimeZone)
	exported := mustRFC3339UTC(t, f.ExportedAt)
	require.Len(t, f.Memories, 1)
	require.Equal(t, "The user said: I run a marathon in <April> & swim", f.Memories[0].Summary)
	require.Equal(t, []string{"sport"}, f.Memories[0].Tags)
	require.Equal(t, "current", f.Memories[0].State)
	require.Nil(t, f.Memories[0].SupersededAt)
	remembered := mustRFC3339UTC(t, f.Memories[0].RememberedAt)
	require.False(t, remembered.After(exported))
	require.Len(t, f.Conversation, 2)
	require.Equal(t, "user", f.Conversation[0].Role)
	require.Equal(t, "I run a marathon in <April> & swim", f.Conversation[0].Text)
	require.Equal(t, "assistant", f.Conversation[1].Role)
	require.Equal(t, "Mentor says: I run a marathon in <April> & swim", f.Conversation[1].Text)
	require.Equal(t, f.Conversation[0].RunID, f.Conversation[1].RunID)
	require.Equal(t, []int64{f.Conversation[0].RunID}, f.Memories[0].SourceRunIDs)
	asked := mustRFC3339UTC(t, f.Conversation[0].At)
	require.Zero(t, f.ConversationOmitted)

	text := string(md.File.Data)
	t.Logf("en Markdown:\n%s", text)
	require.True(t, strings.HasPrefix(text, "# What I remember about you and our conversation\n\n"), text)
	require.Contains(t, text, ". Time zone: JST (UTC+09:00).\n")
	require.Contains(t, text, "## Memories: 1\n\n### 1. "+remembered.In(tokyo(t)).Format("2006-01-02 15:04")+" · current\n\nTags: sport\n\n"+
		"> The user said: I run a marathon in \\<April> \\& swim\n")
	require.Contains(t, text, "## Conversation (messages: 2)\n\n**You** · "+asked.In(tokyo(t)).Format("2006-01-02 15:04")+
		"\n\n> I run a marathon in \\<April> \\& swim\n\n**Bot** · ")
	require.NotContains(t, text, "&lt;", "Markdown's own escapes, not HTML entities")

	// The rows named what to send; once sent they hold nothing of Ann's.
	quiet(t, pool)
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE kind = 'memory_export' AND state = 'sent'`))
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE kind = 'memory_export' AND body::text LIKE '%marathon%'`))

	require.Len(t, env.TG.SentFiles(ann.ID()), 2, "each file once")
	var refused int
	for _, c := range env.TG.CallsTo("sendDocument") {
		if c.Err != nil {
			refused++
		}
	}
	require.Equal(t, 2, refused, "the 429 and the 500 were met, and retried")

	again := ask(t, env, ann, ann.ID(), "/export")
	t.Logf("en, too soon: %s", again.Text)
	require.Regexp(t, `^You can ask for an export once a minute\. Try again in \d+\x{a0}s\.$`, again.Text)
	require.Len(t, env.TG.SentFiles(ann.ID()), 2, "nothing more was sent")

	// Ivan, once he has talked, gets his export in Russian.
	chatRemembered(t, env, pool, ivan, "Я учу испанский")
	icmd := ivan.SendText(ivan.ID(), "/export")
	imd, ijs := exportFiles(t, env, ivan, icmd.MessageID)
	t.Logf("ru captions: %q, %q\nru Markdown:\n%s", imd.Caption, ijs.Caption, imd.File.Data)
	require.Equal(t, "📄 Что я о вас помню и наша переписка — для чтения.", imd.Caption)
	require.Contains(t, string(imd.File.Data), "# Что я о вас помню и наша переписка\n")
	require.Contains(t, string(imd.File.Data), "**Вы** · ")
	require.Contains(t, string(imd.File.Data), "> Я учу испанский\n")
}

// nobody is an id no row holds: holding then looks for a text alone.
const nobody = 9_300_999_999

func tokyo(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	return loc
}

// Incognito: /incognito turns it on (durable, per user); an exchange taken
// in meanwhile is answered with the incognito line, summarised by nobody,
// in no table once its answer is delivered, and absent from the next
// runs' prompts and from /export; /incognito off ends it.
func TestIncognitoLeavesNoMemory(t *testing.T) {
	t.Parallel()
	const (
		ivanID = 7_300_011
		secret = "kumquat-7300"
	)
	env, pool := memoryEnv(t)
	ivan := env.TG.User(ivanID, "Иван", "ru")
	ann := env.TG.User(7_300_012, "Ann", "en")

	chatRemembered(t, env, pool, ivan, "Я бегаю марафоны")

	on := ask(t, env, ivan, ivan.ID(), "/incognito")
	t.Logf("ru, on: %s", on.Text)
	require.True(t, strings.HasPrefix(on.Text, "🕶 Режим инкогнито включён. Я отвечаю, но ничего из сказанного не запоминаю"), on.Text)
	require.True(t, scalar[bool](t, pool, `SELECT incognito FROM memory_settings WHERE user_id = $1`, int64(ivanID)))

	q := ivan.SendText(ivan.ID(), "Мой секрет: "+secret)
	answer := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q.MessageID })
	t.Logf("ru, incognito answer: %s", answer.Text)
	require.Equal(t, "Mentor says: Мой секрет: "+secret+"\n\n🕶 Инкогнито: этот обмен сообщениями я не запомню.", answer.Text)
	line := utf16.Encode([]rune("🕶 Инкогнито: этот обмен сообщениями я не запомню."))
	require.Contains(t, answer.Entities, tgfake.MessageEntity{Type: "italic",
		Offset: len(utf16.Encode([]rune(answer.Text))) - len(line), Length: len(line)}, "the line is in italics")

	// Delivered, closed: no table holds the exchange, and nothing was
	// summarised.
	quiet(t, pool)
	eventually(t, 20*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE closed_at IS NULL`) == 0
	})
	require.Empty(t, holding(t, pool, secret, nobody), "the incognito exchange is in no table")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`))
	require.Equal(t, 1, env.LLM.Calls("archivist"), "the incognito exchange was never summarised")

	// Still on (durable): a second exchange is incognito too.
	q2 := ivan.SendText(ivan.ID(), "Ещё один секрет: "+secret)
	a2 := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q2.MessageID })
	require.True(t, strings.HasSuffix(a2.Text, "🕶 Инкогнито: этот обмен сообщениями я не запомню."), a2.Text)

	off := ask(t, env, ivan, ivan.ID(), "/incognito выкл")
	t.Logf("ru, off: %s", off.Text)
	require.Equal(t, "Режим инкогнито выключен. Я снова запоминаю наш разговор; сказанное, пока он был включён, не сохранилось.", off.Text)
	already := ask(t, env, ivan, ivan.ID(), "/incognito off")
	t.Logf("ru, already off: %s", already.Text)
	require.Equal(t, "Режим инкогнито уже выключен. /incognito включит его.", already.Text)

	next := ivan.SendText(ivan.ID(), "Что ты обо мне знаешь?")
	a3 := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == next.MessageID })
	require.NotContains(t, a3.Text, "Инкогнито")
	for _, role := range []string{"analyzer", "assembler", "responder"} {
		reqs := env.LLM.RequestsFor(role)
		last := reqs[len(reqs)-1].Prompt
		require.Contains(t, last, "Что ты обо мне знаешь?", role)
		require.NotContains(t, last, secret, "a later run's context never sees the incognito exchange (%s)", role)
		require.Contains(t, last, "Я бегаю марафоны", "while it sees what was remembered (%s)", role)
	}
	require.NotContains(t, ask(t, env, ivan, ivan.ID(), "/memory").Text, secret)
	ecmd := ivan.SendText(ivan.ID(), "/export")
	_, js := exportFiles(t, env, ivan, ecmd.MessageID)
	require.NotContains(t, string(js.File.Data), secret)
	require.Contains(t, string(js.File.Data), "Я бегаю марафоны")

	// In English: the replies of each state.
	for _, c := range []struct{ cmd, want string }{
		{"/incognito on", "🕶 Incognito is on. I will answer, but remember nothing of what we say: it will not be in /memory or /export, nor shape my later answers. Send /incognito again to turn it off."},
		{"/incognito on", "Incognito is already on. /incognito off turns it off."},
		{"/incognito maybe", "/incognito switches incognito on or off; /incognito on and /incognito off set it."},
		{"/incognito", "Incognito is off. I remember our conversation again; what we said while it was on is gone."},
	} {
		got := ask(t, env, ann, ann.ID(), c.cmd)
		t.Logf("en, %s: %s", c.cmd, got.Text)
		require.Equal(t, c.want, got.Text)
	}
}

// /forget after an /export: the export's rows, its record and incognito go
// with everything else, and no table holds the user's text or id.
func TestForgetAfterExportLeavesNothing(t *testing.T) {
	t.Parallel()
	const (
		annID  = 7_300_021
		marker = "quokka-7300"
	)
	env, pool := memoryEnv(t)
	ann := env.TG.User(annID, "Ann", "en")
	chatRemembered(t, env, pool, ann, "Remember "+marker)
	require.Contains(t, ask(t, env, ann, ann.ID(), "/incognito").Text, "Incognito is on")
	cmd := ann.SendText(ann.ID(), "/export")
	_, js := exportFiles(t, env, ann, cmd.MessageID)
	require.Contains(t, string(js.File.Data), marker)
	quiet(t, pool)
	require.Contains(t, holding(t, pool, marker, annID), "memory_settings")

	confirm := ask(t, env, ann, ann.ID(), "/forget")
	press, err := ann.PressButton(confirm, "Forget everything")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, press.ID).ShowAlert)
	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, annID), "no table holds Ann's text or id")

	// Coming back, she starts afresh: nothing to export.
	again := ask(t, env, ann, ann.ID(), "/export")
	require.Equal(t, "There is nothing to export yet: I have no memories of you and no conversation with you.", again.Text)
}

// Stop: the reader presses the draft's stop button while the model writes.
// The model's call is cancelled (the scripted model sees the connection
// closed long before its answer was done), no draft follows, and the
// answer is what was written by then, marked as stopped, a reply to the
// question; the run is completed and archived, the archivist told it was
// cut short, and nothing is left pending. On a server older than Bot API
// 10.3 there is no stop button.
func TestMemoryAnswerStoppedByItsReader(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	// Twelve seconds of answer: a word every 300 ms.
	long := strings.Repeat("Walk the old town early and take the tram to the park. ", 8)
	env.LLM.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").
		Reply(long).ChunkDelay(300 * time.Millisecond)
	scriptMemory(env)
	env.Start(nil)
	pool := db(t, env)
	ann := env.TG.User(790, "Ann", "en")

	q := ann.SendText(ann.ID(), "What should I do in Lviv?")
	var shown tgfake.Draft
	env.TG.WaitFor(t, 60*time.Second, func() bool {
		d, ok := env.TG.ShownDraft(ann.ID())
		shown = d
		return ok && len(d.Text) > 40
	})
	require.True(t, shown.CanStop, "the draft has a stop button")
	stoppedAt := time.Now()
	_, err := ann.StopDraft(ann.ID())
	require.NoError(t, err)

	answer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.Contains(m.Text, "⏹")
	})
	written, marked := strings.CutSuffix(answer.Text, "\n\n⏹ Stopped: the rest was not written.")
	require.True(t, marked, "marked as stopped: %q", answer.Text)
	require.True(t, strings.HasPrefix(strings.TrimSpace(long), written), "what was written by then: %q", written)
	shownText, _ := strings.CutSuffix(shown.Text, " …")
	require.True(t, strings.HasPrefix(written, shownText), "at least what the reader saw: %q after %q", written, shownText)
	require.Less(t, len(written), len(strings.TrimSpace(long)), "not the whole answer")

	left := env.LLM.Left("responder")
	require.Len(t, left, 1, "the model's call was cancelled: its connection closed mid-answer")
	t.Logf("the model's connection closed %s after the stop", left[0].Sub(stoppedAt).Round(time.Millisecond))
	require.Len(t, env.LLM.RequestsFor("responder"), 1, "asked once, never again")

	drafts := len(env.TG.Drafts(ann.ID()))
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE archived_at IS NOT NULL AND stop_requested_at IS NOT NULL AND status = 'COMPLETED'`) == 1
	})
	// The archive's commit can come before the sender's last delivery: a
	// row still on its way is not one left behind.
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE state = 'pending'`) == 0
	}, func() string { return "nothing left pending" })
	require.Equal(t, drafts, len(env.TG.Drafts(ann.ID())), "no draft after the stop")
	archivist := env.LLM.RequestsFor("archivist")
	require.NotEmpty(t, archivist)
	require.Contains(t, archivist[len(archivist)-1].Prompt, "stopped this answer", "the archivist knows it was cut short")

	// A second stop, or one of an answer already done, changes nothing.
	_, err = ann.StopDraft(ann.ID())
	require.ErrorIs(t, err, tgfake.ErrNoStopButton)
}
