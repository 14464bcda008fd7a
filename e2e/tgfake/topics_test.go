package tgfake

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Topics in a private chat: only with the bot's topic mode on (getMe says
// so); createForumTopic's name and colour rules; a message to a live topic
// is in it, to a deleted one or in a chat without topics "message thread
// not found"; the user's deleting a topic takes its messages. A forum
// supergroup's topics need an administrator with rights; an older server
// has none in private chats.
func TestTopics(t *testing.T) {
	srv := New(t, WithoutLimits())
	ann := startedUser(t, srv, 1001)
	me := func() User { return decodeResult[User](t, callJSON(t, srv, "getMe", nil)) }
	create := func(chat int64, params map[string]any) apiResponse {
		p := map[string]any{"chat_id": chat}
		for k, v := range params {
			p[k] = v
		}
		return callJSON(t, srv, "createForumTopic", p)
	}
	send := func(chat int64, thread int, text string) apiResponse {
		return callJSON(t, srv, "sendMessage", map[string]any{"chat_id": chat, "message_thread_id": thread, "text": text})
	}

	require.False(t, *me().HasTopicsEnabled)
	requireError(t, create(ann.ID(), map[string]any{"name": "Vacancies"}), 400, DescNotForum)
	requireError(t, send(ann.ID(), 5, "x"), 400, DescThreadNotFound)

	srv.SetTopics(true, false)
	require.True(t, *me().HasTopicsEnabled)
	require.False(t, *me().AllowsUsersToCreateTopics)
	requireError(t, create(ann.ID(), map[string]any{"name": ""}), 400, DescTopicTitle)
	requireError(t, create(ann.ID(), map[string]any{"name": strings.Repeat("я", 129)}), 400, DescTopicTitleLong)
	requireError(t, create(ann.ID(), map[string]any{"name": "Orders", "icon_color": 123}), 400, DescTopicIconColor)
	vac := decodeResult[ForumTopic](t, create(ann.ID(), map[string]any{"name": "Vacancies", "icon_color": 9367192}))
	require.Equal(t, "Vacancies", vac.Name)
	require.Equal(t, 9367192, vac.IconColor)
	mem := decodeResult[ForumTopic](t, create(ann.ID(), map[string]any{"name": "Memory chat"}))
	require.NotEqual(t, vac.MessageThreadID, mem.MessageThreadID)

	m := decodeResult[Message](t, send(ann.ID(), vac.MessageThreadID, "a card"))
	require.Equal(t, vac.MessageThreadID, m.MessageThreadID)
	require.True(t, m.IsTopicMessage)
	q, err := ann.SendTextIn(ann.ID(), mem.MessageThreadID, "how are you?")
	require.NoError(t, err)
	require.Equal(t, mem.MessageThreadID, q.MessageThreadID)

	require.NoError(t, ann.DeleteTopic(vac.MessageThreadID))
	requireError(t, send(ann.ID(), vac.MessageThreadID, "another card"), 400, DescThreadNotFound)
	gone, _ := srv.MessageByID(ann.ID(), m.MessageID)
	require.True(t, gone.Deleted, "the topic's messages go with it")
	_, err = ann.SendTextIn(ann.ID(), vac.MessageThreadID, "hi")
	require.ErrorIs(t, err, ErrNoSuchTopic)
	require.Len(t, srv.Topics(ann.ID()), 2)
	require.True(t, srv.Topics(ann.ID())[0].Deleted)

	// A forum supergroup: the General topic is 1; creating one needs rights.
	forum := srv.ForumSupergroup(-1001234, "Admins")
	decodeResult[Message](t, send(forum.ID, 1, "in General"))
	requireError(t, create(forum.ID, map[string]any{"name": "Live log"}), 400, DescTopicNoRights)
	srv.SetChatMember(forum.ID, srv.Bot().ID, StatusAdministrator)
	log := decodeResult[ForumTopic](t, create(forum.ID, map[string]any{"name": "Live log"}))
	decodeResult[Message](t, send(forum.ID, log.MessageThreadID, "order #1 created"))
	plain := srv.Supergroup(-1005678, "Team", "")
	requireError(t, create(plain.ID, map[string]any{"name": "x"}), 400, DescNotForum)

	srv.SetUnsupported(true, FeatureTopics)
	require.Nil(t, me().HasTopicsEnabled, "an older server's getMe says nothing of topics")
	requireError(t, send(ann.ID(), mem.MessageThreadID, "x"), 400, DescThreadNotFound)
}
