package vacancy

// The job seeker's pipeline: what happens to an application after the
// person pressed Applied. The employer's answer reaches the person, not
// us (hh.ru's applicant API is closed to third parties), so every step is
// reported by the person with a button: on the card, on a follow-up
// reminder, or on /applications.
//
//	SENT_TO_USER ──Applied──► APPLIED ──Invited──► INVITED ──Offer──► OFFER
//	                            │  │                  │
//	                            │  └──No answer──► NO_ANSWER
//	                            │                 │  │
//	                            │       Invited ◄─┘  │
//	                            ▼                    ▼
//	                         REJECTED ◄──────────────┴──── (from INVITED too)
//
// Each report is one conditional UPDATE naming the status the pressed
// message showed (storage/applications.go), so a press on a message that
// shows an older state, a second press, or a press racing another changes
// nothing and is answered as stale. The report's time comes from
// Deps.CalendarClock (CLOCK_START in end-to-end tests), as does the
// follow-up's "now", and goes to SQL as a parameter.
//
// A follow-up reminder asks how it went once the application has waited
// Config.FollowUp in APPLIED or INVITED: once per waiting period, since
// every report clears followed_up_at and so starts a new one. NO_ANSWER
// gets none: it is the person's own answer to that question, and asking
// again would nag; its buttons stay on /applications for a late answer.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"switchboard/domain"
)

// ApplicationsWindow is how far back /applications counts applications.
const ApplicationsWindow = 30 * 24 * time.Hour

// MaxWaiting is how many waiting applications /applications lists.
const MaxWaiting = 5

// DefaultFollowUp is Config.FollowUp unless set (APPLICATION_FOLLOW_UP).
const DefaultFollowUp = 7 * 24 * time.Hour

// followUpBatch bounds the reminders one transaction records and queues.
const followUpBatch = 100

// steps are the statuses the person reports after Applied, in the order
// their buttons appear.
var steps = []Status{Invited, Offer, Rejected, NoAnswer}

// Steps lists what the person may report next from s, in button order:
// none unless s is in the pipeline and not final.
func Steps(s Status) []Status {
	var out []Status
	for _, to := range steps {
		if CanTransition(s, to) {
			out = append(out, to)
		}
	}
	return out
}

// InPipeline reports whether s is a status of an application: APPLIED or
// one the person reported after it.
func (s Status) InPipeline() bool { return s == Applied || slices.Contains(steps, s) }

// Reported reports whether the person set s with a button (as against the
// workflow's own statuses before a decision).
func (s Status) Reported() bool { return s == NotInterested || s.InPipeline() }

// Waiting reports whether an application in s still waits for the
// employer: /applications lists those.
func (s Status) Waiting() bool { return s.InPipeline() && !s.Final() }

// ErrStaleStep: the pressed button was for another status than the
// application's (an older message, a second press, a forged step).
var ErrStaleStep = errors.New("application step is stale")

// Application is a match in the pipeline, with its vacancy and the times
// the person reported its steps (by the service's clock).
type Application struct {
	Match   Match
	Vacancy Vacancy
	// AppliedAt is when Applied was pressed; InvitedAt when Invited was
	// (zero: never); ReportedAt when the current status was reported.
	AppliedAt, InvitedAt, ReportedAt time.Time
}

// FollowUp is a reminder asking how an application went.
type FollowUp struct {
	Application Application
	Lang        string
	// Days is how many whole days it has been in its status.
	Days int
}

// Funnel counts applications made within ApplicationsWindow by how far
// they got: every stage counts those that reached it, whatever came later
// (an invitation followed by a rejection is invited and answered).
type Funnel struct {
	Applied int
	// Answered: invited, rejected or offered.
	Answered int
	Invited  int
	Offer    int
}

// SearchFunnel is the funnel of the applications to vacancies one of the
// user's saved searches found.
type SearchFunnel struct {
	Search Search
	Funnel Funnel
}

// ApplicationsReport is what /applications shows.
type ApplicationsReport struct {
	Overall   Funnel
	PerSearch []SearchFunnel
	// Waiting are the applications still waiting for the employer, those
	// without news for longest first, at most MaxWaiting; WaitingTotal
	// counts them all.
	Waiting      []Application
	WaitingTotal int
	// Now is the service's clock when the report was made.
	Now time.Time
}

