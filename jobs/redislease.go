package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisLease is one exclusive, renewable claim shared by replicas — the bot
// polls Telegram only while it holds one, because two pollers steal each
// other's updates. It uses the same token-checked scripts as the job locker,
// so a holder whose claim expired can neither extend nor delete a successor's.
type RedisLease struct {
	client redis.UniversalClient
	key    string
	token  string
	ttl    time.Duration
}

// NewRedisLease returns a lease on key; holder names the claimant (its
// replica) so an operator can see who holds it with GET.
func NewRedisLease(client redis.UniversalClient, key, holder string, ttl time.Duration) *RedisLease {
	token, err := newToken(holder)
	if err != nil { // crypto/rand failing leaves no safe token to use
		panic(fmt.Sprintf("jobs: lease token: %v", err))
	}
	return &RedisLease{client: client, key: key, token: token, ttl: ttl}
}

// TTL is how long a claim lives unrenewed.
func (l *RedisLease) TTL() time.Duration { return l.ttl }

// Acquire claims the lease if nobody holds it (or this holder already does).
func (l *RedisLease) Acquire(ctx context.Context) (bool, error) {
	ok, err := l.client.SetNX(ctx, l.key, l.token, l.ttl).Result()
	if err != nil {
		return false, fmt.Errorf("acquire lease %s: %w", l.key, err)
	}
	if ok {
		return true, nil
	}
	// The key may already be ours (an earlier Acquire whose answer was lost).
	return l.Renew(ctx)
}

// Renew extends the claim; false means it expired and someone else has it.
func (l *RedisLease) Renew(ctx context.Context) (bool, error) {
	n, err := extendScript.Run(ctx, l.client, []string{l.key}, l.token, l.ttl.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew lease %s: %w", l.key, err)
	}
	return n == 1, nil
}

// Release gives the claim up so a peer can take over at once.
func (l *RedisLease) Release(ctx context.Context) error {
	if err := releaseScript.Run(ctx, l.client, []string{l.key}, l.token).Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", l.key, err)
	}
	return nil
}
