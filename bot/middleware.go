package bot

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
	"switchboard/locales"
)

// track logs how long each update took. (The ordered poller counts the
// updates in flight, queued or running, so a stop can wait for them.)
func (b *Bot) track(next tele.HandlerFunc) tele.HandlerFunc {
	return func(c tele.Context) error {
		start := time.Now()
		err := next(c)
		b.deps.Log.Debug("update handled", "update_id", c.Update().ID, "duration", time.Since(start))
		return err
	}
}

// recover keeps one bad update from taking the bot down (a panic on the
// chat's goroutine would kill the process). An update run from the inbox
// reports how its handler failed to the inbox's worker, which retries a
// passing failure and tells the user only when it gives up; without an
// inbox the user is told at once that something went wrong, in their
// language when we know it.
func (b *Bot) recover(next tele.HandlerFunc) tele.HandlerFunc {
	return func(c tele.Context) (err error) {
		out, fromInbox := b.outcomes.Load(c.Update().ID)
		if pe := b.deps.Panics.Contain(b.deps.Log, "update", c.Update().ID, func() { err = next(c) }); pe != nil {
			if fromInbox {
				out.(*inboxOutcome).panicked = true
			} else {
				b.replyError(c, "error.internal")
			}
			return nil
		}
		if err != nil {
			if fromInbox {
				b.deps.Log.Warn("handler failed: the inbox decides", "err", err, "update", c.Update().ID)
				out.(*inboxOutcome).err = err
				return nil
			}
			b.deps.Log.Error("handler failed", "err", err, "update", c.Update().ID)
			b.replyError(c, "error.internal")
			return nil
		}
		return nil
	}
}

// tellNotDone tells the sender of an update the inbox gave up on that it
// was not carried out (key: why, "error.not_done" or "error.unreadable").
// What a failed handler did commit is mostly keyed by the update or its
// message, so a resend finds it done rather than doing it twice
// (ARCHITECTURE "Answered once" lists what is not yet).
func (b *Bot) tellNotDone(u tele.Update, key string) {
	c := b.tb.NewContext(u)
	m := c.Message()
	if m == nil || m.Chat == nil || c.Callback() != nil || silent(c) {
		b.replyError(c, key)
		return
	}
	// A reply to the message itself, so the user sees which one to send again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lang := b.senderLang(ctx, c)
	if err := b.queueReply(ctx, m.Chat.ID, m.ID, b.deps.Catalog.T(lang, key), nil); err != nil {
		b.deps.Log.Warn("could not tell the user their message was not carried out", "err", err)
	}
}

