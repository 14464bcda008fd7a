package resume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// State is where a profile draft is (profile_drafts.state).
type State string

// The states of a draft; confirmed, cancelled and expired drafts are
// deleted.
const (
	Reading State = "reading" // the file waits for a worker, or one reads it
	Ready   State = "ready"   // the draft is shown with its buttons
	Editing State = "editing" // the user was asked for the corrected text
	// Failed: the file could not be read and the user was told. It keeps
	// nothing of the file, only its message, which handled again (after
	// a crash) finds it and is not read and refused a second time.
	Failed State = "failed"
)

// Draft is a profile_drafts row.
type Draft struct {
	ID        int64
	UserID    int64
	ChatID    int64
	MessageID int // the document's message
	// Lang is the language the user is written to in.
	Lang  string
	State State
	// Revision grows with every change shown to the user: buttons carry
	// it, so an older message's buttons are stale.
	Revision int
	// FileID is Telegram's handle of the file, while it is being read.
	FileID   string
	FileName string
	Format   Format
	// Text is the condensed profile (empty while Reading).
	Text string
	// Attempts counts the claims of a Reading draft; Token is the current
	// claim's, which the worker's writes name.
	Attempts int
	Token    string
}

// Document is a file a user sent in private chat, as Telegram describes it.
type Document struct {
	UserID, ChatID int64
	MessageID      int
	FileID         string
	FileName       string
	MIMEType       string
	Size           int64 // 0: Telegram did not say
}

// Drafts is the résumé drafts as the workflow keeps them;
// storage.ProfileDrafts implements it. Every method that changes a draft
// is one conditional statement or transaction naming its state; ok false
// means the draft was not in it (gone, changed, or someone else's).
type Drafts interface {
	// Create stores a new Reading draft for the document's
	// message, replacing the user's earlier draft, with tell's messages;
	// created is false when this message's draft exists already (the
	// update was delivered twice) and then nothing is written.
	Create(ctx context.Context, d Draft, tell domain.Render[Draft]) (Draft, bool, error)
	// Claim claims the oldest Reading draft whose claim is
	// free or lapsed for lease, counting the attempt.
	Claim(ctx context.Context, lease time.Duration, claimer string) (Draft, bool, error)
	// Release gives a claim back, to be claimed again after
	// after; an attempt not counted is taken back off.
	Release(ctx context.Context, id int64, token string, after time.Duration, counted bool) error
	// Finish makes a claimed draft Ready with its text and
	// forgets the file id.
	Finish(ctx context.Context, id int64, token, text string, tell domain.Render[Draft]) (bool, error)
	// Fail makes a claimed draft Failed, forgetting the file, with
	// tell's messages.
	Fail(ctx context.Context, id int64, token string, tell domain.Render[Draft]) (bool, error)
	// WaitForModel marks a claimed Reading draft as waiting for the
	// model, writing msgs the first time only (told); waited is how long
	// it has waited since then. ok is false when the claim is lost.
	WaitForModel(ctx context.Context, id int64, token string, msgs []domain.Message) (waited time.Duration, told, ok bool, err error)
	// Edit moves the user's Ready draft of this id and
	// revision, younger than ttl, to Editing under a new revision.
	Edit(ctx context.Context, userID, id int64, revision int, ttl time.Duration) (Draft, bool, error)
	// Revise sets the text of the user's Editing draft,
	// younger than ttl, making it Ready under a new revision, with tell's
	// messages.
	// It names messageID, the text's message.
	Revise(ctx context.Context, userID int64, messageID int, text string, ttl time.Duration, tell domain.Render[Draft]) (Draft, bool, error)
	// Confirm makes the text of the user's Ready or Editing
	// draft of this id and revision, younger than ttl, their profile and
	// deletes the draft, in one statement.
	Confirm(ctx context.Context, userID, id int64, revision int, ttl time.Duration) (Draft, bool, error)
	// Cancel deletes the user's draft of this id and revision.
	Cancel(ctx context.Context, userID, id int64, revision int) (bool, error)
	// Editing reports whether the user has a draft waiting for
	// corrected text, younger than ttl, and whether messageID revised
	// their draft already.
	Editing(ctx context.Context, userID int64, messageID int, ttl time.Duration) (waiting, revised bool, err error)
}

