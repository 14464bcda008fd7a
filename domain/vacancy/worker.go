package vacancy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"switchboard/domain"
)

// A turn's reasons, stored with the match and used as metric labels.
//
// A failure's (Match.FailureReason): the turn ran and failed for this
// match, and Config.MaxFailures of them make it SKIPPED with the last
// one's reason.
const (
	ReasonHHUnavailable = "hh_unavailable"
	ReasonLLMError      = "llm_error"
	ReasonInvalidJSON   = "invalid_json"
	// ReasonPanic: the turn panicked (a bug: a nil in an odd answer, a
	// vacancy of a shape nobody foresaw), contained to the match.
	ReasonPanic = "panic"
)

// A wait's (Match.WaitReason): the turn was given back unjudged, the match
// QUEUED, for a cause that is not the match's; waits never make it
// SKIPPED, however many.
const (
	// ReasonBreakerOpen: the LLM's breaker was open when the turn began,
	// or turned the call away (domain.ErrLLMDown): it opened while the call waited
	// for a slot, or it was probing the model with its probe out.
	ReasonBreakerOpen = "breaker_open"
	// ReasonLLMBusy: the provider rate-limited the call (domain.ErrLLMBusy).
	ReasonLLMBusy = "llm_busy"
	// ReasonLLMRefused: the provider refuses the model or key.
	ReasonLLMRefused = "llm_refused"
	// ReasonHHBlocked: HH blocks us as a client (ErrHHBlocked).
	ReasonHHBlocked = "hh_blocked"
	// ReasonDetailFetching: another worker fetches the vacancy's detail.
	ReasonDetailFetching = "detail_fetching"
	// ReasonShutdown: the replica stopped mid-turn.
	ReasonShutdown = "shutdown"
	// ReasonLeaseLost: the turn's claim ended without its worker (it died,
	// or its lease ran out first); counted by the claim that took over.
	ReasonLeaseLost = "lease_lost"
	// ReasonUnsaved: the database refused the turn's closing write through
	// every retry.
	ReasonUnsaved = "unsaved"
)

// Skip reasons of a match set SKIPPED at once, no failure counted.
const (
	// ReasonNoCard: the card could not be rendered (a bug); recovery
	// judges the match again.
	ReasonNoCard = "no_card"
	// ReasonRefused: the database refused what the match's turn wrote (a
	// value it cannot hold: Deps.AboutData), which it would refuse again
	// however often the match were judged; recovery leaves it.
	ReasonRefused = "refused"
)

// refusedWait is how long a worker waits, while the LLM refuses or turns
// calls away or HH blocks us, before it looks again, and how long a match
// given back for such a cause waits QUEUED before it is claimable again.
const refusedWait = 5 * time.Second

// detailWait is when a match whose detail another worker fetches is
// looked at again. The fetch lease itself lasts a claim's lease: the
// detail is stored with the fetching match's transition, after its
// judgement.
const detailWait = time.Second

// Run starts Config.Workers queue workers and blocks until ctx ends. Idle
// workers wake on Wake, at the earliest lease expiry they know of, and
// every SweepInterval. When ctx ends, a match in flight is put back QUEUED
// before Run returns, claimable at once by another replica.
func (s *Service) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.discoverFresh(ctx) })
	wg.Go(func() { s.queue.Run(ctx, s.cfg.Workers) })
	s.log.Info("vacancy workers started", "workers", s.cfg.Workers, "lease", s.cfg.ClaimLease)
	wg.Wait()
}

// discoverFresh runs discovery for searches just saved, so a new user sees
// vacancies within a minute instead of at the next FETCH_INTERVAL.
func (s *Service) discoverFresh(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case key := <-s.fresh:
			var err error
			// A panic is the search's failure to discover, which the
			// vacancy-first-news job makes up for as for HH failing.
			_ = s.m.panics.Contain(s.log, "vacancy_discovery", key, func() { _, err = s.FetchKey(ctx, key) })
			if err != nil && ctx.Err() == nil {
				s.log.Warn("discover a new search", "search_key", key, "err", err)
			}
		}
	}
}

func (s *Service) sleep(ctx context.Context, d time.Duration) {
	t := s.deps.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	}
}

