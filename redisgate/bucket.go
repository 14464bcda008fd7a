package redisgate

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"switchboard/domain"
)

// Limit is perSecond tokens a second, in bursts of burst, as redis_rate's
// GCRA limit: one token per period of one token's share, which keeps any
// rate exact (20 a minute is one per 3 s). A rate below one a minute is
// one a minute.
func Limit(perSecond float64, burst int) redis_rate.Limit {
	perSecond = max(perSecond, 1.0/60)
	return redis_rate.Limit{Rate: 1, Burst: max(burst, 1), Period: time.Duration(float64(time.Second) / perSecond)}
}

// Emission is how often limit's bucket gains a token.
func Emission(limit redis_rate.Limit) time.Duration {
	return limit.Period / time.Duration(max(limit.Rate, 1))
}

// Take takes a token of key's bucket, shared by every replica on the Redis
// behind rl, sleeping for it while the wait is at most maxWait (any wait
// if maxWait is negative); a longer wait takes nothing and is returned. A
// refused call takes nothing, so a waiter never holds a token it has not
// used.
func Take(ctx context.Context, rl *redis_rate.Limiter, key string, limit redis_rate.Limit, maxWait time.Duration) (time.Duration, error) {
	for {
		res, err := rl.Allow(ctx, key, limit)
		if err != nil {
			return 0, err
		}
		if res.Allowed > 0 {
			return 0, nil
		}
		if maxWait >= 0 && res.RetryAfter > maxWait {
			return res.RetryAfter, nil
		}
		if err := domain.Sleep(ctx, res.RetryAfter); err != nil {
			return 0, err
		}
	}
}
