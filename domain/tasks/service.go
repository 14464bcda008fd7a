package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Push is one approved proposal on its way to its destination, as a
// worker claimed it: Token names the claim (a push whose lease ran out
// and another worker claimed again is no longer this claim's).
type Push struct {
	ID          int64
	Destination Destination
	Task        Task
	Token       string
	Attempts    int
	// FileAnyway: an admin chose to file it although it looked like an
	// open task of its destination; no duplicate check again.
	FileAnyway bool
}

// Pushed is a push as /tasks lists it.
type Pushed struct {
	ID          int64
	ProposalID  int64
	Title       string
	Destination Destination
	State       string // pending, held, refused, pushed
	Number      int
	URL         string
	IssueState  string
	LastError   string
	ApprovedAt  time.Time
	// Like is the open task a held push looks like; Linked: an admin
	// linked the proposal to it rather than filing it.
	Like   Open
	Linked bool
}

// MessageLink opens a group message in Telegram: t.me/c/<id>/<message>
// for a supergroup (its id without the -100); "" for a basic group, which
// has no links.
func MessageLink(chatID, messageID int64) string {
	s := strconv.FormatInt(chatID, 10)
	internal, ok := strings.CutPrefix(s, "-100")
	if !ok || internal == "" {
		return ""
	}
	return "https://t.me/c/" + internal + "/" + strconv.FormatInt(messageID, 10)
}

// Tracked is a filed task as the sync reads it.
type Tracked struct {
	PushID      int64
	ProposalID  int64
	Title       string
	Destination Destination
	Number      int
	URL         string
	State       string
	ETag        string
}

// Syncer reads a filed task's state from its tracker, conditionally: etag
// is what the last read answered, and notModified says nothing changed
// (GitHub counts no rate limit for it). GitHub's client implements it.
type Syncer interface {
	Issue(ctx context.Context, target string, number int, etag string) (f Filed, newETag string, notModified bool, err error)
}

// SyncStore is the sync's storage (storage.Tasks).
type SyncStore interface {
	Filed(ctx context.Context, since time.Duration, limit int) ([]Tracked, error)
	Synced(ctx context.Context, t Tracked, state, etag string, tell []domain.Message) (bool, error)
}

// Store is the pushes' storage (storage.Tasks).
type Store interface {
	Claim(ctx context.Context, claimer string, lease time.Duration) (Push, bool, error)
	Pushed(ctx context.Context, p Push, f Filed) (bool, error)
	Defer(ctx context.Context, p Push, notBefore time.Time, why string) error
	Pause(ctx context.Context, scope string, until time.Time, reason string) error
	// Hold sets a claimed push aside until an admin says whether it is
	// like, which it looks like: link it, or file it anyway. False when
	// the claim is no longer its.
	Hold(ctx context.Context, p Push, like Open) (bool, error)
	// Refuse sets a claimed push aside as its tracker refused it, why
	// being the tracker's words, and writes tell with it, in its
	// transaction: false (nothing written) when the claim is no longer
	// its. It waits for an admin's retry.
	Refuse(ctx context.Context, p Push, why string, tell []domain.Message) (bool, error)
	Pacing
}

// Boards redraws an analysis run's board (analysis.Service): a filed
// task's link shows there.
type Boards interface {
	RefreshBoard(ctx context.Context, runID int64) error
}

// ShowOn makes each task filed show its link on its run's board. Call
// before the jobs run.
func (s *Service) ShowOn(b Boards) { s.boards = b }

// Notices tells the admin chat of a condition once, when it starts, and
// once when it ends (storage.Notices with the bot's renderer).
type Notices interface {
	Once(ctx context.Context, key string, msgs []domain.Message) error
	End(ctx context.Context, key string, msgs []domain.Message) error
}

