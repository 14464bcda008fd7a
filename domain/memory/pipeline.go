package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"switchboard/domain"
)

// Analysis is the analyzer's validated JSON.
type Analysis struct {
	NeedsContext   *bool    `json:"needs_context"`
	ContextType    string   `json:"context_type"`
	TimeScope      string   `json:"time_scope"`
	SearchKeywords []string `json:"search_keywords"`
	ContextFound   bool     `json:"context_found"`
}

// Validate makes a malformed analysis count as invalid JSON.
func (a *Analysis) Validate() error {
	if a.NeedsContext == nil {
		return errors.New("needs_context missing")
	}
	a.SearchKeywords = words(a.SearchKeywords, 10)
	return nil
}

// words is list trimmed and lowercased, without empty entries, at most max.
func words(list []string, max int) []string {
	var out []string
	for _, w := range list {
		if w = strings.ToLower(strings.TrimSpace(w)); w != "" && len(out) < max {
			out = append(out, w)
		}
	}
	return out
}

// archiveNote is the archivist's validated JSON. Supersedes names the
// remembered memories the exchange contradicts; an archivist prompt of
// before it (an admin's own) leaves it out.
type archiveNote struct {
	Summary    string   `json:"summary"`
	Tags       []string `json:"tags"`
	Supersedes []int64  `json:"supersedes,omitempty"`
}

func (n *archiveNote) Validate() error {
	n.Summary = strings.TrimSpace(n.Summary)
	if n.Summary == "" {
		return errors.New("summary missing")
	}
	n.Tags = words(n.Tags, 5)
	return nil
}

// typingShown is how long the "typing" sent at intake is taken to show:
// Telegram shows it for five seconds or until the bot sends a message.
const typingShown = 4 * time.Second

// How much memory the stages read (the process document's numbers).
const (
	analyzerSummaries = 20
	draftLogs         = 10
	focusedSummaries  = 5
)

// process takes a run as far as it goes from where ref says it is. It
// captures the stage first (or claims a finished run for delivery), so a
// run someone else holds, or that has moved on, is left alone; then it
// carries the run through every later stage itself, each step committing a
// stage's result together with the capture of the next, and on to the
// answer and the archive.
func (s *Service) process(ctx context.Context, ref Ref) {
	var (
		r   PipelineRun
		rc  Recall
		ok  bool
		err error
	)
	switch ref.Status {
	case New, Analyzed, Ready:
		r, rc, ok, err = s.capture(ctx, ref)
	case Completed, Failed:
		r, ok, err = s.deps.Runs.ClaimFinished(ctx, ref.ID, s.cfg.StageLease, s.cfg.Claimer)
	default:
		return // a stage at work, here or elsewhere, or stalled (the reaper's)
	}
	if err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			s.log.Error("capture run", "run", ref.ID, "status", ref.Status, "err", err)
		}
		return
	}
	for {
		if ctx.Err() != nil {
			if r.Status.Final() {
				s.release(ctx, r.ID) // let another replica deliver it now, not after the lease
			}
			return
		}
		switch r.Status {
		case Analyzing:
			r, ok = s.analyze(ctx, r, rc)
		case Assembling:
			r, ok = s.assemble(ctx, r, rc)
		case Responding:
			r, ok = s.respond(ctx, r)
		case Completed, Failed:
			s.finish(ctx, r, rc)
			return
		default:
			return
		}
		if !ok {
			return
		}
	}
}

// following is, for each stage at work, the status its result is stored
// in and the stage the same worker captures next ("" for none).
var following = map[Status][2]Status{
	Analyzing:  {Analyzed, Assembling},
	Assembling: {Ready, Responding},
	Responding: {Completed, ""},
}

// stage runs the stage r was captured for: fn computes its output; success
// stores it and captures the next stage in the same commit; an error fails
// the run; a stop hands it back to the status before the stage.
// refusedWait is how long a run whose model or key the provider refuses,
// or whose call the breaker turned away, waits before it is handed back
// to be tried again.
const refusedWait = 5 * time.Second

