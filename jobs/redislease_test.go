package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRedisLeaseIsExclusiveAndTokenChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newRedis(t, redisAddr())
	key := testPrefix(t, c) + "poller"
	a := NewRedisLease(c, key, "a", 10*time.Second)
	b := NewRedisLease(c, key, "b", 10*time.Second)
	require.Equal(t, 10*time.Second, a.TTL())

	ok, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the holder re-acquiring keeps its claim")
	ok, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.False(t, ok, "a second holder is refused")
	ok, err = b.Renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "a non-holder cannot renew")
	require.NoError(t, b.Release(ctx))
	ok, err = a.Renew(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a non-holder's release deleted nothing")

	// a's claim expires (it stalled); b takes over; a can no longer act on it.
	require.NoError(t, c.Del(ctx, key).Err())
	ok, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = a.Renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "the old holder learns it lost the lease")
	require.NoError(t, a.Release(ctx))
	ok, err = b.Renew(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the old holder's release left the new claim alone")

	ttl, err := c.PTTL(ctx, key).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 9*time.Second, "renew extends to the full TTL")

	require.NoError(t, b.Release(ctx))
	ok, err = a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a release frees the lease at once")
}
