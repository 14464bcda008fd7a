package bot

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/domain"
)

// Messages renders HTML text for a chat as outbox rows: split at Telegram's
// limit, in order, the buttons under the last part. Workflows write them
// with the state change that causes them; the senders deliver them.
func Messages(chatID int64, kind string, ref int64, text string, kb *tele.ReplyMarkup) []domain.Message {
	chunks := Split(text, MaxMessageLen)
	out := make([]domain.Message, 0, len(chunks))
	for i, chunk := range chunks {
		m := domain.Message{ChatID: chatID, Kind: kind, Ref: ref, Text: chunk}
		if i == len(chunks)-1 {
			m.Buttons = Buttons(kb)
		}
		out = append(out, m)
	}
	return out
}

// toTopic puts msgs into topic (domain.Message.Topic): a workflow's
// message to a user that its kind does not place, or a system notice.
func toTopic(topic string, msgs []domain.Message) []domain.Message {
	for i := range msgs {
		msgs[i].Topic = topic
	}
	return msgs
}

// Keyed is one message that later rows may edit by key (an offer, a
// progress message): the text must fit one message.
func Keyed(chatID int64, kind string, ref int64, key, text string, kb *tele.ReplyMarkup) domain.Message {
	return domain.Message{ChatID: chatID, Kind: kind, Ref: ref, Key: key, Text: text, Buttons: Buttons(kb)}
}

// EditOf is an edit of the message key names; ifGone says what to do when
// that message is gone (domain.IfGoneDrop or domain.IfGoneSend).
// Its text is cut to one message (fitMessage): Telegram refuses a longer
// edit, and a refused edit row would leave the message as it was.
func EditOf(chatID int64, kind string, ref int64, key, text string, kb *tele.ReplyMarkup, ifGone string) domain.Message {
	return domain.Message{ChatID: chatID, Kind: kind, Ref: ref, Key: key, Edit: true, Text: fitMessage(text), Buttons: Buttons(kb), IfGone: ifGone}
}

// MessageKey names a workflow's message for later edits ("offer:17").
func MessageKey(kind string, id int64) string { return kind + ":" + strconv.FormatInt(id, 10) }

// copyMark marks a telebot button as a copy button, its Data the text to
// copy: telebot's InlineButton, the renderers' keyboard type, has no
// copy_text field, and the renderers' keyboards reach Telegram only
// through Buttons, which turns the mark into domain.Button's Copy.
const copyMark = "copy_text"

// copyButton is a button that copies text to the clipboard; false when
// text is empty or longer than a copy button holds. What it copies stands
// in the message's text too: a server without copy buttons gets the
// message without them (bot/delivery).
func copyButton(label, text string) (tele.InlineButton, bool) {
	text = strings.TrimSpace(text)
	if text == "" || utf16Len(text) > domain.MaxCopyText {
		return tele.InlineButton{}, false
	}
	return tele.InlineButton{Unique: copyMark, Text: label, Data: text}, true
}

// styleMark prefixes a telebot button's Unique with its style, and
// disabledMark marks a disabled one, for Buttons to carry over as the
// copy mark is.
const (
	styleMark    = "style:"
	disabledMark = "disabled"
)

// styled is b coloured with style (domain.Style*).
func styled(b tele.InlineButton, style string) tele.InlineButton {
	b.Unique = styleMark + style
	return b
}

// disabledButton is a button that does nothing, its label saying why
// (an expired offer's "⌛ Expired"): a server without disabled buttons gets
// the message without it, its text saying the same (bot/delivery).
func disabledButton(label string) tele.InlineButton {
	return tele.InlineButton{Unique: disabledMark, Text: label}
}

