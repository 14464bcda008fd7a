package delivery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"switchboard/domain"
	"switchboard/redisgate"
)

// Limits are Telegram's limits as the senders pace under them. Each is a
// token bucket: Rate per second with Burst. Telegram lets short bursts pass
// (its own buckets are deeper than these), so pacing with shallower
// buckets at the same rates never reaches its refusal.
type Limits struct {
	Global, Private, Group                float64 // messages per second
	GlobalBurst, PrivateBurst, GroupBurst int
}

// DefaultLimits are Telegram's published limits: about 30 messages a second
// per bot, about one a second per private chat, 20 a minute per group. A
// group's bucket holds one message: any deeper and a burst after a quiet
// minute puts more than 20 into some 60 seconds (Telegram counts the
// minute, not a bucket), so a group gets one message every three seconds.
func DefaultLimits() Limits {
	return Limits{Global: 30, GlobalBurst: 5, Private: 1, PrivateBurst: 2, Group: 20.0 / 60, GroupBurst: 1}
}

func (l Limits) forChat(chatID int64) (float64, int) {
	if chatID < 0 {
		return l.Group, l.GroupBurst
	}
	return l.Private, l.PrivateBurst
}

// Limiter paces messages. Take blocks until a message to chatID may go
// (taking the global and the chat's budget) or, when that would take longer
// than max, takes nothing and reports the wait. Pause stops a chat, or with
// global every chat, for d: Telegram's retry_after.
// Paused is how long a pause of the chat or of the bot still holds; it
// takes nothing (a chat action, which is no message, only obeys pauses).
type Limiter interface {
	Take(ctx context.Context, chatID int64, max time.Duration) (wait time.Duration, err error)
	Pause(ctx context.Context, chatID int64, d time.Duration, global bool) error
	Paused(ctx context.Context, chatID int64) (time.Duration, error)
}

// buckets are what a Limiter keeps: the pauses and the token buckets,
// in process or in Redis.
type buckets interface {
	// pausedFor is how long a pause of the chat or of the bot still holds.
	pausedFor(ctx context.Context, chatID int64) (time.Duration, error)
	// chatNeeds is how long until the chat's bucket holds a token; it
	// takes nothing.
	chatNeeds(ctx context.Context, chatID int64) (time.Duration, error)
	// takeGlobal waits for a token of the bot's bucket and takes it.
	takeGlobal(ctx context.Context) error
	// takeChat takes a token of the chat's bucket, waiting for it up to
	// maxWait; a longer wait takes nothing and is reported.
	takeChat(ctx context.Context, chatID int64, maxWait time.Duration) (time.Duration, error)
}

// take is every Limiter's Take. The pauses first, then the chat's budget,
// waited for without taking it, then the global budget (waiting for it),
// and the chat's budget taken last, right before the send. So waiting for
// the global budget never squeezes two messages to one chat closer than
// the chat's rate, and a global token is never held through a chat's wait
// (which would let more than the global rate out in the next second).
func take(ctx context.Context, b buckets, chatID int64, maxWait time.Duration) (time.Duration, error) {
	for {
		p, err := b.pausedFor(ctx, chatID)
		if err != nil {
			return 0, err
		}
		if p > 0 {
			if p > maxWait {
				return p, nil
			}
			if err := domain.Sleep(ctx, p); err != nil {
				return 0, err
			}
			continue
		}
		need, err := b.chatNeeds(ctx, chatID)
		if err != nil {
			return 0, err
		}
		if need > maxWait {
			return need, nil
		}
		if need > 0 {
			if err := domain.Sleep(ctx, need); err != nil {
				return 0, err
			}
			continue
		}
		if err := b.takeGlobal(ctx); err != nil {
			return 0, err
		}
		return b.takeChat(ctx, chatID, maxWait)
	}
}

// MemoryLimiter paces one replica in process (no REDIS_URL).
type MemoryLimiter struct {
	limits Limits
	global *rate.Limiter

	mu     sync.Mutex
	chats  map[int64]*rate.Limiter
	paused map[int64]time.Time // chat → until; key 0 is the whole bot
	now    func() time.Time
}

// NewMemoryLimiter builds an in-process limiter.
func NewMemoryLimiter(l Limits) *MemoryLimiter {
	return &MemoryLimiter{
		limits: l,
		global: rate.NewLimiter(rate.Limit(l.Global), max(1, l.GlobalBurst)),
		chats:  map[int64]*rate.Limiter{},
		paused: map[int64]time.Time{},
		now:    time.Now,
	}
}

