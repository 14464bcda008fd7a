package jobs

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"switchboard/config"
	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/storage/storagetest"
)

// newScheduler builds a scheduler shut down when the test ends (a second
// Shutdown is harmless).
func newScheduler(t *testing.T, cfg Config, deps Deps) *Scheduler {
	t.Helper()
	if deps.Log == nil {
		deps.Log = discardLog()
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	s, err := New(cfg, deps)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

func shutdown(t *testing.T, s *Scheduler) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
}

func counter(s *Scheduler, job, outcome string) int {
	return int(testutil.ToFloat64(s.metrics.runs.WithLabelValues(job, outcome)))
}

func TestSlotMath(t *testing.T) {
	t.Parallel()
	base := time.Unix(1_700_000_000, 0) // a multiple of 10s and of 1h
	for _, tc := range []struct {
		name     string
		at       time.Time
		interval time.Duration
		slot     int64
	}{
		{"on the boundary", base, 10 * time.Second, 170_000_000},
		{"late timer", base.Add(9 * time.Second), 10 * time.Second, 170_000_000},
		{"early timer within slack", base.Add(-100 * time.Millisecond), 10 * time.Second, 170_000_000},
		{"before the slack", base.Add(-101 * time.Millisecond), 10 * time.Second, 169_999_999},
		{"hourly job, 36s slack", base.Add(-36 * time.Second), time.Hour, 1_700_000_000 / 3600},
		{"short interval, half of it", base.Add(-50 * time.Millisecond), 100 * time.Millisecond, 17_000_000_000},
	} {
		require.Equal(t, tc.slot, slotAt(tc.at, tc.interval), tc.name)
	}
	require.Equal(t, base.Add(10*time.Second).UTC(), nextBoundary(base, 10*time.Second), "strictly after")
	require.Equal(t, base.Add(10*time.Second).UTC(), nextBoundary(base.Add(time.Nanosecond), 10*time.Second))
}

// TestOncePerTick runs one job on two replicas sharing a locker for about ten
// one-second ticks and checks that every tick ran exactly once. With a skew
// of half an interval the replicas' ticks interleave, which is gocron issue
// #841's trap: the early replica finishes long before the late one's timer
// fires, and a lock held only during the run would let the late one run the
// same tick again. Midway the replica doing the work stops; the other must
// take over without losing or repeating a tick.
func TestOncePerTick(t *testing.T) {
	t.Parallel()
	for _, be := range []string{"redis", "memory"} {
		for _, skew := range []time.Duration{0, 500 * time.Millisecond} {
			t.Run(be+"/skew="+skew.String(), func(t *testing.T) {
				t.Parallel()
				testOncePerTick(t, be, skew)
			})
		}
	}
}

func testOncePerTick(t *testing.T, backend string, skew time.Duration) {
	const interval = time.Second
	ctx := context.Background()
	pool := storagetest.New(t).Pool()
	_, err := pool.Exec(ctx, `CREATE TABLE ticks (slot bigint NOT NULL, replica text NOT NULL, at timestamptz NOT NULL)`)
	require.NoError(t, err)

	var locker Locker
	if backend == "redis" {
		c := newRedis(t, redisAddr())
		locker = NewRedisLocker(c, RedisLockerOptions{Prefix: testPrefix(t, c), Log: discardLog()})
	} else {
		locker = NewMemoryLocker(MemoryLockerOptions{Log: discardLog()})
	}

	real := clockwork.NewRealClock()
	clocks := map[string]clockwork.Clock{"a": real, "b": config.ShiftedClock(real, skew)}
	replicas := map[string]*Scheduler{}
	var logs logBuffer
	for _, name := range []string{"a", "b"} {
		clock := clocks[name]
		s := newScheduler(t, Config{Replica: name, Locker: locker}, Deps{Clock: clock, Log: newLog(&logs).With("replica", name)})
		require.NoError(t, s.Every("tick", interval, func(ctx context.Context) error {
			tick, ok := TickFrom(ctx)
			if !ok || tick.OnDemand || tick.Replica != name {
				return errors.New("run without a claimed tick")
			}
			_, err := pool.Exec(ctx, `INSERT INTO ticks (slot, replica, at) VALUES ($1, $2, $3)`, tick.Slot, name, clock.Now())
			return err
		}))
		replicas[name] = s
	}
	rows := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ticks`).Scan(&n))
		return n
	}

	started := time.Now()
	defer func() {
		if t.Failed() { // what ran when, on the replica's own clock
			r, err := pool.Query(ctx, `SELECT slot, replica, to_char(at, 'HH24:MI:SS.MS') FROM ticks ORDER BY slot`)
			require.NoError(t, err)
			for r.Next() {
				var slot int64
				var replica, at string
				require.NoError(t, r.Scan(&slot, &replica, &at))
				t.Logf("slot %d replica %s at %s", slot, replica, at)
			}
			t.Logf("started at %s", started.UTC().Format("15:04:05.000"))
			for _, l := range logs.lines(`"job":"tick"`) {
				t.Log(l)
			}
		}
	}()
	replicas["a"].Start()
	time.Sleep(interval / 2) // start b half a tick later
	replicas["b"].Start()

	eventually(t, 10*time.Second, func() bool { return rows() >= 5 }, "first five ticks")
	// Stop whoever did the latest tick, right after its run.
	var winner string
	require.NoError(t, pool.QueryRow(ctx, `SELECT replica FROM ticks ORDER BY slot DESC LIMIT 1`).Scan(&winner))
	shutdown(t, replicas[winner])
	survivor := map[string]string{"a": "b", "b": "a"}[winner]

	eventually(t, 10*time.Second, func() bool { return rows() >= 10 }, "ten ticks")
	shutdown(t, replicas[survivor])
	elapsed := slotAt(time.Now(), interval) - slotAt(started, interval)

	r, err := pool.Query(ctx, `SELECT slot FROM ticks GROUP BY slot HAVING count(*) > 1`)
	require.NoError(t, err)
	dupes, err := pgx.CollectRows(r, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Empty(t, dupes, "slots run twice")

	// Losing a tick is not a safety failure but it must stay rare: only a
	// timer firing most of an interval late (a starved CI machine) may.
	var n, first, last int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), min(slot), max(slot) FROM ticks`).Scan(&n, &first, &last))
	require.LessOrEqual(t, last-first+1-n, int64(1), "ticks lost between the first and the last")
	require.InDelta(t, elapsed, n, 1, "one row per elapsed slot")

	var replicasSeen int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT replica) FROM ticks`).Scan(&replicasSeen))
	require.Equal(t, 2, replicasSeen, "both replicas ran ticks")
}

// TestNoOverlapAcrossReplicas: a run longer than the interval (and than the
// lease, which must therefore be refreshed) never overlaps a run on the other
// replica.
func TestNoOverlapAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, be := range lockerBackends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			locker := be.setup(t, 300*time.Millisecond).locker
			var running, maxRunning, runs atomic.Int32
			job := func(ctx context.Context) error {
				n := running.Add(1)
				defer running.Add(-1)
				for {
					m := maxRunning.Load()
					if n <= m || maxRunning.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(500 * time.Millisecond) // the job's own work, longer than interval and lease
				runs.Add(1)
				return nil
			}
			var replicas []*Scheduler
			for _, name := range []string{"a", "b"} {
				s := newScheduler(t, Config{Replica: name, Locker: locker}, Deps{})
				require.NoError(t, s.Every("slow", 200*time.Millisecond, job))
				s.Start()
				replicas = append(replicas, s)
			}
			eventually(t, 10*time.Second, func() bool { return runs.Load() >= 4 })
			for _, s := range replicas {
				shutdown(t, s)
			}
			require.EqualValues(t, 1, maxRunning.Load())
			skipped := counter(replicas[0], "slow", OutcomeSkipped) + counter(replicas[1], "slow", OutcomeSkipped)
			require.Positive(t, skipped, "overlapping ticks are counted as skipped")
		})
	}
}

// TestFailuresKeepTicking: an error and a panic are logged, counted and
// recorded in job_runs, and the next tick still runs.
func TestFailuresKeepTicking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storagetest.New(t)
	var logs logBuffer
	reg := prometheus.NewRegistry()
	s := newScheduler(t, Config{Replica: "r1"}, Deps{
		Log:        newLog(&logs),
		Registerer: reg,
		// What main does: the store is the recorder.
		Recorder: st.Jobs(),
	})
	require.NoError(t, s.Every("ok", 100*time.Millisecond, func(context.Context) error { return nil }))
	require.NoError(t, s.Every("fails", 100*time.Millisecond, func(context.Context) error {
		return errors.New("hh: 503")
	}))
	require.NoError(t, s.Every("panics", 100*time.Millisecond, func(context.Context) error {
		var m map[string]int
		m["boom"]++ // a real bug, not a panic(…) call
		return nil
	}))
	s.Start()

	summaries := func() map[string]domain.JobRunSummary {
		list, err := st.Jobs().Runs(ctx)
		require.NoError(t, err)
		out := map[string]domain.JobRunSummary{}
		for _, r := range list {
			out[r.Name] = r
		}
		return out
	}
	eventually(t, 10*time.Second, func() bool {
		m := summaries()
		return m["ok"].Runs >= 3 && m["fails"].Runs >= 3 && m["panics"].Runs >= 3
	}, "three runs of each job")
	shutdown(t, s)

	m := summaries()
	require.Zero(t, m["ok"].Failures)
	require.Empty(t, m["ok"].Err)
	require.Equal(t, "hh: 503", m["fails"].Err)
	require.Equal(t, m["fails"].Runs, m["fails"].Failures)
	require.Equal(t, "panic: assignment to entry in nil map", m["panics"].Err)
	require.Equal(t, m["panics"].Runs, m["panics"].Failures)
	require.Equal(t, "r1", m["panics"].Replica)

	// Every run was counted and recorded.
	require.EqualValues(t, m["ok"].Runs, counter(s, "ok", OutcomeOK))
	require.EqualValues(t, m["fails"].Runs, counter(s, "fails", OutcomeError))
	require.EqualValues(t, m["panics"].Runs, counter(s, "panics", OutcomePanic))
	require.Zero(t, counter(s, "panics", OutcomeOK))
	require.EqualValues(t, m["panics"].Runs, domaintest.Counter(t, reg, "panics_total", "job"), "in the series every contained panic is counted in")
	require.Equal(t, 3, testutil.CollectAndCount(s.metrics.duration), "one duration series per job")

	require.NotEmpty(t, logs.lines(`"level":"ERROR"`, `"msg":"job failed"`, `"job":"fails"`, `"err":"hh: 503"`, `"duration"`))
	panics := logs.lines(`"level":"ERROR"`, `"msg":"panic contained to one item"`, `"where":"job"`, `"job":"panics"`)
	require.NotEmpty(t, panics)
	require.Contains(t, panics[0], `"stack":"goroutine`)
	require.Contains(t, panics[0], "TestFailuresKeepTicking", "stack points at the job")
}

