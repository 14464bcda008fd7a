package vacancy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Cover letters: the LLM drafts one for a match on its owner's press.
//
//	press ──► pending ──LLM answered──► ready   (the letter's message in the outbox, same transaction)
//	            │    └──LLM failed────► failed  (a note with a Try again button, same transaction)
//	            └── claim lease ran out (replica died) ──► claimable again, up to LetterConfig.MaxAttempts
//
// A press writes the pending row (Letters.Ask) and the handler answers at
// once; a letter worker on any replica claims the row under a lease and a
// token, asks the model, and settles it. The press's callback id is unique
// among letters, so the same update handled twice asks once; a second
// press while the match's letter is pending is told it is on its way (a
// partial unique index); the daily limit is counted under a lock of the
// user's row. Failed letters do not count against the limit.

// LetterStyle is what a letter is asked to be.
type LetterStyle string

const (
	// StyleDraft is a match's letter written from the profile and the vacancy.
	StyleDraft LetterStyle = "draft"
	// StyleAnother is a new version of a letter, worded differently.
	StyleAnother LetterStyle = "another"
	// StyleShorter rewrites a letter at about half its length.
	StyleShorter LetterStyle = "shorter"
	// StyleFormal rewrites a letter in a more formal register.
	StyleFormal LetterStyle = "formal"
	// StyleRetry asks again for what a failed letter was asked for; it is
	// never stored (the new row takes the failed one's style).
	StyleRetry LetterStyle = "retry"
)

// LetterState is where a cover letter is.
type LetterState string

const (
	// LetterPending waits for a letter worker, or is being drafted.
	LetterPending LetterState = "pending"
	// LetterReady holds the text; its message went to the outbox with it.
	LetterReady LetterState = "ready"
	// LetterFailed: the model failed, refused or answered unusably; the
	// user was told and may press again.
	LetterFailed LetterState = "failed"
)

// letterTransitions is the letter's table: a pending letter ends once.
var letterTransitions = domain.NewTransitions(ErrIllegalTransition, "cover letter", map[LetterState][]LetterState{
	LetterPending: {LetterReady, LetterFailed}, // the model answered; or it failed, refused, or answered unusably
})

// Letter languages a user may choose; "" writes in the vacancy's.
var LetterLanguages = []string{"en", "ru", "uk"}

// Failure reasons of a failed letter, stored and used as metric labels.
const (
	LetterFailedLLM      = "llm_error"      // timeout, 5xx, breaker open
	LetterFailedRefused  = "llm_refused"    // the provider refuses the model or key
	LetterFailedInvalid  = "invalid_answer" // empty, only reasoning, or too short to be a letter
	LetterFailedAttempts = "interrupted"    // claimed MaxAttempts times without an end (replicas died mid-way)
	LetterFailedPanic    = "panic"          // drafting it panicked (a bug), contained to the letter
)

// Letter is one cover_letters row.
type Letter struct {
	ID, MatchID, UserID int64
	// Version counts the match's letters from 1.
	Version int
	Style   LetterStyle
	// BaseID is the letter a rewrite starts from (0: a first draft).
	BaseID int64
	// Language is the one the user chose ("" = the vacancy's).
	Language  string
	State     LetterState
	Text      string
	Failure   string
	TokensIn  int
	TokensOut int
	Attempts  int
	CreatedAt time.Time
	// ClaimToken identifies a worker's claim; settling the letter names it.
	ClaimToken string
}

// LetterAsk is a press asking for a letter.
type LetterAsk struct {
	UserID int64
	// MatchID is the card's match, for StyleDraft.
	MatchID int64
	// FromID is the letter pressed on, for the other styles: the base of a
	// rewrite, or the failed letter to retry.
	FromID int64
	Style  LetterStyle
	// Language, when set, is the language chosen on the press; a rewrite
	// otherwise keeps its base's.
	Language string
	// PressID is the Telegram callback query's id: the press, once.
	PressID string
}

// NewLetter is the pending row an accepted ask writes.
type NewLetter struct {
	MatchID, UserID, BaseID int64
	Style                   LetterStyle
	Language                string
	PressID                 string
}

// Asked is what an ask came to; at most one of Repeat, Busy and Limited holds.
type Asked struct {
	Letter Letter
	// Repeat: this press was taken before (the update handled twice);
	// Letter is the letter it asked for.
	Repeat bool
	// Busy: a letter for the match is being drafted; nothing was written.
	Busy bool
	// Limited: the user's letters of the last LetterWindow reached the
	// limit; Resets is when the oldest of them leaves the window.
	Limited bool
	Limit   int
	Resets  time.Time
}