func (m *MemoryLimiter) chat(id int64) *rate.Limiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.chats[id]
	if !ok {
		r, b := m.limits.forChat(id)
		l = rate.NewLimiter(rate.Limit(r), max(1, b))
		if len(m.chats) > 100_000 {
			// Idle chats' buckets are full again; forgetting them is harmless.
			clear(m.chats)
		}
		m.chats[id] = l
	}
	return l
}

func (m *MemoryLimiter) pausedFor(_ context.Context, chatID int64) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	return max(m.paused[0].Sub(now), m.paused[chatID].Sub(now), 0), nil
}

func (m *MemoryLimiter) chatNeeds(_ context.Context, chatID int64) (time.Duration, error) {
	cl := m.chat(chatID)
	return untilToken(cl.TokensAt(m.now()), float64(cl.Limit())), nil
}

func (m *MemoryLimiter) takeGlobal(ctx context.Context) error {
	if err := m.global.Wait(ctx); err != nil {
		return fmt.Errorf("global budget: %w", err)
	}
	return nil
}

func (m *MemoryLimiter) takeChat(ctx context.Context, chatID int64, maxWait time.Duration) (time.Duration, error) {
	r := m.chat(chatID).Reserve()
	if d := r.Delay(); d > 0 {
		// Another sender took the chat's token meanwhile.
		if d > maxWait {
			r.Cancel()
			return d, nil
		}
		if err := domain.Sleep(ctx, d); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// Paused implements Limiter.
func (m *MemoryLimiter) Paused(ctx context.Context, chatID int64) (time.Duration, error) {
	return m.pausedFor(ctx, chatID)
}

// Take implements Limiter.
func (m *MemoryLimiter) Take(ctx context.Context, chatID int64, maxWait time.Duration) (time.Duration, error) {
	return take(ctx, m, chatID, maxWait)
}

// Pause implements Limiter.
func (m *MemoryLimiter) Pause(_ context.Context, chatID int64, d time.Duration, global bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	until := m.now().Add(d)
	if global {
		chatID = 0
	}
	if until.After(m.paused[chatID]) {
		m.paused[chatID] = until
	}
	return nil
}

// untilToken is how long a bucket holding tokens at rate needs to hold one.
func untilToken(tokens, r float64) time.Duration {
	if tokens >= 1 || r <= 0 {
		return 0
	}
	return time.Duration((1 - tokens) / r * float64(time.Second))
}

// RedisLimiter shares the budget between replicas through Redis, with
// github.com/go-redis/redis_rate (GCRA in one Lua script per call; a refused
// call takes nothing).
type RedisLimiter struct {
	rdb    *redis.Client
	rl     *redis_rate.Limiter
	prefix string
	limits Limits
}

// NewRedisLimiter builds a limiter whose keys start with prefix.
func NewRedisLimiter(rdb *redis.Client, prefix string, l Limits) *RedisLimiter {
	return &RedisLimiter{rdb: rdb, rl: redis_rate.NewLimiter(rdb), prefix: prefix + "tg:", limits: l}
}

func (r *RedisLimiter) chatKey(id int64) string {
	return r.prefix + "chat:" + strconv.FormatInt(id, 10)
}

func (r *RedisLimiter) chatLimit(chatID int64) redis_rate.Limit {
	return redisgate.Limit(r.limits.forChat(chatID))
}

func (r *RedisLimiter) chatNeeds(ctx context.Context, chatID int64) (time.Duration, error) {
	// A cost of 0 reads the bucket without taking from it.
	l := r.chatLimit(chatID)
	peek, err := r.rl.AllowN(ctx, r.chatKey(chatID), l, 0)
	if err != nil {
		return 0, fmt.Errorf("chat budget: %w", err)
	}
	if peek.Remaining >= 1 {
		return 0, nil
	}
	// One token is there once the bucket's theoretical arrival time (now +
	// ResetAfter) less the burst allowance, plus one emission interval, has
	// passed.
	e := redisgate.Emission(l)
	return peek.ResetAfter + e - time.Duration(l.Burst)*e, nil
}

func (r *RedisLimiter) takeGlobal(ctx context.Context) error {
	if _, err := redisgate.Take(ctx, r.rl, r.prefix+"global", redisgate.Limit(r.limits.Global, r.limits.GlobalBurst), -1); err != nil {
		return fmt.Errorf("global budget: %w", err)
	}
	return nil
}

func (r *RedisLimiter) takeChat(ctx context.Context, chatID int64, maxWait time.Duration) (time.Duration, error) {
	wait, err := redisgate.Take(ctx, r.rl, r.chatKey(chatID), r.chatLimit(chatID), max(maxWait, 0))
	if err != nil {
		return 0, fmt.Errorf("chat budget: %w", err)
	}
	return wait, nil
}

// Paused implements Limiter.
func (r *RedisLimiter) Paused(ctx context.Context, chatID int64) (time.Duration, error) {
	return r.pausedFor(ctx, chatID)
}

// Take implements Limiter.
func (r *RedisLimiter) Take(ctx context.Context, chatID int64, maxWait time.Duration) (time.Duration, error) {
	return take(ctx, r, chatID, maxWait)
}

func (r *RedisLimiter) pausedFor(ctx context.Context, chatID int64) (time.Duration, error) {
	p, err := redisgate.Paused(ctx, r.rdb, r.pauseKey(0), r.pauseKey(chatID))
	if err != nil {
		return 0, fmt.Errorf("read pauses: %w", err)
	}
	return p, nil
}

func (r *RedisLimiter) pauseKey(chatID int64) string {
	return r.prefix + "pause:" + strconv.FormatInt(chatID, 10)
}

// Pause implements Limiter.
func (r *RedisLimiter) Pause(ctx context.Context, chatID int64, d time.Duration, global bool) error {
	if global {
		chatID = 0
	}
	if err := redisgate.Pause(ctx, r.rdb, r.pauseKey(chatID), d); err != nil {
		return fmt.Errorf("pause chat %d: %w", chatID, err)
	}
	return nil
}

// jitter spreads d by ±20 %, so rows retried together do not return together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// FallbackLimiter is the shared RedisLimiter while Redis answers and, while
// it fails, an in-process MemoryLimiter pacing this replica at its share of
// the limits (redisgate.Fallback, Limits.Share). Redis is an accelerator:
// its outage slows delivery, never stops it.
type FallbackLimiter struct {
	shared   Limiter
	fallback *redisgate.Fallback[*MemoryLimiter]
}

// NewFallbackLimiter wraps shared (a RedisLimiter) with gate's view of Redis;
// replicas counts the live replicas.
func NewFallbackLimiter(shared Limiter, gate *redisgate.Gate, l Limits, replicas func(context.Context) (int, error)) *FallbackLimiter {
	build := func(share int) *MemoryLimiter { return NewMemoryLimiter(l.Share(share)) }
	return &FallbackLimiter{shared: shared, fallback: redisgate.NewFallback(gate, build, replicas)}
}

// Share is l for one of n replicas pacing alone: every rate divided by n,
// the per-chat ones too — consecutive rows of one chat are claimed by
// whichever replica is free, so a busy chat gets sends from several
// replicas at once and their chat rates add up (the e2e test of a Redis
// outage saw a 429 when only the bot-wide rate was divided); every burst
// one, as a burst is what replicas pacing apart would add up.
func (l Limits) Share(n int) Limits {
	d := float64(max(n, 1))
	return Limits{Global: l.Global / d, Private: l.Private / d, Group: l.Group / d, GlobalBurst: 1, PrivateBurst: 1, GroupBurst: 1}
}

// Take implements Limiter.
func (f *FallbackLimiter) Take(ctx context.Context, chatID int64, maxWait time.Duration) (time.Duration, error) {
	var wait time.Duration
	if done, err := f.fallback.Shared(ctx, func() (err error) {
		wait, err = f.shared.Take(ctx, chatID, maxWait)
		return err
	}); done {
		return wait, err
	}
	return f.fallback.Local(ctx).Take(ctx, chatID, maxWait)
}

// Paused implements Limiter.
func (f *FallbackLimiter) Paused(ctx context.Context, chatID int64) (time.Duration, error) {
	var p time.Duration
	if done, err := f.fallback.Shared(ctx, func() (err error) {
		p, err = f.shared.Paused(ctx, chatID)
		return err
	}); done {
		return p, err
	}
	return f.fallback.Local(ctx).Paused(ctx, chatID)
}

// Pause implements Limiter: the pause is kept in process too, so it holds
// whichever limiter the next Take uses.
func (f *FallbackLimiter) Pause(ctx context.Context, chatID int64, d time.Duration, global bool) error {
	_ = f.fallback.Local(ctx).Pause(ctx, chatID, d, global)
	_, _ = f.fallback.Shared(ctx, func() error { return f.shared.Pause(ctx, chatID, d, global) })
	return nil
}