func (s *Service) stage(ctx context.Context, r PipelineRun, rc Recall, name string,
	fn func(context.Context, PipelineRun, Recall) (Change, error)) (PipelineRun, bool) {
	if r.Attempts > s.cfg.MaxReaps {
		return s.fail(ctx, r, name, fmt.Errorf("%w: given back %d times", errNotSaved, r.Attempts))
	}
	next := following[r.Status]
	st := Step{From: r.Status, To: next[0], Then: next[1], Hold: s.cfg.StageLease}
	start := s.deps.Clock.Now()
	var ch Change
	var err error
	if perr := s.m.panics.Contain(s.log, "memory_stage", r.ID, func() {
		if ch, err = fn(ctx, r, rc); err == nil && st.To == Completed {
			// Rendered here, where a renderer's panic on this answer (an
			// odd model's Markdown) fails this run and no other.
			st.Change = ch
			st.Tell = domain.Fixed[PipelineRun](s.render(r.apply(st))...) // queued with the answer itself
		}
	}); perr != nil {
		// The stage failed, as one whose model failed does: the user is
		// told, and their next message goes on; taken again, the run
		// would only panic again.
		err = perr
	}
	s.m.stage.WithLabelValues(name).Observe(s.deps.Clock.Since(start).Seconds())
	if ctx.Err() != nil {
		// Stopping: hand the stage back now rather than after the lease.
		s.handBack(ctx, r, "return run on stop")
		return r, false
	}
	if errors.Is(err, domain.ErrLLMRefused) || errors.Is(err, domain.ErrLLMDown) {
		// The model or key is refused, or the model is down (its breaker
		// turned the call away): nothing this run can do. Wait a little
		// (so the wait costs a capture every few seconds, not a loop) and
		// hand the stage back as a stopping replica does; the run is
		// captured again and goes on once the model is there.
		s.tellWaiting(ctx, r, name, err)
		t := s.deps.Clock.NewTimer(refusedWait)
		select {
		case <-ctx.Done():
		case <-t.Chan():
		}
		t.Stop()
		s.handBack(ctx, r, "return run to wait for the LLM")
		// Its NOTIFY may arrive while this worker still holds the run,
		// which would leave it to the next sweep: look again when done.
		s.o.wake(Ref{ID: r.ID, UserID: r.UserID, Status: capturing[r.Status]})
		return r, false
	}
	if err != nil {
		r.Placeholder = r.Placeholder || ch.Placeholder // the notice replaces it
		return s.fail(ctx, r, name, err)
	}
	st.Change = ch
	moved, ok, err := s.step(ctx, r, st)
	if err != nil {
		// The database refused the result through every retry: give the
		// stage back as soon as it answers, so a worker takes the run
		// again at once instead of after the lease.
		s.log.Warn("advance run failed; giving the stage back", "run", r.ID, "to", next[0], "err", err)
		s.giveBack(ctx, r)
		return r, false
	}
	if !ok {
		// The reaper took it back while we worked; whoever has it now finishes.
		s.log.Warn("advance run", "run", r.ID, "to", next[0], "moved", ok)
		return r, false
	}
	return moved, true
}

// tellWaiting tells the run's user, once however many times the run is
// handed back, that the model is not answering and their message will be
// answered when it is back: the wait may last as long as an outage does,
// and a silent chat reads as a bot that lost the message. The first wait
// is logged as a warning; the hand-backs that follow, every refusedWait,
// only at debug level, so that a long outage with many waiting runs does
// not flood the log (the admin chat's outage notice is what operators
// read).
func (s *Service) tellWaiting(ctx context.Context, r PipelineRun, stage string, cause error) {
	told, err := s.deps.Runs.TellWaiting(ctx, r.ID, r.Status, s.deps.Notifier.Waiting(r))
	switch {
	case err != nil:
		// The notice is a courtesy: the wait goes on, and the next
		// hand-back tries to tell again.
		s.log.Warn("tell run's user it waits for the LLM", "run", r.ID, "err", err)
	case told:
		s.log.Warn("pipeline run waits for the LLM", "run", r.ID, "stage", stage, "err", cause, "retry_in", refusedWait)
		return
	}
	s.log.Debug("pipeline run waits for the LLM", "run", r.ID, "stage", stage, "err", cause, "retry_in", refusedWait)
}

// errNotSaved is a failure whose own text could not be stored, or a stage
// given back more often than MaxReaps after its result was refused.
var errNotSaved = errors.New("the result could not be saved")

