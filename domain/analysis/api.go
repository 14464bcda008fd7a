package analysis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"switchboard/domain"
)

// PageSize is how many runs one /runs page shows.
const PageSize = 10

// Service runs the analysis workflow: message intake, runs and their
// executors, reviews.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
	m    *metrics

	mu   sync.Mutex
	base context.Context // Run's context: executors outlive the command that started them
	exec sync.WaitGroup
}

// NewService builds the workflow; Run must be running for Start to work.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Runs == nil || deps.Chats == nil || deps.LLM == nil || deps.Notifier == nil {
		return nil, errors.New("analysis: Runs, Chats, LLM and Notifier are required")
	}
	m, log, err := domain.Prepare("analysis", &deps.Clock, &deps.Log, &deps.Registerer, newMetrics)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg.withDefaults(), deps: deps, log: log, m: m}, nil
}

// Record stores a group text message.
func (s *Service) Record(ctx context.Context, m GroupMessage) error {
	return s.deps.Chats.SaveMessage(ctx, m)
}

// Edited applies an edit to a stored message (unknown ones are ignored: the
// bot may have joined after it was written).
func (s *Service) Edited(ctx context.Context, chatID, messageID int64, text string) error {
	_, err := s.deps.Chats.EditMessage(ctx, chatID, messageID, text)
	return err
}

// TrackChat records a group and whether the bot can read it.
func (s *Service) TrackChat(ctx context.Context, id int64, title string, canRead bool) error {
	return s.deps.Chats.Track(ctx, id, title, canRead)
}

// Chats lists tracked groups for /chats.
func (s *Service) Chats(ctx context.Context) ([]Chat, error) { return s.deps.Chats.List(ctx) }

// NewRun is /run_new: a pending run over the window ending now. An
// *UnclosedError names the runs in the way.
func (s *Service) NewRun(ctx context.Context, adminID int64, args string) (Run, error) {
	f, err := ParseRunArgs(args)
	if err != nil {
		return Run{}, err
	}
	now := s.deps.Clock.Now().UTC()
	r, blocking, err := s.deps.Runs.Create(ctx, Run{
		State: Pending, CreatedBy: adminID, Filters: f, From: now.Add(-f.Window), To: now,
	}, s.renderEvent(EventCreated))
	if err != nil {
		return Run{}, err
	}
	if len(blocking) > 0 {
		return Run{}, &UnclosedError{IDs: blocking}
	}
	s.m.runs.WithLabelValues(string(Pending)).Inc()
	s.event(ctx, Event{Kind: EventCreated, Run: r})
	return r, nil
}

// Start is /run_start: pending → running, and the executor works in the
// background. ErrState (with the run as it is) if it was not pending.
func (s *Service) Start(ctx context.Context, id int64, rag bool) (Run, error) {
	if err := checkTransition(Pending, Running); err != nil {
		return Run{}, err
	}
	// The lock keeps the check and exec.Add together, before Serve's
	// exec.Wait at shutdown (see Serve).
	s.mu.Lock()
	base := s.base
	if base == nil || base.Err() != nil {
		s.mu.Unlock()
		return Run{}, errors.New("analysis: the service is not running")
	}
	r, ok, err := s.deps.Runs.Start(ctx, id, rag, s.cfg.RunLease, s.renderEvent(EventStarted))
	if err == nil && ok {
		s.exec.Add(1)
	}
	s.mu.Unlock()
	if err != nil {
		return Run{}, err
	}
	if !ok {
		return r, ErrState
	}
	s.m.runs.WithLabelValues(string(Running)).Inc()
	s.event(ctx, Event{Kind: EventStarted, Run: r})
	go func() {
		defer s.exec.Done()
		// A panic past the steps (in failing or completing the run) leaves
		// it running, its lease no longer renewed: the reaper fails it as
		// interrupted, as when the executor's replica died.
		_ = s.m.panics.Contain(s.log, "analysis_executor", r.ID, func() { s.execute(base, r) })
	}()
	return r, nil
}

// Close is /run_close: completed → closed with accuracy metrics, only when
// nothing is pending (*PendingError otherwise).
func (s *Service) Close(ctx context.Context, id int64) (Run, error) {
	if err := checkTransition(Completed, Closed); err != nil {
		return Run{}, err
	}
	r, ok, err := s.deps.Runs.Close(ctx, id, s.renderEvent(EventClosed))
	if err != nil {
		return Run{}, err
	}
	if !ok {
		if r.State == Completed && r.ProposalsPending > 0 {
			return r, &PendingError{Pending: r.ProposalsPending}
		}
		return r, ErrState
	}
	s.m.runs.WithLabelValues(string(Closed)).Inc()
	s.event(ctx, Event{Kind: EventClosed, Run: r})
	return r, nil
}

// Runs is one page of /runs, newest first, and the number of runs.
func (s *Service) Runs(ctx context.Context, page int) ([]Run, int, error) {
	return s.deps.Runs.List(ctx, max(page, 0)*PageSize, PageSize)
}

// Run returns one run.
func (s *Service) Run(ctx context.Context, id int64) (Run, error) {
	return s.deps.Runs.Get(ctx, id)
}

// Decide is Approve or Reject; the board shows it. An approved proposal
// is embedded for later runs' RAG context; failing that is logged, not
// refused.
func (s *Service) Decide(ctx context.Context, proposalID, adminID int64, approve bool) (Proposal, Run, error) {
	d := Rejected
	if approve {
		d = Approved
	}
	p, r, ok, err := s.deps.Runs.DecideProposal(ctx, proposalID, d, adminID, s.renderBoard(false))
	if err != nil {
		return Proposal{}, Run{}, err
	}
	if !ok {
		return p, r, ErrDecided
	}
	s.m.decisions.WithLabelValues(string(d)).Inc()
	if approve {
		s.embed(ctx, []Proposal{p})
	}
	return p, r, nil
}

