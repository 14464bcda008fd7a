package storage

import (
	"context"
	"time"
)

// The liveness steps Run takes each second, for the tests to take one at a
// time on a clock of their own.

// LiveGrace is liveGrace.
const LiveGrace = liveGrace

// Hold takes or checks the lock as Run does.
func (l *Liveness) Hold(ctx context.Context) (bool, error) { return l.hold(ctx) }

// ReclaimAt is one of Run's sweeps, as if at now.
func (l *Liveness) ReclaimAt(ctx context.Context, now time.Time) error { return l.reclaim(ctx, now) }

// Die closes the lock's connection without unlocking, as a killed process's
// kernel does, and returns once the server has let the lock go (it does
// when it reads the closed connection, a moment later).
func (l *Liveness) Die() {
	l.lock.mu.Lock()
	l.lock.dropLocked()
	l.lock.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		var held bool
		err := l.store.pool.QueryRow(ctx, `WITH `+liveLocks+` SELECT EXISTS (SELECT 1 FROM live WHERE n = $2)`,
			livenessClass, l.lock.key&0xffff_ffff).Scan(&held)
		if err == nil && !held {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	panic("the server never let a dead liveness lock go")
}
