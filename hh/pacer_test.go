package hh_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
	"switchboard/redisgate"
	"switchboard/redisgate/redistest"
)

var params = vacancy.Params{Text: "golang"}

// arrivals are when the fake received its requests, in order.
func arrivals(srv *hhtest.Server) []time.Time {
	var out []time.Time
	for _, r := range srv.Requests() {
		out = append(out, r.At)
	}
	return out
}

// With a pacer of 20 a second and no burst, ten requests reach HH over at
// least 9 × 50 ms, however fast the callers ask. The bound is on the span,
// not on each gap: a request delayed on its way (a busy machine) lets the
// next arrive right behind it without the pacer having released it early.
func TestPacerSpacesRequests(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	c, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Pacer = hh.NewMemoryPacer(20, 1) })
	const n = 10
	for range n {
		_, err := c.Search(context.Background(), params, 0, 10)
		require.NoError(t, err)
	}
	at := arrivals(srv)
	require.Len(t, at, n)
	// 50 ms of slack for the first request's own delay on its way.
	require.GreaterOrEqual(t, at[n-1].Sub(at[0]), (n-1)*50*time.Millisecond-50*time.Millisecond)
}

// A 429 with Retry-After holds every request until then: the failed call
// is a block (ErrHHBlocked, ErrUnavailable), calls within the second are
// refused without reaching HH, and the first after it is answered.
func TestRetryAfterPausesRequests(t *testing.T) {
	t.Parallel()
	srv := catalogue(t)
	srv.InjectFault(hhtest.Fault{Count: 1, Status: http.StatusTooManyRequests, On: hhtest.SearchEndpoint, RetryAfter: "2"})
	c, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Pacer = hh.NewMemoryPacer(100, 10) })
	_, err := c.Search(context.Background(), params, 0, 10)
	require.ErrorIs(t, err, vacancy.ErrHHBlocked)
	require.ErrorIs(t, err, vacancy.ErrUnavailable)
	// Ask until answered; far past Retry-After something is broken.
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err = c.Search(context.Background(), params, 0, 10)
		if err == nil {
			break
		}
		require.ErrorIs(t, err, vacancy.ErrHHBlocked)
		require.True(t, time.Now().Before(deadline), "still refused long after Retry-After")
		time.Sleep(20 * time.Millisecond)
	}
	at := arrivals(srv)
	require.Len(t, at, 2, "nothing reached HH while it said to wait")
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 2*time.Second, "the second request waited out Retry-After")
}

// Through Redis the pause is the deployment's: one client's 429 holds
// another client (another replica) sharing the key.
func TestRedisPacerSharesThePause(t *testing.T) {
	t.Parallel()
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err(), "Redis must run for this test")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	key := "hhtest:" + hex.EncodeToString(b)
	t.Cleanup(func() { rdb.Del(context.Background(), key, key+":pause") })

	srv := catalogue(t)
	srv.InjectFault(hhtest.Fault{Count: 1, Status: http.StatusTooManyRequests, On: hhtest.SearchEndpoint, RetryAfter: "1"})
	one, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Pacer = hh.NewRedisPacer(rdb, key, 100, 10) })
	two, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Pacer = hh.NewRedisPacer(rdb, key, 100, 10) })
	_, err := one.Search(context.Background(), params, 0, 10)
	require.True(t, errors.Is(err, vacancy.ErrUnavailable), "%v", err)
	_, err = two.Search(context.Background(), params, 0, 10)
	require.NoError(t, err)
	at := arrivals(srv)
	require.Len(t, at, 2)
	require.GreaterOrEqual(t, at[1].Sub(at[0]), 900*time.Millisecond, "the other replica waited out the pause (PTTL is in milliseconds)")
}

// With its Redis stopped the pacer still lets requests go, paced in
// process, and goes back to Redis once it answers.
func TestFallbackPacerRidesOutRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	gate := redisgate.New("hh pacer", func(ctx context.Context) error { return rdb.Ping(ctx).Err() }, nil)
	gate.First, gate.Max = 20*time.Millisecond, 50*time.Millisecond
	p := hh.NewFallbackPacer(hh.NewRedisPacer(rdb, "pace", 100, 5), gate, 100,
		func(context.Context) (int, error) { return 2, nil })
	ctx := context.Background()
	require.NoError(t, p.Wait(ctx))
	require.NotEmpty(t, rdb.Keys(ctx, "*pace").Val(), "paced through Redis")

	srv.Stop()
	for range 5 {
		require.NoError(t, p.Wait(ctx), "Redis down slows HH requests, never stops them")
	}
	require.NoError(t, p.Pause(ctx, time.Millisecond))
	require.True(t, gate.IsDown())
	require.Equal(t, 1, gate.Switches())

	srv.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for gate.IsDown() {
		require.True(t, time.Now().Before(deadline), "the gate never probed Redis back")
		require.NoError(t, p.Wait(ctx))
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, p.Wait(ctx))
	require.NotEmpty(t, rdb.Keys(ctx, "*pace").Val(), "back on the shared pace")
}
