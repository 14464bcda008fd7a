package tgfake

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Stored messages follow a copy-on-write discipline: once a Message is
// stored or handed out, its slices and pointed-to values are never mutated;
// edits replace them. That keeps snapshots returned to tests stable without
// deep copies.

type chatState struct {
	chat    Chat
	lastID  int
	msgs    []*msgState
	byID    map[int]*msgState
	actions []ChatAction
	queries []*callbackState
	// ephemeral are the bot's ephemeral messages, each seen by one member,
	// numbered apart from the chat's messages (lastEphemeral).
	ephemeral     []*msgState
	lastEphemeral int
	// topics are the chat's forum topics by thread id (topics.go).
	topics   map[int]*topicState
	members  map[int64]string // explicit statuses; absent means the default
	perms    *ChatPermissions // a group's permissions for members; nil: everything allowed
	instance string           // chat_instance of callback queries from this chat
	drafts   []Draft          // every sendMessageDraft, in order
	draft    *draftState      // the latest one
}

type msgState struct {
	msg       Message
	fromBot   bool
	parseMode string
	deleted   bool
	edits     []Message
	reply     *ReplyKeyboard
	file      *SentFile
	// live marks a live location (sent with a live_period). Its period is
	// msg.Location.LivePeriod; a stop clears that (see LiveStopped).
	live bool
}

type callbackState struct {
	query    CallbackQuery
	chatID   int64
	at       time.Time // when it was pressed
	answered bool
	answer   CallbackAnswer
}

// BotMessage is a message the bot sent, in its current state.
type BotMessage struct {
	// Message is the current state as Telegram would return it: text after
	// edits, entities, inline keyboard, edit_date.
	Message
	// ParseMode is the parse_mode of the latest send or edit ("" if none).
	ParseMode string
	// Deleted is set once the message was deleted (by the bot).
	Deleted bool
	// Edits holds the earlier versions, oldest (the original) first.
	Edits []Message
	// ReplyKeyboard is the non-inline reply_markup the message was sent
	// with, if any.
	ReplyKeyboard *ReplyKeyboard
	// File is the photo or document the message carries, if any.
	File *SentFile
	// Live is where a live location stands (LiveNone for any other
	// message, a static location included); Message.Location is where it
	// is now, and Edits where it was.
	Live LiveState
}

// SentFile is a photo or document the bot sent.
type SentFile struct {
	Kind         string // "photo" or "document"
	FileID       string
	FileUniqueID string
	FileName     string
	MimeType     string
	Width        int
	Height       int
	Size         int64
	// Data is the uploaded content; nil when the bot sent a file_id or URL.
	Data []byte
	// Source is "upload", "file_id" or "url" ("user" for a photo a
	// person sent, which the bot did not).
	Source string
	// URL is the HTTP URL the bot passed, for Source "url".
	URL string
}

// ChatAction is one sendChatAction call.
type ChatAction struct {
	Action string
	Time   time.Time
	// MessageThreadID is the topic it is shown in (0: the chat).
	MessageThreadID int
}

// CallbackAnswer is the bot's answerCallbackQuery for one query.
type CallbackAnswer struct {
	QueryID   string
	Text      string
	ShowAlert bool
	URL       string
	CacheTime int
}

// Callback is a button press and what the bot answered.
type Callback struct {
	Query    CallbackQuery
	Answered bool
	Answer   CallbackAnswer
}

func chatInstance(chatID int64) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(strconv.FormatInt(chatID, 10))) // hash writes never fail
	return strconv.FormatInt(int64(h.Sum64()>>1)*-1, 10)
}

func newChatState(c Chat) *chatState {
	return &chatState{chat: c, byID: map[int]*msgState{}, members: map[int64]string{}, instance: chatInstance(c.ID)}
}

// addMessage stores a new message with the chat's next id. Users and the bot
// share one sequence per chat, as in Telegram.
func (c *chatState) addMessage(m Message, fromBot bool) *msgState {
	c.lastID++
	m.MessageID = c.lastID
	m.Chat = c.chat
	st := &msgState{msg: m, fromBot: fromBot}
	c.msgs = append(c.msgs, st)
	c.byID[m.MessageID] = st
	return st
}

// live returns a message that exists and was not deleted.
func (c *chatState) live(id int) *msgState {
	m := c.byID[id]
	if m == nil || m.deleted {
		return nil
	}
	return m
}

// snapshot is the message at unix time now (the server's clock), which
// decides whether a live location is still live.
func (m *msgState) snapshot(now int64) BotMessage {
	return BotMessage{
		Message:       m.at(now),
		ParseMode:     m.parseMode,
		Deleted:       m.deleted,
		Edits:         append([]Message(nil), m.edits...),
		ReplyKeyboard: m.reply,
		File:          m.file,
		Live:          m.liveState(now),
	}
}

