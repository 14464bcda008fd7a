package memory

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"

	"switchboard/domain"
)

// Channel is the NOTIFY channel the pipeline_runs trigger speaks on.
const Channel = "pipeline_events"

// orchestrator feeds runs to a bounded pool of workers. Runs come from
// NOTIFY, from sweeps and from the pipeline itself; the bookkeeping here
// only saves duplicate work (the captures make duplicates harmless), and
// anything dropped is found again by the next sweep.
type orchestrator struct {
	s     *Service
	queue chan int64

	mu sync.Mutex
	// pending holds the runs queued or at work here.
	pending map[int64]*entry
	// users holds, per user, the one run of theirs queued or at work here.
	// Their other NEW runs could not be captured before it is done, so they
	// are parked instead of queued, and queued when it is done: a user
	// takes one place in the queue at a time, and a run that waits behind
	// its predecessor does not lose its turn to a capture that had to fail.
	users  map[int64]int64
	parked map[int64][]Ref
}

type entry struct {
	// ref.Status is the latest status heard of: a run captured elsewhere
	// while it waited in the queue is skipped without a round trip.
	ref   Ref
	held  bool // the latest notification said someone holds it
	taken bool // a worker is on it
	again bool // worth another look when the worker is done
}

func newOrchestrator(s *Service) *orchestrator {
	return &orchestrator{s: s, queue: make(chan int64, 8192),
		pending: map[int64]*entry{}, users: map[int64]int64{}, parked: map[int64][]Ref{}}
}

// dispatch queues a run for a worker, unless it is queued or at work here
// already (then only its status is noted) or waits behind a run of the
// same user at work here.
func (o *orchestrator) dispatch(ref Ref) { o.queueRun(ref, false) }

// wake is dispatch for a run that has just become ready (its user's
// previous run is done): if a worker here is on it already, its capture
// may have come too early, so it gets another look afterwards.
func (o *orchestrator) wake(ref Ref) { o.queueRun(ref, true) }

func (o *orchestrator) queueRun(ref Ref, again bool) {
	o.mu.Lock()
	if e, ok := o.pending[ref.ID]; ok {
		e.ref.Status, e.held = ref.Status, false
		e.again = e.again || (again && e.taken)
		o.mu.Unlock()
		return
	}
	if ref.UserID != 0 {
		if _, ok := o.users[ref.UserID]; ok && ref.Status == New {
			o.parked[ref.UserID] = append(o.parked[ref.UserID], ref)
			o.mu.Unlock()
			return
		} else if !ok {
			o.users[ref.UserID] = ref.ID
		}
	}
	o.pending[ref.ID] = &entry{ref: ref}
	o.mu.Unlock()
	select {
	case o.queue <- ref.ID:
	default:
		// Full: forget it and the user's parked runs; the next sweep
		// dispatches them again.
		o.mu.Lock()
		delete(o.pending, ref.ID)
		if o.users[ref.UserID] == ref.ID {
			delete(o.users, ref.UserID)
			delete(o.parked, ref.UserID)
		}
		o.mu.Unlock()
	}
}

// note records that someone holds a run queued here: when a worker gets
// to it, it is skipped without a round trip.
func (o *orchestrator) note(ref Ref) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e, ok := o.pending[ref.ID]; ok {
		e.ref.Status, e.held = ref.Status, true
	}
}

// take is a worker picking up a queued run: false if it is no longer
// worth a look (a stage at work elsewhere).
func (o *orchestrator) take(id int64) (Ref, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.pending[id]
	if !ok {
		return Ref{ID: id}, false
	}
	e.taken = true
	if _, working := capturing[e.ref.Status]; working || e.held {
		return e.ref, false
	}
	return e.ref, true
}

// done is a worker letting go of a run; the user's parked runs are queued,
// and so is the run itself if it was woken meanwhile.
func (o *orchestrator) done(ref Ref) {
	o.mu.Lock()
	var wake []Ref
	if e, ok := o.pending[ref.ID]; ok {
		delete(o.pending, ref.ID)
		if e.again {
			wake = append(wake, e.ref)
		}
	}
	if o.users[ref.UserID] == ref.ID {
		delete(o.users, ref.UserID)
		parked := o.parked[ref.UserID]
		delete(o.parked, ref.UserID)
		// Oldest first: it takes the user's place in the queue, the rest park again.
		slices.SortFunc(parked, func(a, b Ref) int { return cmp.Compare(a.ID, b.ID) })
		wake = append(wake, parked...)
	}
	o.mu.Unlock()
	for _, r := range wake {
		o.wake(r)
	}
}

