package tgfake

import (
	"errors"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Topics: in a private chat when the bot's forum topic mode is on
// (SetTopics; getMe's has_topics_enabled, Bot API 9.3), where the bot may
// create them (createForumTopic, 9.4) and the user may delete them; and in
// a forum supergroup (ForumSupergroup), where an administrator with
// can_manage_topics may create them. A message goes to a topic by
// message_thread_id, which must name a live topic of the chat: a deleted
// one, or any in a chat without topics, is "message thread not found".
// FeatureTopics plays a server older than 9.3: getMe says nothing of
// topics and a private chat has none.

// The refusals about topics. The first is Telegram's own; the others'
// words are not documented and say they are the fake's.
const (
	DescThreadNotFound   = "Bad Request: message thread not found"
	DescNotForum         = "Bad Request: the chat is not a forum"
	DescTopicTitle       = "Bad Request: TOPIC_TITLE_EMPTY"
	DescTopicTitleLong   = "Bad Request: the topic name must be at most 128 characters (tgfake)"
	DescTopicIconColor   = "Bad Request: icon_color must be one of the six topic colours (tgfake)"
	DescTopicNoRights    = "Bad Request: not enough rights to create a topic"
	maxTopicName         = 128
	defaultTopicColor    = 7322096
	generalTopicThreadID = 1
)

// topicColors are the colours a topic's icon may have (ForumTopic's
// icon_color): 0x6FB9F0, 0xFFD67E, 0xCB86DB, 0x8EEE98, 0xFF93B2, 0xFB6F5F.
var topicColors = map[int]bool{7322096: true, 16766590: true, 13338331: true, 9367192: true, 16749490: true, 16478047: true}

// ForumTopic is the Bot API ForumTopic object.
type ForumTopic struct {
	MessageThreadID   int    `json:"message_thread_id"`
	Name              string `json:"name"`
	IconColor         int    `json:"icon_color"`
	IconCustomEmojiID string `json:"icon_custom_emoji_id,omitempty"`
}

type topicState struct {
	topic   ForumTopic
	deleted bool
}

// ErrNoSuchTopic: the chat has no live topic of that id.
var ErrNoSuchTopic = errors.New("tgfake: no such topic")

// SetTopics turns the bot's forum topic mode in private chats on or off,
// as its owner does in @BotFather (getMe's has_topics_enabled), and
// whether users may create topics there (allows_users_to_create_topics).
func (s *Server) SetTopics(enabled, usersMayCreate bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topicsOn, s.usersCreateTopics = enabled, usersMayCreate
}

// ForumSupergroup registers a supergroup with topics (is_forum).
func (s *Server) ForumSupergroup(id int64, title string) Chat {
	c := s.addGroup(Chat{ID: id, Type: ChatSupergroup, Title: title, IsForum: true})
	return c
}

// topicsLocked reports whether the chat has topics now.
func (s *Server) topicsLocked(ch *chatState) bool {
	if ch.chat.Type == ChatPrivate {
		return s.topicsOn && !s.lacking[FeatureTopics]
	}
	return ch.chat.IsForum
}

// threadLocked checks a send's message_thread_id (0: none): a live topic
// of a chat that has topics. The General topic of a forum is 1.
func (s *Server) threadLocked(ch *chatState, thread int) *APIError {
	if thread == 0 {
		return nil
	}
	if !s.topicsLocked(ch) {
		return errDesc(400, DescThreadNotFound)
	}
	if ch.chat.IsForum && thread == generalTopicThreadID {
		return nil
	}
	if t := ch.topics[thread]; t == nil || t.deleted {
		return errDesc(400, DescThreadNotFound)
	}
	return nil
}

// createForumTopic creates a topic: in a private chat with the bot's topic
// mode on, or in a forum supergroup whose administrator the bot is with
// can_manage_topics. name 1-128 characters; icon_color one of six.
func createForumTopic(s *Server, r *request) (any, *APIError) {
	name := r.str("name")
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return nil, errDesc(400, DescTopicTitle)
	case n > maxTopicName:
		return nil, errDesc(400, DescTopicTitleLong)
	}
	color := defaultTopicColor
	if r.has("icon_color") {
		c, err := strconv.Atoi(r.str("icon_color"))
		if err != nil || !topicColors[c] {
			return nil, errDesc(400, DescTopicIconColor)
		}
		color = c
	}
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		if !s.topicsLocked(ch) {
			return nil, errDesc(400, DescNotForum)
		}
		if ch.chat.Type != ChatPrivate && ch.memberStatus(s.bot.ID) != StatusAdministrator {
			return nil, errDesc(400, DescTopicNoRights)
		}
		if apiErr := s.writableLocked(ch); apiErr != nil {
			return nil, apiErr
		}
		// A topic's thread id is the id of the message that created it.
		ch.lastID++
		t := &topicState{topic: ForumTopic{MessageThreadID: ch.lastID, Name: name, IconColor: color,
			IconCustomEmojiID: r.str("icon_custom_emoji_id")}}
		if ch.topics == nil {
			ch.topics = map[int]*topicState{}
		}
		ch.topics[t.topic.MessageThreadID] = t
		s.hub.NotifyLocked()
		return t.topic, nil
	})
}

