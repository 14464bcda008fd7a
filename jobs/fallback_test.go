package jobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/redisgate"
)

// TestFallbackLockerRunsJobsWhileRedisIsDown: with Redis refusing
// connections the ticks still run, under this replica's in-process lock
// (once per tick here, never beside themselves), the switch is logged once;
// when Redis answers the runs are locked through it again.
func TestFallbackLockerRunsJobsWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	p := newProxy(t, redisAddr())
	c := newRedis(t, p.addr)
	var logs logBuffer
	prefix := testPrefix(t, newRedis(t, redisAddr()))
	// OpTimeout is what only an unhealthy Redis exceeds: on a loaded host a
	// short one made the healthy Redis "fail" before the outage too.
	shared := NewRedisLocker(c, RedisLockerOptions{Prefix: prefix, Lease: time.Second, OpTimeout: 5 * time.Second, Log: newLog(&logs)})
	gate := redisgate.New("job locker", func(ctx context.Context) error { return c.Ping(ctx).Err() }, newLog(&logs))
	gate.First, gate.Max = 50*time.Millisecond, 100*time.Millisecond
	locker := NewFallbackLocker(shared, NewMemoryLocker(MemoryLockerOptions{Lease: time.Second, Log: newLog(&logs)}), gate)
	s := newScheduler(t, Config{Replica: "r1", Locker: locker}, Deps{Log: newLog(&logs)})
	var runs, overlap, inRun atomic.Int32
	require.NoError(t, s.Every("job", 200*time.Millisecond, func(context.Context) error {
		if inRun.Add(1) > 1 {
			overlap.Add(1)
		}
		defer inRun.Add(-1)
		runs.Add(1)
		return nil
	}))
	s.Start()
	eventually(t, 5*time.Second, func() bool { return runs.Load() >= 2 }, "runs before the outage")

	p.down()
	before := runs.Load()
	eventually(t, 10*time.Second, func() bool { return runs.Load() >= before+4 }, "runs go on while Redis refuses")
	require.True(t, gate.IsDown())
	// Each switch is logged once: one more fall-back than returns while
	// down, as many once back (whatever a loaded host made of the time
	// before the outage).
	switches := func() (downs, ups int) {
		return len(logs.lines(`"msg":"redis unavailable; job locker falls back`)),
			len(logs.lines(`"msg":"redis answers again; back to the shared job locker"`))
	}
	downs, ups := switches()
	require.Equal(t, ups+1, downs, "the switch is logged once")

	p.up()
	eventually(t, 10*time.Second, func() bool { return !gate.IsDown() }, "the gate probes Redis back")
	after := runs.Load()
	eventually(t, 5*time.Second, func() bool { return runs.Load() >= after+2 }, "runs go on after the outage")
	downs, ups = switches()
	require.Equal(t, downs, ups, "the way back is logged once")
	require.Zero(t, overlap.Load(), "a job never ran beside itself on one replica")
	shutdown(t, s)
}