// saveRetries are the waits between attempts to save a result the
// database refused, as River retries a job's completion (1, 2, 4 s): a
// blink — a restart, a failover — is over by then; a longer outage gives
// the claim back instead (giveBack).
var saveRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// retrySave runs save until it answers, at most len(saveRetries)+1 times,
// and returns its last error. Every save here is a conditional statement
// naming the state it leaves, so one that landed before its answer was
// lost is refused the second time, not applied twice.
func (s *Service) retrySave(ctx context.Context, what string, id int64, save func(context.Context) error) error {
	err := save(ctx)
	for _, d := range saveRetries {
		if err == nil || ctx.Err() != nil {
			return err
		}
		s.log.Warn(what+": database refused; retrying", "run", id, "err", err, "retry_in", d)
		if !s.wait(ctx, d) {
			return err
		}
		err = save(ctx)
	}
	return err
}

// wait sleeps d on the service's clock; false if ctx ended first.
func (s *Service) wait(ctx context.Context, d time.Duration) bool {
	t := s.deps.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

// giveBack returns a captured stage to the status before it once the
// database answers, counted in its attempts (stage fails a run given back
// more than MaxReaps times, so a result refused for what it holds is not
// computed again for ever): tried with backoff (1 s doubling to 10 s) until the
// lease we hold would have lapsed anyway (then it is the reaper's), and
// once more if ctx ends. The move names the stage's status, so a run the
// reaper took meanwhile is left alone. The run is then looked at again
// here at once; its NOTIFY tells the other replicas.
func (s *Service) giveBack(ctx context.Context, r PipelineRun) {
	deadline := s.deps.Clock.Now().Add(s.cfg.StageLease)
	for d := time.Second; ; d = min(2*d, 10*time.Second) {
		rctx, cancel := detached(ctx)
		_, err := s.deps.Runs.GiveBack(rctx, r.ID, r.Status)
		cancel()
		if err == nil {
			s.m.givenBack.Inc()
			s.log.Info("run given back after a failed save", "run", r.ID, "to", capturing[r.Status])
			s.o.wake(Ref{ID: r.ID, UserID: r.UserID, Status: capturing[r.Status]})
			return
		}
		if ctx.Err() != nil || s.deps.Clock.Now().Add(d).After(deadline) {
			s.log.Error("give run back", "run", r.ID, "err", err)
			return
		}
		if !s.wait(ctx, d) {
			return
		}
	}
}

// handBack returns a captured run to the status before its stage, even
// when ctx has ended, so another worker captures it again; what logs a
// failure.
func (s *Service) handBack(ctx context.Context, r PipelineRun, what string) {
	rctx, cancel := detached(ctx)
	defer cancel()
	if _, _, err := s.step(rctx, r, Step{From: r.Status, To: capturing[r.Status]}); err != nil {
		s.log.Error(what, "run", r.ID, "err", err)
	}
}

// fail records the error and moves the run to FAILED, queuing the notice
// that tells the user in the same commit; the run stays claimed for
// finish, which starts the user's next run.
func (s *Service) fail(ctx context.Context, r PipelineRun, stage string, cause error) (PipelineRun, bool) {
	s.m.failed.WithLabelValues(stage).Inc()
	msg := domain.CleanText(fmt.Sprintf("%s: %v", stage, cause))
	if utf8.RuneCountInString(msg) > 1000 {
		msg = string([]rune(msg)[:1000])
	}
	s.log.Warn("pipeline run failed", "run", r.ID, "user", r.UserID, "stage", stage, "err", cause)
	st := Step{From: r.Status, To: Failed, Change: Change{ErrorMessage: msg}, Hold: s.cfg.StageLease}
	st.Tell = domain.Fixed[PipelineRun](s.render(r.apply(st))...)
	failed, ok, err := s.step(ctx, r, st)
	if err != nil {
		// Perhaps refused for what the cause's text holds: the failure
		// is recorded without it rather than not at all.
		s.log.Warn("mark run failed; trying without the cause's text", "run", r.ID, "err", err)
		st.Change.ErrorMessage = stage + ": " + errNotSaved.Error()
		failed, ok, err = s.step(ctx, r, st)
	}
	if err != nil {
		s.log.Error("mark run failed; giving the stage back", "run", r.ID, "err", err)
		s.giveBack(ctx, r)
		return r, false
	}
	if !ok {
		s.log.Error("mark run failed", "run", r.ID, "moved", ok)
		return r, false
	}
	return failed, true
}

func (s *Service) analyze(ctx context.Context, r PipelineRun, rc Recall) (PipelineRun, bool) {
	return s.stage(ctx, r, rc, "analyzer", func(ctx context.Context, r PipelineRun, rc Recall) (Change, error) {
		sys, err := s.prompt(ctx, "analyzer")
		if err != nil {
			return Change{}, err
		}
		sums := current(rc.Summaries)
		loc := s.zone(r)
		var sb strings.Builder
		sb.WriteString(written(r, loc) + "## New message\n" + r.Query + "\n\n## Summaries of earlier conversations\n")
		if len(sums) == 0 {
			sb.WriteString("(none yet)\n")
		}
		writeSummaries(&sb, sums, loc)
		var a Analysis
		if _, err := s.call(ctx, Call{Label: "memory_analyzer", System: sys, Prompt: sb.String()}, &a); err != nil {
			return Change{}, err
		}
		return Change{Analysis: &a}, nil
	})
}

func (s *Service) assemble(ctx context.Context, r PipelineRun, rc Recall) (PipelineRun, bool) {
	return s.stage(ctx, r, rc, "assembler", func(ctx context.Context, r PipelineRun, rc Recall) (Change, error) {
		asm, err := s.prompt(ctx, "assembler")
		if err != nil {
			return Change{}, err
		}
		mentor, err := s.prompt(ctx, "mentor")
		if err != nil {
			return Change{}, err
		}
		focused := focus(rc.Summaries, r.Analysis)
		budget := s.contextBudget(asm)
		loc := s.zone(r)
		draft, kept, logs := buildDraft(written(r, loc), r.Query, rc.Logs, focused, mentor, loc, budget)
		if len(kept) < len(focused) || logs < len(rc.Logs) {
			s.log.Info("memory context trimmed to fit the model's window", "run", r.ID, "user", r.UserID,
				"budget_tokens", budget, "window", s.cfg.Window,
				"summaries_dropped", len(focused)-len(kept), "messages_dropped", len(rc.Logs)-logs)
		}
		notes, err := s.call(ctx, Call{Label: "memory_assembler", System: asm, Prompt: draft}, nil)
		if err != nil {
			return Change{}, err
		}
		var payload strings.Builder
		payload.WriteString("## Context notes\n" + strings.TrimSpace(notes) + "\n")
		if len(kept) > 0 {
			payload.WriteString("\n## Remembered from earlier conversations\n")
			writeSummaries(&payload, kept, loc)
		}
		return Change{DraftContext: draft, FinalContext: payload.String()}, nil
	})
}

// errStopped is the cause of an answer's call cut short by the user.
var errStopped = errors.New("the user stopped the answer")

// Stop stops the answer to the user's run runID while it is written (a
// draft's stop button): the run is marked in the database, which tells
// every replica, and the one writing it cancels the model's call, so a
// stopped answer costs no further tokens; what was written by then is the
// answer, marked as stopped. False when no answer of theirs with that id
// is being written (done already, or stopped before).
func (s *Service) Stop(ctx context.Context, userID, runID int64) (bool, error) {
	ok, err := s.deps.Runs.RequestStop(ctx, runID, userID)
	if err != nil {
		return false, err
	}
	if ok {
		s.cancelAnswer(runID) // ours, at once; the others hear the NOTIFY
	}
	return ok, nil
}

// cancelAnswer cuts short the call writing run id's answer, if it runs
// here.
func (s *Service) cancelAnswer(id int64) {
	if c, ok := s.answering.Load(id); ok {
		c.(context.CancelCauseFunc)(errStopped)
	}
}

func (s *Service) respond(ctx context.Context, r PipelineRun) (PipelineRun, bool) {
	return s.stage(ctx, r, Recall{}, "responder", func(ctx context.Context, r PipelineRun, _ Recall) (Change, error) {
		if s.deps.Typist != nil && s.deps.Clock.Since(r.CreatedAt) >= typingShown {
			// The bot shows "typing" at intake and Telegram keeps it for
			// five seconds; renew it for the answer only when that has run
			// out (a run queued behind others, or slow stages).
			_ = s.deps.Typist.Typing(ctx, r.ChatID)
		}
		mentor, err := s.prompt(ctx, "mentor")
		if err != nil {
			return Change{}, err
		}
		// When goes before the message, which stays the prompt's end.
		prompt := r.FinalContext + "\n" + written(r, s.zone(r)) + "## The user's message\n" + r.Query + "\n"
		c := Call{
			Label: "memory_responder", System: mentor, Prompt: prompt, Strong: true,
			Temperature: s.cfg.ResponderTemperature, MaxTokens: s.cfg.ResponderMaxTokens, Timeout: s.cfg.ResponderTimeout,
		}
		if r.Stopped {
			// Stopped while another worker wrote it (its replica died):
			// what it had written is gone, and nothing more is asked for.
			return Change{Stopped: true}, nil
		}
		// The answer can be stopped by the user (Stop): its call runs on
		// a context Stop cancels, and what was written by then stands.
		actx, cancel := context.WithCancelCause(ctx)
		s.answering.Store(r.ID, cancel)
		defer func() {
			s.answering.Delete(r.ID)
			cancel(nil)
		}()
		st := s.startStream(ctx, r)
		// A call that panics still stops the showing, whose goroutine
		// would otherwise wait for the process to end.
		defer st.end()
		// What was written so far, for a stop: only an answer shown as it
		// is written can be stopped (its draft has the button), and an
		// answer not shown goes unstreamed, as a call without Partial does.
		var written string // the call's Partial runs within the call, and ends with it
		if st != nil {
			c.Partial = func(text string) {
				written = text
				st.show(text)
			}
		}
		answer, err := s.call(actx, c, nil)
		// Whatever the outcome, a placeholder in the chat is replaced by
		// what the run ends with: the answer or the failure notice.
		placeholder := st.end()
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errStopped) {
			s.m.stopped.Inc()
			return Change{FinalAnswer: strings.TrimSpace(written), Stopped: true, Placeholder: placeholder}, nil
		}
		if err != nil {
			return Change{Placeholder: placeholder}, err
		}
		answer = strings.TrimSpace(answer)
		if answer == "" {
			return Change{Placeholder: placeholder}, errors.New("empty answer")
		}
		return Change{FinalAnswer: answer, Placeholder: placeholder}, nil
	})
}