// Notifier renders what the admins read of the pushes.
type Notifier interface {
	// TrackerRefused: a destination refuses (ErrAccess: our credentials;
	// ErrGone: it is no more); why is the tracker's words.
	TrackerRefused(d Destination, gone bool, why string) []domain.Message
	// TrackerBack: the destination takes pushes again.
	TrackerBack(d Destination) []domain.Message
	// AssigneeDropped: a task was filed without the assignee its tracker
	// refused.
	AssigneeDropped(p Push, f Filed) []domain.Message
	// TaskRefused: the tracker refused a task for what it holds (why is
	// its words), and the push waits for an admin to send it again.
	TaskRefused(p Push, why string) []domain.Message
	// TaskClosed: a filed task was closed in its tracker.
	TaskClosed(t Tracked) []domain.Message
}

// Config tunes the pushing.
type Config struct {
	// Lease is how long a claim holds a push: longer than a push's
	// requests take, so a live worker's push is not taken from it.
	Lease time.Duration
	// Refused is how long a destination that refuses (our credentials,
	// or gone) waits before it is asked again.
	Refused time.Duration
	// MaxBackoff bounds the wait after a passing failure.
	MaxBackoff time.Duration
	// Claimer names this replica in its claims.
	Claimer string
	// Content are the content limits GitHub's destinations are paced to
	// (pace.go), the Per of each in real time: nil means GitHub's own
	// (GitHubContent), an empty slice no pacing.
	Content []Window
	// MaxWait bounds how long the job waits in place for the content
	// limits or for a pause about to end (5 s); a longer wait pauses the
	// kind and ends the run.
	MaxWait time.Duration
	// Registerer takes the pusher's metrics; nil: a registry of its own.
	Registerer prometheus.Registerer
}

// Service pushes approved tasks to their trackers. Push is the job each
// replica runs, locked across replicas per tick, so one worker at a time
// speaks to the trackers: a rate limit's "not before" is then kept for
// every request, not only the next one.
type Service struct {
	cfg      Config
	store    Store
	trackers map[string]Tracker
	notices  Notices
	render   Notifier
	sync     SyncStore
	boards   Boards
	log      *slog.Logger
	now      func() time.Time
	panics   domain.Panics
}

// NewService builds the pusher over the trackers by kind (KindGitHub,
// KindWebhook; a kind without one waits, named in the log).
func NewService(cfg Config, store interface {
	Store
	SyncStore
}, trackers map[string]Tracker, notices Notices, render Notifier, log *slog.Logger) *Service {
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.Refused <= 0 {
		cfg.Refused = 10 * time.Minute
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Minute
	}
	cfg = withPacing(cfg)
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	r := domain.NewRegistrar(cfg.Registerer)
	panics := domain.NewPanics(r)
	if err := r.Err(); err != nil {
		// Only a metric of that name and another shape clashes; the
		// panics are still contained and logged, just not counted there.
		log.Error("tasks: metrics not registered", "err", err)
	}
	return &Service{cfg: cfg, store: store, sync: store, trackers: trackers, notices: notices, render: render, log: log, now: time.Now,
		panics: panics}
}

// Module is the pushing as the house runs it: the push job every
// interval and the sync every sync, each on one replica per tick.
func (s *Service) Module(interval, sync time.Duration) domain.Module {
	return domain.Module{Name: "tasks", Jobs: []domain.Job{
		{Name: "tasks-push", Every: interval, Run: s.Push},
		{Name: "tasks-sync", Every: sync, Run: s.Sync},
	}}
}

// syncWindow and syncBatch bound a sync: the last 30 days' filed tasks
// whose closing was not told, the least recently read first, a batch a
// tick (each read of an unchanged issue is a 304, free of GitHub's limit).
const (
	syncWindow = 30 * 24 * time.Hour
	syncBatch  = 100
)

// Sync reads the filed tasks' states from their trackers and tells the
// admin chat's log, once, of each one closed there: the job. A tracker's
// refusal ends the tick (the next one tries again); a rate limit is the
// push's to honour, so the sync stops at it too.
func (s *Service) Sync(ctx context.Context) error {
	ts, err := s.sync.Filed(ctx, syncWindow, syncBatch)
	if err != nil {
		return err
	}
	for _, t := range ts {
		syncer, ok := s.trackers[t.Destination.Kind].(Syncer)
		if !ok {
			continue
		}
		f, etag, same, err := syncer.Issue(ctx, t.Destination.Target, t.Number, t.ETag)
		if err != nil {
			s.log.Warn("tasks: a filed task's state not read", "push", t.PushID, "err", err)
			return nil
		}
		state := t.State
		if !same {
			state = f.State
		} else {
			etag = t.ETag
		}
		told, err := s.sync.Synced(ctx, t, state, etag, s.render.TaskClosed(t))
		if err != nil {
			return err
		}
		if told {
			s.log.Info("tasks: a filed task was closed in its tracker", "push", t.PushID, "number", t.Number)
		}
	}
	return nil
}