// senderLang is the language to tell the sender of an update that never
// reached its handler: the one they chose with /lang if the database can
// say (it often cannot, which is why the update failed), else Telegram's.
func (b *Bot) senderLang(ctx context.Context, c tele.Context) string {
	s := c.Sender()
	if s == nil {
		return locales.Languages[0]
	}
	if lang := b.chatLang(c.Chat(), ""); lang != "" {
		return lang // the admin chat's, no question for the database
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if u, err := b.deps.Users.Get(qctx, s.ID); err == nil {
		return u.Lang()
	}
	return locales.Match(s.LanguageCode)
}

func (b *Bot) replyError(c tele.Context, key string) {
	if silent(c) {
		return // the failure is logged; a group hears nothing from the bot
	}
	lang := locales.Languages[0]
	if r := requestOf(c); r != nil {
		lang = r.Lang
	} else if s := c.Sender(); s != nil {
		lang = locales.Match(s.LanguageCode)
	}
	text := b.deps.Catalog.T(lang, key)
	var err error
	if c.Callback() != nil {
		err = b.answerCallback(context.Background(), c, text, true)
	} else if c.Chat() != nil {
		err = b.SendHTML(c.Chat(), text, nil)
	}
	if err != nil {
		b.deps.Log.Warn("could not tell the user about an error", "err", err)
	}
}

// identify records the sender and resolves language and roles. A database
// outage fails the update (the user is told and may retry): answering in the
// wrong language or with the wrong rights would be worse.
func (b *Bot) identify(next tele.HandlerFunc) tele.HandlerFunc {
	return func(c tele.Context) error {
		s := c.Sender()
		if s == nil || s.IsBot {
			return nil // channel posts and other bots: nothing to serve
		}
		ctx, cancel := context.WithTimeout(b.handlerCtx, b.cfg.HandlerTimeout)
		defer cancel()
		if out, fromInbox := b.outcomes.Load(c.Update().ID); fromInbox {
			ctx = withReplies(ctx, int64(c.Update().ID), out.(*inboxOutcome).retried)
		}
		u, err := b.deps.Users.Upsert(ctx, domain.User{
			ID: s.ID, Username: s.Username, FirstName: s.FirstName, TelegramLanguage: locales.Match(s.LanguageCode),
		})
		if err != nil {
			return fmt.Errorf("identify user %d: %w", s.ID, err)
		}
		lang := b.chatLang(c.Chat(), u.Lang())
		if b.isAdmin(s.ID) {
			if _, done := b.adminMenus.Load(s.ID); !done {
				if err := b.publishAdminMenu(ctx, s.ID); err != nil {
					b.deps.Log.Warn("publish admin menu", "admin", s.ID, "err", err)
				}
			}
		}
		from := b.wherefrom(ctx, c)
		if from != (place{}) {
			ctx = withPlace(ctx, from)
		}
		c.Set(requestKey, &Request{Inbound: c, Ctx: ctx, User: u, Lang: lang, Zone: b.chatZone(c.Chat(), u), Admin: b.isAdmin(s.ID),
			Topic: from.topic, bot: b})
		return next(c)
	}
}

// rateLimit drops a flooding user's updates, warning them once per burst.
// It lives in memory on purpose: only the replica holding the polling lease
// sees updates, and a lost limiter after a restart costs nothing. Admins
// are not limited: they are the operators named in ADMIN_IDS, and pasting
// forty /order commands at once is their work, not a flood.
//
// A message counts at the time Telegram dated it, not when it is handled:
// a backlog fetched at once after an outage or a failover was written at
// the user's own pace and passes; forty messages dated within one second
// are still a flood. A button press carries no date of its own (the date of
// the message it sits on can be days old), so it counts when handled.
func (b *Bot) rateLimit(next tele.HandlerFunc) tele.HandlerFunc {
	return func(c tele.Context) error {
		s := c.Sender()
		if s == nil || silent(c) || b.isAdmin(s.ID) || liveMove(c.Update()) {
			return next(c)
		}
		allowed, warn := b.limiter.allow(s.ID, b.sentAt(c.Update()))
		if allowed {
			return next(c)
		}
		b.deps.Log.Warn("rate limited", "user", s.ID)
		if warn {
			text := b.deps.Catalog.T(locales.Match(s.LanguageCode), "error.rate_limited")
			if c.Callback() != nil {
				return b.answerCallback(b.handlerCtx, c, text, false)
			}
			return b.SendHTML(c.Chat(), text, nil)
		}
		if c.Callback() != nil {
			return b.answerCallback(b.handlerCtx, c, "", false)
		}
		return nil
	}
}

// liveMove reports whether u is a live location's move: the client sends
// one every few seconds on its own, not the user, so it counts toward no
// limit (and its handler answers none).
func liveMove(u tele.Update) bool {
	m := u.EditedMessage
	return m != nil && m.Location != nil && m.Private()
}

// sentAt is when the user acted, as far as Telegram tells: a message's date,
// an edit's edit date, otherwise (button presses, inline queries) now.
func (b *Bot) sentAt(u tele.Update) time.Time {
	if m := u.EditedMessage; m != nil && m.LastEdit != 0 {
		return time.Unix(m.LastEdit, 0)
	}
	if m := u.Message; m != nil && m.Unixtime != 0 {
		return time.Unix(m.Unixtime, 0)
	}
	return b.deps.Clock.Now()
}

// rateLimiter is a token bucket per user, advanced by the time each update
// was sent rather than by the clock. Its time only moves forward: an update
// dated before one already counted (a button press counted at handling
// time, then older messages of a backlog) takes a token without refilling,
// so out-of-order dates never earn extra tokens.
type rateLimiter struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	clock  clockwork.Clock
	users  map[int64]*userLimit
	lastGC time.Time
}

type userLimit struct {
	tokens float64
	at     time.Time // the latest send time counted
	warned bool
	seen   time.Time // handling time, for forgetting idle users
}

func newRateLimiter(perSecond float64, burst int, clock clockwork.Clock) *rateLimiter {
	return &rateLimiter{rate: perSecond, burst: float64(burst), clock: clock, users: map[int64]*userLimit{}}
}

// allow counts one update the user sent at sentAt and reports whether it
// may proceed and, if not, whether this is the first refusal since they
// were last allowed (the one worth a warning).
func (l *rateLimiter) allow(user int64, sentAt time.Time) (ok, warn bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if now.Sub(l.lastGC) > 10*time.Minute {
		// An idle user's bucket would be full again by now: forgetting it
		// changes nothing.
		for id, u := range l.users {
			if now.Sub(u.seen) > 10*time.Minute {
				delete(l.users, id)
			}
		}
		l.lastGC = now
	}
	u, found := l.users[user]
	if !found {
		u = &userLimit{tokens: l.burst, at: sentAt}
		l.users[user] = u
	}
	u.seen = now
	if sentAt.After(u.at) {
		u.tokens = min(l.burst, u.tokens+sentAt.Sub(u.at).Seconds()*l.rate)
		u.at = sentAt
	}
	if u.tokens >= 1 {
		u.tokens--
		u.warned = false
		return true, false
	}
	warn = !u.warned
	u.warned = true
	return false, warn
}

// silent reports an update the bot never answers: text or an edit in a
// group that is not a command, and a change of the bot's own membership.
// Its errors are only logged, and the rate limit leaves it alone: it is not
// a request to the bot, and dropping it would lose a message an analysis
// run needs.
func silent(c tele.Context) bool {
	u := c.Update()
	if u.MyChatMember != nil {
		return true
	}
	m := u.Message
	if m == nil {
		m = u.EditedMessage
	}
	if m == nil || m.Chat == nil || m.Private() {
		return false
	}
	return u.EditedMessage != nil || !strings.HasPrefix(m.Text, "/")
}
