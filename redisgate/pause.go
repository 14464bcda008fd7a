package redisgate

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// pauseScript keeps the longer of a pause already set and this one in one
// step: replicas that hear a Retry-After at once may set it together.
const pauseScript = `local t = redis.call('PTTL', KEYS[1])
if t < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
return 1`

// Pause holds, for d, whatever every replica paces under key (Telegram's
// retry_after, HH's Retry-After), unless a longer pause is set there
// already. A pause shorter than a millisecond is none.
func Pause(ctx context.Context, rdb *redis.Client, key string, d time.Duration) error {
	if d.Milliseconds() <= 0 {
		return nil
	}
	return rdb.Eval(ctx, pauseScript, []string{key}, d.Milliseconds()).Err()
}

// Paused is the longest pause left under keys, 0 when none is set.
func Paused(ctx context.Context, rdb *redis.Client, keys ...string) (time.Duration, error) {
	ttls, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var out time.Duration
	for _, c := range ttls {
		// PTTL answers -2 (no key) or -1 (no expiry) as negative durations.
		out = max(out, c.(*redis.DurationCmd).Val())
	}
	return out, nil
}