// TestShutdownWaitsForRunningJob: the job sees its context cancelled, and
// Shutdown returns only once the job has finished its cleanup.
func TestShutdownWaitsForRunningJob(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	s := newScheduler(t, Config{Replica: "r1", StopTimeout: 5 * time.Second}, Deps{
		Recorder: st.Jobs(),
	})
	started := make(chan struct{})
	var finished atomic.Bool
	require.NoError(t, s.Every("long", 100*time.Millisecond, func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		time.Sleep(300 * time.Millisecond) // cleanup that must not be cut short
		finished.Store(true)
		return ctx.Err()
	}))
	s.Start()
	<-started

	begin := time.Now()
	shutdown(t, s)
	require.True(t, finished.Load(), "Shutdown returned before the job finished")
	require.GreaterOrEqual(t, time.Since(begin), 300*time.Millisecond)

	runs, err := st.Jobs().Runs(context.Background())
	require.NoError(t, err)
	require.Len(t, runs, 1)
	require.Equal(t, "context canceled", runs[0].Err, "the run interrupted by shutdown is still recorded")
}

func TestShutdownGivesUpAfterStopTimeout(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, Config{Replica: "r1", StopTimeout: 300 * time.Millisecond}, Deps{})
	started, release := make(chan struct{}), make(chan struct{})
	require.NoError(t, s.Every("stubborn", 100*time.Millisecond, func(context.Context) error {
		close(started)
		<-release // ignores its context
		return nil
	}))
	s.Start()
	<-started

	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.Shutdown(ctx)
	require.Error(t, err)
	require.Less(t, time.Since(begin), 3*time.Second)

	close(release)
	eventually(t, 5*time.Second, func() bool { return !s.Status()[0].Running }, "job goroutine ends")
}

