package hh

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"switchboard/domain"
	"switchboard/redisgate"
)

// Pacer paces the requests of every worker (and, shared through Redis,
// every replica) to HH, which answers a burst with 429 and busy anonymous
// clients with a captcha. Wait blocks until a request may go; Pause holds
// every request for d, HH's Retry-After.
type Pacer interface {
	Wait(ctx context.Context) error
	Pause(ctx context.Context, d time.Duration) error
}

// NewMemoryPacer paces one process: perSecond requests a second, bursts
// of burst (x/time/rate).
func NewMemoryPacer(perSecond float64, burst int) Pacer {
	return &memoryPacer{lim: rate.NewLimiter(rate.Limit(perSecond), max(burst, 1))}
}

type memoryPacer struct {
	lim   *rate.Limiter
	mu    sync.Mutex
	until time.Time
}

func (p *memoryPacer) Wait(ctx context.Context) error {
	p.mu.Lock()
	until := p.until
	p.mu.Unlock()
	if err := domain.Sleep(ctx, time.Until(until)); err != nil {
		return err
	}
	return p.lim.Wait(ctx)
}

func (p *memoryPacer) Pause(_ context.Context, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := time.Now().Add(d); t.After(p.until) {
		p.until = t
	}
	return nil
}

// NewRedisPacer paces every replica sharing rdb under key: the same GCRA
// the Telegram delivery uses (redis_rate), and a pause kept in Redis so a
// Retry-After one replica hears holds them all.
func NewRedisPacer(rdb *redis.Client, key string, perSecond float64, burst int) Pacer {
	return &redisPacer{rdb: rdb, lim: redis_rate.NewLimiter(rdb), key: key, limit: redisgate.Limit(perSecond, burst)}
}

type redisPacer struct {
	rdb   *redis.Client
	lim   *redis_rate.Limiter
	key   string
	limit redis_rate.Limit
}

func (p *redisPacer) Wait(ctx context.Context) error {
	for {
		ms, err := redisgate.Paused(ctx, p.rdb, p.key+":pause")
		if err != nil {
			return fmt.Errorf("hh pacer: %w", err)
		}
		if ms > 0 {
			if err := domain.Sleep(ctx, ms); err != nil {
				return err
			}
			continue
		}
		if _, err := redisgate.Take(ctx, p.lim, p.key, p.limit, -1); err != nil {
			return fmt.Errorf("hh pacer: %w", err)
		}
		return nil
	}
}

func (p *redisPacer) Pause(ctx context.Context, d time.Duration) error {
	if err := redisgate.Pause(ctx, p.rdb, p.key+":pause", d); err != nil {
		return fmt.Errorf("hh pacer pause: %w", err)
	}
	return nil
}

// NewFallbackPacer paces through shared (a Redis pacer) while Redis answers
// and, while it fails (gate), in process at this replica's share: perSecond
// divided by the live replicas (replicas; see redisgate.Fallback), bursts of
// one. A Retry-After heard meanwhile holds this replica.
func NewFallbackPacer(shared Pacer, gate *redisgate.Gate, perSecond float64, replicas func(context.Context) (int, error)) Pacer {
	build := func(share int) Pacer { return NewMemoryPacer(perSecond/float64(share), 1) }
	return &fallbackPacer{shared: shared, fallback: redisgate.NewFallback(gate, build, replicas)}
}

type fallbackPacer struct {
	shared   Pacer
	fallback *redisgate.Fallback[Pacer]
}

func (p *fallbackPacer) Wait(ctx context.Context) error {
	if done, err := p.fallback.Shared(ctx, func() error { return p.shared.Wait(ctx) }); done {
		return err
	}
	return p.fallback.Local(ctx).Wait(ctx)
}

func (p *fallbackPacer) Pause(ctx context.Context, d time.Duration) error {
	_ = p.fallback.Local(ctx).Pause(ctx, d)
	_, _ = p.fallback.Shared(ctx, func() error { return p.shared.Pause(ctx, d) })
	return nil
}

// maxRetryAfter bounds a Retry-After we obey: a pause longer than this is
// more likely a misread header than HH's wish, and would stall the fetches.
const maxRetryAfter = 10 * time.Minute

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 if
// absent or unreadable.
func retryAfter(h http.Header) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return min(time.Duration(s)*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(time.Until(t), 0), maxRetryAfter)
	}
	return 0
}
