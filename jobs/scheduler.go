package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Config is the scheduler's part of the configuration.
type Config struct {
	// Replica names this process in logs, locks and job_runs (hostname).
	Replica string
	// StopTimeout is how long Shutdown waits for running jobs (10s).
	StopTimeout time.Duration
	// Locker decides which replica runs a tick; nil means an in-process
	// MemoryLocker (a single replica).
	Locker Locker
}

// Deps are the scheduler's collaborators; all optional.
type Deps struct {
	Log        *slog.Logger          // slog.Default()
	Registerer prometheus.Registerer // nil: metrics kept but not exported
	Recorder   Recorder              // nil: runs are not recorded
	Clock      clockwork.Clock       // real clock
}

// Recorder keeps the last run of every job where /status can read it on
// any replica (storage's job_runs table).
type Recorder interface {
	RecordRun(ctx context.Context, r domain.JobRun) error
}

// JobStatus is this replica's in-memory view of a job, for /status when the
// database cannot be read.
type JobStatus struct {
	Name     string
	Interval time.Duration
	NextRun  time.Time     // zero before Start
	LastRun  domain.JobRun // last run on this replica; zero StartedAt if none
	Running  bool
}

var (
	// ErrDuplicateJob is returned by Every for a name already registered.
	ErrDuplicateJob = errors.New("job already registered")
	// ErrUnknownJob is returned by RunNow for a name never registered.
	ErrUnknownJob = errors.New("unknown job")
	// ErrNotRunning is returned by RunNow before Start or after Shutdown.
	ErrNotRunning = errors.New("scheduler not running")
)

const (
	defaultStopTimeout = 10 * time.Second
	// recordTimeout bounds writing a run to the Recorder, which happens after
	// the job and so inside the shutdown grace period.
	recordTimeout = 3 * time.Second
)

// Scheduler runs named periodic jobs on gocron, once per tick across
// replicas (see the package doc).
type Scheduler struct {
	gs       gocron.Scheduler
	locker   Locker
	replica  string
	log      *slog.Logger
	clock    clockwork.Clock
	recorder Recorder
	metrics  *metrics

	mu      sync.Mutex
	jobs    map[string]*job
	running atomic.Bool
}

type job struct {
	name     string
	interval time.Duration
	fn       func(context.Context) error
	// runNow marks the next lock request as RunNow's (lease only, no slot).
	runNow atomic.Bool

	mu      sync.Mutex
	handle  gocron.Job // nil until NewJob returns
	claim   *Tick      // what the lock just claimed, handed to the run
	last    domain.JobRun
	running bool
}

func (j *job) gocronJob() gocron.Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.handle
}

// New builds a scheduler; add jobs with Every, then Start.
func New(cfg Config, deps Deps) (*Scheduler, error) {
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if cfg.Replica == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("replica name: %w", err)
		}
		cfg.Replica = host
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = defaultStopTimeout
	}
	if cfg.Locker == nil {
		cfg.Locker = NewMemoryLocker(MemoryLockerOptions{Clock: deps.Clock, Log: deps.Log})
	}
	m, err := newMetrics(deps.Registerer, deps.Log)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{
		locker:   cfg.Locker,
		replica:  cfg.Replica,
		log:      deps.Log,
		clock:    deps.Clock,
		recorder: deps.Recorder,
		metrics:  m,
		jobs:     make(map[string]*job),
	}
	m.rescheduled = s.wakeAgain
	s.gs, err = gocron.NewScheduler(
		gocron.WithClock(deps.Clock),
		gocron.WithLocation(time.UTC),
		gocron.WithLogger(gocronLogger{deps.Log}),
		gocron.WithStopTimeout(cfg.StopTimeout),
		gocron.WithDistributedLocker(gocronLocker{s}),
		gocron.WithMonitor(m),
		// Reschedule, not wait: a run slower than its interval absorbs the
		// ticks it overlaps instead of queueing them up.
		gocron.WithGlobalJobOptions(gocron.WithSingletonMode(gocron.LimitModeReschedule)),
	)
	if err != nil {
		return nil, fmt.Errorf("new gocron scheduler: %w", err)
	}
	return s, nil
}

// Every registers fn to run every interval under name, which is also its
// lock key and metric label. The ctx fn receives is cancelled by Shutdown.
func (s *Scheduler) Every(name string, interval time.Duration, fn func(ctx context.Context) error) error {
	if name == "" || interval <= 0 || fn == nil {
		return fmt.Errorf("register job %q every %s: name, positive interval and function required", name, interval)
	}
	j := &job{name: name, interval: interval, fn: fn}
	// Reserve the name first: gocron's loop, which NewJob waits on, calls
	// back into the scheduler (Lock), so s.mu is not held across it.
	s.mu.Lock()
	if _, ok := s.jobs[name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("register job %q: %w", name, ErrDuplicateJob)
	}
	s.jobs[name] = j
	s.mu.Unlock()
	s.metrics.declare(name)

	h, err := s.gs.NewJob(
		gocron.DurationJob(interval),
		gocron.NewTask(func(ctx context.Context) { s.run(ctx, j) }),
		gocron.WithName(name),
		// Ticks on multiples of the interval since the epoch, the same
		// instants on every replica; "Past" because the boundary may pass
		// while gocron applies the option, and gocron then steps forward by
		// whole intervals, which keeps the alignment.
		gocron.WithStartAt(gocron.WithStartDateTimePast(nextBoundary(s.clock.Now(), interval))),
		gocron.WithEventListeners(gocron.AfterLockError(s.lockFailed)),
	)
	if err != nil {
		s.mu.Lock()
		delete(s.jobs, name)
		s.mu.Unlock()
		return fmt.Errorf("register job %q: %w", name, err)
	}
	j.mu.Lock()
	j.handle = h
	j.mu.Unlock()
	return nil
}

