package bot

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"

	tele "gopkg.in/telebot.v3"
)

// orderedPoller hands each chat's updates to the handlers one at a time,
// in the order Telegram sent them, while different chats are served at the
// same time. telebot on its own starts a goroutine per update, so two quick
// messages of one user raced each other into the database and could be
// stored, and answered, the wrong way round (the memory chat promises a
// user's messages are answered in order). With this poller telebot runs
// synchronously (Settings.Synchronous) and every handler runs on the
// goroutine of its chat's queue.
//
// inflight counts the updates fetched and not yet handled, queued or
// running, so a stop drains both: Telegram has already been told they
// arrived and would not send them again.
type orderedPoller struct {
	inner    tele.Poller
	inflight sync.WaitGroup
	log      *slog.Logger

	mu sync.Mutex
	// queued holds, per chat being served, the updates waiting behind the
	// one its goroutine is handling; a chat is in the map exactly while its
	// goroutine runs.
	queued map[int64][]tele.Update
}

func newOrderedPoller(inner tele.Poller, log *slog.Logger) *orderedPoller {
	return &orderedPoller{inner: inner, log: log, queued: map[int64][]tele.Update{}}
}

// Poll runs the inner poller into a channel of its own and queues what it
// fetches; dest, telebot's channel, stays unused.
func (p *orderedPoller) Poll(b *tele.Bot, dest chan tele.Update, stop chan struct{}) {
	in := make(chan tele.Update, cap(dest))
	done := make(chan struct{})
	go func() { p.inner.Poll(b, in, stop); close(done) }()
	for {
		select {
		case u := <-in:
			p.enqueue(b, u)
		case <-done:
			for {
				select {
				case u := <-in:
					p.enqueue(b, u)
				default:
					return
				}
			}
		}
	}
}

func (p *orderedPoller) enqueue(b *tele.Bot, u tele.Update) {
	p.inflight.Add(1)
	chat, ok := orderKey(u)
	if !ok {
		go p.handle(b, u) // nothing to keep in order with (an inline query, say)
		return
	}
	p.mu.Lock()
	if q, busy := p.queued[chat]; busy {
		p.queued[chat] = append(q, u)
		p.mu.Unlock()
		return
	}
	p.queued[chat] = nil
	p.mu.Unlock()
	go p.serve(b, chat, u)
}

// serve handles u, then the chat's queue, until it is empty.
func (p *orderedPoller) serve(b *tele.Bot, chat int64, u tele.Update) {
	for {
		p.handle(b, u)
		p.mu.Lock()
		q := p.queued[chat]
		if len(q) == 0 {
			delete(p.queued, chat)
			p.mu.Unlock()
			return
		}
		u, p.queued[chat] = q[0], q[1:]
		p.mu.Unlock()
	}
}

// handle runs u's handler. The bot's recover middleware catches a panic in
// a handler; this one catches telebot's own, so that one bad update neither
// kills the process nor stalls its chat.
func (p *orderedPoller) handle(b *tele.Bot, u tele.Update) {
	defer p.inflight.Done()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("update panic", "panic", fmt.Sprint(r), "stack", string(debug.Stack()), "update", u.ID)
		}
	}()
	b.ProcessUpdate(u)
}

// orderKey is the chat whose updates u must stay in order with: the chat
// of a message, an edit, a channel post, a button press or a membership
// change; the sender's private chat for the rest that have one.
func orderKey(u tele.Update) (int64, bool) {
	for _, m := range []*tele.Message{u.Message, u.EditedMessage, u.ChannelPost, u.EditedChannelPost} {
		if m != nil && m.Chat != nil {
			return m.Chat.ID, true
		}
	}
	if c := u.Callback; c != nil {
		if c.Message != nil && c.Message.Chat != nil {
			return c.Message.Chat.ID, true
		}
		if c.Sender != nil {
			return c.Sender.ID, true
		}
	}
	for _, m := range []*tele.ChatMemberUpdate{u.MyChatMember, u.ChatMember} {
		if m != nil && m.Chat != nil {
			return m.Chat.ID, true
		}
	}
	if r := u.ChatJoinRequest; r != nil && r.Chat != nil {
		return r.Chat.ID, true
	}
	return 0, false
}
