package redisgate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/redisgate"
	"switchboard/redisgate/redistest"
)

// A pause keeps the longer of itself and the one already set; Paused is
// the longest left of its keys, none counting as 0.
func TestPauseKeepsTheLonger(t *testing.T) {
	t.Parallel()
	rdb, ctx := redistest.Start(t).Client(), t.Context()

	p, err := redisgate.Paused(ctx, rdb, "a", "b")
	require.NoError(t, err)
	require.Zero(t, p, "no pause")
	require.NoError(t, redisgate.Pause(ctx, rdb, "a", time.Hour))
	require.NoError(t, redisgate.Pause(ctx, rdb, "a", time.Minute), "shorter: the hour stays")
	require.NoError(t, redisgate.Pause(ctx, rdb, "b", 2*time.Hour))
	require.NoError(t, redisgate.Pause(ctx, rdb, "c", time.Microsecond), "less than a millisecond is no pause")

	a, err := redisgate.Paused(ctx, rdb, "a")
	require.NoError(t, err)
	require.Greater(t, a, 59*time.Minute)
	both, err := redisgate.Paused(ctx, rdb, "a", "b")
	require.NoError(t, err)
	require.Greater(t, both, 119*time.Minute, "the longer of the two")
	require.Zero(t, rdb.Exists(ctx, "c").Val())
}
