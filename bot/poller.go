package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
)

// PollingLock is an exclusive lock shared by replicas (storage.PollingLock,
// PostgreSQL). Only the holder polls Telegram: two pollers would steal each
// other's updates with 409 Conflict.
type PollingLock interface {
	// Acquire takes the lock if it is free; false means another holds it.
	Acquire(ctx context.Context) (bool, error)
	// Renew confirms the lock is still held; false means it was lost.
	Renew(ctx context.Context) (bool, error)
	// Release gives it up early so a peer can take over at once.
	Release(ctx context.Context) error
	// TTL is how long a lost lock may go unnoticed by its holder.
	TTL() time.Duration
}

// lockedPoller long-polls only while it holds the polling lock. A replica that dies
// stops renewing; a peer takes over within TTL plus its retry interval.
type lockedPoller struct {
	inner tele.Poller
	lock  PollingLock
	log   *slog.Logger
}

func (p *lockedPoller) Poll(b *tele.Bot, dest chan tele.Update, stop chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-stop; cancel() }()

	ttl := p.lock.TTL()
	waiting := false
	for {
		ok, err := p.lock.Acquire(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			p.log.Warn("polling lease unavailable", "err", err)
		}
		if !ok {
			if !waiting && err == nil {
				p.log.Info("polling lease held by another replica: standing by")
			}
			waiting = true
			select {
			case <-ctx.Done():
				return
			case <-time.After(ttl / 3):
				continue
			}
		}
		waiting = false
		p.log.Info("polling lease acquired: this replica reads Telegram updates")
		lost := p.pollWhileHeld(ctx, b, dest, ttl)
		if !lost {
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := p.lock.Release(rctx); err != nil {
				p.log.Warn("release polling lease", "err", err)
			}
			rcancel()
			return
		}
		p.log.Warn("polling lease lost: stopped reading updates")
	}
}

// pollWhileHeld runs the long poller and checks the lock; it returns true
// when the lock was lost and false when the bot is stopping.
func (p *lockedPoller) pollWhileHeld(ctx context.Context, b *tele.Bot, dest chan tele.Update, ttl time.Duration) bool {
	innerStop := make(chan struct{})
	done := make(chan struct{})
	go func() { p.inner.Poll(b, dest, innerStop); close(done) }()
	defer func() { close(innerStop); <-done }()

	tick := time.NewTicker(ttl / 3)
	defer tick.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
			ok, err := p.lock.Renew(ctx)
			if ctx.Err() != nil {
				return false
			}
			if err != nil {
				// Redis may be briefly away while we still hold the key; keep
				// polling until the claim could have expired, then assume a
				// peer took over rather than risk two pollers.
				p.log.Warn("renew polling lease", "err", err)
				if time.Since(renewed) >= ttl {
					return true
				}
				continue
			}
			if !ok {
				return true
			}
			renewed = time.Now()
		}
	}
}

// Inbox is where updates wait to be handled (storage implements it): an
// update is stored before Telegram is told it arrived, and handled from
// there, in its chat's order, by any replica.
type Inbox interface {
	// Take stores updates, each once whatever how often it comes.
	Take(ctx context.Context, from string, us []domain.InboxUpdate) error
	// Claim claims up to n updates, each the oldest pending one of
	// its chat, for lease.
	Claim(ctx context.Context, claimer string, n int, lease time.Duration) ([]domain.InboxUpdate, error)
	// The settling statements name the claim's token; false: the claim was
	// lost (taken over after its lease) and the row is its new holder's.
	Renew(ctx context.Context, id int64, token string, lease time.Duration) (bool, error)
	Done(ctx context.Context, id int64, token string) (bool, error)
	Retry(ctx context.Context, id int64, token string, after time.Duration, why string) (bool, error)
	Failed(ctx context.Context, id int64, token, why string) (bool, error)
}

// intakePoller reads Telegram into the inbox. telebot's LongPoller
// acknowledges an update with its next getUpdates (the offset past it)
// whatever became of it, so an update fetched by a replica that died before
// handling it was lost. This poller moves the offset past an update only
// once the inbox holds it: a failed insert is retried with backoff, the
// offset unmoved (Telegram keeps an unacknowledged update for 24 hours and
// sends it again), and a poller that stops before storing leaves the updates
// to the next one.
type intakePoller struct {
	inbox Inbox
	// from names this replica in the inbox's notification (Intake).
	from string
	// aboutData tells a refusal of what was written from a passing error.
	aboutData AboutData
	timeout   time.Duration
	log       *slog.Logger
	// wake tells this replica's inbox workers updates were stored (the
	// NOTIFY tells the other replicas').
	wake func()
	// offset is the next update_id to ask for; only Poll's goroutine
	// touches it. It survives a lost and retaken lease.
	offset int64
}

// untilStop is a context that ends when telebot closes stop, or at cancel.
func untilStop(stop chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

func (p *intakePoller) Poll(b *tele.Bot, _ chan tele.Update, stop chan struct{}) {
	ctx, cancel := untilStop(stop)
	defer cancel()
	fetchBackoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		us, err := p.fetch(b)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Warn("getUpdates failed", "err", err, "in", fetchBackoff)
			if domain.Sleep(ctx, fetchBackoff) != nil {
				return
			}
			fetchBackoff = min(2*fetchBackoff, 5*time.Second)
			continue
		}
		fetchBackoff = 250 * time.Millisecond
		if len(us) == 0 {
			continue
		}
		if !p.store(ctx, us) {
			return // stopping: unacknowledged, so Telegram sends them again
		}
		for _, u := range us {
			p.offset = max(p.offset, u.ID+1)
		}
		p.wake()
	}
}

// store inserts us until the inbox takes them or ctx ends. An update the
// database refuses for what it holds is kept as a skeleton or given up
// (storeUpdates): only a passing error is retried.
func (p *intakePoller) store(ctx context.Context, us []domain.InboxUpdate) bool {
	backoff := 250 * time.Millisecond
	for {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := storeUpdates(sctx, p.inbox, p.from, p.aboutData, p.log, us)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		p.log.Warn("updates not stored in the inbox: Telegram is not told they arrived; retrying",
			"updates", len(us), "first", us[0].ID, "err", err, "in", backoff)
		if domain.Sleep(ctx, backoff) != nil {
			return false
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// fetch asks Telegram for the updates from offset on, keeping each as sent.
func (p *intakePoller) fetch(b *tele.Bot) ([]domain.InboxUpdate, error) {
	allowed, _ := json.Marshal(allowedUpdates)
	data, err := b.Raw("getUpdates", map[string]string{
		"offset":          strconv.FormatInt(p.offset, 10),
		"timeout":         strconv.Itoa(int(p.timeout / time.Second)),
		"allowed_updates": string(allowed),
	})
	if err != nil {
		return nil, err
	}
	var resp struct {
		Result []json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &resp); err != nil {
		return nil, fmt.Errorf("getUpdates answer: %w", err)
	}
	out := make([]domain.InboxUpdate, 0, len(resp.Result))
	for _, raw := range resp.Result {
		u, err := InboxUpdateOf(raw)
		if err != nil {
			// Not Telegram's doing; skipped, or the whole batch would be
			// fetched again for ever.
			p.log.Error("getUpdates returned an update that cannot be read: skipped", "err", err)
			continue
		}
		out = append(out, u)
	}
	return out, nil
}
