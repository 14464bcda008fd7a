package analysis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchboard/domain"
)

// Executor steps, as error_log names them.
const (
	StepFetch     = "fetch"
	StepBatch     = "batch"
	StepProposals = "proposals"
	StepSave      = "save"
	StepComplete  = "complete"
	// StepInterrupted: the executor stopped (shutdown, or found dead).
	StepInterrupted = "interrupted"
)

// stepError is a failure at one step (and batch) of the executor.
type stepError struct {
	step  string
	batch int
	err   error
}

func (e *stepError) Error() string { return fmt.Sprintf("%s: %v", e.step, e.err) }

// failed is err at the step (and batch) e names.
func (e stepError) failed(err error) *stepError {
	e.err = err
	return &e
}

// execute runs a started run's steps (started_at was set by the start)
// and completes or fails it. ctx is the service's: a shutdown fails the
// run as interrupted rather than leave it running.
func (s *Service) execute(ctx context.Context, r Run) {
	leaseCtx, stopLease := context.WithCancel(ctx)
	defer stopLease()
	go s.keepLease(leaseCtx, r.ID)

	var at stepError // the step under way, which a panic fails
	var err error
	if perr := s.m.panics.Contain(s.log, "analysis_run", r.ID, func() { err = s.steps(ctx, &r, &at) }); perr != nil {
		// The run fails at the step that panicked, as at one that failed:
		// started again it would only panic again.
		err = at.failed(perr)
	}
	stopLease()
	if err == nil {
		done, ok, cerr := s.deps.Runs.Complete(context.WithoutCancel(ctx), r.ID, s.renderEvent(EventCompleted))
		switch {
		case cerr != nil:
			err = &stepError{step: StepComplete, err: cerr}
		case !ok:
			// Failed meanwhile (a replica thought the executor dead).
			s.log.Warn("run no longer running at completion", "run", r.ID, "state", done.State)
			return
		default:
			s.m.runs.WithLabelValues(string(Completed)).Inc()
			s.event(context.WithoutCancel(ctx), Event{Kind: EventCompleted, Run: done})
			return
		}
	}
	// Cleaned: an error may quote what the model or a chat sent, and a
	// failure refused for a NUL in it would leave the run to the reaper,
	// its cause lost.
	e := ErrorLog{Error: domain.CleanText(err.Error())}
	if se := (*stepError)(nil); errors.As(err, &se) {
		e = ErrorLog{Step: se.step, Batch: se.batch, Error: domain.CleanText(se.err.Error())}
	}
	if ctx.Err() != nil {
		e = ErrorLog{Step: StepInterrupted, Batch: e.Batch, Error: "stopped by shutdown"}
	}
	// The failure is written even when ctx ended: it is the last thing
	// this executor owes the run.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	failed, ok, ferr := s.deps.Runs.Fail(wctx, r.ID, e, s.renderEvent(EventFailed))
	if ferr != nil {
		s.log.Error("fail run", "run", r.ID, "err", ferr)
		return
	}
	if !ok {
		return
	}
	s.log.Warn("run failed", "run", r.ID, "step", e.Step, "batch", e.Batch, "err", e.Error)
	s.m.runs.WithLabelValues(string(Failed)).Inc()
	s.event(wctx, Event{Kind: EventFailed, Run: failed})
}

// steps is the executor's work after started_at: fetch, prefilter, batch,
// then per batch proposals, save, progress. at follows the step under way.
func (s *Service) steps(ctx context.Context, r *Run, at *stepError) error {
	at.step = StepFetch
	msgs, err := s.deps.Chats.Window(ctx, r.ID, r.From, r.To, r.Filters.ChatID)
	if err != nil {
		return at.failed(err)
	}
	at.step = StepBatch
	filtered := Prefilter(msgs, r.Filters)
	batches := Batch(filtered, s.cfg.BatchGap, s.cfg.BatchSize)
	if len(filtered) > 0 && len(batches) == 0 {
		return at.failed(errors.New("messages left after the prefilter but no batch"))
	}
	// The board is posted with the counts, and edited with each batch's
	// save (the edits coalesce to one per interval in the outbox).
	updated, err := s.deps.Runs.SetProgress(ctx, r.ID, len(msgs), len(filtered), len(batches), s.renderBoard(true))
	if err != nil {
		return at.failed(err)
	}
	*r = updated
	s.event(ctx, Event{Kind: EventProgress, Run: *r})
	for i, b := range batches {
		at.step, at.batch = StepProposals, i+1
		if err := ctx.Err(); err != nil {
			return at.failed(err)
		}
		start := s.deps.Clock.Now()
		ps, err := s.propose(ctx, *r, b)
		if err != nil {
			return at.failed(err)
		}
		at.step = StepSave
		saved, created, err := s.deps.Runs.SaveProposalBatch(ctx, r.ID, at.batch, len(b), ps, s.renderBoard(false))
		if err != nil {
			return at.failed(err)
		}
		*r = saved
		if len(created) > 0 {
			s.event(ctx, Event{Kind: EventProposalsCreated, Run: *r, Proposals: created})
		}
		s.event(ctx, Event{Kind: EventProgress, Run: *r})
		s.m.batch.Observe(s.deps.Clock.Since(start).Seconds())
	}
	return nil
}

// propose asks the LLM for a batch's proposals, with the most similar
// approved proposals of earlier runs when the run has rag. An invalid
// answer is retried once.
func (s *Service) propose(ctx context.Context, r Run, batch []GroupMessage) ([]Proposal, error) {
	var similar []Proposal
	if r.RAG {
		v, err := s.deps.LLM.Embed(ctx, []string{embedText(batch)})
		if err != nil {
			return nil, fmt.Errorf("embed batch: %w", err)
		}
		if len(v) == 1 {
			if similar, err = s.deps.Runs.SimilarProposals(ctx, r.ID, v[0], s.cfg.Similar); err != nil {
				return nil, fmt.Errorf("similar proposals: %w", err)
			}
		}
	}
	loc := s.deps.Notifier.AdminZone()
	prompt, cut := renderBatch(batch, similar, loc)
	if cut > 0 {
		s.log.Info("long messages cut to fit the model's window", "run", r.ID, "messages", len(batch), "cut", cut)
	}
	var a Answer
	err := s.deps.LLM.JSON(ctx, systemPrompt, prompt, &a)
	if errors.Is(err, domain.ErrLLMInvalidAnswer) {
		a = Answer{}
		err = s.deps.LLM.JSON(ctx, systemPrompt, prompt, &a)
	}
	if err != nil {
		return nil, err
	}
	return proposalsFrom(a, batch, loc), nil
}

// renderBoard renders the run's board, written with the change that
// alters it: first posts it (with the window's counts), later ones edit
// it.
func (s *Service) renderBoard(first bool) domain.Render[Review] {
	n := s.deps.Notifier
	return func(rv Review) []domain.Message { return n.Board(rv, first) }
}

// keepLease renews the run's lease until ctx ends, so other replicas do
// not take the executor for dead.
func (s *Service) keepLease(ctx context.Context, id int64) {
	renew := func(ctx context.Context) (bool, error) {
		return s.deps.Runs.RenewLease(ctx, id, s.cfg.RunLease)
	}
	domain.RenewLease(ctx, s.deps.Clock, s.cfg.RunLease, renew, func(err error) { s.log.Warn("renew run lease", "run", id, "err", err) })
}
