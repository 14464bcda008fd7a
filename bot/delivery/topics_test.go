package delivery_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/e2e/tgfake"
)

// A message naming a topic goes into that topic of the private chat,
// created on first use with its name in the reader's language and kept for
// every later one (every replica reads the same row). A topic the user
// deleted is created again and the message sent there, once: nothing lost,
// nothing doubled. Edits go to their message wherever it is. With the
// bot's topic mode off, or a message naming none, it goes to the chat.
func TestMessagesGoIntoTheirWorkflowsTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(1, "Ann")
	b.srv.SetTopics(true, false)
	s := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	names := map[string]string{"vacancies": "Вакансии", "memory": "Чат памяти"}
	s.UseTopics(b.store.ChatTopics(), func(_ context.Context, _ int64, topic string) string { return names[topic] })
	on, off := true, false
	s.TopicModes(&on)
	send := func(topic, text string) tgfake.BotMessage {
		t.Helper()
		id, err := s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Text: text, Topic: topic})
		require.NoError(t, err)
		m, ok := b.srv.MessageByID(1, id)
		require.True(t, ok)
		return m
	}

	card := send("vacancies", "a card")
	again := send("vacancies", "another card")
	answer := send("memory", "an answer")
	plain := send("", "to the chat")
	topics := b.srv.Topics(1)
	require.Len(t, topics, 2, "one topic per workflow, created once")
	require.Equal(t, "Вакансии", topics[0].Name)
	require.Equal(t, "Чат памяти", topics[1].Name)
	require.Equal(t, topics[0].MessageThreadID, card.MessageThreadID)
	require.Equal(t, card.MessageThreadID, again.MessageThreadID)
	require.Equal(t, topics[1].MessageThreadID, answer.MessageThreadID)
	require.Zero(t, plain.MessageThreadID)
	kept, err := b.store.ChatTopics().Thread(b.ctx, 1, "vacancies")
	require.NoError(t, err)
	require.Equal(t, card.MessageThreadID, kept, "kept for every replica")

	// An edit goes to its message, in its topic.
	_, err = s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Edit: true, ReplyTo: card.MessageID,
		Text: "a card, decided", Topic: "vacancies"})
	require.NoError(t, err)
	edited, _ := b.srv.MessageByID(1, card.MessageID)
	require.Equal(t, "a card, decided", edited.Text)

	// Ann deletes the vacancies topic: the next card opens a new one.
	require.NoError(t, ann.DeleteTopic(card.MessageThreadID))
	calls := len(b.srv.CallsTo("sendMessage"))
	next := send("vacancies", "a new card")
	require.NotEqual(t, card.MessageThreadID, next.MessageThreadID)
	require.Len(t, b.srv.Topics(1), 3)
	require.Len(t, b.srv.CallsTo("sendMessage"), calls+2, "refused once, then sent into the new topic: one message")
	require.Equal(t, "a new card", next.Text)

	// The bot's topic mode off (or an older server): the chat, as before.
	plainSender := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	plainSender.UseTopics(b.store.ChatTopics(), func(context.Context, int64, string) string { return "x" })
	plainSender.TopicModes(&off)
	id, err := plainSender.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Text: "no topics", Topic: "vacancies"})
	require.NoError(t, err)
	m, _ := b.srv.MessageByID(1, id)
	require.Zero(t, m.MessageThreadID)
}
