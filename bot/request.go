package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/locales"
)

// Request is one update as handlers see it: who sent it, in which language,
// with what rights, and a context that ends with the handler's budget.
type Request struct {
	Inbound
	Ctx  context.Context
	User domain.User
	Lang string
	// Zone is where the reader of the reply lives: times are written in
	// it (the user's zone in private, the admin chat's there).
	Zone  *time.Location
	Admin bool
	// Topic is the workflow topic of a private chat the update came from
	// (domain.TopicVacancies, …; "": the chat), and where a command's
	// replies go: its workflow's topic (inSection).
	Topic string
	bot   *Bot
}

// Inbound is what a handler reads of the update it serves: telebot's
// Context without its sending methods (Send, Reply, Edit, Respond, Notify
// and the rest), so a handler cannot reach Telegram except through the
// port (Request.Reply, Ack, Toast, Alert; the Bot's direct edits).
type Inbound interface {
	Update() tele.Update
	Message() *tele.Message
	Callback() *tele.Callback
	Sender() *tele.User
	Chat() *tele.Chat
	Text() string
	Data() string
	Args() []string
	Get(key string) interface{}
	Set(key string, val interface{})
}

const requestKey = "sb.request"

func requestOf(c tele.Context) *Request {
	r, _ := c.Get(requestKey).(*Request)
	return r
}

// T renders a text in the request's language.
func (r *Request) T(key string, data ...locales.Data) string {
	return r.bot.deps.Catalog.T(r.Lang, key, data...)
}

// InputText renders a workflow's rejection of the user's input: its key with
// its args, more (what only the bot knows: the language's words for a
// filter's values, a number written the language's way) over them, and arg
// as the part of the input at fault, which the caller cuts to the width its
// reply allows (a word of /run_new, a field of /order).
func (r *Request) InputText(e *domain.InputError, arg any, more ...locales.Data) string {
	data := make(locales.Data, len(e.Args)+1)
	for k, v := range e.Args {
		data[k] = v
	}
	for _, m := range more {
		for k, v := range m {
			data[k] = v
		}
	}
	data["Arg"] = arg
	return r.T(e.Key, data)
}

// Reply queues HTML text for the update's chat as outbox rows, split at
// Telegram's limit, the markup on the last chunk so buttons sit under the
// whole text; the sender delivers them at the chat's pace. Only when the
// database cannot take them are they sent before Reply returns (queueReply).
// It is the bot's own: Request carries no telebot Reply to fall back on.
func (r *Request) Reply(text string, markup *tele.ReplyMarkup) error {
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return r.bot.queueReply(ctx, r.Chat().ID, 0, text, markup)
}

// ReplyToAsker answers the update's sender with HTML text: in a group,
// as a reply to their message that only they see where Telegram lets the
// bot send one (it administers the group); elsewhere, as Reply. Only what
// the group may read is sent this way.
func (r *Request) ReplyToAsker(text string) error {
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	chat := r.Chat()
	if chat.Type == tele.ChatPrivate {
		return r.Reply(text, nil)
	}
	replyTo := 0
	if m := r.Message(); m != nil {
		replyTo = m.ID
	}
	return r.bot.queueReplyFor(ctx, chat.ID, r.User.ID, replyTo, text, nil)
}

// ReplyRendered sends what a renderer made for the request (a list and its
// buttons), or returns the renderer's error: r.ReplyRendered(u.banList(r)).
func (r *Request) ReplyRendered(text string, markup *tele.ReplyMarkup, err error) error {
	if err != nil {
		return err
	}
	return r.Reply(text, markup)
}

// replyRendered is the handler of a command that answers with what render
// makes: a list whose buttons re-render it in place.
func replyRendered(render func(*Request) (string, *tele.ReplyMarkup, error)) func(*Request) error {
	return func(r *Request) error { return r.ReplyRendered(render(r)) }
}

