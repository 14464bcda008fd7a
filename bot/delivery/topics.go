package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Topics keep each chat's topics (Bot API 9.3: topics in private chats,
// created by the bot since 9.4; a forum supergroup's since 6.3): a
// message goes into its topic (domain.TopicOf: "vacancies", "memory", …,
// a forum admin chat's "log", "runs", "notices") of its chat, created on
// first use. Storage implements it.
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
// whether the bot's topic mode in private chats is on (getMe's
// has_topics_enabled), and which groups are forums it writes into by
// topic (the admin chat), until when each such group was seen to refuse
// the bot a topic (it may not manage them there).
type topics struct {
	store  Topics
	name   TopicNamer
	on     atomic.Bool
	mu     sync.Mutex
	forums map[int64]time.Time
}

// UseTopics makes messages go into their topic (domain.TopicOf) where
// TopicModes says the chat has topics; until then, and elsewhere, they go
// to the chat as they always did. Call before Run.
func (s *Sender) UseTopics(store Topics, name TopicNamer) {
	s.topics = &topics{store: store, name: name, forums: map[int64]time.Time{}}
}

// TopicModes says where topics are: in private chats when private (the
// bot's topic mode, getMe's has_topics_enabled; nil: the server says
// nothing of it, which /status names), and in the forum groups named.
// Safe while the sender runs: the bot learns it on connecting.
func (s *Sender) TopicModes(private *bool, forums ...int64) {
	t := s.topics
	if t == nil {
		return
	}
	t.on.Store(private != nil && *private)
	if private == nil {
		s.features.refused(FeatureTopics, errors.New("getMe says nothing of has_topics_enabled"))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.forums)
	for _, id := range forums {
		t.forums[id] = time.Time{}
	}
}

// inUse reports whether chatID's messages go into topics now.
func (t *topics) inUse(chatID int64, fs *features) bool {
	if chatID > 0 {
		return t.on.Load() && !fs.lacks(FeatureTopics)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	until, ok := t.forums[chatID]
	return ok && time.Now().After(until)
}

// refusedIn records that chatID refused the bot a topic: a private chat
// speaks for the server (its topic mode is off, or it has no topics in
// private chats), a forum for itself (the bot lost can_manage_topics).
// Either is believed for featureRefusedFor.
func (s *Sender) topicsRefusedIn(chatID int64, err error) {
	if chatID > 0 {
		s.features.refused(FeatureTopics, err)
		return
	}
	t := s.topics
	t.mu.Lock()
	first := time.Now().After(t.forums[chatID])
	t.forums[chatID] = time.Now().Add(featureRefusedFor)
	t.mu.Unlock()
	if first {
		s.log.Warn("the forum refuses the bot its topics: messages go to its General topic; give the bot the right to manage topics",
			"chat", chatID, "retry_in", featureRefusedFor, "err", err)
	}
}

// topicsRefused is a refusal of a topic by the chat, not of the one
// asked for: "the chat is not a forum" (a private chat of a bot whose
// topic mode is off, or of a server without topics there), "not enough
// rights to create a topic" (a forum's).
func topicsRefused(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != http.StatusBadRequest {
		return false
	}
	d := strings.ToLower(ae.Description)
	return strings.Contains(d, "forum") || strings.Contains(d, "rights")
}

// threadNotFound is Telegram's refusal of a message to a topic that is
// gone (the user deleted it) or never was.
func threadNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(ae.Description), "message thread not found")
}

// threadFor is the thread of a message's topic in its chat, created if
// the chat has none: 0 (the chat itself) where topics are not in use or
// the topic cannot be created, which the log tells. kept reports a thread
// read from the store, which a refusal may show the user has deleted.
func (s *Sender) threadFor(ctx context.Context, chatID int64, topic string) (thread int, kept bool) {
	t := s.topics
	if t == nil || topic == "" || !t.inUse(chatID, s.features) {
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
	if topicsRefused(err) {
		s.topicsRefusedIn(chatID, err)
		return 0, false
	}
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

// keptThread is the thread of chat's topic if one is kept and topics are
// in use there; 0 otherwise, and for a store that fails (the log tells).
func (s *Sender) keptThread(ctx context.Context, chatID int64, topic string) int {
	t := s.topics
	if t == nil || topic == "" || !t.inUse(chatID, s.features) {
		return 0
	}
	thread, err := t.store.Thread(ctx, chatID, topic)
	if err != nil {
		s.log.Warn("topic not read", "chat", chatID, "topic", topic, "err", err)
	}
	return thread
}

// IsForum reports whether a group has topics (getChat's is_forum).
func (c *Client) IsForum(ctx context.Context, chatID int64) (bool, error) {
	res, err := c.Call(ctx, "getChat", map[string]any{"chat_id": chatID})
	if err != nil {
		return false, err
	}
	var chat struct {
		IsForum bool `json:"is_forum"`
	}
	if err := json.Unmarshal(res, &chat); err != nil {
		return false, fmt.Errorf("getChat answer %.100s: %w", res, err)
	}
	return chat.IsForum, nil
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
