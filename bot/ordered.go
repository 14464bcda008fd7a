package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
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
	panics   domain.Panics

	mu sync.Mutex
	// queued holds, per chat being served, the updates waiting behind the
	// one its goroutine is handling; a chat is in the map exactly while its
	// goroutine runs.
	queued map[int64][]tele.Update
}

func newOrderedPoller(inner tele.Poller, log *slog.Logger, panics domain.Panics) *orderedPoller {
	return &orderedPoller{inner: inner, log: log, panics: panics, queued: map[int64][]tele.Update{}}
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
	_ = p.panics.Contain(p.log, "update", u.ID, func() { route(b, u) })
}

// route runs u through tb's handlers. telebot has no endpoint for a
// message holding a poll (OnPoll is a poll's state changing, and is not
// called for it): such a message goes where the other kinds nothing reads
// go, so a user who sends one in private is answered, not met with silence.
func route(tb *tele.Bot, u tele.Update) {
	if m := u.Message; m != nil && m.Poll != nil {
		c := tb.NewContext(u)
		if err := tb.Trigger(tele.OnMedia, c); err != nil {
			tb.OnError(err, c)
		}
		return
	}
	tb.ProcessUpdate(u)
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

// inboxPoller is the poller of a bot with an inbox: intake (when this
// replica reads Telegram) stores updates, and on every replica a pool of
// workers claims them, each the oldest pending update of its chat, so a
// chat's updates run one at a time in Telegram's order across replicas,
// while different chats are served at the same time. A claim has a short
// lease renewed while its handler runs; a dead replica's claims are taken
// over when theirs lapse.
//
// inflight counts the claimed updates still running, so a stop drains
// them; nothing else is held in memory (what is not claimed waits in the
// inbox for whichever replica is up).
type inboxPoller struct {
	b        *Bot
	intake   tele.Poller // nil: this replica only handles
	inflight sync.WaitGroup
	wake     chan struct{}
	// finished hears a worker free its slot (its chat's next update may
	// be claimable now).
	finished chan struct{}
	running  atomic.Int64
}

func newInboxPoller(b *Bot, intake tele.Poller) *inboxPoller {
	return &inboxPoller{b: b, intake: intake, wake: make(chan struct{}, 1), finished: make(chan struct{}, 1)}
}

// Wake tells the workers updates were stored (a hint: they also sweep).
func (p *inboxPoller) Wake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *inboxPoller) Poll(tb *tele.Bot, dest chan tele.Update, stop chan struct{}) {
	intakeDone := make(chan struct{})
	go func() {
		defer close(intakeDone)
		if p.intake != nil {
			p.intake.Poll(tb, dest, stop)
		}
	}()
	p.claimLoop(stop)
	<-intakeDone
}

// claimLoop claims as many updates as there are idle workers whenever
// something may have become claimable: updates stored (here or, by NOTIFY,
// elsewhere), a worker done, or the sweep, which also finds backoffs due
// and lapsed claims.
func (p *inboxPoller) claimLoop(stop chan struct{}) {
	cfg := p.b.cfg
	sweep := time.NewTicker(cfg.InboxSweep)
	defer sweep.Stop()
	failing := false
	for {
		if free := cfg.InboxWorkers - int(p.running.Load()); free > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			items, err := p.b.deps.Inbox.Claim(ctx, p.b.claimer(), free, cfg.InboxLease)
			cancel()
			switch {
			case err != nil && !failing:
				p.b.deps.Log.Warn("inbox not reachable: updates wait there", "err", err)
				failing = true
			case err == nil && failing:
				p.b.deps.Log.Info("inbox reachable again")
				failing = false
			}
			for _, it := range items {
				p.running.Add(1)
				p.inflight.Add(1)
				go p.run(it)
			}
		}
		select {
		case <-stop:
			return
		case <-p.wake:
		case <-p.finished:
		case <-sweep.C:
		}
	}
}

// claimer is the name this replica's inbox claims carry.
func (b *Bot) claimer() string {
	if b.deps.Claimer != "" {
		return b.deps.Claimer
	}
	return b.deps.Replica
}