// RunNow runs a job at once on this replica, beside its ticks: it claims only
// the run lease, so it is skipped if the job is running anywhere, and it does
// not use up the current tick. If this replica is itself running the job,
// the job runs again once that run is over: a wake-up means new work, which
// the running pass may have missed. Wake-ups during one run coalesce.
func (s *Scheduler) RunNow(name string) error {
	j := s.lookup(name)
	if j == nil || j.gocronJob() == nil {
		return fmt.Errorf("run job %q now: %w", name, ErrUnknownJob)
	}
	if !s.running.Load() {
		// gocron would park the request until Start, blocking its own loop.
		return fmt.Errorf("run job %q now: %w", name, ErrNotRunning)
	}
	j.runNow.Store(true)
	if err := j.gocronJob().RunNow(); err != nil {
		j.runNow.Store(false)
		return fmt.Errorf("run job %q now: %w", name, err)
	}
	return nil
}

// runNowRetry is how soon a dropped RunNow is asked again: gocron's runner
// for the job is busy only for the moments after the job function returned.
const runNowRetry = 20 * time.Millisecond

// wakeAgain is told of every start gocron dropped because the job's runner
// was still busy on this replica. A RunNow dropped that way would be lost, and
// its flag would mark the next scheduled tick on-demand; so while a RunNow is
// pending it is asked again until a run takes it. It runs on gocron's
// executor goroutine, which RunNow itself needs, hence the timer.
func (s *Scheduler) wakeAgain(name string) {
	j := s.lookup(name)
	if j == nil || !j.runNow.Load() {
		return
	}
	time.AfterFunc(runNowRetry, func() {
		h := j.gocronJob()
		if h == nil || !j.runNow.Load() || !s.running.Load() {
			return
		}
		if err := h.RunNow(); err != nil && s.running.Load() {
			s.log.Warn("job wake-up not delivered", "job", name, "err", err)
		}
	})
}

// Start begins ticking. It does not block.
func (s *Scheduler) Start() {
	s.running.Store(true)
	s.gs.Start()
}

// Shutdown stops ticking, cancels the jobs' context and waits for running
// jobs up to Config.StopTimeout (or ctx); an error means some were still
// running. The scheduler cannot be restarted.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.running.Store(false)
	if err := s.gs.ShutdownWithContext(ctx); err != nil {
		return fmt.Errorf("shut down jobs: %w", err)
	}
	return nil
}

// Status lists the jobs by name with this replica's view of them.
func (s *Scheduler) Status() []JobStatus {
	s.mu.Lock()
	list := make([]*job, 0, len(s.jobs))
	for _, j := range s.jobs {
		list = append(list, j)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *job) int { return strings.Compare(a.name, b.name) })

	out := make([]JobStatus, 0, len(list))
	for _, j := range list {
		st := JobStatus{Name: j.name, Interval: j.interval}
		if h := j.gocronJob(); h != nil && s.running.Load() {
			st.NextRun, _ = h.NextRun() // zero if gocron is busy; a status page can live with that
		}
		j.mu.Lock()
		st.LastRun, st.Running = j.last, j.running
		j.mu.Unlock()
		out = append(out, st)
	}
	return out
}

func (s *Scheduler) lookup(name string) *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs[name]
}

// run is the task gocron calls: it owns recovery, logging, metrics and
// recording, so that a job only has to return an error.
func (s *Scheduler) run(ctx context.Context, j *job) {
	start := s.clock.Now()
	j.mu.Lock()
	j.running = true
	if j.claim != nil {
		ctx = context.WithValue(ctx, tickKey{}, *j.claim)
		j.claim = nil
	}
	j.mu.Unlock()

	// Recovered here rather than by gocron, which knows neither our logger
	// nor the stack.
	var err error
	if pe := s.metrics.panics.Contain(s.log.With("job", j.name), "job", j.name, func() { err = j.fn(ctx) }); pe != nil {
		err = pe
	}
	d := s.clock.Since(start)

	r := domain.JobRun{Name: j.name, Replica: s.replica, StartedAt: start.UTC(), Duration: d}
	outcome := OutcomeOK
	var pe *domain.PanicError
	switch {
	case errors.As(err, &pe):
		// Contain logged it with the stack.
		outcome, r.Err = OutcomePanic, pe.Error()
	case err != nil:
		outcome, r.Err = OutcomeError, err.Error()
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			s.log.Info("job interrupted by shutdown", "job", j.name, "duration", d, "err", err)
		} else {
			s.log.Error("job failed", "job", j.name, "duration", d, "err", err)
		}
	default:
		s.log.Debug("job done", "job", j.name, "duration", d)
	}
	s.metrics.observe(j.name, outcome, d)

	j.mu.Lock()
	j.last, j.running = r, false
	j.mu.Unlock()

	if s.recorder != nil {
		// The job's ctx may be cancelled by shutdown; its last run still counts.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		if err := s.recorder.RecordRun(rctx, r); err != nil {
			s.log.Warn("job run not recorded", "job", j.name, "err", err)
		}
	}
}

