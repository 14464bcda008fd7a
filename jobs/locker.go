package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"switchboard/domain"
)

// Locker decides which replica runs a tick of a job (see the package doc).
// RedisLocker and MemoryLocker implement it with the same semantics.
type Locker interface {
	// Lock claims t's slot (unless t.OnDemand) and the job's run lease in one
	// atomic step. It returns ErrTickTaken or ErrJobRunning (wrapped) when
	// another holder has them, and any other error when the locker cannot
	// answer; either way the run is skipped.
	Lock(ctx context.Context, t Tick) (Lease, error)
}

// Lease is a held run lease. It satisfies gocron.Lock.
type Lease interface {
	// Unlock stops refreshing the lease and releases it if this holder still
	// owns it; ErrLeaseLost when it had expired and maybe been taken since.
	Unlock(ctx context.Context) error
}

// Tick is what a replica asks a Locker for before a run.
type Tick struct {
	Job string
	// Replica is stored with the claim so an operator can see who holds it.
	Replica  string
	Interval time.Duration
	// Slot numbers the tick: it starts Slot×Interval after the Unix epoch.
	Slot int64
	// OnDemand marks a RunNow: only the run lease is claimed, no slot.
	OnDemand bool
}

var (
	// ErrTickTaken means another replica (or this one, earlier) ran this slot.
	ErrTickTaken = errors.New("tick already claimed")
	// ErrJobRunning means the job's run lease is held: a run is in progress.
	ErrJobRunning = errors.New("job is running")
	// ErrLeaseLost means the lease expired before it was released; someone
	// else may hold it now, so it was left alone.
	ErrLeaseLost = errors.New("lease lost")
)

// DefaultLease is how long a run lease lives without a refresh: long enough
// to ride out a short Redis or process stall, short enough that a crashed
// replica blocks the job on the others only briefly.
const DefaultLease = 30 * time.Second

// leaseStore is where claims live: a map in process, keys in Redis. Both
// lockers share the token and refresh logic in leaser on top of it.
type leaseStore interface {
	// claim checks and sets the slot (unless t.OnDemand) and the run lease
	// atomically, so a refused lease never leaves the slot claimed.
	claim(ctx context.Context, t Tick, token string, lease time.Duration) error
	// extend pushes the lease's expiry to now+lease if token still holds it.
	extend(ctx context.Context, job, token string, lease time.Duration) (bool, error)
	// release deletes the lease if token still holds it.
	release(ctx context.Context, job, token string) (bool, error)
}

type leaser struct {
	store leaseStore
	// clock paces refreshes; it must be the clock the store expires by.
	clock clockwork.Clock
	lease time.Duration
	log   *slog.Logger
}

func (l *leaser) lock(ctx context.Context, t Tick) (Lease, error) {
	token, err := newToken(t.Replica)
	if err != nil {
		return nil, err
	}
	if err := l.store.claim(ctx, t, token, l.lease); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h := &heldLease{leaser: l, job: t.Job, token: token, cancel: cancel, done: make(chan struct{})}
	go h.refresh(rctx)
	return h, nil
}

// newToken names one claim. The replica prefix is for humans reading Redis;
// the random part is what makes a release by a former holder harmless.
func newToken(replica string) (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("lease token: %w", err)
	}
	return replica + "/" + hex.EncodeToString(b), nil
}

type heldLease struct {
	*leaser
	job, token string
	cancel     context.CancelFunc
	done       chan struct{}

	once sync.Once
	err  error
}

// refresh keeps the lease alive while the job runs. A failed refresh is only
// logged: the lease may still have time left, and a lost lease means at most
// an overlapping run, which the SQL tolerates.
func (h *heldLease) refresh(ctx context.Context) {
	defer close(h.done)
	extend := func(ctx context.Context) (bool, error) { return h.store.extend(ctx, h.job, h.token, h.lease) }
	failed := func(err error) { h.log.Warn("job lease not extended", "job", h.job, "err", err) }
	if domain.RenewLease(ctx, h.clock, h.lease, extend, failed) {
		h.log.Warn("job lease lost while running; another replica may start it", "job", h.job)
	}
}