// Files downloads a document from Telegram (the bot implements it).
type Files interface {
	// Download reads the file; a file over max bytes is ErrFileTooBig,
	// whether Telegram or the reader finds it so.
	Download(ctx context.Context, fileID string, max int64) ([]byte, error)
}

// LLM is the model's JSON call (llm.Port implements it).
type LLM interface {
	JSON(ctx context.Context, system, prompt string, out any) error
}

// Notifier renders what the workers tell the user (bot.Renderer).
type Notifier interface {
	// ResumeDraft is the draft with its buttons.
	ResumeDraft(d Draft) []domain.Message
	// ResumeFailed tells why no draft was made from the file (one of the
	// errors of Extract, ErrFileTooBig or ErrGaveUp).
	ResumeFailed(d Draft, why error) []domain.Message
	// ResumeWaiting tells the user, once a draft, that the model is not
	// answering and the draft comes when it is back.
	ResumeWaiting(d Draft) []domain.Message
}

// Errors the user is told about beside Extract's.
var (
	// ErrFileTooBig: the file is over the size limit (Config.MaxBytes),
	// or over what Telegram lets bots download.
	ErrFileTooBig = errors.New("file too big")
	// ErrGaveUp: the file could not be read in Config.Attempts attempts
	// (Telegram or the LLM failing), or the model did not answer within
	// Config.ModelWait; the user is asked to send it again.
	ErrGaveUp = errors.New("gave up reading the file")
)

// DraftTTL is how long a draft waits for the user: past it the buttons are
// stale and the prune job deletes it.
const DraftTTL = 24 * time.Hour

// Config bounds the workflow.
type Config struct {
	// MaxBytes is the largest file read (0: 5 MiB); Telegram lets bots
	// download at most 20 MB.
	MaxBytes int64
	// MaxPages is the longest PDF read (0: 20).
	MaxPages int
	// MaxProfile is the longest profile, in characters (vacancy.MaxProfile).
	MaxProfile int
	// DraftTTL is how long a draft's buttons work (0: the package's
	// DraftTTL, which the prune job keeps to).
	DraftTTL time.Duration
	// Lease is a worker's claim on a draft being read (0: 3 min): past it
	// another worker takes the draft over, or at once once the claimer,
	// which Claimer names (storage.Liveness), is seen dead.
	Lease   time.Duration
	Claimer string
	// Attempts is how many claims a draft gets before the user is asked to
	// send the file again (0: 3); Backoff is the wait after a failed one,
	// times the attempt (0: 20 s).
	Attempts int
	Backoff  time.Duration
	// ModelWait is how long a draft waits for a model that is not
	// answering (its breaker open, the model or key refused, calls
	// rate-limited) before the user is asked to send the file again (0:
	// 12 h, well inside DraftTTL, from which the prune job counts);
	// ModelRetry is how often the draft is tried meanwhile (0: 30 s):
	// each try downloads and reads the file again, so not every few
	// seconds. Those tries spend no attempts.
	ModelWait  time.Duration
	ModelRetry time.Duration
	// Workers read drafts at once on this replica (0: 2); Sweep is how
	// often they look for drafts nobody woke them for (0: 2 s).
	Workers int
	Sweep   time.Duration
}

func (c Config) withDefaults() Config {
	domain.OrDefault(&c.MaxBytes, 5<<20)
	domain.OrDefault(&c.MaxPages, 20)
	domain.OrDefault(&c.MaxProfile, 4000)
	domain.OrDefault(&c.DraftTTL, DraftTTL)
	domain.OrDefault(&c.Lease, 3*time.Minute)
	domain.OrDefault(&c.Attempts, 3)
	domain.OrDefault(&c.Backoff, 20*time.Second)
	domain.OrDefault(&c.ModelWait, 12*time.Hour)
	domain.OrDefault(&c.ModelRetry, 30*time.Second)
	domain.OrDefault(&c.Workers, 2)
	domain.OrDefault(&c.Sweep, 2*time.Second)
	return c
}

