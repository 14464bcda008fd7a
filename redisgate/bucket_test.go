package redisgate_test

import (
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/stretchr/testify/require"

	"switchboard/redisgate"
	"switchboard/redisgate/redistest"
)

// Limit keeps a fractional rate exact; Take takes a token while one is
// there, and reports a wait longer than it may sleep without taking
// anything.
func TestTakeSleepsOnlyAsLongAsItMay(t *testing.T) {
	t.Parallel()
	rdb, ctx := redistest.Start(t).Client(), t.Context()
	l := redisgate.Limit(20.0/60, 2)
	require.Equal(t, 3*time.Second, redisgate.Emission(l), "20 a minute is one per 3 s")
	require.Equal(t, time.Minute, redisgate.Emission(redisgate.Limit(0, 1)), "no rate is one a minute")
	rl := redis_rate.NewLimiter(rdb)

	for i := range 2 {
		wait, err := redisgate.Take(ctx, rl, "k", l, 0)
		require.NoError(t, err)
		require.Zero(t, wait, "token %d of the burst", i+1)
	}
	wait, err := redisgate.Take(ctx, rl, "k", l, time.Second)
	require.NoError(t, err)
	require.Greater(t, wait, 2*time.Second, "the next token is about 3 s away")
	require.LessOrEqual(t, wait, 3*time.Second)
	// Reported, not taken: a peek still finds the bucket empty and the
	// wait no longer than before.
	peek, err := rl.AllowN(ctx, "k", l, 0)
	require.NoError(t, err)
	require.Zero(t, peek.Remaining)
	again, err := redisgate.Take(ctx, rl, "k", l, time.Second)
	require.NoError(t, err)
	require.LessOrEqual(t, again, wait)
}