// Push files due pushes one after another until none is due or ctx ends
// (the tick's budget): the job. When none is due but one will be within
// Config.MaxWait, it waits for that one.
func (s *Service) Push(ctx context.Context) error {
	for ctx.Err() == nil {
		p, ok, err := s.store.Claim(ctx, s.cfg.Claimer, s.cfg.Lease)
		if err != nil {
			return err
		}
		if !ok {
			if waited, err := s.awaitDue(ctx); !waited || err != nil {
				return err
			}
			continue
		}
		if perr := s.panics.Contain(s.log, "tasks_push", p.ID, func() { err = s.push(ctx, p) }); perr != nil {
			err = s.panicked(ctx, p, perr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// panicked retries a push that panicked with backoff, as one that failed
// for any other reason, and the run goes on to the pushes due behind it:
// left claimed, the push would come back at every lease's end and end that
// tick's run at once. It is not set aside as refused, which would tell the
// admins the tracker refused the task. A task filed before the panic is
// found by its marker at the retry, not filed twice.
func (s *Service) panicked(ctx context.Context, p Push, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWithin)
	defer cancel()
	return s.refused(ctx, s.log.With("push", p.ID, "proposal", p.Task.ProposalID, "kind", p.Destination.Kind), p, cause)
}

// push files one claimed push: unless its tracker finds the task filed
// already (an attempt that crashed after the tracker's answer), files it,
// then records it. A refusal is acted on (pause, tell); a passing failure
// defers the push with backoff. Only a storage error is returned.
func (s *Service) push(ctx context.Context, p Push) error {
	log := s.log.With("push", p.ID, "proposal", p.Task.ProposalID, "kind", p.Destination.Kind)
	tr, ok := s.trackers[p.Destination.Kind]
	if !ok {
		log.Warn("tasks: no tracker of this kind is configured; the push waits")
		return s.store.Defer(ctx, p, s.now().Add(s.cfg.Refused), "no tracker of kind "+p.Destination.Kind+" is configured")
	}
	f, found, err := tr.Find(ctx, p.Destination.Target, p.Task.Marker())
	if err == nil && !found {
		var like Open
		var held bool
		if like, held, err = s.looksLike(ctx, tr, p); err == nil && held {
			return s.hold(ctx, log, p, like)
		}
	}
	if err == nil && !found {
		if held, perr := s.pace(ctx, log, p); held || perr != nil {
			return perr
		}
		f, err = tr.File(ctx, p.Destination.Target, p.Task)
	}
	// What the tracker answered is recorded even when the tick's budget
	// ran out meanwhile: a filed task recorded late is better than one
	// found by its marker a lease later.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWithin)
	defer cancel()
	if err != nil {
		return s.refused(ctx, log, p, err)
	}
	recorded, err := s.store.Pushed(ctx, p, f)
	if err != nil {
		return err
	}
	if !recorded {
		// Our claim ran out while the tracker answered; whoever holds it
		// now finds the task by its marker and records it.
		log.Warn("tasks: a push outlived its claim; the next claim finds it filed")
		return nil
	}
	log.Info("tasks: pushed", "number", f.Number, "found_filed", found)
	if s.boards != nil && f.URL != "" {
		if err := s.boards.RefreshBoard(ctx, p.Task.RunID); err != nil {
			log.Warn("tasks: the run's board not redrawn with the issue's link", "run", p.Task.RunID, "err", err)
		}
	}
	s.back(ctx, p.Destination)
	if f.AssigneeDropped {
		if err := s.notices.Once(ctx, "tasks:assignee:"+strconv.FormatInt(p.ID, 10), s.render.AssigneeDropped(p, f)); err != nil {
			log.Warn("tasks: the dropped assignee not told", "err", err)
		}
	}
	return nil
}

// looksLike is the open task of p's destination p's task looks like, if
// its tracker can list them and an admin has not chosen to file it anyway.
func (s *Service) looksLike(ctx context.Context, tr Tracker, p Push) (Open, bool, error) {
	l, ok := tr.(Lister)
	if !ok || p.FileAnyway {
		return Open{}, false, nil
	}
	open, err := l.Open(ctx, p.Destination.Target)
	if err != nil {
		return Open{}, false, err
	}
	like, ok := LikelyDuplicate(p.Task.Title, open)
	return like, ok, nil
}

// hold sets p aside as looking like an open task, and redraws its run's
// board, where the admins choose: link it to that task, or file it anyway.
func (s *Service) hold(ctx context.Context, log *slog.Logger, p Push, like Open) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWithin)
	defer cancel()
	held, err := s.store.Hold(ctx, p, like)
	if err != nil || !held {
		return err
	}
	log.Info("tasks: looks like an open task; held for the admins", "like", like.Number)
	if s.boards != nil {
		if err := s.boards.RefreshBoard(ctx, p.Task.RunID); err != nil {
			log.Warn("tasks: the run's board not redrawn with the likely duplicate", "run", p.Task.RunID, "err", err)
		}
	}
	return nil
}

// recordWithin bounds the writes that record a push's outcome.
const recordWithin = 10 * time.Second

// refused acts on a tracker's error: a rate limit pauses the whole kind
// until its "not before"; our credentials refused pause the kind and tell
// the admins once; a destination gone pauses it and tells which; a task
// refused for what it holds is set aside and told; anything else defers
// this push with backoff.
func (s *Service) refused(ctx context.Context, log *slog.Logger, p Push, err error) error {
	var rl *RateLimited
	// A tracker quotes what it was answered; the reason is stored, and
	// text PostgreSQL refuses would fail the deferral itself, again at
	// every claim.
	why := domain.CleanText(err.Error())
	switch {
	case errors.As(err, &rl):
		log.Warn("tasks: the tracker's rate limit; its pushes wait", "until", rl.Until, "secondary", rl.Secondary)
		if perr := s.store.Pause(ctx, p.Destination.Kind, rl.Until, why); perr != nil {
			return perr
		}
		return s.store.Defer(ctx, p, rl.Until, why)
	case errors.Is(err, ErrAccess):
		until := s.now().Add(s.cfg.Refused)
		log.Warn("tasks: the tracker refuses our credentials; its pushes wait", "retry_at", until, "err", err)
		if perr := s.store.Pause(ctx, p.Destination.Kind, until, why); perr != nil {
			return perr
		}
		s.tell(ctx, log, refusalKey(p.Destination, false), s.render.TrackerRefused(p.Destination, false, why))
		return s.store.Defer(ctx, p, until, why)
	case errors.Is(err, ErrGone):
		until := s.now().Add(s.cfg.Refused)
		log.Warn("tasks: the destination is gone; its pushes wait for a new one", "retry_at", until, "err", err)
		if perr := s.store.Pause(ctx, scopeOf(p.Destination), until, why); perr != nil {
			return perr
		}
		s.tell(ctx, log, refusalKey(p.Destination, true), s.render.TrackerRefused(p.Destination, true, why))
		return s.store.Defer(ctx, p, until, why)
	case errors.Is(err, ErrRefused):
		// Retried, it would be refused at every backoff for ever while
		// /tasks called it waiting: it waits for an admin instead, and
		// the pushes behind it go on.
		msgs := s.render.TaskRefused(p, why)
		for i := range msgs {
			// The claim's token: a statement run again for the same claim
			// writes no second notice, and a refusal after an admin's
			// retry (a new claim) is told again.
			msgs[i].Origin = "tasks:refused:" + p.Token + ":" + strconv.Itoa(i)
		}
		set, serr := s.store.Refuse(ctx, p, why, msgs)
		if serr != nil {
			return serr
		}
		if set {
			log.Warn("tasks: the tracker refuses this task; set aside for the admins", "err", err)
		} else {
			log.Warn("tasks: a refused push outlived its claim; the next claim tries it", "err", err)
		}
		return nil
	}
	wait := backoff(p.Attempts, s.cfg.MaxBackoff)
	log.Warn("tasks: push failed; retried", "in", wait, "attempt", p.Attempts, "err", err)
	return s.store.Defer(ctx, p, s.now().Add(wait), why)
}

// back tells the admins a destination that refused takes pushes again.
func (s *Service) back(ctx context.Context, d Destination) {
	for _, gone := range []bool{false, true} {
		if err := s.notices.End(ctx, refusalKey(d, gone), s.render.TrackerBack(d)); err != nil {
			s.log.Warn("tasks: the tracker's return not told", "err", err)
		}
	}
}

func (s *Service) tell(ctx context.Context, log *slog.Logger, key string, msgs []domain.Message) {
	if err := s.notices.Once(ctx, key, msgs); err != nil {
		log.Warn("tasks: the admins not told", "key", key, "err", err)
	}
}

// refusalKey names a destination's refusal among the admin chat's
// notices: our credentials are the kind's; a destination gone is its own.
func refusalKey(d Destination, gone bool) string {
	if gone {
		return "tasks:gone:" + scopeOf(d)
	}
	return "tasks:access:" + d.Kind
}

// scopeOf is a destination's pause scope.
func scopeOf(d Destination) string { return d.Kind + ":" + d.Target }

// backoff is the wait after the n-th passing failure: 10 s doubling, at
// most ceiling.
func backoff(n int, ceiling time.Duration) time.Duration {
	return min(10*time.Second<<min(max(n-1, 0), 16), ceiling)
}

// repoName is GitHub's owner/repo.
var repoName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)

