package delivery_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/e2e/tgfake"
	"switchboard/redisgate"
	"switchboard/redisgate/redistest"
)

func fallbackLimiter(t *testing.T, rdb *redis.Client, prefix string, l delivery.Limits, replicas int) (*delivery.FallbackLimiter, *redisgate.Gate) {
	gate := redisgate.New("telegram limiter", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, slog.Default())
	// Probe often: the test waits for the switch back, not for a backoff.
	gate.First, gate.Max = 20*time.Millisecond, 50*time.Millisecond
	return delivery.NewFallbackLimiter(delivery.NewRedisLimiter(rdb, prefix, l), gate, l,
		func(context.Context) (int, error) { return replicas, nil }), gate
}

// With Redis stopped a Take still answers, from the in-process limiter, and
// the gate records one switch (logged once, not per message); when Redis
// answers again the shared budget is used again.
func TestFallbackLimiterRidesOutRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	l := delivery.Limits{Global: 100, GlobalBurst: 10, Private: 100, PrivateBurst: 10, Group: 100, GroupBurst: 10}
	lim, gate := fallbackLimiter(t, rdb, "t:", l, 2)

	_, err := lim.Take(ctx, 1, time.Second)
	require.NoError(t, err)
	require.False(t, gate.IsDown())
	require.NotZero(t, len(rdb.Keys(ctx, "*t:tg:global").Val()), "paced through Redis while it answers")

	srv.Stop()
	for i := range 5 {
		_, err := lim.Take(ctx, int64(1+i), time.Second)
		require.NoError(t, err, "Redis down costs pace, not delivery")
	}
	require.True(t, gate.IsDown())
	require.Equal(t, 1, gate.Switches(), "one switch for five messages")
	require.NoError(t, lim.Pause(ctx, 7, time.Millisecond, false), "a pause is kept in process")

	srv.Resume()
	require.NoError(t, rdb.FlushAll(ctx).Err())
	deadline := time.Now().Add(10 * time.Second)
	for gate.IsDown() {
		require.True(t, time.Now().Before(deadline), "the gate never probed Redis back")
		_, err := lim.Take(ctx, 1, time.Second)
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, 2, gate.Switches())
	_, err = lim.Take(ctx, 1, time.Second)
	require.NoError(t, err)
	require.NotZero(t, len(rdb.Keys(ctx, "*t:tg:global").Val()), "back on the shared budget")
}

// The share: a replica pacing alone while Redis is down takes its part of
// each rate, so N replicas together stay within the limits.
func TestLimitsShare(t *testing.T) {
	l := delivery.Limits{Global: 30, GlobalBurst: 5, Private: 1, PrivateBurst: 2, Group: 1.0 / 3, GroupBurst: 1}
	s := l.Share(3)
	require.InDelta(t, 10, s.Global, 1e-9)
	require.InDelta(t, 1.0/3, s.Private, 1e-9, "a chat's rows go out from any replica: its rate is split too")
	require.InDelta(t, 1.0/9, s.Group, 1e-9)
	require.Equal(t, 1, s.PrivateBurst)
	require.Equal(t, 1, s.GlobalBurst)
	require.InDelta(t, 30, l.Share(0).Global, 1e-9, "never more than the whole allowance")
}

// Two senders sharing a private Redis keep delivering after it stops, each
// at its share, so together they stay under the fake's limits; once Redis
// is back they share its budget again.
func TestTwoSendersDeliverWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	b := setup(t, tgfake.WithLimits(tgfake.Limits{
		Global:  tgfake.Bucket{Burst: 10, Every: time.Second / 10},
		Private: tgfake.Bucket{Burst: 3, Every: time.Second},
	}))
	srv := redistest.Start(t)
	rdb := srv.Client()
	limits := delivery.Limits{Global: 10, GlobalBurst: 2, Private: 1, PrivateBurst: 2, Group: 1.0 / 3, GroupBurst: 1}
	l1, g1 := fallbackLimiter(t, rdb, "s:", limits, 2)
	l2, g2 := fallbackLimiter(t, rdb, "s:", limits, 2)
	srv.Stop()
	b.notes(t, 6, 3)
	// Three workers each: one sender holds at most three of the six chats
	// at once, so both deliver (with 16, one could claim every chat before
	// the other's first poll, and its gate would never see Redis down).
	b.run(t, l1, delivery.Config{Workers: 3})
	b.run(t, l2, delivery.Config{Workers: 3})
	for u := int64(1); u <= 6; u++ {
		require.Equal(t, fmt.Sprintf("u%d #2", u), b.waitTexts(t, u, 3)[2])
	}
	require.False(t, srv.Running())
	require.True(t, g1.IsDown() && g2.IsDown(), "delivered with Redis down, each sender on its own share")

	srv.Resume()
	for u := int64(1); u <= 6; u++ {
		require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(u, fmt.Sprintf("u%d #3", u))))
	}
	for u := int64(1); u <= 6; u++ {
		require.Equal(t, fmt.Sprintf("u%d #3", u), b.waitTexts(t, u, 4)[3])
	}
	b.requirePaced(t, "the two replicas together stayed under the limits")
}
