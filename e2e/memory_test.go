package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
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
	env := e2e.New(t)
	scriptMemory(env)
	env.Start(nil)
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
// replica's reaper returns the run once the lease runs out and finishes it.
func TestMemoryChatKilledReplicaIsReaped(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	responder := scriptMemory(env)
	responder.FaultNext(1, llmtest.Hang())
	over := map[string]string{"MEMORY_LEASE": "3s", "MEMORY_REAPER_INTERVAL": "1s", "LLM_TIMEOUT": "1m"}
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
	env.TG.SetDraftsUnsupported(draftsRefused)
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
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Text
	}
	return out
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
	var out []string
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}