// RefreshBoard draws the run's board again as it stands (its page kept):
// a proposal filed in the team's tracker shows its link.
func (s *Service) RefreshBoard(ctx context.Context, runID int64) error {
	r, err := s.deps.Runs.Get(ctx, runID)
	if err != nil {
		return err
	}
	_, err = s.deps.Runs.TurnPage(ctx, runID, r.ReviewPage, s.renderBoard(false))
	return err
}

// TurnPage shows another page of the run's proposals on its board.
func (s *Service) TurnPage(ctx context.Context, runID int64, page int) (Run, error) {
	return s.deps.Runs.TurnPage(ctx, runID, max(page, 0), s.renderBoard(false))
}

// AskApproveAll makes the board ask to confirm approving every pending
// proposal; ErrState (with the run) unless the run is completed with
// proposals pending and not asking already.
func (s *Service) AskApproveAll(ctx context.Context, runID int64) (Run, error) {
	r, ok, err := s.deps.Runs.AskApproveAllProposals(ctx, runID, s.renderBoard(false))
	if err == nil && !ok {
		err = ErrState
	}
	return r, err
}

// CancelApproveAll withdraws the question; ErrState if it was not asked.
func (s *Service) CancelApproveAll(ctx context.Context, runID int64) (Run, error) {
	r, ok, err := s.deps.Runs.CancelApproveAllProposals(ctx, runID, s.renderBoard(false))
	if err == nil && !ok {
		err = ErrState
	}
	return r, err
}

// ApproveAll approves every proposal still pending, once the board asked
// and the admin confirmed; ErrState (with the run) if the board no longer
// asks (confirmed or cancelled already). The approved are embedded for RAG.
func (s *Service) ApproveAll(ctx context.Context, runID, adminID int64) ([]Proposal, Run, error) {
	ps, r, ok, err := s.deps.Runs.ApproveAllProposals(ctx, runID, adminID, s.renderBoard(false))
	if err != nil {
		return nil, r, err
	}
	if !ok {
		return nil, r, ErrState
	}
	s.m.decisions.WithLabelValues(string(Approved)).Add(float64(len(ps)))
	s.embed(ctx, ps)
	return ps, r, nil
}

// embed stores approved proposals' embeddings for later runs' RAG
// context, in one call; a failure is logged (the decision stands).
func (s *Service) embed(ctx context.Context, ps []Proposal) {
	if len(ps) == 0 {
		return
	}
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second+time.Duration(len(ps))*100*time.Millisecond)
	defer cancel()
	texts := make([]string, len(ps))
	for i, p := range ps {
		texts[i] = p.Title + "\n" + p.Description
	}
	v, err := s.deps.LLM.Embed(ectx, texts)
	if err == nil && len(v) != len(ps) {
		err = fmt.Errorf("%d embeddings for %d proposals", len(v), len(ps))
	}
	for i := 0; err == nil && i < len(ps); i++ {
		err = s.deps.Runs.SaveProposalEmbedding(ectx, ps[i].ID, v[i])
	}
	if err != nil {
		s.log.Warn("embed approved proposals", "proposals", len(ps), "first", ps[0].ID, "err", err)
	}
}

// Serve fails runs whose executor died (at once, then every half lease)
// and lets Start launch executors, until ctx ends; it then waits for the
// executors, which fail their runs as interrupted.
func (s *Service) Serve(ctx context.Context) {
	s.mu.Lock()
	s.base = ctx
	s.mu.Unlock()
	defer func() {
		// ctx has ended: a Start holding the lock has done its exec.Add,
		// and any later one sees ctx.Err() and refuses, so no Add races
		// the Wait.
		s.mu.Lock()
		//lint:ignore SA2001 the empty critical section is the point: it waits out a Start holding the lock
		s.mu.Unlock()
		s.exec.Wait()
	}()
	t := s.deps.Clock.NewTicker(s.cfg.RunLease / 2)
	defer t.Stop()
	for {
		s.reap(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// reap fails running runs whose lease expired: their executor is gone.
func (s *Service) reap(ctx context.Context) {
	runs, err := s.deps.Runs.FailInterrupted(ctx, s.renderEvent(EventFailed))
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("fail interrupted runs", "err", err)
		}
		return
	}
	for _, r := range runs {
		s.log.Warn("run interrupted", "run", r.ID)
		s.m.runs.WithLabelValues(string(Failed)).Inc()
		s.event(ctx, Event{Kind: EventFailed, Run: r})
	}
}

// renderEvent renders a run event for the admin chat, to be written with
// the state change that causes it.
func (s *Service) renderEvent(kind EventKind) domain.Render[Review] {
	n := s.deps.Notifier
	return func(rv Review) []domain.Message { return n.Event(Event{Kind: kind, Run: rv.Run, Board: rv}) }
}

// event logs e and publishes it on pg_notify('analysis_runs'); failing to
// publish does not stop the workflow. Its admin-chat message was written
// with the state change (renderEvent).
func (s *Service) event(ctx context.Context, e Event) {
	s.log.Info("analysis_event", "event", string(e.Kind), "run", e.Run.ID, "state", string(e.Run.State))
	if s.deps.Publisher != nil {
		if err := s.deps.Publisher.Publish(ctx, eventPayload(e)); err != nil {
			s.log.Warn("publish run event", "event", e.Kind, "err", err)
		}
	}
}
