package redisgate

import (
	"context"
	"sync"
	"time"
)

// DefaultShare is the replica count a Fallback assumes until the heartbeat
// table says (the database may be down too): pacing as one of this many is
// conservative for the deployments this bot runs as.
const DefaultShare = 4

// Fallback is the in-process stand-in for a budget shared through Redis (the
// Telegram limiter, HH's pacer): while the gate is down, each replica paces
// alone at its share of the budget, so the replicas together stay under it
// without talking to each other. L is the in-process pacer, built by build
// for one of share replicas.
type Fallback[L any] struct {
	gate  *Gate
	build func(share int) L
	// replicas counts the live replicas; on error or 0 the last count is
	// kept, at first DefaultShare.
	replicas func(context.Context) (int, error)

	mu      sync.Mutex
	local   L
	built   bool
	share   int
	builtAt time.Time
}

// NewFallback returns the fallback of a budget shared while gate is up.
func NewFallback[L any](gate *Gate, build func(share int) L, replicas func(context.Context) (int, error)) *Fallback[L] {
	return &Fallback[L]{gate: gate, build: build, replicas: replicas, share: DefaultShare}
}

// Shared runs call against the shared budget unless Redis is down. done is
// true when call's answer stands (it succeeded, or ctx ended); on another
// failure the gate goes down and the caller paces with Local instead.
func (f *Fallback[L]) Shared(ctx context.Context, call func() error) (done bool, err error) {
	if f.gate.Down(ctx) {
		return false, nil
	}
	err = call()
	if err == nil || ctx.Err() != nil {
		return true, err
	}
	f.gate.Fail(ctx, err)
	return false, nil
}

// Local returns the in-process pacer, rebuilt at the share of the replicas
// alive now when it is a minute old and that count changed (a replica gone
// or come).
func (f *Fallback[L]) Local(ctx context.Context) L {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.built && time.Since(f.builtAt) < time.Minute {
		return f.local
	}
	n := f.share
	if f.replicas != nil {
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		if got, err := f.replicas(qctx); err == nil && got > 0 {
			n = got
		}
		cancel()
	}
	if !f.built || n != f.share {
		f.local, f.built = f.build(n), true
	}
	f.share, f.builtAt = n, time.Now()
	return f.local
}
