// Package redisgate follows whether Redis answers, for the pieces that use
// Redis only to share a budget or a lock between replicas (the Telegram
// limiter, HH's pacer, the job locker). While Redis fails they fall back to
// an in-process equivalent; the gate says when to, probes Redis with backoff
// while it is down, and logs each switch once — not once per message.
// Fallback holds the in-process budget the Telegram limiter and HH's pacer
// fall back to, at this replica's share; Pause and Paused keep the pause
// (a Retry-After) they share through Redis; Limit and Take are the one
// token-bucket step (GCRA, redis_rate) both pace with.
package redisgate

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Gate is the shared view of one Redis for one user of it.
type Gate struct {
	name  string
	probe func(context.Context) error
	log   *slog.Logger
	// First and Max bound the wait between probes while down (1 s doubling
	// to 30 s by default): a Redis that stays down costs one ping per Max.
	First, Max time.Duration
	now        func() time.Time

	mu       sync.Mutex
	down     bool
	next     time.Time // the next probe is due
	wait     time.Duration
	probing  bool
	switches int // times the gate changed state; tests read it
}

// New returns a gate for name (used in logs) that probes Redis with probe,
// typically client.Ping(ctx).Err().
func New(name string, probe func(context.Context) error, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.Default()
	}
	return &Gate{name: name, probe: probe, log: log, First: time.Second, Max: 30 * time.Second, now: time.Now}
}

// Down reports whether the caller should use its fallback. While down, the
// first caller after the probe falls due pings Redis (bounded by a 1 s
// timeout, others do not wait for it); an answer switches back.
func (g *Gate) Down(ctx context.Context) bool {
	g.mu.Lock()
	if !g.down {
		g.mu.Unlock()
		return false
	}
	if g.probing || g.now().Before(g.next) {
		g.mu.Unlock()
		return true
	}
	g.probing = true
	g.mu.Unlock()

	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	err := g.probe(pctx)
	cancel()

	g.mu.Lock()
	defer g.mu.Unlock()
	g.probing = false
	if err != nil {
		g.wait = min(2*g.wait, g.Max)
		g.next = g.now().Add(g.wait)
		return true
	}
	g.down = false
	g.switches++
	g.log.Info("redis answers again; back to the shared "+g.name, "redis_user", g.name)
	return false
}

// Fail records that a Redis call failed with err: the gate goes down (logged
// once) and the next probe is First from now. A cancelled ctx is the
// caller's doing, not Redis's, and is ignored; so is a nil err.
func (g *Gate) Fail(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.down {
		return
	}
	g.down = true
	g.switches++
	g.wait = g.First
	g.next = g.now().Add(g.wait)
	g.log.Warn("redis unavailable; "+g.name+" falls back to this replica alone until it answers", "redis_user", g.name, "err", err)
}

// IsDown reports the state without probing.
func (g *Gate) IsDown() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.down
}

// Switches counts state changes (down and back up) so far.
func (g *Gate) Switches() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.switches
}