// Topics returns a chat's topics, the deleted ones included (Deleted
// says which), in the order they were created.
func (s *Server) Topics(chatID int64) []TopicInfo {
	return readChat(s, chatID, func(ch *chatState) []TopicInfo {
		out := make([]TopicInfo, 0, len(ch.topics))
		for _, t := range ch.topics {
			out = append(out, TopicInfo{ForumTopic: t.topic, Deleted: t.deleted})
		}
		slices.SortFunc(out, func(a, b TopicInfo) int { return a.MessageThreadID - b.MessageThreadID })
		return out
	})
}

// TopicChats are the chats that have topics the bot created, in id order.
func (s *Server) TopicChats() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for id, ch := range s.chats {
		if len(ch.topics) > 0 {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// TopicInfo is a topic as the fake knows it.
type TopicInfo struct {
	ForumTopic
	Deleted bool
}

// DeleteTopic deletes a topic of the user's private chat with the bot, as
// the user can there: the topic and every message in it go.
func (p *Person) DeleteTopic(thread int) error {
	s := p.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[p.user.ID]
	if ch == nil || !s.deleteTopicLocked(ch, thread) {
		return ErrNoSuchTopic
	}
	return nil
}

// deleteTopicLocked deletes a live topic of ch and every message in it;
// false when ch has no such topic.
func (s *Server) deleteTopicLocked(ch *chatState, thread int) bool {
	t := ch.topics[thread]
	if t == nil || t.deleted {
		return false
	}
	t.deleted = true
	for _, m := range ch.msgs {
		if m.msg.MessageThreadID == thread {
			m.deleted = true
		}
	}
	s.hub.NotifyLocked()
	return true
}

// SendTextIn sends a text message as this user in a topic of a chat.
func (p *Person) SendTextIn(chatID int64, thread int, text string) (Message, error) {
	s := p.srv
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	if s.threadLocked(ch, thread) != nil {
		return Message{}, ErrNoSuchTopic
	}
	from := p.user
	m := Message{From: &from, Date: s.now().Unix(), Text: text, Entities: detectEntities(text),
		MessageThreadID: thread, IsTopicMessage: true}
	return s.postLocked(ch, m), nil
}

// deleteForumTopic deletes a topic and its messages: the bot's own chat
// topics in a private chat, a forum's with administrator rights.
func deleteForumTopic(s *Server, r *request) (any, *APIError) {
	thread := int(r.int64Arg("message_thread_id"))
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		if !s.topicsLocked(ch) {
			return nil, errDesc(400, DescNotForum)
		}
		if ch.chat.Type != ChatPrivate && ch.memberStatus(s.bot.ID) != StatusAdministrator {
			return nil, errDesc(400, DescTopicNoRights)
		}
		if !s.deleteTopicLocked(ch, thread) {
			return nil, errDesc(400, DescThreadNotFound)
		}
		return true, nil
	})
}