// TestRedisOutage: while Redis refuses connections or hangs, every tick is
// skipped quickly, logged and counted, nothing panics or hangs; when Redis
// returns, runs resume.
func TestRedisOutage(t *testing.T) {
	t.Parallel()
	const opTimeout = 500 * time.Millisecond
	p := newProxy(t, redisAddr())
	// go-redis's own timeouts are far longer than the locker's, so only
	// OpTimeout can end a call to a stalled Redis soon.
	c := redis.NewClient(&redis.Options{Addr: p.addr, ContextTimeoutEnabled: true,
		DialTimeout: time.Minute, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	t.Cleanup(func() { _ = c.Close() })
	var logs logBuffer
	locker := NewRedisLocker(c, RedisLockerOptions{
		Prefix:    testPrefix(t, newRedis(t, redisAddr())),
		Lease:     time.Second,
		OpTimeout: opTimeout,
		Log:       newLog(&logs),
	})
	s := newScheduler(t, Config{Replica: "r1", Locker: locker}, Deps{Log: newLog(&logs)})
	var runs atomic.Int32
	require.NoError(t, s.Every("job", 200*time.Millisecond, func(context.Context) error {
		runs.Add(1)
		return nil
	}))
	s.Start()
	eventually(t, 5*time.Second, func() bool { return runs.Load() >= 2 }, "runs before the outage")

	outage := func() {
		t.Helper()
		begin := time.Now()
		_, err := locker.Lock(context.Background(), Tick{Job: "probe", Replica: "r1", Interval: time.Second, OnDemand: true})
		require.Error(t, err)
		require.Less(t, time.Since(begin), 10*time.Second, "Lock must fail within OpTimeout, not go-redis's minute")

		before, skipped := runs.Load(), counter(s, "job", OutcomeSkipped)
		eventually(t, 5*time.Second, func() bool { return counter(s, "job", OutcomeSkipped) >= skipped+3 }, "ticks skipped during the outage")
		require.LessOrEqual(t, runs.Load(), before+1, "at most the run already past its lock")
		require.NotEmpty(t, logs.lines(`"level":"WARN"`, `"msg":"job skipped: lock unavailable"`, `"job":"job"`))

		p.up()
		after := runs.Load()
		eventually(t, 5*time.Second, func() bool { return runs.Load() >= after+3 }, "runs resume after the outage")
	}

	p.down() // connection refused: go-redis retries the dial until the deadline
	outage()
	p.stall() // connected, never answered
	outage()
	shutdown(t, s)
}

func TestRunNow(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, Config{Replica: "r1"}, Deps{})
	var runs atomic.Int32
	require.NoError(t, s.Every("distribute", time.Hour, func(ctx context.Context) error {
		if tick, ok := TickFrom(ctx); !ok || !tick.OnDemand {
			return errors.New("RunNow's run must claim an on-demand tick")
		}
		runs.Add(1)
		return nil
	}))
	require.ErrorIs(t, s.Every("distribute", time.Minute, func(context.Context) error { return nil }), ErrDuplicateJob)
	require.ErrorIs(t, s.RunNow("distribute"), ErrNotRunning)
	require.ErrorIs(t, s.RunNow("nope"), ErrUnknownJob)

	s.Start()
	require.NoError(t, s.RunNow("distribute"))
	eventually(t, 5*time.Second, func() bool { return runs.Load() == 1 && !s.Status()[0].Running })
	// A second wake-up in the same tick still runs: on-demand runs use no slot.
	require.NoError(t, s.RunNow("distribute"))
	eventually(t, 5*time.Second, func() bool { return runs.Load() == 2 })

	st := s.Status()
	require.Len(t, st, 1)
	require.Equal(t, "distribute", st[0].Name)
	require.Equal(t, time.Hour, st[0].Interval)
	require.True(t, st[0].NextRun.After(time.Now()))
	require.Zero(t, st[0].NextRun.UnixNano()%int64(time.Hour), "ticks are aligned to the interval")
	require.Equal(t, "r1", st[0].LastRun.Replica)
	require.False(t, st[0].LastRun.StartedAt.IsZero())
	shutdown(t, s)
	require.ErrorIs(t, s.RunNow("distribute"), ErrNotRunning)
}

// TestRunNowDuringRun: a wake-up that arrives while this replica runs the
// job (gocron drops it: singleton mode) runs the job once more afterwards;
// several wake-ups during one run make one more run.
func TestRunNowDuringRun(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, Config{Replica: "r1"}, Deps{})
	var runs atomic.Int32
	started, release := make(chan struct{}, 4), make(chan struct{})
	require.NoError(t, s.Every("distribute", time.Hour, func(ctx context.Context) error {
		tick, _ := TickFrom(ctx)
		if !tick.OnDemand {
			return errors.New("only RunNow's runs are expected within the hour")
		}
		if runs.Add(1) == 1 {
			started <- struct{}{}
			<-release
		}
		return nil
	}))
	s.Start()
	require.NoError(t, s.RunNow("distribute"))
	<-started
	for range 3 {
		require.NoError(t, s.RunNow("distribute"))
	}
	close(release)
	eventually(t, 5*time.Second, func() bool { return runs.Load() == 2 }, "the wake-ups during the run make one more run")
	time.Sleep(10 * runNowRetry) // time for a third run, were one coming
	require.EqualValues(t, 2, runs.Load(), "wake-ups coalesce")
	shutdown(t, s)
}