// Deps are the service's collaborators; Drafts, Files, LLM and Notifier
// are required.
type Deps struct {
	Drafts   Drafts
	Files    Files
	LLM      LLM
	Notifier Notifier
	// Extractor reads the files (Isolated, in the binary); nil: Extract,
	// in this process.
	Extractor  Extractor
	Log        *slog.Logger
	Clock      clockwork.Clock
	Registerer prometheus.Registerer
}

// Service is the workflow.
type Service struct {
	cfg  Config
	deps Deps
	// queue is the drafts' worker loops (ProcessNext).
	queue  *domain.Workers
	panics domain.Panics
}

// NewService builds the workflow.
func NewService(cfg Config, deps Deps) (*Service, error) {
	if deps.Drafts == nil || deps.Files == nil || deps.LLM == nil || deps.Notifier == nil {
		return nil, errors.New("resume: Drafts, Files, LLM and Notifier are required")
	}
	domain.Defaults(&deps.Clock, &deps.Log, &deps.Registerer)
	if deps.Extractor == nil {
		deps.Extractor = inProcess{}
	}
	panics, err := domain.NewMetrics(deps.Registerer, "resume", domain.NewPanics)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg.withDefaults(), deps: deps, panics: panics}
	s.queue = &domain.Workers{Name: "résumé drafts", Next: s.ProcessNext, Sweep: s.cfg.Sweep, Clock: deps.Clock, Log: deps.Log, Panics: panics}
	return s, nil
}

// MaxBytes is the largest file the service reads.
func (s *Service) MaxBytes() int64 { return s.cfg.MaxBytes }

// MaxPages is the longest PDF the service reads.
func (s *Service) MaxPages() int { return s.cfg.MaxPages }

// Accept takes a document: an unsupported type or a file over the size
// limit is refused at once (a *domain.InputError); else a Reading draft is
// stored with ack's messages, replacing the user's earlier draft, and a
// worker is woken. created is false for a document already accepted (its
// update delivered twice): nothing is written again.
func (s *Service) Accept(ctx context.Context, doc Document, lang string, ack domain.Render[Draft]) (Draft, bool, error) {
	f, ok := FormatOf(doc.FileName, doc.MIMEType)
	if !ok {
		return Draft{}, false, &domain.InputError{Key: "cv.error_type"}
	}
	if doc.Size > s.cfg.MaxBytes {
		return Draft{}, false, &domain.InputError{Key: "cv.error_too_big", Args: map[string]any{"MaxMB": s.cfg.MaxBytes >> 20}}
	}
	d, created, err := s.deps.Drafts.Create(ctx, Draft{
		UserID: doc.UserID, ChatID: doc.ChatID, MessageID: doc.MessageID, Lang: lang,
		FileID: doc.FileID, FileName: doc.FileName, Format: f,
	}, ack)
	if err != nil {
		return Draft{}, false, fmt.Errorf("accept résumé: %w", err)
	}
	if created {
		s.Wake()
	}
	return d, created, nil
}

// Edit asks for the corrected text: the draft moves to Editing under a new
// revision, returned for the message that asks. ok is false for a stale
// press.
func (s *Service) Edit(ctx context.Context, userID, id int64, revision int) (Draft, bool, error) {
	return s.deps.Drafts.Edit(ctx, userID, id, revision, s.cfg.DraftTTL)
}

// Revise takes the user's corrected text for their draft waiting for it:
// handled is false when there is none (the text is someone else's to
// handle, the memory chat's). Too long a text is a *domain.InputError and
// the draft keeps waiting.
func (s *Service) Revise(ctx context.Context, userID int64, messageID int, text string, tell domain.Render[Draft]) (handled bool, err error) {
	waiting, revised, err := s.deps.Drafts.Editing(ctx, userID, messageID, s.cfg.DraftTTL)
	if err != nil || revised {
		// Revised by this message already: handled, and its draft was
		// sent then.
		return revised, err
	}
	if !waiting {
		return false, nil
	}
	text = strings.TrimSpace(text)
	if n := utf8.RuneCountInString(text); n > s.cfg.MaxProfile {
		return true, &domain.InputError{Key: "profile.error_too_long", Args: map[string]any{"Max": s.cfg.MaxProfile}}
	}
	_, ok, err := s.deps.Drafts.Revise(ctx, userID, messageID, text, s.cfg.DraftTTL, tell)
	if err != nil {
		return true, fmt.Errorf("revise profile draft: %w", err)
	}
	// Not ok: the draft was confirmed, cancelled or replaced since the
	// look; the text is then the memory chat's after all.
	return ok, nil
}

