package bot_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/memory"
)

func TestPartialAnswerIsOneMessageSayingMoreIsComing(t *testing.T) {
	rd := testRenderer(bot.RenderConfig{})
	r := memory.PipelineRun{ID: 42, ChatID: 7, MessageID: 3, Lang: "en"}

	first := rd.Partial(r, "Lviv is **lovely", true)
	require.Len(t, first, 1)
	assert.Equal(t, domain.Message{ChatID: 7, Kind: domain.KindMemoryDraft, Ref: 42, Key: "answer:42",
		Text: "Lviv is **lovely …", ReplyTo: 3}, first[0], "an unclosed ** shows as typed; a reply to the question")

	edit := rd.Partial(r, "Lviv is **lovely** <in> spring", false)[0]
	assert.True(t, edit.Edit)
	assert.Equal(t, "answer:42", edit.Key)
	assert.Equal(t, "Lviv is <b>lovely</b> &lt;in&gt; spring …", edit.Text, "Markdown rendered, HTML in the model's text escaped")
	assert.Equal(t, domain.IfGoneDrop, edit.IfGone, "an edit of a gone placeholder is dropped: the answer comes anyway")

	long := rd.Partial(r, strings.Repeat("word ", 2000), false)[0]
	assert.LessOrEqual(t, utf8.RuneCountInString(long.Text), bot.MaxMessageLen, "what fits one message")
	assert.True(t, strings.HasSuffix(long.Text, " …"))
}

func TestAnswerReplacesItsPlaceholder(t *testing.T) {
	rd := testRenderer(bot.RenderConfig{})
	r := memory.PipelineRun{ID: 42, ChatID: 7, MessageID: 3, Lang: "ru", Status: memory.Completed,
		Change: memory.Change{FinalAnswer: strings.Repeat("Длинный ответ. ", 400)}}

	plain := rd.Answer(r)
	require.Greater(t, len(plain), 1, "a long answer is split")
	assert.False(t, plain[0].Edit, "without a placeholder the answer is sent")

	r.Placeholder = true
	msgs := rd.Answer(r)
	require.Len(t, msgs, len(plain))
	assert.True(t, msgs[0].Edit)
	assert.Equal(t, "answer:42", msgs[0].Key)
	assert.Equal(t, domain.IfGoneSend, msgs[0].IfGone, "a placeholder never delivered: the answer is sent anew")
	assert.Equal(t, 3, msgs[0].ReplyTo, "and then as a reply")
	assert.False(t, msgs[1].Edit, "the rest follows as messages")

	r.Status = memory.Failed
	failed := rd.Failed(r)
	require.Len(t, failed, 1)
	assert.True(t, failed[0].Edit, "the failure notice takes the half answer's place too")
	assert.Equal(t, "Извините, не получилось ответить на это сообщение. Написанное вами сохранено; отправьте его ещё раз, и я попробую снова.",
		failed[0].Text, "the Russian notice, in the placeholder's place")
}