// LetterClaim is a claimed pending letter with what drafting it needs.
type LetterClaim struct {
	Letter  Letter
	Vacancy Vacancy
	Profile string
	// Lang is the user's language, for the messages (not the letter's).
	Lang string
	// Base is the text a rewrite starts from.
	Base string
}

// LetterData is what a letter's message, or its failure note, is rendered from.
type LetterData struct {
	Letter  Letter
	Vacancy Vacancy
	Lang    string
}

// Written is the model's letter with the tokens the provider counted.
type Written struct {
	Text                string
	TokensIn, TokensOut int
}

// LetterLLM is the model as the letters need it: text, not JSON.
type LetterLLM interface {
	// Letter answers the prompt with text. A provider refusing the model
	// or key is a domain.ErrLLMRefused; an answer with no text a
	// domain.ErrLLMInvalidAnswer.
	Letter(ctx context.Context, system, prompt string) (Written, error)
}

// LetterNotifier renders a letter's messages; the bot implements it.
type LetterNotifier interface {
	// Letter is the ready letter's message: the text to copy, the apply
	// link, and the buttons that ask for another version.
	Letter(d LetterData) []domain.Message
	// LetterFailed tells the user the letter could not be drafted, with a
	// button to try again.
	LetterFailed(d LetterData) []domain.Message
}

// LetterConfig tunes the letters; zero values take the defaults.
type LetterConfig struct {
	// PerDay is COVER_LETTERS_PER_DAY: letters one user may have drafted
	// within LetterWindow.
	PerDay int
	// Lease is how long a worker holds a letter; it must outlast one
	// LLM call. Claimer names this replica in its claims (storage.Liveness):
	// once it is seen dead they are claimable again at once.
	Lease   time.Duration
	Claimer string
	// Workers is how many letters one replica drafts at once.
	Workers int
	// MaxAttempts ends a letter claimed this often without an end.
	MaxAttempts int
	// SweepInterval wakes idle workers even without a signal.
	SweepInterval time.Duration
}

// LetterWindow is the span the daily limit counts over: the last 24
// hours, so it resets letter by letter rather than at a midnight that
// differs per user.
const LetterWindow = 24 * time.Hour

// DefaultLettersPerDay is LetterConfig.PerDay unless set.
const DefaultLettersPerDay = 10

func (c LetterConfig) withDefaults() LetterConfig {
	domain.OrDefault(&c.PerDay, DefaultLettersPerDay)
	domain.OrDefault(&c.Lease, 2*time.Minute)
	domain.OrDefault(&c.Workers, 1)
	domain.OrDefault(&c.MaxAttempts, 3)
	domain.OrDefault(&c.SweepInterval, time.Minute)
	return c
}

// LetterDeps are the letters' collaborators.
type LetterDeps struct {
	Applications Applications
	Matches      Matches
	Profiles     Profiles
	LLM          LetterLLM
	Notifier     LetterNotifier
	Clock        clockwork.Clock
	Log          *slog.Logger
	Registerer   prometheus.Registerer
}

// Letters drafts cover letters: the press the bot hands over (Ask) and
// the workers that draft what was asked (Run).
type Letters struct {
	cfg  LetterConfig
	deps LetterDeps
	log  *slog.Logger
	// queue is the letters' worker loops (DraftNext).
	queue *domain.Workers

	drafted *prometheus.CounterVec
	tokens  *prometheus.CounterVec
	panics  domain.Panics
}

// NewLetters builds the letters' service. It starts nothing; see Run.
func NewLetters(cfg LetterConfig, deps LetterDeps) (*Letters, error) {
	if deps.Applications == nil || deps.Matches == nil || deps.Profiles == nil || deps.LLM == nil || deps.Notifier == nil {
		return nil, errors.New("cover letters: Applications, Matches, Profiles, LLM and Notifier are required")
	}
	domain.Defaults(&deps.Clock, &deps.Log, &deps.Registerer)
	l, err := domain.NewMetrics(deps.Registerer, "cover letter", func(r *domain.Registrar) *Letters {
		return &Letters{
			cfg: cfg.withDefaults(), deps: deps, log: deps.Log.With("component", "cover_letters"),
			drafted: r.CounterVec("cover_letters_total", "Cover letters settled, by outcome (ready or a failure reason).", "outcome"),
			tokens:  r.CounterVec("cover_letter_tokens_total", "Tokens of ready cover letters, by kind (prompt, completion).", "kind"),
			panics:  domain.NewPanics(r),
		}
	})
	if err != nil {
		return nil, err
	}
	l.queue = &domain.Workers{
		Name: "cover letter queue", Next: l.DraftNext, Expiry: deps.Applications.NextCoverLetterLeaseExpiry,
		Sweep: l.cfg.SweepInterval, Clock: deps.Clock, Log: l.log, Panics: l.panics,
	}
	return l, nil
}