// Confirm makes the draft the user's profile. ok is false for a stale press.
func (s *Service) Confirm(ctx context.Context, userID, id int64, revision int) (Draft, bool, error) {
	return s.deps.Drafts.Confirm(ctx, userID, id, revision, s.cfg.DraftTTL)
}

// Cancel drops the draft; the profile stays. ok is false for a stale press.
func (s *Service) Cancel(ctx context.Context, userID, id int64, revision int) (bool, error) {
	return s.deps.Drafts.Cancel(ctx, userID, id, revision)
}

// Wake tells this replica's workers a draft waits.
func (s *Service) Wake() { s.queue.Wake() }

// Run reads drafts until ctx ends: Workers loops, each claiming the next
// draft whenever woken and every Sweep, so drafts accepted on another
// replica, or left by a dead one, are read too.
func (s *Service) Run(ctx context.Context) { s.queue.Run(ctx, s.cfg.Workers) }

// ProcessNext claims one draft and reads it; worked is false when none waits.
func (s *Service) ProcessNext(ctx context.Context) (worked bool, err error) {
	d, ok, err := s.deps.Drafts.Claim(ctx, s.cfg.Lease, s.cfg.Claimer)
	if err != nil || !ok {
		return false, err
	}
	if err := s.panics.Contain(s.deps.Log, "resume_draft", d.ID, func() { s.process(ctx, d) }); err != nil {
		// An attempt that failed, as any: the last one's asks the user to
		// send the file again, rather than the draft panicking a worker
		// at every claim.
		s.retryLater(ctx, d, s.deps.Log.With("draft", d.ID, "user", d.UserID, "attempt", d.Attempts))
	}
	return true, nil
}

// process reads one claimed draft: a file refused for what it is ends the
// draft with the reason told; a passing failure gives the claim back for a
// later attempt, and the last attempt's asks the user to send it again.
func (s *Service) process(ctx context.Context, d Draft) {
	log := s.deps.Log.With("draft", d.ID, "user", d.UserID, "attempt", d.Attempts)
	if d.Attempts > s.cfg.Attempts {
		s.fail(ctx, d, ErrGaveUp, log)
		return
	}
	profile, err := s.read(ctx, d)
	switch {
	case err == nil:
		// The claim's writes outlive a stop that comes after the work.
		ok, err := s.deps.Drafts.Finish(context.WithoutCancel(ctx), d.ID, d.Token, profile, func(d Draft) []domain.Message {
			return s.deps.Notifier.ResumeDraft(d)
		})
		if err != nil {
			log.Warn("resume: draft not saved", "err", err)
			return
		}
		if !ok {
			log.Info("resume: draft replaced or claim lost before it was saved")
			return
		}
		log.Info("resume: draft made", "chars", utf8.RuneCountInString(profile))
	case ctx.Err() != nil:
		// Stopping: another replica takes it at once, the attempt not counted.
		if err := s.deps.Drafts.Release(context.WithoutCancel(ctx), d.ID, d.Token, 0, false); err != nil {
			log.Warn("resume: claim not released on stop", "err", err)
		}
	case refused(err):
		log.Info("resume: file refused", "why", err)
		s.fail(ctx, d, err, log)
	case modelAway(err):
		s.waitForModel(ctx, d, err, log)
	default:
		log.Warn("resume: attempt failed", "err", err)
		s.retryLater(ctx, d, log)
	}
}