// render is what a finished run tells the user: the answer, or the
// failure notice.
func (s *Service) render(r PipelineRun) []domain.Message {
	if r.Status == Failed {
		return s.deps.Notifier.Failed(r)
	}
	return s.deps.Notifier.Answer(r)
}

// finish archives a finished run, which this worker holds claimed, and
// starts the user's next run. The claim keeps two orchestrators from
// archiving the same run at once; it is released when anything fails, so
// the sweep retries.
//
// The answer (or the failure notice) is normally queued already, in the
// commit that made the run COMPLETED or FAILED; finish queues it only for
// a run whose step did not (one the reaper FAILED, or one finished before
// answers were queued with the step), in one statement with delivered_at,
// which refuses a second time. Nobody waits for Telegram here: the
// outbox's senders deliver the rows, one chat's in the order they were
// written.
//
// Then the archivist summarises the exchange and one statement archives
// it. The user's next run starts only once the run is archived (its
// summary is part of the next run's memory) and its answer queued (so the
// next answer is queued, and delivered, after it). An incognito run is
// summarised by nobody: it is closed with its texts and raw logs erased.
func (s *Service) finish(ctx context.Context, r PipelineRun, rc Recall) {
	released := false
	defer func() {
		if !released {
			s.release(ctx, r.ID)
		}
	}()
	if r.DeliveredAt.IsZero() {
		if err := s.retrySave(ctx, "queue the answer of run", r.ID, func(ctx context.Context) error {
			_, err := s.deps.Runs.MarkDelivered(ctx, r.ID, domain.Fixed[PipelineRun](s.render(r)...))
			return err
		}); err != nil {
			s.log.Error("queue the answer of run", "run", r.ID, "status", r.Status, "err", err)
			return // the sweep retries; archiving waits so the user's runs stay in order
		}
	}
	var next Ref
	if r.Incognito {
		// An incognito run leaves no memory: no summary, and one statement
		// erases its texts and raw logs and closes it, so the user's next
		// run (which waits for this one) never sees the exchange.
		var n Ref
		var ok bool
		err := s.retrySave(ctx, "close incognito run", r.ID, func(ctx context.Context) error {
			var err error
			n, ok, err = s.deps.Runs.ArchiveIncognito(ctx, r.ID)
			return err
		})
		if err != nil {
			s.log.Error("close incognito run", "run", r.ID, "err", err)
			return
		}
		released, next = ok, n
	} else if r.Status == Completed && r.ArchivedAt.IsZero() {
		var sum *Summary
		// A panic leaves sum nil: archived without a summary, as when the
		// archivist cannot summarise, rather than block the user's next
		// run for ever.
		_ = s.m.panics.Contain(s.log, "memory_archivist", r.ID, func() { sum = s.summarise(ctx, r, rc) })
		if ctx.Err() != nil {
			return
		}
		var n Ref
		err := s.retrySave(ctx, "archive run", r.ID, func(ctx context.Context) error {
			var err error
			n, _, err = s.deps.Runs.Archive(ctx, r.ID, sum)
			return err
		})
		if err != nil {
			s.log.Error("archive run", "run", r.ID, "err", err)
			return
		}
		released, next = true, n
	} else {
		s.release(ctx, r.ID)
		released = true
		n, ok, err := s.deps.Runs.Next(ctx, r.UserID)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("next run", "user", r.UserID, "err", err) // the sweep finds it
		}
		if ok {
			next = n
		}
	}
	s.m.finished.WithLabelValues(string(r.Status)).Inc()
	if next.ID != 0 {
		s.o.wake(next)
	}
}