// ErrNoProfile: the user has no profile, and a letter states only what
// the profile does.
var ErrNoProfile = &domain.InputError{Key: "letter.no_profile"}

// ErrNotLetterable: the match has no card the user could act on (it was
// never judged relevant).
var ErrNotLetterable = errors.New("no card for this match")

// letterable are the statuses whose match has a card: a letter may be
// asked for while the card's delivery is being recorded, and after a
// decision.
var letterable = []Status{Analyzed, SentToUser, Applied, NotInterested}

// Ask takes a press: it checks the presser owns the match (or the letter
// pressed on), then writes the pending letter under the daily limit and
// wakes a worker. The draft itself happens later, on any replica; its
// message goes through the outbox.
func (l *Letters) Ask(ctx context.Context, a LetterAsk) (Asked, error) {
	nl, err := l.resolve(ctx, a)
	if err != nil {
		return Asked{}, err
	}
	profile, err := l.deps.Profiles.Profile(ctx, a.UserID)
	if err != nil {
		return Asked{}, fmt.Errorf("ask cover letter: %w", err)
	}
	if strings.TrimSpace(profile) == "" {
		return Asked{}, ErrNoProfile
	}
	asked, err := l.deps.Applications.AskCoverLetter(ctx, nl, l.cfg.PerDay, LetterWindow)
	if err != nil {
		return Asked{}, fmt.Errorf("ask cover letter: %w", err)
	}
	if !asked.Busy && !asked.Limited && !asked.Repeat {
		l.Wake()
	}
	return asked, nil
}

// resolve turns a press into the row it asks for, refusing one that is
// not the presser's (ErrForbidden), names nothing (domain.ErrNotFound) or
// has nothing to start from (ErrNotLetterable).
func (l *Letters) resolve(ctx context.Context, a LetterAsk) (NewLetter, error) {
	nl := NewLetter{UserID: a.UserID, MatchID: a.MatchID, Style: a.Style, Language: a.Language, PressID: a.PressID}
	if a.PressID == "" {
		return nl, errors.New("ask cover letter: no press id")
	}
	if a.Language != "" && !slices.Contains(LetterLanguages, a.Language) {
		return nl, fmt.Errorf("ask cover letter: %w: language %q", domain.ErrNotFound, a.Language)
	}
	switch a.Style {
	case StyleDraft:
	case StyleAnother, StyleShorter, StyleFormal, StyleRetry:
		from, err := l.deps.Applications.CoverLetter(ctx, a.FromID)
		if err != nil {
			return nl, fmt.Errorf("ask cover letter: %w", err)
		}
		if from.UserID != a.UserID {
			return nl, ErrForbidden
		}
		nl.MatchID = from.MatchID
		if a.Style == StyleRetry {
			nl.BaseID, nl.Style, nl.Language = from.BaseID, from.Style, from.Language
			break
		}
		if from.State != LetterReady {
			return nl, ErrNotLetterable
		}
		nl.BaseID = from.ID
		if nl.Language == "" {
			nl.Language = from.Language
		}
	default:
		return nl, fmt.Errorf("ask cover letter: %w: style %q", domain.ErrNotFound, a.Style)
	}
	m, _, err := l.deps.Matches.WithVacancy(ctx, nl.MatchID)
	if err != nil {
		return nl, fmt.Errorf("ask cover letter: %w", err)
	}
	if m.UserID != a.UserID {
		return nl, ErrForbidden
	}
	if !slices.Contains(letterable, m.Status) {
		return nl, ErrNotLetterable
	}
	return nl, nil
}

// Wake tells an idle worker there is a letter to draft (after a press on
// this replica, or a notification from another).
func (l *Letters) Wake() { l.queue.Wake() }

// Run starts LetterConfig.Workers letter workers and blocks until ctx
// ends. Idle workers wake on Wake, at the earliest lease expiry, and every
// SweepInterval. A letter in flight when ctx ends is given back, so another
// replica drafts it at once.
func (l *Letters) Run(ctx context.Context) { l.queue.Run(ctx, l.cfg.Workers) }