type tickKey struct{}

// TickFrom returns the tick the current run claimed, from the ctx a job
// function receives. A job that must do its work exactly once per tick can
// key it on (job, Tick.Slot) in SQL, which holds even when the lock fails.
// OnDemand is set for RunNow's runs, which claim no slot.
func TickFrom(ctx context.Context) (Tick, bool) {
	t, ok := ctx.Value(tickKey{}).(Tick)
	return t, ok
}

// lockFailed is gocron's AfterLockError listener: the tick was skipped.
func (s *Scheduler) lockFailed(_ uuid.UUID, name string, err error) {
	s.metrics.observe(name, OutcomeSkipped, 0)
	switch {
	case errors.Is(err, ErrTickTaken), errors.Is(err, ErrJobRunning):
		s.log.Debug("job skipped", "job", name, "reason", err)
	case !s.running.Load():
		s.log.Debug("job skipped: shutting down", "job", name, "err", err)
	default:
		s.log.Warn("job skipped: lock unavailable", "job", name, "err", err)
	}
}

// gocronLocker adapts Locker to gocron's Lock(ctx, key): the key is the job
// name, and the job's interval and the clock turn it into a Tick.
type gocronLocker struct{ s *Scheduler }

func (l gocronLocker) Lock(ctx context.Context, name string) (gocron.Lock, error) {
	s := l.s
	j := s.lookup(name)
	if j == nil {
		return nil, fmt.Errorf("lock job %q: %w", name, ErrUnknownJob)
	}
	t := Tick{Job: name, Replica: s.replica, Interval: j.interval}
	if j.runNow.CompareAndSwap(true, false) {
		t.OnDemand = true
	} else {
		t.Slot = slotAt(s.clock.Now(), j.interval)
	}
	lease, err := s.locker.Lock(ctx, t)
	if err != nil {
		return nil, err
	}
	// gocron runs the task right after this, on the same goroutine, and
	// singleton mode keeps a second run of the job from slipping in between.
	j.mu.Lock()
	j.claim = &t
	j.mu.Unlock()
	return loggedLease{lease: lease, log: s.log, job: name}, nil
}

// loggedLease logs a failed release, which gocron would drop silently.
type loggedLease struct {
	lease Lease
	log   *slog.Logger
	job   string
}

func (l loggedLease) Unlock(ctx context.Context) error {
	err := l.lease.Unlock(ctx)
	if err != nil {
		l.log.Warn("job lease not released", "job", l.job, "err", err)
	}
	return err
}

// slotAt numbers the tick a timer firing at now belongs to. Ticks sit on
// multiples of interval since the epoch. A timer never fires early by more
// than the wall clock drifted since it was set (NTP slews at most 500ppm),
// but it fires late by whatever a busy process or a GC pause costs; so the
// tick is taken to have started up to earlySlack before now's boundary and
// may end up to interval-earlySlack after it. Flooring would file a 1ms-early
// timer under the previous tick and lose this one; rounding would file a
// timer half an interval late under the next tick.
func slotAt(now time.Time, interval time.Duration) int64 {
	iv := int64(interval)
	return (now.UnixNano() + int64(earlySlack(interval))) / iv
}

// earlySlack is a hundredth of the interval (20× the worst NTP slew),
// at least 100ms and at most half the interval.
func earlySlack(interval time.Duration) time.Duration {
	return min(max(interval/100, 100*time.Millisecond), interval/2)
}

// nextBoundary is the first multiple of interval since the epoch after now.
func nextBoundary(now time.Time, interval time.Duration) time.Time {
	iv := int64(interval)
	return time.Unix(0, (now.UnixNano()/iv+1)*iv).UTC()
}

// gocronLogger tags gocron's own messages and keeps its chatty Info lines
// ("scheduler started") at debug.
type gocronLogger struct{ log *slog.Logger }

func (l gocronLogger) Debug(msg string, args ...any) { l.log.Debug(msg, args...) }
func (l gocronLogger) Info(msg string, args ...any)  { l.log.Debug(msg, args...) }
func (l gocronLogger) Warn(msg string, args ...any)  { l.log.Warn(msg, args...) }
func (l gocronLogger) Error(msg string, args ...any) { l.log.Error(msg, args...) }