// Applications is the applications' storage: the pipeline's (this file)
// and the cover letters' (letter.go); storage.Applications implements it.
type Applications interface {
	// Get returns a match with its vacancy and pipeline times, or
	// domain.ErrNotFound.
	Get(ctx context.Context, id int64) (Application, error)
	// Move moves a match from → to at in one conditional UPDATE (false:
	// it was not in from), recording at as the report's time (and as
	// applied_at or invited_at for those) and starting a new follow-up
	// period.
	Move(ctx context.Context, id int64, from, to Status, at time.Time) (Application, bool, error)
	// Remind records, for up to limit applications waiting in APPLIED or
	// INVITED since before due and not reminded in this period, that they
	// were, and writes remind's messages to the outbox in the same
	// transaction; it returns how many.
	Remind(ctx context.Context, due time.Time, limit int, remind domain.Render[FollowUp]) (int, error)
	// Funnel counts the user's applications made since, overall and per
	// saved search that found their vacancy.
	Funnel(ctx context.Context, userID int64, since time.Time) (Funnel, []SearchFunnel, error)
	// Waiting lists up to limit of the user's applications in a waiting
	// status, the longest without news first, and counts them all.
	Waiting(ctx context.Context, userID int64, limit int) ([]Application, int, error)

	// CoverLetter reads one letter, or domain.ErrNotFound.
	CoverLetter(ctx context.Context, id int64) (Letter, error)
	// AskCoverLetter writes l pending unless its press was taken before,
	// the match has a pending letter, or the user's letters created within
	// window (pending and ready) number limit: all decided under a lock of
	// the user's row, so two presses at once cannot pass the limit together.
	AskCoverLetter(ctx context.Context, l NewLetter, limit int, window time.Duration) (Asked, error)
	// ClaimCoverLetter claims the oldest pending letter whose lease is free
	// or ran out (FOR UPDATE SKIP LOCKED), counting the attempt.
	ClaimCoverLetter(ctx context.Context, lease time.Duration, claimer string) (LetterClaim, bool, error)
	// FinishCoverLetter moves the claimed letter from pending to l.State
	// with its text or failure and tokens, and writes tell's messages to
	// the outbox in the same transaction; false when the claim is no
	// longer token's.
	FinishCoverLetter(ctx context.Context, l Letter, tell domain.Render[Letter]) (bool, error)
	// ReleaseCoverLetter gives a claimed letter back at once (shutdown).
	ReleaseCoverLetter(ctx context.Context, id int64, token string) error
	// NextCoverLetterLeaseExpiry is when the earliest claim runs out.
	NextCoverLetterLeaseExpiry(ctx context.Context) (time.Time, bool, error)
}

// Report records a step the person reports with a button: the pressed
// message showed the application in from, and the button says to. Only the
// match's owner may report, and only a step the table allows from the
// status the match is in; anything else is ErrForbidden or ErrStaleStep
// (with the application as it stands) and changes nothing.
func (s *Service) Report(ctx context.Context, userID, matchID int64, from, to Status) (Application, error) {
	a, err := s.deps.Applications.Get(ctx, matchID)
	if err != nil {
		return a, fmt.Errorf("report: %w", err)
	}
	if a.Match.UserID != userID {
		return a, ErrForbidden
	}
	if !slices.Contains(steps, to) || a.Match.Status != from || !CanTransition(from, to) {
		return a, ErrStaleStep
	}
	moved, ok, err := s.move(ctx, a.Match, to)
	if err != nil {
		return a, fmt.Errorf("report: %w", err)
	}
	if !ok {
		// A second press racing this one moved it first.
		if a, err = s.deps.Applications.Get(ctx, matchID); err != nil {
			return a, fmt.Errorf("report: %w", err)
		}
		return a, ErrStaleStep
	}
	return moved, nil
}

// move is the one way a match enters the pipeline or moves along it: the
// table checked, then one conditional UPDATE naming the old status, at the
// service's clock.
func (s *Service) move(ctx context.Context, m Match, to Status) (Application, bool, error) {
	if err := checkTransition(m.Status, to); err != nil {
		s.log.Error("refused vacancy transition", "match", m.ID, "from", m.Status, "to", to)
		return Application{}, false, err
	}
	a, ok, err := s.deps.Applications.Move(ctx, m.ID, m.Status, to, s.deps.CalendarClock.Now())
	if err != nil {
		return a, false, fmt.Errorf("match %d %s → %s: %w", m.ID, m.Status, to, err)
	}
	if ok {
		s.m.transitions.WithLabelValues(string(m.Status), string(to)).Inc()
	}
	return a, ok, nil
}

// FollowUps sends the follow-up reminders that are due (the
// vacancy-follow-up job): each written to the outbox in the transaction
// that records it was sent, so any number of replicas send each once.
func (s *Service) FollowUps(ctx context.Context) error {
	now := s.deps.CalendarClock.Now()
	remind := func(f FollowUp) []domain.Message {
		f.Days = int(now.Sub(f.Application.ReportedAt) / (24 * time.Hour))
		return s.deps.Notifier.FollowUp(f)
	}
	for {
		n, err := s.deps.Applications.Remind(ctx, now.Add(-s.cfg.FollowUp), followUpBatch, remind)
		if err != nil {
			return fmt.Errorf("follow-ups: %w", err)
		}
		if n > 0 {
			s.log.Info("application follow-ups sent", "count", n)
		}
		if n < followUpBatch {
			return nil
		}
	}
}

// Applications is the user's /applications report.
func (s *Service) Applications(ctx context.Context, userID int64) (ApplicationsReport, error) {
	var rep ApplicationsReport
	var err error
	rep.Now = s.deps.CalendarClock.Now()
	since := rep.Now.Add(-ApplicationsWindow)
	if rep.Overall, rep.PerSearch, err = s.deps.Applications.Funnel(ctx, userID, since); err != nil {
		return rep, fmt.Errorf("applications of user %d: %w", userID, err)
	}
	if rep.Waiting, rep.WaitingTotal, err = s.deps.Applications.Waiting(ctx, userID, MaxWaiting); err != nil {
		return rep, fmt.Errorf("applications of user %d: %w", userID, err)
	}
	return rep, nil
}