// Drain drafts pending letters on the caller's goroutine until none is
// claimable: a synchronous Run for tests and tools.
func (l *Letters) Drain(ctx context.Context) (int, error) { return l.queue.Drain(ctx) }

// DraftNext claims one pending letter and settles it. It reports whether
// there was one; errors are the database's (a letter's own failure ends
// in its state).
func (l *Letters) DraftNext(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	// As a match's claim: not cut short by ctx (ProcessNext says why).
	cctx, cancel := detached(ctx)
	c, ok, err := l.deps.Applications.ClaimCoverLetter(cctx, l.cfg.Lease, l.cfg.Claimer)
	cancel()
	if err != nil {
		return false, fmt.Errorf("claim cover letter: %w", err)
	}
	if !ok {
		return false, nil
	}
	if err := l.panics.Contain(l.log, "cover_letter", c.Letter.ID, func() { l.draft(ctx, c) }); err != nil {
		// Claimed again it would panic again, each time after a lease:
		// the user is told at once and may ask again.
		l.finish(ctx, l.log.With("letter", c.Letter.ID), c, Written{}, LetterFailedPanic)
	}
	return true, nil
}

// draft asks the model for the claimed letter and settles it.
func (l *Letters) draft(ctx context.Context, c LetterClaim) {
	lt := c.Letter
	log := l.log.With("letter", lt.ID, "match", lt.MatchID, "user", lt.UserID)
	if lt.Attempts > l.cfg.MaxAttempts {
		l.finish(ctx, log, c, Written{}, LetterFailedAttempts)
		return
	}
	w, err := l.deps.LLM.Letter(ctx, letterSystemPrompt(lt.Language), letterPrompt(c))
	if err == nil {
		w.Text = strings.TrimSpace(w.Text)
		if utf8.RuneCountInString(w.Text) < minLetter {
			err = fmt.Errorf("%w: %d characters", domain.ErrLLMInvalidAnswer, utf8.RuneCountInString(w.Text))
		}
	}
	if ctx.Err() != nil {
		// Shutting down: the letter goes back for another replica, untouched.
		rctx, cancel := detached(ctx)
		defer cancel()
		if rerr := l.deps.Applications.ReleaseCoverLetter(rctx, lt.ID, lt.ClaimToken); rerr != nil {
			log.Warn("give back a cover letter", "err", rerr)
		}
		return
	}
	reason := ""
	switch {
	case err == nil:
	case errors.Is(err, domain.ErrLLMRefused):
		reason = LetterFailedRefused
	case errors.Is(err, domain.ErrLLMInvalidAnswer):
		reason = LetterFailedInvalid
	default:
		reason = LetterFailedLLM
	}
	if err != nil {
		log.Warn("cover letter not drafted", "reason", reason, "err", err)
	}
	l.finish(ctx, log, c, w, reason)
}

// finish settles the letter: ready with w, or failed for reason, its
// message written with it.
func (l *Letters) finish(ctx context.Context, log *slog.Logger, c LetterClaim, w Written, reason string) {
	lt := c.Letter
	to := LetterReady
	tell := l.deps.Notifier.Letter
	if reason != "" {
		to, tell = LetterFailed, l.deps.Notifier.LetterFailed
	}
	if err := letterTransitions.Check(lt.State, to); err != nil {
		log.Error("refused cover letter transition", "err", err)
		return
	}
	lt.State, lt.Failure = to, reason
	lt.Text, lt.TokensIn, lt.TokensOut = w.Text, w.TokensIn, w.TokensOut
	render := func(done Letter) []domain.Message {
		return tell(LetterData{Letter: done, Vacancy: c.Vacancy, Lang: c.Lang})
	}
	fctx, cancel := detached(ctx)
	defer cancel()
	ok, err := l.deps.Applications.FinishCoverLetter(fctx, lt, render)
	switch {
	case err != nil:
		// The claim runs out and another worker drafts it again.
		log.Error("settle cover letter", "state", to, "err", err)
		return
	case !ok:
		log.Warn("cover letter claim lost before it was settled")
		return
	}
	outcome := string(to)
	if reason != "" {
		outcome = reason
	}
	l.drafted.WithLabelValues(outcome).Inc()
	if to == LetterReady {
		l.tokens.WithLabelValues("prompt").Add(float64(w.TokensIn))
		l.tokens.WithLabelValues("completion").Add(float64(w.TokensOut))
	}
}