// Drain processes queued matches on the caller's goroutine until none is
// claimable: a synchronous Run for tests and tools.
func (s *Service) Drain(ctx context.Context) (int, error) { return s.queue.Drain(ctx) }

// ProcessNext claims one match and takes it as far as it goes. It reports
// whether there was one. Errors are infrastructure errors (the claim
// failed); a match's own failures end in its status.
func (s *Service) ProcessNext(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// The claim is not cut short by ctx: a statement cancelled mid-way can
	// commit all the same while we hear only the cancellation, and the
	// match would stay claimed, by nobody, for a whole lease after the
	// process is gone. A claim that went through is processed with ctx, so
	// a shutdown meanwhile puts it back like any match in flight.
	cctx, cancel := detached(ctx)
	c, ok, err := s.deps.Matches.Claim(cctx, ClaimOptions{
		ClaimLease: s.cfg.ClaimLease, Taste: s.cfg.TasteExamples,
		FreshOnly: s.deps.Source.Holding(), DetailFresh: s.cfg.DetailFresh, FetchLease: s.cfg.ClaimLease, Claimer: s.cfg.Claimer,
	})
	cancel()
	if err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	if !ok {
		return false, nil
	}
	if c.TookOver {
		s.m.waits.WithLabelValues(ReasonLeaseLost).Inc()
		s.log.Info("vacancy match taken over from a lost claim", "match", c.Match.ID, "waits", c.Match.Waits)
	}
	start := s.deps.Clock.Now()
	var outcome string
	if err := s.m.panics.Contain(s.log, "vacancy_match", c.Match.ID, func() { outcome = s.process(ctx, c) }); err != nil {
		outcome = s.panicked(ctx, c, err)
	}
	s.m.processed.WithLabelValues(outcome).Inc()
	s.m.duration.Observe(s.deps.Clock.Since(start).Seconds())
	return true, nil
}

// process runs the design's order: breaker, HH detail, ban words, LLM,
// and for a relevant vacancy ANALYZED with its card written to the outbox.
// It returns the outcome label (see metrics.go).
func (s *Service) process(ctx context.Context, c Claim) string {
	m := c.Match
	log := s.log.With("match", m.ID, "vacancy", m.VacancyID, "user", m.UserID)
	if m.Status != Queued {
		log.Error("claimed a match in an unexpected status", "status", m.Status)
		return "error"
	}
	// An exclusion added since the match was queued drops it before HH or the
	// LLM is asked; a stale description is left to the fresh one's check.
	seen := c.Vacancy
	if c.DetailStale {
		seen.Description = ""
	}
	if why := c.User.Exclusions.Excludes(seen); why != "" {
		s.dropLease(ctx, c)
		return s.dropBanned(ctx, c, log, why, c.Vacancy, nil)
	}
	if s.deps.LLM.Refused() {
		s.dropLease(ctx, c)
		return s.wait(ctx, m, ReasonLLMRefused, refusedWait, nil)
	}
	if s.deps.LLM.Open() {
		// Claimed as the breaker opened (the workers claim nothing while
		// it is open): the model is down, not this match.
		s.dropLease(ctx, c)
		return s.wait(ctx, m, ReasonBreakerOpen, refusedWait, nil)
	}

	v := c.Vacancy
	// fresh is the detail fetched now. It is stored with the match's next
	// transition, which ends the vacancy's fetch lease: one statement
	// fewer per match than storing it first, and the vacancy's other
	// matches wait for it under the lease rather than fetch it again.
	var fresh *Vacancy
	if c.DetailStale {
		d, outcome := s.fetchDetail(ctx, m, c.DetailMine)
		if outcome != "" {
			return outcome
		}
		v, fresh = d, &d
	}

	word := ""
	if fresh != nil {
		// Only the fetched description is new since the check above.
		word = c.User.Exclusions.Excludes(v)
	}
	if word != "" || v.Experience == MoreThan6 && !c.User.Senior {
		return s.dropBanned(ctx, c, log, word, v, fresh)
	}

	verdict, err := s.judge(ctx, c.User, v)
	switch wait := llmWait(err); {
	case ctx.Err() != nil:
		s.keepDetail(ctx, fresh)
		return s.wait(ctx, m, ReasonShutdown, 0, err)
	case wait != "":
		// Not the match's: it was never judged, so it waits QUEUED.
		s.keepDetail(ctx, fresh)
		return s.wait(ctx, m, wait, refusedWait, err)
	case errors.Is(err, domain.ErrLLMInvalidAnswer):
		return s.fail(ctx, m, ReasonInvalidJSON, err, fresh)
	case err != nil:
		return s.fail(ctx, m, ReasonLLMError, err, fresh)
	}
	if !verdict.Relevant() {
		return s.markNotSuitable(ctx, c, log, verdict, fresh)
	}
	return s.markAnalyzed(ctx, c, log, v, verdict, fresh)
}

