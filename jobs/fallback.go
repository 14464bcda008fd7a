package jobs

import (
	"context"
	"errors"

	"switchboard/redisgate"
)

// FallbackLocker is the RedisLocker while Redis answers and, while it
// fails, a MemoryLocker in this process: each replica then runs each tick
// at most once and never beside itself, but replicas may run the same tick
// together. That is safe because every job is (see "Why correctness still
// comes from SQL" above and ARCHITECTURE "Every job is safe twice"); the
// outage costs duplicated work, not a stopped scheduler. The gate logs the
// switch both ways once and probes Redis with backoff while it is down.
type FallbackLocker struct {
	shared Locker
	local  Locker
	gate   *redisgate.Gate
}

var _ Locker = (*FallbackLocker)(nil)

// NewFallbackLocker wraps shared (a RedisLocker) with local (a MemoryLocker).
func NewFallbackLocker(shared, local Locker, gate *redisgate.Gate) *FallbackLocker {
	return &FallbackLocker{shared: shared, local: local, gate: gate}
}

// Lock implements Locker.
func (f *FallbackLocker) Lock(ctx context.Context, t Tick) (Lease, error) {
	if !f.gate.Down(ctx) {
		l, err := f.shared.Lock(ctx, t)
		if err == nil || errors.Is(err, ErrTickTaken) || errors.Is(err, ErrJobRunning) || ctx.Err() != nil {
			return l, err
		}
		f.gate.Fail(ctx, err)
	}
	return f.local.Lock(ctx, t)
}