// TestRunNowWhileRunningElsewhere: an on-demand run never overlaps a run on
// another replica.
func TestRunNowWhileRunningElsewhere(t *testing.T) {
	t.Parallel()
	locker := NewMemoryLocker(MemoryLockerOptions{Log: discardLog()})
	a := newScheduler(t, Config{Replica: "a", Locker: locker}, Deps{})
	b := newScheduler(t, Config{Replica: "b", Locker: locker}, Deps{})
	started, release := make(chan struct{}), make(chan struct{})
	var bRuns atomic.Int32
	require.NoError(t, a.Every("job", time.Hour, func(context.Context) error {
		close(started)
		<-release
		return nil
	}))
	require.NoError(t, b.Every("job", time.Hour, func(context.Context) error {
		bRuns.Add(1)
		return nil
	}))
	a.Start()
	b.Start()
	require.NoError(t, a.RunNow("job"))
	<-started
	require.NoError(t, b.RunNow("job"))
	eventually(t, 5*time.Second, func() bool { return counter(b, "job", OutcomeSkipped) == 1 })
	require.Zero(t, bRuns.Load())
	close(release)
	shutdown(t, a)
	shutdown(t, b)
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	// Two schedulers on one registry share the collectors instead of failing.
	a := newScheduler(t, Config{}, Deps{Registerer: reg})
	b := newScheduler(t, Config{}, Deps{Registerer: reg})
	require.NotEmpty(t, a.replica, "hostname by default")
	require.NoError(t, a.Every("x", time.Minute, func(context.Context) error { return nil }))
	require.NoError(t, b.Every("y", time.Minute, func(context.Context) error { return nil }))
	require.Error(t, a.Every("", time.Minute, func(context.Context) error { return nil }))
	require.Error(t, a.Every("z", 0, func(context.Context) error { return nil }))
	n, err := testutil.GatherAndCount(reg, "jobs_runs_total")
	require.NoError(t, err)
	require.Equal(t, 2*len(outcomes), n, "series declared at zero for both jobs")
}