// quoted is the message as embedded in reply_to_message or a callback
// query at unix time now: Telegram does not nest replies further.
func (m *msgState) quoted(now int64) *Message {
	cp := m.at(now)
	cp.ReplyToMessage = nil
	return &cp
}

func (c *chatState) memberStatus(userID int64) string {
	if st, ok := c.members[userID]; ok {
		return st
	}
	return StatusMember
}

// Messages returns the bot's messages in a chat, oldest first, including
// deleted ones (see BotMessage.Deleted).
func (s *Server) Messages(chatID int64) []BotMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.botMessagesLocked(chatID, 0)
}

func (s *Server) botMessagesLocked(chatID int64, afterID int) []BotMessage {
	ch := s.chats[chatID]
	if ch == nil {
		return nil
	}
	now := s.now().Unix()
	return kept(ch.msgs, func(m *msgState) (BotMessage, bool) {
		if m.fromBot && m.msg.MessageID > afterID {
			return m.snapshot(now), true
		}
		return BotMessage{}, false
	})
}

// LastMessage returns the bot's most recent message in a chat.
func (s *Server) LastMessage(chatID int64) (BotMessage, bool) {
	msgs := s.Messages(chatID)
	if len(msgs) == 0 {
		return BotMessage{}, false
	}
	return msgs[len(msgs)-1], true
}

// MessageByID returns any message of a chat (the bot's or a user's) in its
// current state.
func (s *Server) MessageByID(chatID int64, messageID int) (BotMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[chatID]
	if ch == nil || ch.byID[messageID] == nil {
		return BotMessage{}, false
	}
	return ch.byID[messageID].snapshot(s.now().Unix()), true
}

// SentFiles returns the photos and documents the bot sent to a chat, in
// order, including those of deleted messages.
func (s *Server) SentFiles(chatID int64) []SentFile {
	var out []SentFile
	for _, m := range s.Messages(chatID) {
		if m.File != nil {
			out = append(out, *m.File)
		}
	}
	return out
}

// readChat returns read(ch) for the chat chatID, under the server's lock,
// or nothing for a chat the fake does not know.
func readChat[T any](s *Server, chatID int64, read func(ch *chatState) []T) []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[chatID]
	if ch == nil {
		return nil
	}
	return read(ch)
}

// mapped is f of each element of in, in order (never nil).
func mapped[S, T any](in []S, f func(S) T) []T {
	out := make([]T, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

// kept is f of each element of in for which f says true, in order (nil
// when there is none).
func kept[S, T any](in []S, f func(S) (T, bool)) []T {
	var out []T
	for _, v := range in {
		if t, ok := f(v); ok {
			out = append(out, t)
		}
	}
	return out
}

// History returns every message of a chat that was not deleted, users' and
// the bot's, in order: the chat as a user would see it.
func (s *Server) History(chatID int64) []Message {
	return readChat(s, chatID, func(ch *chatState) []Message {
		now := s.now().Unix()
		return kept(ch.msgs, func(m *msgState) (Message, bool) { return m.at(now), !m.deleted })
	})
}

// Callbacks returns the button presses in a chat with the bot's answers.
func (s *Server) Callbacks(chatID int64) []Callback {
	return readChat(s, chatID, func(ch *chatState) []Callback {
		return mapped(ch.queries, func(q *callbackState) Callback {
			return Callback{Query: q.query, Answered: q.answered, Answer: q.answer}
		})
	})
}

// UnansweredCallbacks returns presses the bot has not answered yet, in any
// chat. Telegram clients show a spinner until the answer arrives, so a
// non-empty result at the end of a flow is usually a bug.
func (s *Server) UnansweredCallbacks() []CallbackQuery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CallbackQuery
	for _, ch := range s.chats {
		out = append(out, kept(ch.queries, func(q *callbackState) (CallbackQuery, bool) { return q.query, !q.answered })...)
	}
	return out
}

// ChatActions returns the actions the bot sent to a chat ("typing", ...).
func (s *Server) ChatActions(chatID int64) []string {
	return readChat(s, chatID, func(ch *chatState) []string {
		return mapped(ch.actions, func(a ChatAction) string { return a.Action })
	})
}

// ChatActionsIn returns the actions the bot sent to a chat, with the
// topic each was shown in.
func (s *Server) ChatActionsIn(chatID int64) []ChatAction {
	return readChat(s, chatID, func(ch *chatState) []ChatAction { return append([]ChatAction(nil), ch.actions...) })
}

// Commands returns the command list set for a scope and language, exactly
// as getMyCommands would.
func (s *Server) Commands(scope BotCommandScope, languageCode string) []BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	if scope.Type == "" {
		scope.Type = "default"
	}
	return append([]BotCommand(nil), s.commands[commandKey{scope: scope, lang: languageCode}]...)
}

// PendingUpdates returns the updates the bot has not confirmed yet.
func (s *Server) PendingUpdates() []Update {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Update(nil), s.updates...)
}