// Buttons converts telebot's inline keyboard to the outbox's.
func Buttons(kb *tele.ReplyMarkup) [][]domain.Button {
	if kb == nil || len(kb.InlineKeyboard) == 0 {
		return nil
	}
	out := make([][]domain.Button, 0, len(kb.InlineKeyboard))
	for _, row := range kb.InlineKeyboard {
		r := make([]domain.Button, 0, len(row))
		for _, b := range row {
			switch {
			case b.Unique == copyMark:
				r = append(r, domain.Button{Text: b.Text, Copy: b.Data})
			case b.Unique == disabledMark:
				r = append(r, domain.Button{Text: b.Text, Disabled: true})
			default:
				style, _ := strings.CutPrefix(b.Unique, styleMark)
				if style == b.Unique {
					style = ""
				}
				r = append(r, domain.Button{Text: b.Text, Data: b.Data, URL: b.URL, Style: style})
			}
		}
		out = append(out, r)
	}
	return out
}

// Direct is the bot's port to Telegram (bot/delivery's Sender implements
// it): messages at once under the outbox's limiter and failure rules, chat
// actions under the same limiter, and the client through which every other
// call goes, so no request to the Bot API bypasses its error rules.
type Direct interface {
	SendNow(ctx context.Context, m domain.Message) (int, error)
	// SendWithin sends m within d of the chat's pace or not at all
	// (delivery.ErrPaced).
	SendWithin(ctx context.Context, m domain.Message, d time.Duration) (int, error)
	// Wake tells the sender rows were just queued.
	Wake()
	ChatAction(ctx context.Context, chatID int64, topic, action string) error
	Client() *delivery.Client
	// Lacking lists the Bot API features the server was seen to refuse
	// lately, which the sender falls back from (/status names them).
	Lacking() []delivery.Feature
}

// Queue writes messages to the outbox (storage implements it).
type Queue interface {
	Enqueue(ctx context.Context, msgs ...domain.Message) error
}

// queueReply answers a user's command: text to a chat, split, the markup
// under the last part, the first part a reply to replyTo when it is set.
// It writes outbox rows and wakes the sender; it does not send. It goes
// through the outbox like everything else, so the handler returns
// at once instead of waiting for the chat's pacing (an admin's forty quick
// /order commands are all created within a second, their confirmations
// follow at Telegram's pace), and a Telegram outage delays the answer
// rather than losing it or failing the handler, which would tell the user
// to try again a command whose change already committed. Only when the
// outbox cannot take it (the database is down) is it sent at once, and
// not while the inbox would run the update again (queueMessages).
func (b *Bot) queueReply(ctx context.Context, chatID int64, replyTo int, text string, kb *tele.ReplyMarkup) error {
	return b.queueReplyFor(ctx, chatID, 0, replyTo, text, kb)
}

// queueReplyFor is queueReply for one member of a group: onlyFor (0:
// everyone) makes each part a message only they see where Telegram lets
// the bot send one (domain.Message.OnlyFor). Only what the group may read
// is sent this way: where it may not, it goes to the group.
func (b *Bot) queueReplyFor(ctx context.Context, chatID, onlyFor int64, replyTo int, text string, kb *tele.ReplyMarkup) error {
	msgs := Messages(chatID, domain.KindReply, 0, text, kb)
	if len(msgs) > 0 {
		msgs[0].ReplyTo = replyTo
	}
	for i := range msgs {
		msgs[i].OnlyFor = onlyFor
	}
	return b.queueMessages(ctx, chatID, msgs)
}

// queueMessages writes a reply's messages to the outbox and wakes the
// sender, numbering them by the update that caused them (replies) and
// placing them in the topic the update's handler answers in (withPlace);
// only when the outbox cannot take them are they sent at once.
//
// Not so for an update the inbox will run again if this run fails for a
// passing reason: the error is returned and the rerun writes the replies
// under the same origins, once. Sent at once now, they would be sent a
// second time by a rerun whenever this run's done-mark is lost too (the
// database that refused the replies refusing it). On the update's last
// attempt they are sent at once, since a failure then is told to the user
// as not carried out.
func (b *Bot) queueMessages(ctx context.Context, chatID int64, msgs []domain.Message) error {
	at := placeIn(ctx, chatID)
	for i := range msgs {
		msgs[i].Topic, msgs[i].Thread = at.topic, at.thread
	}
	rs := repliesOf(ctx)
	if rs != nil {
		for i := range msgs {
			// A message that names its own origin (what it answers spans
			// updates: an album) keeps it.
			if msgs[i].Origin == "" {
				msgs[i].Origin = rs.next()
			}
		}
	}
	if b.deps.Queue != nil {
		err := b.deps.Queue.Enqueue(context.WithoutCancel(ctx), msgs...)
		if err == nil {
			b.deps.Direct.Wake()
			return nil
		}
		if rs != nil && rs.retried && b.passing(err) {
			return fmt.Errorf("queue reply to chat %d: %w", chatID, err)
		}
		b.deps.Log.Warn("reply not queued, sending it at once", "chat", chatID, "err", err)
	}
	for i, m := range msgs {
		if _, err := b.deps.Direct.SendNow(ctx, m); err != nil {
			return fmt.Errorf("send message part %d/%d: %w", i+1, len(msgs), err)
		}
	}
	return nil
}