// inboxOutcome is how an inbox-run update's handler ended, as the recover
// middleware saw it; the worker decides what the user hears.
type inboxOutcome struct {
	err      error
	panicked bool
	// retried: a passing failure of this run is retried from the inbox
	// (it is not the update's last attempt).
	retried bool
}

// run handles one claimed update and settles it: done; given back with
// backoff when it failed for a passing reason (the user hears nothing
// yet); failed, and the user told once, when it panicked, failed for good,
// or ran out of attempts.
func (p *inboxPoller) run(it domain.InboxUpdate) {
	defer func() {
		p.running.Add(-1)
		p.inflight.Done()
		select {
		case p.finished <- struct{}{}:
		default:
		}
	}()
	b, cfg, log := p.b, p.b.cfg, p.b.deps.Log
	cl := &claim{p: p, it: it, until: time.Now().Add(cfg.InboxLease)}
	var u tele.Update
	if err := json.Unmarshal(it.Body, &u); err != nil {
		log.Error("inbox update unreadable", "update", it.ID, "err", err)
		cl.settle("fail", func(ctx context.Context) (bool, error) {
			return b.deps.Inbox.Failed(ctx, it.ID, it.Token, err.Error())
		})
		return
	}
	if it.Refused != "" {
		// Kept as a skeleton: nothing of what the sender wrote is here to
		// handle. Told only by the replica whose failed-mark took, so once.
		log.Error("update refused by the inbox: the sender is told", "update", it.ID, "why", it.Refused)
		if cl.settle("fail", func(ctx context.Context) (bool, error) {
			return b.deps.Inbox.Failed(ctx, it.ID, it.Token, "refused: "+it.Refused)
		}) {
			b.tellNotDone(u, "error.unreadable")
		}
		return
	}
	stopRenew := cl.renew()
	var out inboxOutcome
	if st := stoppedGeneration(it.Body); st != nil {
		out = p.b.stopGeneration(*st)
	} else {
		out = p.handle(u, it.Attempts < cfg.InboxAttempts)
	}
	stopRenew()

	inbox := b.deps.Inbox
	switch {
	case out.err == nil && !out.panicked:
		cl.settle("done", func(ctx context.Context) (bool, error) { return inbox.Done(ctx, it.ID, it.Token) })
	case !out.panicked && b.handlerCtx.Err() != nil:
		// Cut by the end of the drain: not the update's fault, back to
		// the inbox for the next replica, no backoff.
		cl.settle("retry", func(ctx context.Context) (bool, error) {
			return inbox.Retry(ctx, it.ID, it.Token, 0, "stopped: "+out.err.Error())
		})
	case !out.panicked && b.passing(out.err) && it.Attempts < cfg.InboxAttempts:
		after := min(time.Second<<min(it.Attempts-1, 20), cfg.InboxMaxBackoff)
		log.Warn("update failed for a passing reason: retrying from the inbox",
			"update", it.ID, "attempt", it.Attempts, "in", after, "err", out.err)
		cl.settle("retry", func(ctx context.Context) (bool, error) {
			return inbox.Retry(ctx, it.ID, it.Token, after, out.err.Error())
		})
	default:
		why := "panic"
		if out.err != nil {
			why = out.err.Error()
		}
		log.Error("update failed: the user is told it was not carried out", "update", it.ID, "attempt", it.Attempts, "err", why)
		// Told only by the replica whose failed-mark took, so once.
		if cl.settle("fail", func(ctx context.Context) (bool, error) { return inbox.Failed(ctx, it.ID, it.Token, why) }) {
			b.tellNotDone(u, "error.not_done")
		}
	}
}

// handle runs u through telebot (middleware and handlers as they are) and
// returns how it ended. The recover middleware reports a handler's error or
// panic here instead of answering; this recover catches telebot's own.
func (p *inboxPoller) handle(u tele.Update, retried bool) (out inboxOutcome) {
	out.retried = retried
	p.b.outcomes.Store(u.ID, &out)
	defer p.b.outcomes.Delete(u.ID)
	if pe := p.b.deps.Panics.Contain(p.b.deps.Log, "update", u.ID, func() { route(p.b.tb, u) }); pe != nil {
		out.panicked = true
	}
	return out
}