// release drops this worker's claim on a finished run, as soon as the
// database answers: retried with backoff (1 s doubling to 10 s) until the
// claim would have lapsed anyway, so another worker delivers or archives
// it at once rather than after the lease.
func (s *Service) release(ctx context.Context, id int64) {
	deadline := s.deps.Clock.Now().Add(s.cfg.StageLease)
	for d := time.Second; ; d = min(2*d, 10*time.Second) {
		rctx, cancel := detached(ctx)
		err := s.deps.Runs.Release(rctx, id)
		cancel()
		if err == nil {
			return
		}
		if ctx.Err() != nil || s.deps.Clock.Now().Add(d).After(deadline) {
			s.log.Error("release run", "run", id, "err", err)
			return
		}
		s.log.Warn("release run: database refused; retrying", "run", id, "err", err, "retry_in", d)
		if !s.wait(ctx, d) {
			return
		}
	}
}

// summarise is archivist signal 2's model call: the exchange summarised
// for lsm_storage, or nil when the archivist cannot summarise it (or ctx
// ended); the run is then archived without a summary rather than block the
// user's next run for ever.
//
// The archivist is shown the user's current memories the run recalled
// with their ids, and may name those the exchange contradicts; only ids it
// was shown are kept, and archiving supersedes only those still current.
// The recall is the one this worker captured the run with (a user's runs
// go one after another, so nothing was archived for the user since); a run
// taken up again after its stages (the reaper's, another replica's) has
// none, and reads them now.
func (s *Service) summarise(ctx context.Context, r PipelineRun, rc Recall) *Summary {
	start := s.deps.Clock.Now()
	defer func() { s.m.stage.WithLabelValues("archivist").Observe(s.deps.Clock.Since(start).Seconds()) }()
	sys, err := s.prompt(ctx, "archivist")
	var note archiveNote
	known := rc.Summaries
	if err == nil && !rc.Read {
		if known, err = s.deps.Memories.Summaries(ctx, r.UserID, analyzerSummaries); err != nil && ctx.Err() == nil {
			// Summarise without offering any: the memory is kept, only a
			// contradiction goes unnoticed this time.
			s.log.Warn("archivist: current memories not read; none offered", "run", r.ID, "err", err)
			known, err = nil, nil
		}
	}
	if err == nil {
		answer := r.FinalAnswer
		if r.Stopped {
			// The user cut it short: what they read is not a whole answer,
			// and not what they were told.
			answer = "(The user stopped this answer while it was being written; what they read by then:)\n" + answer
		}
		prompt := written(r, s.zone(r)) + "## The user wrote\n" + r.Query + "\n\n## The mentor answered\n" + answer + "\n" + rememberedNow(current(known))
		_, err = s.call(ctx, Call{Label: "memory_archivist", System: sys, Prompt: prompt}, &note)
	}
	switch {
	case ctx.Err() != nil:
		return nil // nobody archives with it
	case err != nil:
		s.m.failed.WithLabelValues("archivist").Inc()
		s.log.Warn("archivist could not summarise; archived without a summary", "run", r.ID, "err", err)
		return nil
	}
	bs, be := isoWeek(r.CreatedAt)
	sup := offered(note.Supersedes, known)
	if len(sup) < len(note.Supersedes) {
		s.log.Warn("archivist named memories it was not shown; ignored", "run", r.ID,
			"named", note.Supersedes, "kept", sup)
	}
	return &Summary{BucketStart: bs, BucketEnd: be, Tags: note.Tags, Summary: note.Summary, SourceRunIDs: []int64{r.ID},
		Supersedes: sup}
}