// Alert answers a button press with a pop-up of the text key renders. A
// refusal of a press in a group (refusals) goes instead as a message only
// the presser sees, where Telegram allows it (answerOnlyToPresser).
func (r *Request) Alert(key string, data ...locales.Data) error {
	text := r.T(key, data...)
	if refusals[key] && r.bot.answerOnlyToPresser(r, text) {
		return nil
	}
	return r.AlertText(text)
}

// pressAnswerWait is the longest an ephemeral answer to a press waits for
// the group's pace before the alert answers instead: one group message's
// spacing, well within Telegram's 15 seconds.
const pressAnswerWait = 3 * time.Second

// refusals are the answers to a press that is stale or not the presser's
// to make.
var refusals = map[string]bool{"error.callback_forbidden": true, "error.callback_invalid": true}

// answerOnlyToPresser answers a press in a group with text (catalogue
// HTML) as an ephemeral message to the presser, which Telegram lets any
// bot send within 15 seconds of the press, and stops the button's spinner;
// false where it cannot (a private chat, a server without ephemeral
// messages, a refusal), for the caller's alert.
func (b *Bot) answerOnlyToPresser(r *Request, text string) bool {
	cb, chat := r.Callback(), r.Chat()
	if cb == nil || chat == nil || (chat.Type != tele.ChatGroup && chat.Type != tele.ChatSuperGroup) ||
		slices.Contains(b.deps.Direct.Lacking(), delivery.FeatureEphemeral) {
		return false
	}
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	m := domain.Message{ChatID: chat.ID, Kind: domain.KindReply, Text: text, OnlyFor: r.User.ID, ForPress: cb.ID}
	if cb.Message != nil {
		m.ReplyTo = cb.Message.ID
	}
	// Soon or never: a busy group's pace (a message every three seconds)
	// must not hold the press's answer long, nor past Telegram's window;
	// an alert takes none of the group's budget.
	if _, err := b.deps.Direct.SendWithin(ctx, m, pressAnswerWait); err != nil {
		b.deps.Log.Info("press answered with an alert: no ephemeral message", "chat", chat.ID, "err", err)
		return false
	}
	if err := b.answerCallback(ctx, r.Inbound, "", false); err != nil {
		b.deps.Log.Warn("answer a press answered ephemerally", "chat", chat.ID, "err", err)
	}
	return true
}

// AlertText answers a button press with a pop-up of text.
func (r *Request) AlertText(text string) error {
	return r.bot.answerCallback(r.Ctx, r.Inbound, text, true)
}

// Toast answers a button press with text that fades by itself.
func (r *Request) Toast(text string) error {
	return r.bot.answerCallback(r.Ctx, r.Inbound, text, false)
}

// Ack answers a button press with nothing to say: the client stops its
// spinner.
func (r *Request) Ack() error {
	return r.bot.answerCallback(r.Ctx, r.Inbound, "", false)
}

// Forbidden refuses a button press by someone who may not act on it (not the
// vacancy's owner, not the addressed master, not an admin); nothing changes.
func (r *Request) Forbidden() error {
	r.bot.deps.Log.Warn("button press refused", "user", r.User.ID, "data_len", len(r.Callback().Data))
	return r.Alert("error.callback_forbidden")
}

// answerCallback answers the button press c carries through the port.
// Telegram refuses an answer to a press it no longer waits for ("query is
// too old": some seconds on); that is an update run again after its
// replica died, whose first run answered it, or one that waited out an
// outage in the inbox. Nothing is left to answer, so the handler's work
// stands instead of failing over the toast.
func (b *Bot) answerCallback(ctx context.Context, c Inbound, text string, alert bool) error {
	cb := c.Callback()
	if cb == nil {
		return errors.New("answer a button press: the update is not one")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	err := b.tg.AnswerCallback(ctx, delivery.CallbackAnswer{QueryID: cb.ID, Text: delivery.WithoutTimes(text), Alert: alert})
	if errors.Is(err, delivery.ErrQueryTooOld) {
		b.deps.Log.Info("button press answered too late for Telegram: no toast", "query", cb.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("answer button press: %w", err)
	}
	return nil
}
