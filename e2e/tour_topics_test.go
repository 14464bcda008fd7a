package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

// tourMode is how a tour meets Telegram: with topics off, as every bot
// without them does, or on: the bot's topic mode in private chats
// (@BotFather's threaded mode) and the admin chat a forum whose topics
// the bot manages.
type tourMode struct{ topics bool }

func (m tourMode) String() string {
	if m.topics {
		return "topics=on"
	}
	return "topics=off"
}

// out is where the tour's transcript goes (TOUR_OUT; with topics on,
// beside it with ".topics" before its extension); "" for none.
func (m tourMode) out() string {
	out := os.Getenv("TOUR_OUT")
	if out == "" || !m.topics {
		return out
	}
	ext := filepath.Ext(out)
	return strings.TrimSuffix(out, ext) + ".topics" + ext
}

// bothWays runs a tour with topics off and on, side by side.
func bothWays(t *testing.T, tour func(t *testing.T, mode tourMode)) {
	for _, mode := range []tourMode{{false}, {true}} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			tour(t, mode)
		})
	}
}

// env starts a tour's fakes: with an admin chat of id admin (0: none).
func (m tourMode) env(t *testing.T, admin int64) *e2e.Env {
	t.Helper()
	var opts []e2e.Option
	switch {
	case admin != 0 && m.topics:
		opts = append(opts, e2e.WithAdminForum(admin))
	case admin != 0:
		opts = append(opts, e2e.WithAdminGroup(admin))
	}
	env := e2e.New(t, opts...)
	if m.topics {
		env.TG.SetTopics(true, false)
		if admin != 0 {
			env.TG.SetChatMember(admin, env.TG.Bot().ID, tgfake.StatusAdministrator)
		}
	}
	return env
}

// topicLabel is how a transcript heads a message: the name of the topic
// it is in, if any.
func topicLabel(env *e2e.Env, chat int64, m tgfake.BotMessage) string {
	if m.MessageThreadID == 0 {
		return ""
	}
	for _, tp := range env.TG.Topics(chat) {
		if tp.MessageThreadID == m.MessageThreadID {
			return " {" + tp.Name + "}"
		}
	}
	return fmt.Sprintf(" {thread %d}", m.MessageThreadID)
}

// topicHeading is the line a transcript writes before a message in a
// topic: the topic's name ("" for a message in the chat).
func topicHeading(env *e2e.Env, chat int64, m tgfake.BotMessage) string {
	if m.MessageThreadID == 0 {
		return ""
	}
	return "{in " + threadName(env, chat, m.MessageThreadID) + "}\n"
}

// topicNamesOf are a topic's names in every language.
func topicNamesOf(topic string) []string {
	cat := locales.MustLoad()
	var out []string
	for _, lang := range locales.Languages {
		out = append(out, cat.T(lang, "topic."+topic))
	}
	return out
}

// inTopic asserts m is in the topic of its chat named for topic, in any
// language, where the tour runs with topics; without them, or for topic
// "", in the chat.
func (m tourMode) inTopic(t *testing.T, env *e2e.Env, chat int64, msg tgfake.BotMessage, topic string) {
	t.Helper()
	if !m.topics || topic == "" {
		assert.Zero(t, msg.MessageThreadID, "chat %d: %q is in a topic", chat, msg.Text)
		return
	}
	assert.Contains(t, topicNamesOf(topic), threadName(env, chat, msg.MessageThreadID),
		"chat %d: %q is not in its %s topic", chat, msg.Text, topic)
}

// threadName is the name of chat's topic thread ("" for the chat).
func threadName(env *e2e.Env, chat int64, thread int) string {
	for _, tp := range env.TG.Topics(chat) {
		if tp.MessageThreadID == thread {
			return tp.Name
		}
	}
	return ""
}

// everyMessageInItsTopic reads every message the bot delivered through
// its outbox against the topic it belongs to (domain.TopicOf: its kind's,
// or the one its command's workflow or its update gave it): in that topic
// of its chat, named in some language, where the chat has topics (a
// private chat with topics on, the forum admin chat); in the chat itself
// otherwise, and for a message that has none. Each chat's topics are one
// per workflow: none named twice alive.
func (m tourMode) everyMessageInItsTopic(t *testing.T, env *e2e.Env, pool *pgxpool.Pool, forum int64) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT chat_id, kind, body, message_id FROM outbox
WHERE state = 'sent' AND NOT edit AND message_id IS NOT NULL AND NOT (body ? 'only_for')
ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	checked := 0
	for rows.Next() {
		var chat, msgID int64
		var kind string
		var raw []byte
		require.NoError(t, rows.Scan(&chat, &kind, &raw, &msgID))
		var body struct {
			Topic  string `json:"topic"`
			Thread int    `json:"thread"`
		}
		require.NoError(t, json.Unmarshal(raw, &body))
		msg, ok := env.TG.MessageByID(chat, int(msgID))
		if !ok {
			continue // deleted since (a topic the user deleted took it along)
		}
		checked++
		topic := domain.TopicOf(chat, kind, body.Topic)
		hasTopics := m.topics && (chat > 0 || chat == forum)
		switch {
		case body.Thread != 0:
			assert.Equal(t, body.Thread, msg.MessageThreadID, "chat %d: a reply left its command's topic: %q", chat, msg.Text)
		case !hasTopics || topic == "":
			assert.Zero(t, msg.MessageThreadID, "chat %d: a %s message in a topic: %q", chat, kind, msg.Text)
		default:
			assert.Contains(t, topicNamesOf(topic), threadName(env, chat, msg.MessageThreadID),
				"chat %d: a %s message is not in its %s topic: %q", chat, kind, topic, msg.Text)
		}
	}
	require.NoError(t, rows.Err())
	require.NotZero(t, checked, "no message read")
	if !m.topics {
		return
	}
	for _, chat := range env.TG.TopicChats() {
		alive := map[string]bool{}
		for _, tp := range env.TG.Topics(chat) {
			if tp.Deleted {
				continue
			}
			assert.False(t, alive[tp.Name], "chat %d has two live topics named %q", chat, tp.Name)
			alive[tp.Name] = true
		}
	}
}