// llmWait names the wait an LLM error that is not the match's makes, ""
// for any other error.
func llmWait(err error) string {
	switch {
	case errors.Is(err, domain.ErrLLMRefused):
		// The provider refuses the model or key (this call found it, or
		// another's probe did and this call was turned away meanwhile).
		return ReasonLLMRefused
	case errors.Is(err, domain.ErrLLMDown):
		// Turned away unrun by the breaker, which opened while the call
		// queued or is probing: the model is down, as the check before
		// the call would have said had the turn begun a moment later.
		return ReasonBreakerOpen
	case errors.Is(err, domain.ErrLLMBusy):
		// Rate-limited: the model's load, which a retry of the same match
		// would only add to.
		return ReasonLLMBusy
	}
	return ""
}

// panicked ends a turn that panicked as a failed one: were its claim left
// to lapse instead, the claim that took the match over would count a wait
// (lease_lost), which bounds nothing, and the match would panic a worker
// every lease for ever. As a failure it is retried, and at MaxFailures
// SKIPPED with ReasonPanic for recovery, which gives it one more try per
// pass. A detail fetched in the turn is lost with it; its fetch lease is
// ended so the vacancy's other matches need not wait it out.
func (s *Service) panicked(ctx context.Context, c Claim, cause error) string {
	s.dropLease(ctx, c)
	return s.fail(ctx, c.Match, ReasonPanic, cause, nil)
}

// markAnalyzed records a relevant verdict: the match becomes ANALYZED with
// its card; the outcome label.
func (s *Service) markAnalyzed(ctx context.Context, c Claim, log *slog.Logger, v Vacancy, verdict Verdict, fresh *Vacancy) string {
	m := c.Match
	// The card goes to the outbox in the transaction that marks the match
	// ANALYZED, which also releases the claim: the outbox delivers it, and
	// its delivery makes the match SENT_TO_USER. The user's rhythm, read
	// in that transaction, may hold it or keep it for a digest (Pace). The judgement is paid
	// for: record it even if we are stopping.
	card := s.deps.Notifier.Card(CardData{MatchID: m.ID, UserID: m.UserID, Lang: c.User.Lang, Vacancy: v, Verdict: verdict})
	if len(card) == 0 {
		return s.skip(ctx, m, ReasonNoCard, nil, fresh)
	}
	ch := Change{Verdict: &verdict, Token: m.ClaimToken, Detail: fresh, Card: card}
	if c.User.Paced {
		ch.Card, ch.Pace = nil, s.pace(card)
	}
	var ok bool
	if err := s.save(ctx, m, "mark analyzed", func(ctx context.Context) error {
		var err error
		_, ok, err = s.transition(ctx, m, Analyzed, ch)
		return err
	}); err != nil || !ok {
		// Not ok: our lease ran out and another worker owns it now.
		if err != nil {
			log.Error("mark analyzed", "err", err)
		}
		return "lost"
	}
	return "queued"
}

// dropBanned deletes a claimed match whose vacancy the user excludes
// (word: why, Exclusions.Excludes) or seniority rule out; the outcome label.
func (s *Service) dropBanned(ctx context.Context, c Claim, log *slog.Logger, word string, v Vacancy, fresh *Vacancy) string {
	m := c.Match
	s.keepDetail(ctx, fresh)
	if err := s.save(ctx, m, "delete banned match", func(ctx context.Context) error {
		_, err := s.deps.Matches.Delete(ctx, m.ID, m.ClaimToken, s.firstNews(c))
		return err
	}); err != nil {
		log.Error("delete banned match", "err", err)
		return "error"
	}
	log.Info("vacancy dropped", "because", word, "experience", v.Experience)
	return "deleted"
}

