package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
)

// streamedAnswer is a Markdown answer the scripted responder writes a word
// every 100 ms: about three seconds, long enough to be shown as it grows
// at the default MEMORY_STREAM_EVERY of one second.
const streamedAnswer = "Lviv is **lovely** in spring. Walk the old town early, before the tour groups, " +
	"then take the tram to Stryiskyi park and finish with coffee on Rynok square."

// streamingMemory scripts the memory chat with a slowly written answer.
func streamingMemory(env *e2e.Env) {
	env.LLM.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").
		Reply(streamedAnswer).ChunkDelay(100 * time.Millisecond)
	scriptMemory(env)
}

// The answer grows in the chat as message drafts while the model writes,
// then arrives once as a message, formatted from the model's Markdown.
func TestMemoryAnswerStreamsAsDraftsThenIsSentOnce(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	streamingMemory(env)
	env.Start(nil)
	ann := env.TG.User(711, "Ann", "en")

	q := ann.SendText(ann.ID(), "What should I see in Lviv?")
	answer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q.MessageID })

	want := strings.ReplaceAll(streamedAnswer, "**", "")
	assert.Equal(t, want, answer.Text, "the final message is the whole answer")
	assert.Contains(t, entityTypes(answer.Entities), "bold", "rendered from the model's Markdown")
	assert.Empty(t, answer.Edits, "sent once, never edited")
	assert.Len(t, env.TG.Messages(ann.ID()), 1, "one message from the bot")

	drafts := env.TG.Drafts(ann.ID())
	require.GreaterOrEqual(t, len(drafts), 2, "a three-second answer shown every second: %+v", drafts)
	for i, d := range drafts {
		assert.Equal(t, drafts[0].DraftID, d.DraftID, "one draft, animated")
		text := strings.TrimSuffix(d.Text, " …")
		assert.NotEqual(t, d.Text, text, "a draft says more is coming")
		assert.True(t, strings.HasPrefix(want, text), "draft %d is the answer so far: %q", i, d.Text)
		if i > 0 {
			assert.Greater(t, len(d.Text), len(drafts[i-1].Text), "drafts grow")
			assert.GreaterOrEqual(t, d.Time.Sub(drafts[i-1].Time), 900*time.Millisecond, "within the chat's pace")
		}
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
	env := e2e.New(t)
	streamingMemory(env)
	env.TG.SetDraftsUnsupported(true)
	env.Start(nil)
	ivan := env.TG.User(712, "Иван", "ru")

	q := ivan.SendText(ivan.ID(), "Что посмотреть во Львове?")
	want := strings.ReplaceAll(streamedAnswer, "**", "")
	answer := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && m.Text == want
	})
	assert.Contains(t, entityTypes(answer.Entities), "bold")
	require.NotEmpty(t, answer.Edits, "the placeholder showed the answer as it grew")

	for i, e := range answer.Edits {
		text := strings.TrimSuffix(e.Text, " …")
		assert.NotEqual(t, e.Text, text, "version %d says more is coming: %q", i, e.Text)
		assert.True(t, strings.HasPrefix(want, text), "version %d is the answer so far: %q", i, e.Text)
	}
	assert.Len(t, env.TG.Messages(ivan.ID()), 1, "one message: the placeholder became the answer")
	assert.Empty(t, env.TG.Drafts(ivan.ID()))
	assert.Zero(t, env.TG.RateLimitedIn(ivan.ID()), "edits within the chat's pace")
}

func entityTypes(es []tgfake.MessageEntity) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}

// A second message while the first answer streams waits its turn, as
// before streaming: the first answer is sent whole before the second one's
// drafts begin, each answer replies to its own question, and every draft is
// its own run's.
func TestMemoryMessageWhileAnAnswerStreamsKeepsItsTurn(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	streamingMemory(env)
	env.Start(nil)
	ann := env.TG.User(713, "Ann", "en")

	q1 := ann.SendText(ann.ID(), "What should I see in Lviv?")
	eventually(t, 30*time.Second, func() bool { return len(env.TG.Drafts(ann.ID())) > 0 })
	q2 := ann.SendText(ann.ID(), "And where should I eat?")

	want := strings.ReplaceAll(streamedAnswer, "**", "")
	a2 := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q2.MessageID && m.Text == want })
	var a1 tgfake.BotMessage
	for _, m := range env.TG.Messages(ann.ID()) {
		if m.ReplyToID() == q1.MessageID && m.Text == want {
			a1 = m
		}
	}
	require.NotZero(t, a1.MessageID, "the first question is answered too")
	assert.Less(t, a1.MessageID, a2.MessageID, "in the order they were asked")

	var firstRun, secondRun []tgfake.Draft
	for _, d := range env.TG.Drafts(ann.ID()) {
		if d.DraftID == env.TG.Drafts(ann.ID())[0].DraftID {
			firstRun = append(firstRun, d)
		} else {
			secondRun = append(secondRun, d)
		}
	}
	require.NotEmpty(t, firstRun)
	require.NotEmpty(t, secondRun, "the second answer streamed too, as a draft of its own")
	assert.True(t, firstRun[len(firstRun)-1].Time.Before(secondRun[0].Time), "one answer streams at a time")
	for _, d := range secondRun {
		assert.True(t, strings.HasPrefix(want, strings.TrimSuffix(d.Text, " …")), "the second run's drafts are its own answer: %q", d.Text)
	}
}