// Run is the orchestrator: it listens for pipeline events (sweeping every
// unfinished run after each (re)connect, since NOTIFY is lost while nobody
// listens), sweeps every SweepInterval as the guarantee, and works runs on
// Workers goroutines until ctx ends. A stage interrupted by the stop is
// handed back to the status before it.
func (s *Service) Run(ctx context.Context, listen domain.Listen) {
	o := s.o
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case id := <-o.queue:
					ref, ok := o.take(id)
					if ok {
						// A stage's own panic fails the run (stage); one
						// past it leaves the run held, as a worker that
						// died would: the reaper returns its stage,
						// counted, and fails it after MaxReaps.
						_ = s.m.panics.Contain(s.log, "memory_run", ref.ID, func() { s.process(ctx, ref) })
					}
					o.done(ref)
				}
			}
		}()
	}
	if listen != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			listen(ctx, Channel, func() { go s.Sweep(ctx) }, func(payload string) { s.onEvent(ctx, payload) })
		}()
	}
	s.log.Info("memory orchestrator started", "workers", s.cfg.Workers, "lease", s.cfg.StageLease)
	t := s.deps.Clock.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	if listen == nil {
		s.Sweep(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.Chan():
			s.Sweep(ctx)
		}
	}
}

// onEvent takes one pipeline_events notification: a stop cuts the run's
// answer short, a reap returns dead replicas' stages now, and a run no one
// holds goes to a worker.
func (s *Service) onEvent(ctx context.Context, payload string) {
	o := s.o
	var ev struct {
		ID     int64  `json:"id"`
		UserID int64  `json:"user_id"`
		Status Status `json:"status"`
		Held   bool   `json:"held"`
		// Reap: a dead replica's stages had their leases
		// ended (storage.Liveness); return them now rather
		// than at the reaper's next tick.
		Reap bool `json:"reap"`
		// Stop: the user stopped the run's answer
		// (Runs.RequestStop); the replica writing it cuts it
		// short.
		Stop bool `json:"stop"`
	}
	if json.Unmarshal([]byte(payload), &ev) != nil {
		return
	}
	if ev.Stop {
		s.cancelAnswer(ev.ID)
		return
	}
	if ev.Reap {
		go s.reapNow(ctx)
		return
	}
	if ev.ID <= 0 {
		return
	}
	ref := Ref{ID: ev.ID, UserID: ev.UserID, Status: ev.Status}
	if _, working := capturing[ev.Status]; working || ev.Held {
		// Someone holds it and carries it on, or the reaper will.
		o.note(ref)
		return
	}
	o.dispatch(ref)
}

// sweepLimit bounds one sweep; the rest waits for the next.
const sweepLimit = 10000

// Sweep dispatches every unfinished run and updates the backlog gauge.
func (s *Service) Sweep(ctx context.Context) {
	refs, err := s.deps.Runs.Open(ctx, sweepLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sweep pipeline runs", "err", err)
		}
		return
	}
	for _, r := range refs {
		s.o.dispatch(r)
	}
	if n, err := s.deps.Runs.Backlog(ctx); err == nil {
		s.m.backlog.Set(float64(n))
	}
}

// reapNow is Reap on a wake, its failure logged: the reaper's tick retries.
func (s *Service) reapNow(ctx context.Context) {
	if _, err := s.Reap(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("reap pipeline runs", "err", err)
	}
}

// Reap returns runs held in a capturing status past their lease (their
// orchestrator died) to the status before it, and fails those returned
// MaxReaps times already. Safe on several replicas: each move names the old
// status and the expired lease.
func (s *Service) Reap(ctx context.Context) (int, error) {
	returned, failed, err := s.deps.Runs.Reap(ctx, s.cfg.MaxReaps)
	if err != nil {
		return 0, err
	}
	for _, r := range returned {
		s.m.reaped.Inc()
		s.log.Warn("reaper returned a stalled run", "run", r.ID, "to", r.Status)
		s.o.dispatch(r)
	}
	for _, r := range failed {
		s.m.failed.WithLabelValues("reaper").Inc()
		s.log.Warn("reaper failed a run stalled too often", "run", r.ID)
		s.o.dispatch(r) // to tell the user
	}
	return len(returned) + len(failed), nil
}
