package memory

import (
	"context"
	"encoding/json"
	"sync"
)

// Channel is the NOTIFY channel the pipeline_runs trigger speaks on.
const Channel = "pipeline_events"

// Listen subscribes to a NOTIFY channel on a connection of its own,
// calling onConnect after every (re)connect and onNotify per payload, until
// ctx ends (storage.Store.Listen does this).
type Listen func(ctx context.Context, channel string, onConnect func(), onNotify func(payload string))

// orchestrator feeds run ids to a bounded pool of workers. Ids come from
// NOTIFY, from sweeps and from the pipeline itself; the set of pending ids
// only saves duplicate work (the captures make duplicates harmless), and
// anything dropped is found again by the next sweep.
type orchestrator struct {
	s     *Service
	queue chan int64

	// pending holds ids queued or being processed here. A notification for
	// one of them is dropped: the worker on it carries the run through
	// every stage it can, and whoever takes it further notifies again.
	mu      sync.Mutex
	pending map[int64]bool
}

func newOrchestrator(s *Service) *orchestrator {
	return &orchestrator{s: s, queue: make(chan int64, 8192), pending: map[int64]bool{}}
}

func (o *orchestrator) dispatch(id int64) {
	o.mu.Lock()
	if o.pending[id] {
		o.mu.Unlock()
		return
	}
	o.pending[id] = true
	o.mu.Unlock()
	select {
	case o.queue <- id:
	default:
		// Full: forget it; the next sweep dispatches it again.
		o.mu.Lock()
		delete(o.pending, id)
		o.mu.Unlock()
	}
}

func (o *orchestrator) done(id int64) {
	o.mu.Lock()
	delete(o.pending, id)
	o.mu.Unlock()
}

// Run is the orchestrator: it listens for pipeline events (sweeping every
// unfinished run after each (re)connect, since NOTIFY is lost while nobody
// listens), sweeps every SweepInterval as the guarantee, and works runs on
// Workers goroutines until ctx ends. A stage interrupted by the stop is
// handed back to the status before it.
func (s *Service) Run(ctx context.Context, listen Listen) {
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
					s.process(ctx, id)
					o.done(id)
				}
			}
		}()
	}
	if listen != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			listen(ctx, Channel, func() { go s.Sweep(ctx) }, func(payload string) {
				var ev struct {
					ID     int64  `json:"id"`
					Status Status `json:"status"`
				}
				if json.Unmarshal([]byte(payload), &ev) != nil || ev.ID <= 0 {
					return
				}
				if _, working := capturing[ev.Status]; working {
					return // someone just started a stage: nothing to do until it ends
				}
				o.dispatch(ev.ID)
			})
		}()
	}
	s.log.Info("memory orchestrator started", "workers", s.cfg.Workers, "lease", s.cfg.Lease)
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

// sweepLimit bounds one sweep; the rest waits for the next.
const sweepLimit = 10000

// Sweep dispatches every unfinished run and updates the backlog gauge.
func (s *Service) Sweep(ctx context.Context) {
	refs, err := s.deps.Repo.OpenRuns(ctx, sweepLimit)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("sweep pipeline runs", "err", err)
		}
		return
	}
	for _, r := range refs {
		s.o.dispatch(r.ID)
	}
	if n, err := s.deps.Repo.Backlog(ctx); err == nil {
		s.m.backlog.Set(float64(n))
	}
}

// Reap returns runs held in a capturing status past their lease (their
// orchestrator died) to the status before it, and fails those returned
// MaxReaps times already. Safe on several replicas: each move names the old
// status and the expired lease.
func (s *Service) Reap(ctx context.Context) (int, error) {
	returned, failed, err := s.deps.Repo.ReapRuns(ctx, s.cfg.MaxReaps)
	if err != nil {
		return 0, err
	}
	for _, r := range returned {
		s.m.reaped.Inc()
		s.log.Warn("reaper returned a stalled run", "run", r.ID, "to", r.Status)
		s.o.dispatch(r.ID)
	}
	for _, r := range failed {
		s.m.failed.WithLabelValues("reaper").Inc()
		s.log.Warn("reaper failed a run stalled too often", "run", r.ID)
		s.o.dispatch(r.ID) // to tell the user
	}
	return len(returned) + len(failed), nil
}