// rememberedNow is the archivist's list of the user's current memories,
// each with the id it may name in supersedes.
func rememberedNow(known []Summary) string {
	var sb strings.Builder
	sb.WriteString("\n## Remembered about the user now (id: memory)\n")
	if len(known) == 0 {
		sb.WriteString("(nothing yet)\n")
	}
	for _, m := range known {
		fmt.Fprintf(&sb, "- %d: ", m.ID)
		if len(m.Tags) > 0 {
			sb.WriteString("[" + strings.Join(m.Tags, ", ") + "] ")
		}
		sb.WriteString(m.Summary + "\n")
	}
	return sb.String()
}

// call makes an LLM call under the document's error table: invalid JSON is
// retried once; a timeout or rate limit up to Attempts times with
// exponential backoff (rate limits wait longer); anything else fails at once.
func (s *Service) call(ctx context.Context, c Call, out any) (string, error) {
	invalidRetries := 1
	for attempt := 1; ; attempt++ {
		var text string
		var err error
		if out != nil {
			err = s.deps.LLM.JSON(ctx, c, out)
		} else {
			text, err = s.deps.LLM.Text(ctx, c)
		}
		if err == nil {
			return text, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		switch {
		case errors.Is(err, domain.ErrLLMInvalidAnswer) && invalidRetries > 0:
			invalidRetries--
			s.m.retries.WithLabelValues(c.Label, "invalid_json").Inc()
			continue
		case (errors.Is(err, domain.ErrLLMTimeout) || errors.Is(err, domain.ErrLLMBusy)) && attempt < s.cfg.Attempts:
			wait := s.cfg.Backoff << (attempt - 1)
			reason := "timeout"
			if errors.Is(err, domain.ErrLLMBusy) {
				wait *= 3
				reason = "rate_limited"
			}
			s.m.retries.WithLabelValues(c.Label, reason).Inc()
			t := s.deps.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return "", ctx.Err()
			case <-t.Chan():
			}
			continue
		}
		return "", fmt.Errorf("%s (attempt %d): %w", c.Label, attempt, err)
	}
}