// replies numbers the replies an inbox update's handler writes, so that a
// second run of the update (its replica died between the handler's commit
// and the done-mark) writes none the first run wrote: the n-th reply of
// update u is the outbox's origin "u.n", written once (storage's onOrigin).
// A second run reads the state the first left and may word its reply
// otherwise ("already exists" for "created"); its n-th reply still stands
// for the first's n-th and is not written, while a reply the first run
// did not get to write is.
type replies struct {
	update int64
	n      atomic.Int64
	// retried: the inbox runs the update again if this run fails for a
	// passing reason (inboxOutcome.retried).
	retried bool
}

type repliesKey struct{}

func withReplies(ctx context.Context, update int64, retried bool) context.Context {
	return context.WithValue(ctx, repliesKey{}, &replies{update: update, retried: retried})
}

func repliesOf(ctx context.Context) *replies {
	r, _ := ctx.Value(repliesKey{}).(*replies)
	return r
}

func (r *replies) next() string {
	return strconv.FormatInt(r.update, 10) + "." + strconv.FormatInt(r.n.Add(1), 10)
}

// editDirect edits a message at once, through the same path. An edit is
// one message: a text too long for it is cut (fitEdit) rather than
// refused by Telegram.
func (b *Bot) editDirect(ctx context.Context, chatID int64, messageID int, text string, kb *tele.ReplyMarkup) error {
	m := domain.Message{ChatID: chatID, Kind: domain.KindReply, Edit: true, ReplyTo: messageID, Text: b.fitEdit(text), Buttons: Buttons(kb)}
	if _, err := b.deps.Direct.SendNow(ctx, m); err != nil {
		return fmt.Errorf("edit message %d: %w", messageID, err)
	}
	return nil
}

// fitEdit is an edit's text cut to one message (fitMessage). Every view
// edited in place is built to fit, so a cut here is a bug in its budgets:
// logged, so that it is found, while the user still gets the edit and its
// buttons.
func (b *Bot) fitEdit(text string) string {
	fitted := fitMessage(text)
	if len(fitted) != len(text) {
		b.deps.Log.Warn("edit cut to fit one message", "units", utf16Len(text), "limit", MaxMessageLen)
	}
	return fitted
}

// editMarkupDirect replaces a message's buttons at once, its text left as
// it is (editMessageReplyMarkup), through the same path; no buttons removes
// them.
func (b *Bot) editMarkupDirect(ctx context.Context, chatID int64, messageID int, kb *tele.ReplyMarkup) error {
	m := domain.Message{ChatID: chatID, Kind: domain.KindReply, Edit: true, MarkupOnly: true, ReplyTo: messageID, Buttons: Buttons(kb)}
	if _, err := b.deps.Direct.SendNow(ctx, m); err != nil {
		return fmt.Errorf("edit buttons of message %d: %w", messageID, err)
	}
	return nil
}

// SendHTML answers something the user just did (an error, a rate limit)
// with text to a chat, split, queued as a reply (queueReply).
func (b *Bot) SendHTML(chat *tele.Chat, text string, markup *tele.ReplyMarkup) error {
	return b.queueReply(context.Background(), chat.ID, 0, text, markup)
}
