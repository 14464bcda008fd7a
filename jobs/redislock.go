package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// RedisLockerOptions tune a RedisLocker; zero values take defaults.
type RedisLockerOptions struct {
	// Prefix starts every key ("sb:"); tests give each test its own.
	Prefix string
	Lease  time.Duration // DefaultLease
	// OpTimeout bounds each Redis call (2s), so a dead Redis costs a skipped
	// tick, not a hung job. It bounds socket reads only on clients built with
	// ContextTimeoutEnabled; others fall back to their ReadTimeout.
	OpTimeout time.Duration
	Log       *slog.Logger // slog.Default()
}

// RedisLocker is the Locker shared by replicas through one Redis. Keys carry
// the job name as a hash tag ({name}) so both of a job's keys land on one
// cluster slot and the claim script may touch them together.
type RedisLocker struct {
	leaser
	client    redis.UniversalClient
	prefix    string
	opTimeout time.Duration
}

var _ Locker = (*RedisLocker)(nil)

// NewRedisLocker returns a locker over client. The client stays the
// caller's to close.
func NewRedisLocker(client redis.UniversalClient, opts RedisLockerOptions) *RedisLocker {
	if opts.Prefix == "" {
		opts.Prefix = "sb:"
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	r := &RedisLocker{client: client, prefix: opts.Prefix, opTimeout: opts.OpTimeout}
	// Redis expires keys in real time whatever clock the scheduler runs on,
	// so refreshes follow real time too.
	r.leaser = leaser{store: r, clock: clockwork.NewRealClock(), lease: opts.Lease, log: opts.Log}
	return r
}

// Lock implements Locker.
func (r *RedisLocker) Lock(ctx context.Context, t Tick) (Lease, error) {
	return r.lock(ctx, t)
}

func (r *RedisLocker) runningKey(job string) string {
	return r.prefix + "job:{" + job + "}:running"
}

func (r *RedisLocker) slotKey(job string, slot int64) string {
	return r.prefix + "job:{" + job + "}:slot:" + strconv.FormatInt(slot, 10)
}

// claimScript checks both keys before setting either, so a tick refused for
// a running lease leaves its slot free (see the package doc).
// KEYS[1] running, KEYS[2] slot (absent for RunNow); ARGV token, lease ms, slot ms.
var claimScript = redis.NewScript(`
if KEYS[2] and redis.call("exists", KEYS[2]) == 1 then return 1 end
if redis.call("exists", KEYS[1]) == 1 then return 2 end
if KEYS[2] then redis.call("set", KEYS[2], ARGV[1], "PX", ARGV[3]) end
redis.call("set", KEYS[1], ARGV[1], "PX", ARGV[2])
return 0`)

// extendScript and releaseScript act only for the token that set the key:
// a holder whose lease expired must not extend or delete its successor's.
var extendScript = redis.NewScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end`)

var releaseScript = redis.NewScript(`
if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

func (r *RedisLocker) claim(ctx context.Context, t Tick, token string, lease time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	keys := []string{r.runningKey(t.Job)}
	if !t.OnDemand {
		keys = append(keys, r.slotKey(t.Job, t.Slot))
	}
	res, err := claimScript.Run(ctx, r.client, keys, token, lease.Milliseconds(), (2 * t.Interval).Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("claim job %s in redis: %w", t.Job, err)
	}
	switch res {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("job %s slot %d: %w", t.Job, t.Slot, ErrTickTaken)
	default:
		return fmt.Errorf("job %s: %w", t.Job, ErrJobRunning)
	}
}

func (r *RedisLocker) extend(ctx context.Context, job, token string, lease time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	n, err := extendScript.Run(ctx, r.client, []string{r.runningKey(job)}, token, lease.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("redis: %w", err)
	}
	return n == 1, nil
}

func (r *RedisLocker) release(ctx context.Context, job, token string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	defer cancel()
	n, err := releaseScript.Run(ctx, r.client, []string{r.runningKey(job)}, token).Int()
	if err != nil {
		return false, fmt.Errorf("redis: %w", err)
	}
	return n == 1, nil
}