// markNotSuitable records a verdict of not relevant (and the detail
// fetched now); the outcome label.
func (s *Service) markNotSuitable(ctx context.Context, c Claim, log *slog.Logger, verdict Verdict, fresh *Vacancy) string {
	m := c.Match
	if err := s.save(ctx, m, "mark not suitable", func(ctx context.Context) error {
		_, _, err := s.transition(ctx, m, NotSuitable, Change{
			Verdict: &verdict, Token: m.ClaimToken, Detail: fresh, Announce: s.firstNews(c),
		})
		return err
	}); err != nil {
		log.Error("mark not suitable", "err", err)
		return "error"
	}
	return "not_suitable"
}

// firstNews is the Announce for a claimed match's end: the note's renderer
// when a new search's first news waits on the match, else nil (the move
// then needs no check, and a NOT_SUITABLE stays one statement).
func (s *Service) firstNews(c Claim) domain.Render[[]FirstNews] {
	if !c.FirstNews {
		return nil
	}
	return s.announce
}

// wait puts a claimed match back QUEUED, unjudged, claimable again after
// after, counting a wait for reason; it runs even when ctx has ended (a
// shutdown), because leaving it claimed would hold it for a whole lease.
// The cause is the model's, HH's or this replica's, never the match's, so
// it neither turns SKIPPED nor waits for recovery, however often it waits.
func (s *Service) wait(ctx context.Context, m Match, reason string, after time.Duration, cause error) string {
	rctx, cancel := detached(ctx)
	defer cancel()
	if err := s.deps.Matches.PutBack(rctx, m.ID, m.ClaimToken, after, reason); err != nil {
		// The claim lapses instead, and the next claim counts the wait.
		s.log.Error("put back a vacancy match", "match", m.ID, "reason", reason, "err", err)
		return "error"
	}
	s.m.waits.WithLabelValues(reason).Inc()
	s.log.Debug("vacancy match waits", "match", m.ID, "reason", reason, "waits", m.Waits+1, "err", cause)
	return "waiting"
}

// fail records a failed turn of a claimed match: put back QUEUED for a
// retry after RetryAfter times its failures, or, at MaxFailures, SKIPPED
// for recovery; the outcome label. A detail fetched before the failure
// (nil if none) is stored with it, so neither the retry nor the vacancy's
// other matches fetch it again. It runs even when ctx has ended.
func (s *Service) fail(ctx context.Context, m Match, reason string, cause error, detail *Vacancy) string {
	var failed Match
	var ok bool
	if err := s.save(ctx, m, "record a failed turn", func(ctx context.Context) error {
		var err error
		failed, ok, err = s.deps.Matches.Fail(ctx, m.ID, m.ClaimToken,
			Failure{Reason: reason, Max: s.cfg.MaxFailures, RetryAfter: s.cfg.RetryAfter, Detail: detail})
		return err
	}); err != nil {
		s.log.Error("record a failed turn", "match", m.ID, "reason", reason, "err", err)
		return "error"
	}
	if !ok {
		// The claim ran out first (the claim that took the match over
		// counted the turn), or a retried save finds its first one landed:
		// either way the turn is counted once.
		return "lost"
	}
	s.m.failures.WithLabelValues(reason).Inc()
	log := s.log.With("match", m.ID, "vacancy", m.VacancyID, "reason", reason, "failures", failed.Failures, "err", cause)
	if failed.Status == Skipped {
		s.m.transitions.WithLabelValues(string(Queued), string(Skipped)).Inc()
		s.m.skipped.WithLabelValues(reason).Inc()
		log.Info("vacancy match skipped")
		return "skipped"
	}
	log.Info("vacancy match failed; retried", "retry_in", time.Duration(failed.Failures)*s.cfg.RetryAfter)
	return "retrying"
}

// judge asks the LLM, retrying an invalid answer once.
func (s *Service) judge(ctx context.Context, u Recipient, v Vacancy) (Verdict, error) {
	prompt := buildPrompt(u.Profile, u.Liked, u.NotInterested, v)
	var verdict Verdict
	var err error
	for attempt := 1; ; attempt++ {
		verdict = Verdict{}
		err = s.deps.LLM.JSON(ctx, systemPrompt, prompt, &verdict)
		if err == nil || !errors.Is(err, domain.ErrLLMInvalidAnswer) || attempt == 2 {
			return verdict, err
		}
		s.m.retries.Inc()
	}
}