func (h *heldLease) Unlock(ctx context.Context) error {
	h.once.Do(func() {
		h.cancel()
		<-h.done
		// gocron unlocks with the job's context, which shutdown has cancelled;
		// the lease must still go, or the job is blocked on the other replicas
		// until it expires.
		ok, err := h.store.release(context.WithoutCancel(ctx), h.job, h.token)
		switch {
		case err != nil:
			h.err = fmt.Errorf("release lease of job %s: %w", h.job, err)
		case !ok:
			h.err = fmt.Errorf("release lease of job %s: %w", h.job, ErrLeaseLost)
		}
	})
	return h.err
}

// MemoryLockerOptions tune a MemoryLocker; zero values take defaults.
type MemoryLockerOptions struct {
	Lease time.Duration   // DefaultLease
	Clock clockwork.Clock // real clock; expiries and refreshes follow it
	Log   *slog.Logger    // slog.Default()
}

// MemoryLocker is the in-process Locker: what a single replica uses when
// REDIS_URL is empty, and what tests share between schedulers in one process.
// Entries expire by the injected clock exactly like Redis keys expire, so
// the same tests hold for both.
type MemoryLocker struct {
	leaser

	mu      sync.Mutex
	slots   map[memSlot]time.Time // → expiry
	running map[string]memHold
}

type memSlot struct {
	job  string
	slot int64
}

type memHold struct {
	token string
	until time.Time
}

var _ Locker = (*MemoryLocker)(nil)

// NewMemoryLocker returns an empty in-process locker.
func NewMemoryLocker(opts MemoryLockerOptions) *MemoryLocker {
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	m := &MemoryLocker{
		slots:   make(map[memSlot]time.Time),
		running: make(map[string]memHold),
	}
	m.leaser = leaser{store: m, clock: opts.Clock, lease: opts.Lease, log: opts.Log}
	return m
}

// Lock implements Locker.
func (m *MemoryLocker) Lock(ctx context.Context, t Tick) (Lease, error) {
	return m.lock(ctx, t)
}

func (m *MemoryLocker) claim(_ context.Context, t Tick, token string, lease time.Duration) error {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purge(now)
	key := memSlot{t.Job, t.Slot}
	if !t.OnDemand {
		if _, taken := m.slots[key]; taken {
			return fmt.Errorf("job %s slot %d: %w", t.Job, t.Slot, ErrTickTaken)
		}
	}
	if _, held := m.running[t.Job]; held {
		return fmt.Errorf("job %s: %w", t.Job, ErrJobRunning)
	}
	if !t.OnDemand {
		m.slots[key] = now.Add(2 * t.Interval)
	}
	m.running[t.Job] = memHold{token: token, until: now.Add(lease)}
	return nil
}

// purge drops expired entries; the maps stay as small as the job list.
func (m *MemoryLocker) purge(now time.Time) {
	for k, until := range m.slots {
		if !now.Before(until) {
			delete(m.slots, k)
		}
	}
	for k, h := range m.running {
		if !now.Before(h.until) {
			delete(m.running, k)
		}
	}
}

func (m *MemoryLocker) extend(_ context.Context, job, token string, lease time.Duration) (bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.running[job]
	if !ok || h.token != token || !now.Before(h.until) {
		return false, nil
	}
	m.running[job] = memHold{token: token, until: now.Add(lease)}
	return true, nil
}

func (m *MemoryLocker) release(_ context.Context, job, token string) (bool, error) {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.running[job]
	if !ok || h.token != token {
		return false, nil
	}
	delete(m.running, job)
	// An expired lease is not ours any more even if nobody took it yet.
	return now.Before(h.until), nil
}