func (s *Service) prompt(ctx context.Context, role string) (string, error) {
	s.promptMu.Lock()
	defer s.promptMu.Unlock()
	if s.prompts == nil || s.deps.Clock.Since(s.promptsAt) > promptTTL {
		ps, err := s.deps.Prompts.ActiveAll(ctx)
		if err != nil {
			return "", fmt.Errorf("%s prompt: %w", role, err)
		}
		s.prompts, s.promptsAt = ps, s.deps.Clock.Now()
	}
	t, ok := s.prompts[role]
	if !ok {
		return "", fmt.Errorf("%s prompt: none active", role)
	}
	return t, nil
}

// zone is the zone the run's user reads times in (Notifier.Zone), which
// the models are given every time in.
func (s *Service) zone(r PipelineRun) *time.Location {
	if loc := s.deps.Notifier.Zone(r.reader()); loc != nil {
		return loc
	}
	return time.UTC
}

// written is the prompts' section saying when the user wrote, on their
// clock and naming their zone: the moment the model reads "today" or
// "yesterday evening" from, and the zone of every other time the prompt
// gives.
func written(r PipelineRun, loc *time.Location) string {
	return "## When\nThe user wrote at " + domain.PromptTime(r.CreatedAt, loc) +
		", their local time; every date and time here is in their zone.\n\n"
}