// skip marks a QUEUED match SKIPPED at once, no failure counted: a card
// the renderer cannot make, a bug no retry mends. A detail fetched in the
// turn (nil if none) is stored with it, so neither recovery nor the
// vacancy's other matches fetch it again.
func (s *Service) skip(ctx context.Context, m Match, reason string, cause error, detail *Vacancy) string {
	if err := s.save(ctx, m, "mark skipped", func(ctx context.Context) error {
		_, _, err := s.transition(ctx, m, Skipped, Change{SkipReason: reason, Token: m.ClaimToken, Detail: detail})
		return err
	}); err != nil {
		s.log.Error("mark skipped", "match", m.ID, "reason", reason, "err", err)
		return "error"
	}
	s.m.skipped.WithLabelValues(reason).Inc()
	s.log.Info("vacancy match skipped", "match", m.ID, "vacancy", m.VacancyID, "reason", reason, "err", cause)
	return "skipped"
}

// dropLease ends the fetch lease a claim took when the match goes no
// further, so the vacancy's other matches need not wait it out.
func (s *Service) dropLease(ctx context.Context, c Claim) {
	if !c.DetailMine {
		return
	}
	rctx, cancel := detached(ctx)
	defer cancel()
	if err := s.deps.Matches.ReleaseVacancyDetail(rctx, c.Match.VacancyID); err != nil {
		s.log.Error("release vacancy detail", "vacancy", c.Match.VacancyID, "err", err)
	}
}

// fetchDetail gets the claimed match's vacancy from HH, once for all its
// matches: under the vacancy's fetch lease (mine says the claim took it),
// which lasts until the detail is stored with this match's transition, so
// the vacancy's other matches (any user's, any replica's) are claimed with
// the stored detail.
// A non-empty outcome ends the match's turn: archived (every open match of
// the vacancy with it), waiting (another worker fetches it, or HH blocks
// us), or skipped.
func (s *Service) fetchDetail(ctx context.Context, m Match, mine bool) (Vacancy, string) {
	log := s.log.With("match", m.ID, "vacancy", m.VacancyID)
	if !mine {
		// Another worker is fetching it, or just stored it: this match is
		// claimed again once the lease or the detail is there.
		return Vacancy{}, s.wait(ctx, m, ReasonDetailFetching, detailWait, nil)
	}
	d, err := s.deps.Source.Vacancy(ctx, m.VacancyID)
	if err != nil {
		// Bookkeeping of the lease: finish it even if we are stopping.
		rctx, cancel := detached(ctx)
		defer cancel()
		if errors.Is(err, ErrArchived) {
			// Every open match of the vacancy goes, any user's: any may be
			// one a new search's first news waits on.
			moved, aerr := s.deps.Matches.ArchiveVacancy(rctx, m.VacancyID, s.announce)
			if aerr != nil {
				log.Error("archive vacancy", "err", aerr)
				return Vacancy{}, "error"
			}
			for from, n := range moved {
				s.m.transitions.WithLabelValues(string(from), string(InArchive)).Add(float64(n))
			}
			log.Info("vacancy archived on HH", "matches", moved)
			return Vacancy{}, "archived"
		}
		if rerr := s.deps.Matches.ReleaseVacancyDetail(rctx, m.VacancyID); rerr != nil {
			log.Error("release vacancy detail", "err", rerr)
		}
		switch {
		case ctx.Err() != nil:
			return Vacancy{}, s.wait(ctx, m, ReasonShutdown, 0, err)
		case errors.Is(err, ErrHHBlocked):
			// HH blocks us, not this vacancy: the match waits QUEUED,
			// unjudged, and is taken again once HH answers.
			return Vacancy{}, s.wait(ctx, m, ReasonHHBlocked, refusedWait, err)
		}
		return Vacancy{}, s.fail(ctx, m, ReasonHHUnavailable, err, nil)
	}
	return d, ""
}

