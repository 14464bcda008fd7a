package bot

import (
	"context"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/locales"
)

// Topics tells which workflow topic of a private chat a thread is: the
// one the sender created for it (storage's ChatTopics).
type Topics interface {
	TopicAt(ctx context.Context, chatID int64, thread int) (string, error)
}

// sectionTopics is the topic of a private chat a command's answer goes
// into: its workflow's. A general command (/help, /start) answers in the
// topic it was written in.
var sectionTopics = map[Section]string{
	SectionJobs:        domain.TopicVacancies,
	SectionMemory:      domain.TopicMemory,
	SectionMaster:      domain.TopicOrders,
	SectionAdminOrders: domain.TopicAdmin,
	SectionAdminRuns:   domain.TopicAdmin,
	SectionAdminSystem: domain.TopicAdmin,
}

// place is where the replies a handler writes to its update's chat go:
// the topic of a private chat (a workflow's), or the topic of a forum
// group the update came from.
type place struct {
	chatID int64
	topic  string
	thread int
}

type placeKey struct{}

func withPlace(ctx context.Context, p place) context.Context {
	return context.WithValue(ctx, placeKey{}, p)
}

// placeIn is where replies to chatID go from ctx; the zero place for a
// chat other than the update's.
func placeIn(ctx context.Context, chatID int64) place {
	p, _ := ctx.Value(placeKey{}).(place)
	if p.chatID != chatID {
		return place{}
	}
	return p
}

// wherefrom is the topic an update came from: in a private chat, the
// workflow whose topic the message (or the message of a pressed button)
// is in; in a forum group, its thread. A store that fails leaves the
// update where it would be without topics, which the log tells.
func (b *Bot) wherefrom(ctx context.Context, c tele.Context) place {
	msg := c.Message()
	chat := c.Chat()
	if msg == nil || chat == nil || msg.ThreadID == 0 {
		return place{}
	}
	p := place{chatID: chat.ID}
	switch {
	case chat.Type == tele.ChatPrivate && b.deps.Topics != nil:
		topic, err := b.deps.Topics.TopicAt(ctx, chat.ID, msg.ThreadID)
		if err != nil {
			b.deps.Log.Warn("topic of a message not read: answered as in the chat", "chat", chat.ID, "thread", msg.ThreadID, "err", err)
		}
		p.topic = topic
	case msg.TopicMessage:
		// A forum's topic; a reply in an ordinary group has a thread too,
		// which is not one.
		p.thread = msg.ThreadID
	}
	return p
}

// inSection moves a command's replies in a private chat into its
// workflow's topic.
func (r *Request) inSection(s Section) {
	topic, ok := sectionTopics[s]
	if !ok || r.Chat() == nil || r.Chat().Type != tele.ChatPrivate {
		return
	}
	r.Topic = topic
	r.Ctx = withPlace(r.Ctx, place{chatID: r.Chat().ID, topic: topic})
}

// TopicName names a chat's topic in its reader's language: the user's in
// a private chat, the admin chat's in a forum.
func (b *Bot) TopicName(ctx context.Context, chatID int64, topic string) string {
	lang := b.cfg.AdminLang
	if chatID > 0 {
		// A user not read (gone, or the database away) gets the first
		// language's name: the topic is named once, so a wrong guess of
		// the admin chat's would stay.
		lang = ""
		if u, err := b.deps.Users.Get(ctx, chatID); err == nil {
			lang = u.Lang()
		}
	}
	if lang == "" {
		lang = locales.Languages[0]
	}
	key, ok := topicNames[topic]
	if !ok {
		key = "topic.admin" // a topic the bot does not name is none it makes
	}
	return b.deps.Catalog.T(lang, key)
}

// topicNames are the keys of the topics' names.
var topicNames = map[string]string{
	domain.TopicVacancies: "topic.vacancies", domain.TopicMemory: "topic.memory", domain.TopicOrders: "topic.orders",
	domain.TopicAdmin: "topic.admin", domain.TopicLog: "topic.log", domain.TopicRuns: "topic.runs", domain.TopicNotices: "topic.notices",
}