// writeSummaries lists sums with the day each was remembered, in loc.
func writeSummaries(sb *strings.Builder, sums []Summary, loc *time.Location) {
	for _, m := range sums {
		sb.WriteString("- ")
		if len(m.Tags) > 0 {
			sb.WriteString("[" + strings.Join(m.Tags, ", ") + "] ")
		}
		sb.WriteString(domain.PromptDate(m.CreatedAt, loc) + ": " + m.Summary + "\n")
	}
}

// focus picks the summaries the analysis points at: those matching a search
// keyword, else (when context is needed) the most recent few.
func focus(sums []Summary, a *Analysis) []Summary {
	sums = current(sums)
	if a == nil || a.NeedsContext == nil || !*a.NeedsContext || len(sums) == 0 {
		return nil
	}
	var out []Summary
	for _, m := range sums {
		text := strings.ToLower(m.Summary + " " + strings.Join(m.Tags, " "))
		for _, k := range a.SearchKeywords {
			if strings.Contains(text, k) {
				out = append(out, m)
				break
			}
		}
		if len(out) == focusedSummaries {
			break
		}
	}
	if len(out) == 0 {
		out = sums[:min(len(sums), focusedSummaries)]
	}
	return out
}

// buildDraft is the draft builder: when the user wrote (written), the
// message, the recent raw logs, the focused summaries and the mentor's
// role, within a token budget; each log is stamped with its time in loc.
// An oversized draft loses its oldest summaries first, then its oldest
// logs. It returns the draft and the summaries kept (newest first).
func buildDraft(when, query string, logs []LogEntry, sums []Summary, mentor string, loc *time.Location, budget int) (string, []Summary, int) {
	render := func(logs []LogEntry, sums []Summary) string {
		var sb strings.Builder
		sb.WriteString(when + "## The mentor's role\n" + mentor + "\n\n## The user's new message\n" + query + "\n")
		if len(logs) > 0 {
			sb.WriteString("\n## Recent messages (newest first)\n")
			for _, l := range logs {
				who := "User"
				if l.Type == "answer" {
					who = "Mentor"
				}
				sb.WriteString("[" + domain.PromptStamp(l.CreatedAt, loc) + "] " + who + ": " + l.Text + "\n")
			}
		}
		if len(sums) > 0 {
			sb.WriteString("\n## Summaries of earlier conversations (newest first)\n")
			writeSummaries(&sb, sums, loc)
		}
		return sb.String()
	}
	for {
		d := render(logs, sums)
		if Tokens(d) <= budget {
			return d, sums, len(logs)
		}
		switch {
		case len(sums) > 0:
			sums = sums[:len(sums)-1]
		case len(logs) > 0:
			logs = logs[:len(logs)-1]
		default:
			return d, sums, 0 // the message alone is over budget: the model truncates
		}
	}
}

// Tokens estimates a text's tokens on the safe side: about four
// characters a token for ASCII (the usual rule for English) and two for
// anything else (Cyrillic takes two to three a token in the tokenizers of
// the model families we run), so a context estimated to fit does fit.
func Tokens(s string) int {
	ascii, other := 0, 0
	for _, r := range s {
		if r < utf8.RuneSelf {
			ascii++
		} else {
			other++
		}
	}
	return (ascii+3)/4 + (other+1)/2
}

// contextBudget is the assembler's input budget: ContextTokens, and within
// the model's window what its system prompt and an answer leave (with a
// margin for the chat template's own tokens).
func (s *Service) contextBudget(system string) int {
	budget := s.cfg.ContextTokens
	if s.cfg.Window > 0 {
		budget = min(budget, s.cfg.Window-s.cfg.ResponderMaxTokens-Tokens(system)-64)
	}
	return max(budget, 0)
}

// isoWeek is the ISO week (Monday 00:00 UTC to the next Monday) holding t.
func isoWeek(t time.Time) (time.Time, time.Time) {
	t = t.UTC()
	day := (int(t.Weekday()) + 6) % 7 // Monday = 0
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, -day)
	return start, start.AddDate(0, 0, 7)
}

func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