// claim is one claimed update's lease as this worker keeps it.
type claim struct {
	p  *inboxPoller
	it domain.InboxUpdate
	mu sync.Mutex
	// until is when the lease lapses by this replica's reckoning (set
	// before the statement that renews it, so it errs early).
	until time.Time
}

// renew keeps the claim while its handler runs, every lease/3.
func (c *claim) renew() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lease, log := c.p.b.cfg.InboxLease, c.p.b.deps.Log
	renew := func(ctx context.Context) (bool, error) {
		at := time.Now()
		rctx, rcancel := context.WithTimeout(ctx, lease/3)
		defer rcancel()
		ok, err := c.p.b.deps.Inbox.Renew(rctx, c.it.ID, c.it.Token, lease)
		if err == nil && ok {
			c.mu.Lock()
			c.until = at.Add(lease)
			c.mu.Unlock()
		}
		return ok, err
	}
	failed := func(err error) { log.Warn("renew inbox claim", "update", c.it.ID, "err", err) }
	go func() {
		defer close(done)
		if domain.RenewLease(ctx, clockwork.NewRealClock(), lease, renew, failed) {
			log.Warn("inbox claim lost while its handler runs", "update", c.it.ID)
		}
	}()
	return func() { cancel(); <-done }
}

// settle runs a settling statement, retrying while the database is away
// (a blink must not leave the update claimed until its lease lapses, nor,
// for a done update, have it run again) until the claim could have lapsed.
// It reports whether the statement took.
func (c *claim) settle(what string, stmt func(ctx context.Context) (bool, error)) bool {
	backoff := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := stmt(ctx)
		cancel()
		if err == nil {
			if !ok {
				c.p.b.deps.Log.Warn("inbox claim lost before it was settled: its new holder decides", "update", c.it.ID, "as", what)
			}
			return ok
		}
		c.mu.Lock()
		left := time.Until(c.until)
		c.mu.Unlock()
		if left <= backoff {
			c.p.b.deps.Log.Error("inbox update not settled: its claim lapses and another worker takes it",
				"update", c.it.ID, "as", what, "err", err)
			return false
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// allowedUpdates are the kinds of update the bot asks Telegram for:
// telebot's, and the stop of a draft, which telebot does not know.
var allowedUpdates = append(slices.Clone(tele.AllowedUpdates), "stopped_message_generation")

// generationStopped is the stopped_message_generation update (Bot API
// 10.3): the user pressed the stop button of a draft. telebot does not
// know it, so it is read from the update as stored.
type generationStopped struct {
	Chat struct {
		ID int64 `json:"id"`
	} `json:"chat"`
	DraftID int64 `json:"draft_id"`
}

// stoppedGeneration is the update's stopped_message_generation, if it is
// one.
func stoppedGeneration(body []byte) *generationStopped {
	if !bytes.Contains(body, []byte(`"stopped_message_generation"`)) {
		return nil
	}
	var u struct {
		Stopped *generationStopped `json:"stopped_message_generation"`
	}
	if json.Unmarshal(body, &u) != nil || u.Stopped == nil || u.Stopped.DraftID == 0 {
		return nil
	}
	return u.Stopped
}

// stopGeneration stops the answer whose draft the user stopped. Drafts
// are sent only in private chats, whose id is the user's. A stop that
// comes too late (the answer is done) or twice changes nothing.
func (b *Bot) stopGeneration(st generationStopped) inboxOutcome {
	if b.stopAnswer == nil {
		return inboxOutcome{}
	}
	ctx, cancel := context.WithTimeout(b.handlerCtx, b.cfg.HandlerTimeout)
	defer cancel()
	stopped, err := b.stopAnswer(ctx, st.Chat.ID, st.DraftID)
	if err != nil {
		return inboxOutcome{err: fmt.Errorf("stop the answer of draft %d: %w", st.DraftID, err)}
	}
	b.deps.Log.Info("answer stopped by its reader", "chat", st.Chat.ID, "run", st.DraftID, "stopped", stopped)
	return inboxOutcome{}
}