// ParseDestination reads an admin's destination: "github owner/repo",
// "webhook https://…", or "none"; when "close", its tasks wait for their
// run's close ("approve" or "": each goes as it is approved). Kind "" is
// none.
func ParseDestination(kind, target, when string) (Destination, error) {
	d, err := parseDestination(kind, target)
	if err != nil || d.Kind == "" {
		return d, err
	}
	switch strings.ToLower(when) {
	case "", "approve", "approved":
	case "close", "closed", "on-close":
		d.OnClose = true
	default:
		return Destination{}, &domain.InputError{Key: "tasks.error_when", Args: map[string]any{"Arg": when}}
	}
	return d, nil
}

func parseDestination(kind, target string) (Destination, error) {
	switch strings.ToLower(kind) {
	case "none", "off", "-":
		return Destination{}, nil
	case KindGitHub:
		target = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(target, "https://github.com/"), "github.com/"), "/")
		if !repoName.MatchString(target) {
			return Destination{}, &domain.InputError{Key: "tasks.error_repo", Args: map[string]any{"Arg": target}}
		}
		return Destination{Kind: KindGitHub, Target: target}, nil
	case KindWebhook:
		if !webhookURL(target) {
			return Destination{}, &domain.InputError{Key: "tasks.error_url", Args: map[string]any{"Arg": target}}
		}
		return Destination{Kind: KindWebhook, Target: target}, nil
	}
	return Destination{}, &domain.InputError{Key: "tasks.error_kind", Args: map[string]any{"Arg": kind}}
}

// webhookURL reports whether s is an absolute http(s) URL with a host that
// a push can reach, as written: "https://" or "http://:80/x" would be
// taken now and fail at every push.
func webhookURL(s string) bool {
	if len(s) > 2048 || strings.ContainsAny(s, " \n") {
		return false
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Hostname() != "" &&
		strings.HasPrefix(s, u.Scheme+"://")
}

// String is how a destination reads: "GitHub owner/repo", "webhook URL".
func (d Destination) String() string {
	switch d.Kind {
	case KindGitHub:
		return "GitHub " + d.Target
	case KindWebhook:
		return "webhook " + d.Target
	}
	return fmt.Sprintf("%s %s", d.Kind, d.Target)
}

// PushOn is when a destination's tasks go, as storage spells it.
func (d Destination) PushOn() string {
	if d.OnClose {
		return "close"
	}
	return "approve"
}