// retryLater gives a draft whose attempt failed back for a later one, the
// attempt counted.
func (s *Service) retryLater(ctx context.Context, d Draft, log *slog.Logger) {
	after := s.cfg.Backoff * time.Duration(d.Attempts)
	if err := s.deps.Drafts.Release(context.WithoutCancel(ctx), d.ID, d.Token, after, true); err != nil {
		log.Warn("resume: claim not released", "err", err)
	}
}

// modelAway says whether err is the model's absence, not the file's or the
// attempt's fault: the breaker turned the call away, the provider refuses
// the model or key (a misconfiguration an operator fixes), or it
// rate-limits the calls. Such an outage may outlast every attempt; the
// draft waits for the model instead, as memory-chat messages do.
func modelAway(err error) bool {
	return errors.Is(err, domain.ErrLLMDown) || errors.Is(err, domain.ErrLLMRefused) || errors.Is(err, domain.ErrLLMBusy)
}

// waitForModel gives a draft whose model is away back for a try after
// ModelRetry, the attempt not counted, telling its user the first time
// that the draft comes when the model is back; a draft that has waited
// ModelWait already asks the user to send the file again instead. The
// first wait is logged as a warning, the tries after it at debug level,
// so that a long outage does not flood the log.
func (s *Service) waitForModel(ctx context.Context, d Draft, cause error, log *slog.Logger) {
	waited, told, ok, err := s.deps.Drafts.WaitForModel(context.WithoutCancel(ctx), d.ID, d.Token, s.deps.Notifier.ResumeWaiting(d))
	switch {
	case err != nil:
		// The wait goes on untold; the next try tells.
		log.Warn("resume: wait for the LLM not recorded", "err", err)
	case !ok:
		log.Info("resume: draft replaced or claim lost while the LLM was away")
		return
	case waited > s.cfg.ModelWait:
		log.Warn("resume: gave up waiting for the LLM", "waited", waited, "err", cause)
		s.fail(ctx, d, ErrGaveUp, log)
		return
	case told:
		log.Warn("resume: draft waits for the LLM", "err", cause, "retry_in", s.cfg.ModelRetry)
	default:
		log.Debug("resume: draft waits for the LLM", "err", cause, "waited", waited, "retry_in", s.cfg.ModelRetry)
	}
	if err := s.deps.Drafts.Release(context.WithoutCancel(ctx), d.ID, d.Token, s.cfg.ModelRetry, false); err != nil {
		log.Warn("resume: claim not released", "err", err)
	}
}

// refused says whether err is the file's fault, so trying again is useless.
func refused(err error) bool {
	return errors.Is(err, ErrNoText) || errors.Is(err, ErrUnreadable) || errors.Is(err, ErrTooManyPages) || errors.Is(err, ErrFileTooBig)
}

func (s *Service) fail(ctx context.Context, d Draft, why error, log *slog.Logger) {
	ok, err := s.deps.Drafts.Fail(context.WithoutCancel(ctx), d.ID, d.Token, func(d Draft) []domain.Message {
		return s.deps.Notifier.ResumeFailed(d, why)
	})
	if err != nil {
		log.Warn("resume: failure not recorded", "err", err)
	} else if !ok {
		log.Info("resume: draft replaced or claim lost before its failure was told")
	}
}

// read downloads, extracts and condenses the file. The text stays in this
// call; nothing of it is logged.
func (s *Service) read(ctx context.Context, d Draft) (string, error) {
	data, err := s.deps.Files.Download(ctx, d.FileID, s.cfg.MaxBytes)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	text, err := s.deps.Extractor.Extract(ctx, data, d.Format, s.cfg.MaxPages)
	if err != nil {
		return "", fmt.Errorf("extract: %w", err)
	}
	prompt := buildPrompt(text)
	var a answer
	for try := 0; ; try++ {
		a = answer{max: s.cfg.MaxProfile}
		err = s.deps.LLM.JSON(ctx, systemPrompt, prompt, &a)
		if err == nil || !errors.Is(err, domain.ErrLLMInvalidAnswer) || try == 1 {
			break
		}
	}
	if err != nil {
		return "", fmt.Errorf("condense: %w", err)
	}
	return a.Profile, nil
}
