package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// Topics keep each private chat's workflow topics (Bot API 9.3: topics in
// private chats, created by the bot since 9.4): a message naming a topic
// (domain.Message.Topic, "vacancies", "memory", …) goes into that chat's
// topic of that name, created on first use. Storage implements it.
type Topics interface {
	// Thread is chat's thread for topic; 0 when none is kept.
	Thread(ctx context.Context, chatID int64, topic string) (int, error)
	// KeepThread keeps thread as chat's topic unless another replica kept
	// one first; the thread kept.
	KeepThread(ctx context.Context, chatID int64, topic string, thread int) (int, error)
	// ForgetThread forgets chat's topic if it is still thread (the user
	// deleted it), so the next message creates it again.
	ForgetThread(ctx context.Context, chatID int64, topic string, thread int) error
}

// TopicNamer names a chat's topic in its reader's language.
type TopicNamer func(ctx context.Context, chatID int64, topic string) string

// topics is the sender's part: where topics are kept, how they are named,
// and whether the bot's topic mode is on (getMe's has_topics_enabled).
type topics struct {
	store Topics
	name  TopicNamer
	on    atomic.Bool
}

// UseTopics makes messages naming a topic go into it in private chats,
// where enabled says the bot's topic mode is on (has_topics_enabled, read
// at start). Without it, or with the mode off, messages go to the chat as
// they always did. Call before Run.
func (s *Sender) UseTopics(store Topics, name TopicNamer, enabled bool) {
	s.topics = &topics{store: store, name: name}
	s.topics.on.Store(enabled)
}

// threadNotFound is Telegram's refusal of a message to a topic that is
// gone (the user deleted it) or never was.
func threadNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(ae.Description), "message thread not found")
}

// threadFor is the thread of the row's topic in its chat, created if the
// chat has none: 0 (the chat itself) where topics are not in use or the
// topic cannot be created, which the log tells. kept reports a thread read
// from the store, which a refusal may show the user has deleted.
func (s *Sender) threadFor(ctx context.Context, chatID int64, topic string) (thread int, kept bool) {
	t := s.topics
	if t == nil || topic == "" || chatID <= 0 || !t.on.Load() {
		return 0, false
	}
	thread, err := t.store.Thread(ctx, chatID, topic)
	if err != nil {
		s.log.Warn("topic not read: the message goes to the chat", "chat", chatID, "topic", topic, "err", err)
		return 0, false
	}
	if thread != 0 {
		return thread, true
	}
	created, err := s.client.CreateTopic(ctx, chatID, t.name(ctx, chatID, topic))
	if err != nil {
		s.log.Warn("topic not created: the message goes to the chat", "chat", chatID, "topic", topic, "err", err)
		return 0, false
	}
	keeps, err := t.store.KeepThread(ctx, chatID, topic, created)
	if err != nil {
		s.log.Warn("topic created but not kept: the message goes to it", "chat", chatID, "topic", topic, "err", err)
		return created, false
	}
	if keeps != created {
		// Another replica created the chat's topic at the same moment: use
		// theirs, and take ours away so the user sees one.
		if err := s.client.DeleteTopic(ctx, chatID, created); err != nil {
			s.log.Warn("a second topic not deleted", "chat", chatID, "topic", topic, "thread", created, "err", err)
		}
	}
	return keeps, false
}

// CreateTopic creates a topic named name in a chat (createForumTopic); its
// thread id.
func (c *Client) CreateTopic(ctx context.Context, chatID int64, name string) (int, error) {
	res, err := c.Call(ctx, "createForumTopic", map[string]any{"chat_id": chatID, "name": name})
	if err != nil {
		return 0, err
	}
	var t struct {
		Thread int `json:"message_thread_id"`
	}
	if err := json.Unmarshal(res, &t); err != nil {
		return 0, fmt.Errorf("createForumTopic answer %.100s: %w", res, err)
	}
	if t.Thread == 0 {
		return 0, fmt.Errorf("createForumTopic answer %.100s: no message_thread_id", res)
	}
	return t.Thread, nil
}

// DeleteTopic deletes a topic of a chat (deleteForumTopic).
func (c *Client) DeleteTopic(ctx context.Context, chatID int64, thread int) error {
	_, err := c.Call(ctx, "deleteForumTopic", map[string]any{"chat_id": chatID, "message_thread_id": thread})
	return err
}