// keepDetail stores a detail fetched now (nil: none) when the match goes
// no transition that would, ending the vacancy's fetch lease.
func (s *Service) keepDetail(ctx context.Context, d *Vacancy) {
	if d == nil {
		return
	}
	rctx, cancel := detached(ctx)
	defer cancel()
	if err := s.deps.Matches.SaveVacancyDetail(rctx, *d); err != nil {
		// The next match of the vacancy fetches it again once the lease ends.
		s.log.Warn("store vacancy detail", "vacancy", d.ID, "err", err)
	}
}

// saveRetries are the waits between attempts of a claim's closing
// statement the database refused, as River retries a job's completion
// (1, 2, 4 s): a blink — a restart, a failover — is over by then.
var saveRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// save runs a claim's closing statement, each attempt on a context of its
// own (it runs even when ctx has ended), until the database answers: at
// most len(saveRetries)+1 times, or once when ctx has ended (stopping
// waits for nobody). Each closing statement names the claim token, so one
// that landed before its answer was lost is refused the second time, not
// applied twice. When the database never answers, the claim is given back
// as soon as it does (giveBack) rather than held for the whole lease.
func (s *Service) save(ctx context.Context, m Match, what string, fn func(context.Context) error) error {
	attempt := func() error {
		rctx, cancel := detached(ctx)
		defer cancel()
		return fn(rctx)
	}
	err := attempt()
	for _, d := range saveRetries {
		if err == nil || ctx.Err() != nil {
			break
		}
		if s.aboutData(err) {
			s.refusedMatch(ctx, m, what, err)
			return err
		}
		s.log.Warn(what+": database refused; retrying", "match", m.ID, "err", err, "retry_in", d)
		s.sleep(ctx, d)
		err = attempt()
	}
	if err != nil {
		s.giveBack(ctx, m)
	}
	return err
}

// aboutData reports whether a storage error is about what was written
// (Deps.AboutData), so that writing it again is refused again.
func (s *Service) aboutData(err error) bool {
	return s.deps.AboutData != nil && s.deps.AboutData(err)
}

// refusedMatch ends the turn of a claimed match whose closing statement the
// database refused for what it wrote: the match becomes SKIPPED with
// ReasonRefused and nothing else, which recovery leaves, instead of being
// given back to be fetched, judged and refused again for ever. Should even
// that be refused, the claim is left to lapse, so the match comes back
// once a lease, not at once.
func (s *Service) refusedMatch(ctx context.Context, m Match, what string, cause error) {
	rctx, cancel := detached(ctx)
	defer cancel()
	_, ok, err := s.transition(rctx, m, Skipped, Change{SkipReason: ReasonRefused, Token: m.ClaimToken})
	if err != nil {
		s.log.Error(what+": refused for its data, and so was setting the match aside", "match", m.ID,
			"err", cause, "aside_err", err)
		return
	}
	if ok {
		s.m.skipped.WithLabelValues(ReasonRefused).Inc()
	}
	s.log.Error(what+": refused for its data; the match is set aside", "match", m.ID, "vacancy", m.VacancyID,
		"reason", ReasonRefused, "err", cause)
}

// giveBack makes a claimed match claimable again at once (Matches.PutBack,
// conditional on its token, a wait ReasonUnsaved: the database's, not the
// match's) as soon as the database answers: tried with backoff (1 s
// doubling to 10 s) until the claim would have lapsed anyway, or once when
// ctx has ended.
func (s *Service) giveBack(ctx context.Context, m Match) {
	deadline := s.deps.Clock.Now().Add(s.cfg.ClaimLease)
	for d := time.Second; ; d = min(2*d, 10*time.Second) {
		rctx, cancel := detached(ctx)
		err := s.deps.Matches.PutBack(rctx, m.ID, m.ClaimToken, 0, ReasonUnsaved)
		cancel()
		if err == nil {
			s.m.waits.WithLabelValues(ReasonUnsaved).Inc()
			s.log.Info("vacancy match given back after a failed save", "match", m.ID)
			s.Wake()
			return
		}
		if ctx.Err() != nil || s.deps.Clock.Now().Add(d).After(deadline) {
			s.log.Error("give vacancy match back", "match", m.ID, "err", err)
			return
		}
		s.sleep(ctx, d)
	}
}

// detached is a context for bookkeeping that must happen after ctx ended.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}
