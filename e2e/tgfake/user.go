package tgfake

import (
	"testing"

	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Errors returned by Person.Press and friends, for errors.Is.
var (
	ErrNoSuchMessage = errors.New("tgfake: no such message")
	ErrNoSuchButton  = errors.New("tgfake: message has no such button")
)

// Person is a Telegram user played by the test. Its actions deliver updates
// to the bot synchronously (the update is queued when the call returns).
// Misuse, such as writing to an unregistered chat, fails the test given to
// New, so call them from that test's goroutine.
type Person struct {
	srv  *Server
	user User
	// blocked, started and deactivated are guarded by srv.mu.
	blocked     bool
	started     bool
	deactivated bool
}

// User registers a user and their private chat with the bot (chat id =
// user id, as in Telegram) and returns the handle tests act through. lang
// is the user's language_code ("" for none). Calling it again with the same
// id returns the same Person.
//
// Like on Telegram, the bot cannot message the user until the user has
// written to it (or pressed a button in the private chat): until then
// sendMessage fails with 403 "bot can't initiate conversation with a user".
func (s *Server) User(id int64, firstName, lang string) *Person {
	s.t.Helper()
	if id <= 0 {
		s.t.Fatalf("tgfake: user id must be positive, got %d", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.users[id]; ok {
		return p
	}
	p := &Person{srv: s, user: User{ID: id, FirstName: firstName, LanguageCode: lang}}
	s.users[id] = p
	s.chats[id] = newChatState(Chat{ID: id, Type: ChatPrivate, FirstName: firstName})
	s.hub.NotifyLocked()
	return p
}

// SetUsername gives the user a @username (Telegram's, as others mention
// them by); "" takes it away.
func (p *Person) SetUsername(name string) {
	s := p.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	p.user.Username = name
}

// Group registers a basic group the bot is a member of. Group ids are
// negative in the Bot API.
func (s *Server) Group(id int64, title string) Chat {
	return s.addGroup(Chat{ID: id, Type: ChatGroup, Title: title})
}

// Supergroup registers a supergroup the bot is a member of; ids look like
// -100xxxxxxxxxx. A non-empty username makes it addressable as @username.
func (s *Server) Supergroup(id int64, title, username string) Chat {
	return s.addGroup(Chat{ID: id, Type: ChatSupergroup, Title: title, Username: username})
}

func (s *Server) addGroup(c Chat) Chat {
	s.t.Helper()
	if c.ID >= 0 {
		s.t.Fatalf("tgfake: group ids must be negative, got %d", c.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.chats[c.ID]; ok {
		return ch.chat
	}
	ch := newChatState(c)
	if c.IsForum {
		// A forum's first message opened it, and its thread is the
		// General topic's: the topics the bot creates come after.
		ch.lastID = generalTopicThreadID
	}
	s.chats[c.ID] = ch
	s.hub.NotifyLocked()
	return c
}

// SetChatMember sets a user's (or the bot's own, with Bot().ID) status in a
// chat: StatusCreator, StatusAdministrator, StatusMember, StatusRestricted,
// StatusLeft or StatusKicked. getChatMember reports it; the bot's own status
// decides whether it may write to the group (left/kicked fail with 403) and
// delete other people's messages (creator/administrator only).
func (s *Server) SetChatMember(chatID, userID int64, status string) {
	s.t.Helper()
	switch status {
	case StatusCreator, StatusAdministrator, StatusMember, StatusRestricted, StatusLeft, StatusKicked:
	default:
		s.t.Fatalf("tgfake: unknown chat member status %q", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[chatID]
	if ch == nil {
		s.t.Fatalf("tgfake: SetChatMember: unknown chat %d", chatID)
		return
	}
	ch.members[userID] = status
	s.hub.NotifyLocked()
}

// ID is the user's id, which is also their private chat's id.
func (p *Person) ID() int64 { return p.user.ID }

// User is the Bot API User object of this person.
func (p *Person) User() User { return p.user }

// Block makes the user block the bot: sending to their private chat fails
// with 403 "Forbidden: bot was blocked by the user" until Unblock, or until
// the user writes to the bot again.
func (p *Person) Block() { p.setBlocked(true) }

// Deactivate deletes the user's account: from then on sending to, editing
// in or deleting from their private chat fails with 403 "Forbidden: user is
// deactivated", as the Bot API answers for deleted accounts. It cannot be
// undone, and the person can no longer act (doing so fails the test).
func (p *Person) Deactivate() {
	p.srv.mu.Lock()
	defer p.srv.mu.Unlock()
	p.deactivated = true
	p.srv.hub.NotifyLocked()
}

// Unblock undoes Block.
func (p *Person) Unblock() { p.setBlocked(false) }

func (p *Person) setBlocked(b bool) {
	p.srv.mu.Lock()
	defer p.srv.mu.Unlock()
	p.blocked = b
	p.srv.hub.NotifyLocked()
}

// groupLocked is the registered group chatID; any other chat fails the
// test, in caller's name, as a misuse of the fake.
func (s *Server) groupLocked(caller string, chatID int64) *chatState {
	s.t.Helper()
	ch := s.chats[chatID]
	if ch == nil || ch.chat.Type == ChatPrivate {
		s.t.Fatalf("tgfake: %s: %d is not a registered group", caller, chatID)
		return nil
	}
	return ch
}

// chatForLocked finds a chat the person can write in. Misuse is a bug in the
// test, so it fails the test rather than returning an error.
func (p *Person) chatForLocked(chatID int64) *chatState {
	s := p.srv
	ch := s.chats[chatID]
	switch {
	case p.deactivated:
		s.t.Fatalf("tgfake: %s acts after deactivating their account", p.user.FirstName)
	case ch == nil:
		s.t.Fatalf("tgfake: %s acts in unknown chat %d (register it with User/Group/Supergroup)", p.user.FirstName, chatID)
	case ch.chat.Type == ChatPrivate && chatID != p.user.ID:
		s.t.Fatalf("tgfake: %s acts in the private chat of user %d", p.user.FirstName, chatID)
	case ch.chat.Type != ChatPrivate:
		switch st := ch.memberStatus(p.user.ID); st {
		case StatusLeft, StatusKicked:
			s.t.Fatalf("tgfake: %s is %s in chat %d", p.user.FirstName, st, chatID)
		}
	}
	if ch.chat.Type == ChatPrivate {
		// Writing to a bot starts it, and un-blocks it: Telegram clients
		// replace the input field of a blocked bot with "Restart".
		p.started, p.blocked = true, false
	}
	return ch
}

// SendText sends a text message as this user to a chat: their private chat
// with the bot (chat id = p.ID()) or a group. Commands get a bot_command
// entity as Telegram adds them ("/start", "/help@bot"). It returns the
// message as the bot will receive it.
func (p *Person) SendText(chatID int64, text string) Message {
	p.srv.t.Helper()
	return p.send(chatID, text, 0)
}

// Reply sends a text message as this user replying to msg.
func (p *Person) Reply(msg MessageRef, text string) Message {
	p.srv.t.Helper()
	chatID, id := msg.Ref()
	return p.send(chatID, text, id)
}

// SendTextAt is SendText for a message the user sent at an earlier time
// while nobody was receiving (the bot down, a failover): Telegram dates a
// message when it reaches its servers, in unix seconds, however late the
// bot fetches it. The date may not lie in the future nor before the chat's
// latest message: Telegram dates a chat's messages in order.
func (p *Person) SendTextAt(chatID int64, text string, at time.Time) Message {
	p.srv.t.Helper()
	return p.sendAt(chatID, text, 0, at)
}

func (p *Person) send(chatID int64, text string, replyTo int) Message {
	p.srv.t.Helper()
	return p.sendAt(chatID, text, replyTo, time.Time{})
}

func (p *Person) sendAt(chatID int64, text string, replyTo int, at time.Time) Message {
	s := p.srv
	s.t.Helper()
	if text == "" {
		s.t.Fatalf("tgfake: Telegram clients cannot send an empty message")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	date := s.now().Unix()
	if !at.IsZero() {
		if at.Unix() > date {
			s.t.Fatalf("tgfake: a message cannot be dated in the future (%s)", at)
		}
		if n := len(ch.msgs); n > 0 && at.Unix() < ch.msgs[n-1].msg.Date {
			s.t.Fatalf("tgfake: a message cannot be dated before the chat's latest one (%s)", at)
		}
		date = at.Unix()
	}
	from := p.user
	m := Message{From: &from, Date: date, Text: text, Entities: detectEntities(text)}
	if replyTo != 0 {
		target := ch.live(replyTo)
		if target == nil {
			s.t.Fatalf("tgfake: reply to missing message %d in chat %d", replyTo, chatID)
		}
		m.ReplyToMessage = target.quoted(date)
	}
	return s.postLocked(ch, m)
}

// SendRawText sends a text message whose text the bot receives as raw, the
// inside of a JSON string exactly as given: escapes encoding/json never
// writes, such as a lone UTF-16 surrogate ("\\ud83d"), as a client or a
// proxy could send them. The fake keeps a stand-in text of its own.
func (p *Person) SendRawText(chatID int64, raw string) Message {
	s := p.srv
	s.t.Helper()
	if !json.Valid([]byte(`"` + raw + `"`)) {
		s.t.Fatalf("tgfake: SendRawText: %q is not the inside of a JSON string", raw)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	s.nextRaw++
	from := p.user
	m := Message{From: &from, Date: s.now().Unix(), Text: fmt.Sprintf("tgfake raw text %d", s.nextRaw), rawText: raw}
	return s.postLocked(ch, m)
}

// SendPhoto sends a photo as this user, with a caption ("" for none), to a
// chat. The fake makes the photo up (one size, 640×480) and knows its file
// id from then on, so the bot may send it on by that id (sendPhoto). It
// returns the message as the bot will receive it.
func (p *Person) SendPhoto(chatID int64, caption string) Message {
	s := p.srv
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	id, unique := s.newFileIDLocked("photo")
	f := &SentFile{Kind: "photo", FileID: id, FileUniqueID: unique, Width: 640, Height: 480, Size: 40_000, Source: "user"}
	s.files[id] = f
	from := p.user
	m := Message{From: &from, Date: s.now().Unix(), Caption: caption,
		Photo: []PhotoSize{{FileID: id, FileUniqueID: unique, Width: f.Width, Height: f.Height, FileSize: f.Size}}}
	return s.postLocked(ch, m)
}

// Edit edits a text message this user sent earlier, as a Telegram client
// does: the bot receives an edited_message update with the new text and an
// edit_date. It returns the message as the bot will receive it.
func (p *Person) Edit(msg MessageRef, text string) Message {
	s := p.srv
	s.t.Helper()
	if text == "" {
		s.t.Fatalf("tgfake: a message cannot be edited to empty text")
	}
	return p.editOwn("Edit", msg, func(target *msgState, chatID int64, id int) func(*Message) {
		if target.msg.Location != nil {
			s.t.Fatalf("tgfake: message %d in chat %d is a location, which has no text to edit (MoveLiveLocation moves a live one)", id, chatID)
		}
		return func(m *Message) { m.Text, m.Entities = text, detectEntities(text) }
	})
}

// editOwn edits msg, which p sent, as p's client does: the bot receives
// an edited_message update (if it receives the chat's messages) with the
// message as it is now, an edit_date set, which editOwn returns. A
// missing message or another's fails the test, naming caller. check runs
// next, under the server's lock and before anything changes: it fails the
// test for what the edit may not do to target, and returns the change.
func (p *Person) editOwn(caller string, msg MessageRef, check func(target *msgState, chatID int64, id int) func(*Message)) Message {
	s := p.srv
	s.t.Helper()
	chatID, id := msg.Ref()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	target := ch.live(id)
	switch {
	case target == nil:
		s.t.Fatalf("tgfake: %s: no message %d in chat %d", caller, id, chatID)
	case target.fromBot || target.msg.From == nil || target.msg.From.ID != p.user.ID:
		s.t.Fatalf("tgfake: %s: message %d in chat %d is not %s's", caller, id, chatID, p.user.FirstName)
	}
	next := s.applyEditLocked(target, check(target, chatID, id))
	if s.botReceivesLocked(ch) {
		delivered := next
		s.pushUpdateLocked(Update{EditedMessage: &delivered})
	}
	return next
}

// SetBotStatus changes the bot's membership of a group as this user (an
// admin of it) would: adding the bot (StatusMember), making it an
// administrator, removing it (StatusLeft) or banning it (StatusKicked). The
// bot receives a my_chat_member update with the old and new status, as on
// Telegram. To add the bot to a group, register the group, SetChatMember
// the bot StatusLeft, then SetBotStatus StatusMember.
func (p *Person) SetBotStatus(chatID int64, status string) {
	s := p.srv
	s.t.Helper()
	switch status {
	case StatusAdministrator, StatusMember, StatusRestricted, StatusLeft, StatusKicked:
	default:
		s.t.Fatalf("tgfake: SetBotStatus: status %q", status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.groupLocked("SetBotStatus", chatID)
	if ch == nil {
		return
	}
	old := ch.memberStatus(s.bot.ID)
	if old == status {
		return // Telegram sends no update when nothing changes
	}
	ch.members[s.bot.ID] = status
	s.pushUpdateLocked(Update{MyChatMember: &ChatMemberUpdated{
		Chat: ch.chat, From: p.user, Date: s.now().Unix(),
		OldChatMember: chatMember(s.bot, old), NewChatMember: chatMember(s.bot, status),
	}})
}

// Press presses the inline button with the given callback_data on a bot
// message, as a Telegram client does: it fails with ErrNoSuchButton if the
// message (in its current state) has no such button, which catches bots
// whose keyboards do not offer what the test expects. The bot receives a
// callback_query carrying the message as it is now.
func (p *Person) Press(msg MessageRef, data string) (CallbackQuery, error) {
	p.srv.t.Helper()
	return p.press(msg, func(m *Message) (string, error) {
		for _, b := range m.ReplyMarkup.Buttons() {
			if b.CallbackData == data {
				return data, nil
			}
		}
		return "", fmt.Errorf("%w: message %d in chat %d has no button with callback_data %q; buttons: %s",
			ErrNoSuchButton, m.MessageID, m.Chat.ID, data, describeButtons(m.ReplyMarkup))
	})
}

// PressAndWait presses the button labelled text on msg and waits for the
// bot's answer to the press; a button that is not there fails the test.
func (p *Person) PressAndWait(t testing.TB, msg MessageRef, text string) CallbackAnswer {
	t.Helper()
	q, err := p.PressButton(msg, text)
	if err != nil {
		t.Fatalf("press %q: %v", text, err)
	}
	return p.srv.WaitCallbackAnswer(t, q.ID)
}

// PressButton presses the callback button with the given visible text.
func (p *Person) PressButton(msg MessageRef, text string) (CallbackQuery, error) {
	p.srv.t.Helper()
	return p.press(msg, func(m *Message) (string, error) {
		for _, b := range m.ReplyMarkup.Buttons() {
			if b.Text == text && b.CallbackData != "" {
				return b.CallbackData, nil
			}
		}
		return "", fmt.Errorf("%w: message %d in chat %d has no callback button labelled %q; buttons: %s",
			ErrNoSuchButton, m.MessageID, m.Chat.ID, text, describeButtons(m.ReplyMarkup))
	})
}

// PressRaw sends a callback_query with arbitrary data for a bot message,
// whether or not it has such a button: a forged or stale press, as a
// malicious or outdated client could send.
func (p *Person) PressRaw(msg MessageRef, data string) CallbackQuery {
	s := p.srv
	s.t.Helper()
	q, err := p.press(msg, func(*Message) (string, error) { return data, nil })
	if err != nil {
		s.t.Fatalf("tgfake: PressRaw: %v", err)
	}
	return q
}

func (p *Person) press(msg MessageRef, pick func(*Message) (string, error)) (CallbackQuery, error) {
	s := p.srv
	chatID, id := msg.Ref()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	target := ch.live(id)
	if target == nil {
		return CallbackQuery{}, fmt.Errorf("%w: message %d in chat %d does not exist or was deleted", ErrNoSuchMessage, id, chatID)
	}
	if !target.fromBot {
		return CallbackQuery{}, fmt.Errorf("%w: message %d in chat %d was not sent by the bot", ErrNoSuchButton, id, chatID)
	}
	data, err := pick(&target.msg)
	if err != nil {
		return CallbackQuery{}, err
	}
	s.nextCallbackID++
	q := CallbackQuery{
		ID:           strconv.FormatUint(4_000_000_000_000_000_000+s.nextCallbackID, 10),
		From:         p.user,
		Message:      target.quoted(s.now().Unix()),
		ChatInstance: ch.instance,
		Data:         data,
	}
	cb := &callbackState{query: q, chatID: chatID, at: s.now()}
	s.callbacks[q.ID] = cb
	ch.queries = append(ch.queries, cb)
	s.pushUpdateLocked(Update{CallbackQuery: &q})
	return q, nil
}

// botReceivesLocked reports whether the bot gets updates from a chat: not
// from groups it left or was kicked from.
func (s *Server) botReceivesLocked(ch *chatState) bool {
	if ch.chat.Type == ChatPrivate {
		return true
	}
	st := ch.memberStatus(s.bot.ID)
	return st != StatusLeft && st != StatusKicked
}

func describeButtons(m *InlineKeyboardMarkup) string {
	bs := m.Buttons()
	if len(bs) == 0 {
		return "none"
	}
	out := ""
	for i, b := range bs {
		if i > 0 {
			out += ", "
		}
		switch {
		case b.CallbackData != "":
			out += fmt.Sprintf("[%s → %q]", b.Text, b.CallbackData)
		case b.URL != "":
			out += fmt.Sprintf("[%s → %s]", b.Text, b.URL)
		default:
			out += fmt.Sprintf("[%s]", b.Text)
		}
	}
	return out
}

// postLocked stores a message a user sent and hands it to the bot as an
// update when the bot receives that chat's messages.
func (s *Server) postLocked(ch *chatState, m Message) Message {
	st := ch.addMessage(m, false)
	if s.botReceivesLocked(ch) {
		delivered := st.msg // a copy: the update must not follow later changes
		s.pushUpdateLocked(Update{Message: &delivered})
	} else {
		s.hub.NotifyLocked()
	}
	return st.msg
}

// Kinds SendKind sends.
const (
	KindSticker   = "sticker"
	KindVoice     = "voice"
	KindVideo     = "video"
	KindAudio     = "audio"
	KindAnimation = "animation"
	KindVideoNote = "video_note"
	KindContact   = "contact"
	KindPoll      = "poll"
	KindDice      = "dice"
)

// SendKind sends as this user a message of one of the kinds a test rarely
// needs more of than that it arrived (KindSticker, KindVoice, …): the fake
// makes its content up. It returns the message as the bot will receive it.
func (p *Person) SendKind(chatID int64, kind string) Message {
	s := p.srv
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	from := p.user
	m := Message{From: &from, Date: s.now().Unix()}
	file := func() *Attachment {
		id, unique := s.newFileIDLocked(kind)
		return &Attachment{FileID: id, FileUniqueID: unique}
	}
	switch kind {
	case KindSticker:
		a := file()
		a.Type, a.Emoji, a.Width, a.Height = "regular", "👍", 512, 512
		m.Sticker = a
	case KindVoice:
		a := file()
		a.Duration = 3
		m.Voice = a
	case KindVideo:
		a := file()
		a.Width, a.Height, a.Duration = 640, 480, 5
		m.Video = a
	case KindAudio:
		a := file()
		a.Duration = 180
		m.Audio = a
	case KindAnimation:
		a := file()
		a.Width, a.Height, a.Duration = 320, 240, 2
		m.Animation = a
	case KindVideoNote:
		a := file()
		a.Width, a.Height, a.Duration = 240, 240, 4
		m.VideoNote = a
	case KindContact:
		m.Contact = &Contact{PhoneNumber: "+10000000000", FirstName: "Someone"}
	case KindPoll:
		s.nextRaw++
		m.Poll = &Poll{ID: fmt.Sprintf("poll%d", s.nextRaw), Question: "Which?", Type: "regular",
			Options: []PollOption{{Text: "One"}, {Text: "Two"}}}
	case KindDice:
		m.Dice = &Dice{Emoji: "🎲", Value: 4}
	default:
		s.t.Fatalf("tgfake: SendKind: unknown kind %q", kind)
	}
	return s.postLocked(ch, m)
}

// SendAlbum sends n photos (2 to 10) as one album: each arrives as a
// message of its own sharing a media_group_id, the first one with the
// caption, as Telegram delivers them.
func (p *Person) SendAlbum(chatID int64, n int, caption string) []Message {
	s := p.srv
	s.t.Helper()
	if n < 2 || n > 10 {
		s.t.Fatalf("tgfake: an album holds 2 to 10 items, not %d", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	s.nextRaw++
	group := fmt.Sprintf("album%d", s.nextRaw)
	out := make([]Message, 0, n)
	for i := range n {
		id, unique := s.newFileIDLocked("photo")
		f := &SentFile{Kind: "photo", FileID: id, FileUniqueID: unique, Width: 640, Height: 480, Size: 40_000, Source: "user"}
		s.files[id] = f
		from := p.user
		m := Message{From: &from, Date: s.now().Unix(), MediaGroupID: group,
			Photo: []PhotoSize{{FileID: id, FileUniqueID: unique, Width: f.Width, Height: f.Height, FileSize: f.Size}}}
		if i == 0 {
			m.Caption = caption
		}
		out = append(out, s.postLocked(ch, m))
	}
	return out
}

// Forward forwards to chatID, as this user, a text message someone else
// (origin) wrote: the bot receives it with a forward_origin.
func (p *Person) Forward(chatID int64, origin User, text string) Message {
	s := p.srv
	s.t.Helper()
	if text == "" {
		s.t.Fatalf("tgfake: Forward: empty text")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	from := p.user
	date := s.now().Unix()
	m := Message{From: &from, Date: date, Text: text, Entities: detectEntities(text),
		ForwardOrigin: &MessageOrigin{Type: "user", Date: date, SenderUser: &origin}}
	return s.postLocked(ch, m)
}
