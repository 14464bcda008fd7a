package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// lockerBundle is one Locker under test plus a way to make a lease look
// expired, as if its holder had stalled past the lease.
type lockerBundle struct {
	locker Locker
	store  leaseStore
	expire func(job string)
	// slotTTL reports how long a slot claim still lives.
	slotTTL func(job string, slot int64) time.Duration
}

// runs takes tk's lease and gives it back: a run on that tick may go.
func (b lockerBundle) runs(t *testing.T, tk Tick, msgAndArgs ...any) {
	t.Helper()
	l, err := b.locker.Lock(context.Background(), tk)
	require.NoError(t, err, msgAndArgs...)
	require.NoError(t, l.Unlock(context.Background()))
}

var lockerBackends = []struct {
	name  string
	setup func(t *testing.T, lease time.Duration) lockerBundle
}{
	{"memory", func(t *testing.T, lease time.Duration) lockerBundle {
		m := NewMemoryLocker(MemoryLockerOptions{Lease: lease, Log: discardLog()})
		return lockerBundle{
			locker: m,
			store:  m,
			expire: func(job string) {
				m.mu.Lock()
				defer m.mu.Unlock()
				h := m.running[job]
				h.until = m.clock.Now()
				m.running[job] = h
			},
			slotTTL: func(job string, slot int64) time.Duration {
				m.mu.Lock()
				defer m.mu.Unlock()
				until, ok := m.slots[memSlot{job, slot}]
				if !ok {
					return 0
				}
				return m.clock.Until(until)
			},
		}
	}},
	{"redis", func(t *testing.T, lease time.Duration) lockerBundle {
		c := newRedis(t, redisAddr())
		r := NewRedisLocker(c, RedisLockerOptions{Prefix: testPrefix(t, c), Lease: lease, Log: discardLog()})
		return lockerBundle{
			locker: r,
			store:  r,
			// Gone is how an expired key looks to every client.
			expire: func(job string) { require.NoError(t, c.Del(context.Background(), r.runningKey(job)).Err()) },
			slotTTL: func(job string, slot int64) time.Duration {
				d, err := c.PTTL(context.Background(), r.slotKey(job, slot)).Result()
				require.NoError(t, err)
				return max(d, 0)
			},
		}
	}},
}

func TestLocker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tick := func(job string, slot int64) Tick {
		return Tick{Job: job, Replica: "r1", Interval: time.Minute, Slot: slot}
	}

	for _, be := range lockerBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()

			t.Run("OncePerSlot", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t, time.Minute)
				b.runs(t, tick("a", 1))

				// The run is over, but the tick is still taken: a short run
				// must not let another replica run the same tick again.
				_, err := b.locker.Lock(ctx, tick("a", 1))
				require.ErrorIs(t, err, ErrTickTaken)
				require.InDelta(t, 2*time.Minute, b.slotTTL("a", 1), float64(time.Second), "slot lives two intervals")

				b.runs(t, tick("a", 2))
				b.runs(t, tick("b", 1)) // other jobs are independent
			})

			t.Run("RunningLeaseSkipsWithoutBurningSlot", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t, time.Minute)
				long, err := b.locker.Lock(ctx, tick("a", 1))
				require.NoError(t, err)

				_, err = b.locker.Lock(ctx, tick("a", 2))
				require.ErrorIs(t, err, ErrJobRunning)
				require.Zero(t, b.slotTTL("a", 2), "refused tick must leave its slot free")

				require.NoError(t, long.Unlock(ctx))
				b.runs(t, tick("a", 2), "a later replica may still run slot 2")
			})

			t.Run("OnDemand", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t, time.Minute)
				l, err := b.locker.Lock(ctx, tick("a", 1))
				require.NoError(t, err)
				onDemand := Tick{Job: "a", Replica: "r2", Interval: time.Minute, OnDemand: true}
				_, err = b.locker.Lock(ctx, onDemand)
				require.ErrorIs(t, err, ErrJobRunning, "on-demand runs never overlap either")
				require.NoError(t, l.Unlock(ctx))

				// Slot 1 is used up, yet an on-demand run may go, and uses no slot.
				b.runs(t, onDemand)
				l, err = b.locker.Lock(ctx, tick("a", 2))
				require.NoError(t, err)
				require.NoError(t, l.Unlock(ctx))
			})

			t.Run("StolenLeaseIsNotReleasedByOldHolder", func(t *testing.T) {
				t.Parallel()
				b := be.setup(t, time.Minute)
				old, err := b.locker.Lock(ctx, tick("a", 1))
				require.NoError(t, err)
				b.expire("a")

				thief, err := b.locker.Lock(ctx, tick("a", 2))
				require.NoError(t, err)
				oldToken := old.(*heldLease).token
				ok, err := b.store.extend(ctx, "a", oldToken, time.Minute)
				require.NoError(t, err)
				require.False(t, ok, "old holder must not extend the new lease")

				require.ErrorIs(t, old.Unlock(ctx), ErrLeaseLost)
				_, err = b.locker.Lock(ctx, tick("a", 3))
				require.ErrorIs(t, err, ErrJobRunning, "the new holder's lease survived")

				require.NoError(t, thief.Unlock(ctx))
				require.ErrorIs(t, old.Unlock(ctx), ErrLeaseLost, "unlock is idempotent")
			})

			t.Run("RefreshKeepsLongRunHeld", func(t *testing.T) {
				t.Parallel()
				// Long enough that a renewal (every third of it) missing it
				// cannot be a healthy machine, only a busy one: 300 ms was
				// missed once on a CI host running the e2e suite beside it.
				const lease = 2 * time.Second
				b := be.setup(t, lease)
				l, err := b.locker.Lock(ctx, tick("a", 1))
				require.NoError(t, err)
				// Real time must pass here: it is the lease's expiry under
				// test, past it twice.
				time.Sleep(5 * lease / 2)
				_, err = b.locker.Lock(ctx, tick("a", 2))
				require.ErrorIs(t, err, ErrJobRunning, "lease refreshed past its first expiry")
				require.NoError(t, l.Unlock(ctx))
				b.runs(t, tick("a", 2))
			})
		})
	}
}

// TestMemoryLockerExpiresByClock: with nobody refreshing in time, entries
// expire by the injected clock exactly as Redis keys would.
func TestMemoryLockerExpiresByClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clockwork.NewFakeClock()
	m := NewMemoryLocker(MemoryLockerOptions{Clock: clock, Lease: 30 * time.Second, Log: discardLog()})
	tk := Tick{Job: "a", Replica: "r1", Interval: 10 * time.Second, Slot: 7}

	l, err := m.Lock(ctx, tk)
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	clock.Advance(19 * time.Second)
	_, err = m.Lock(ctx, tk)
	require.ErrorIs(t, err, ErrTickTaken, "slot lives 2×interval")
	clock.Advance(time.Second)
	l, err = m.Lock(ctx, tk)
	require.NoError(t, err, "slot expired")

	// One jump past the lease: the refresher wakes to an expired lease and
	// must not revive it, so another holder may take it.
	clock.Advance(31 * time.Second)
	l2, err := m.Lock(ctx, Tick{Job: "a", Replica: "r2", Interval: 10 * time.Second, Slot: 99})
	require.NoError(t, err)
	require.ErrorIs(t, l.Unlock(ctx), ErrLeaseLost)
	require.NoError(t, l2.Unlock(ctx))
}
