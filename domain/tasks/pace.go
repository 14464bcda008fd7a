package tasks

import (
	"context"
	"log/slog"
	"time"

	"switchboard/domain"
)

// Pacing: GitHub bounds content creation (new issues and labels) to 80 a
// minute and 500 an hour per user, across all of a token's repositories,
// and asks clients to space their mutating requests rather than run into
// the secondary limit, whose refusal holds every request for its
// Retry-After and counts against the account. So before each filing to a
// GitHub destination the pusher works out the earliest instant one more
// creation fits every window and waits for it. The creations it counts
// are those recorded in the database (Filed.Created, at pushed_at), so the
// pace holds across replicas and restarts; pushed_at is taken after
// GitHub answered, no earlier than GitHub counted the creation, so the
// reckoning errs on the late side. A refusal is still honoured as before
// (refused): the pace is a courtesy, not what keeps the pusher in bounds.

// Window is one of a tracker's content limits: at most Limit creations in
// any span of Per.
type Window struct {
	Limit int
	Per   time.Duration
}

// GitHubContent are GitHub's documented content-creation limits: 80 a
// minute and 500 an hour.
func GitHubContent() []Window {
	return []Window{{Limit: 80, Per: time.Minute}, {Limit: 500, Per: time.Hour}}
}

// Creation is what a push made in its tracker at At: N things the content
// limits count (an issue, a label made with it).
type Creation struct {
	At time.Time
	N  int
}

// Pacing is the storage the pacer reads (storage.Tasks).
type Pacing interface {
	// Creations are kind's creations within the last within, newest
	// first, at most limit of them, and the database's now they were
	// counted back from.
	Creations(ctx context.Context, kind string, within time.Duration, limit int) (now time.Time, cs []Creation, err error)
	// Due is how long until the next pending push may be claimed; false
	// when none is pending.
	Due(ctx context.Context) (time.Duration, bool, error)
}

// defaultMaxWait is Config.MaxWait's default: above the push job's 2 s
// interval, so that a pause ending between two ticks is waited for by
// the earlier one instead of costing up to a tick.
const defaultMaxWait = 5 * time.Second

// withPacing fills in the pacing's defaults.
func withPacing(cfg Config) Config {
	if cfg.Content == nil {
		cfg.Content = GitHubContent()
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = defaultMaxWait
	}
	return cfg
}

// FitAt is the earliest instant, not before now, at which need more
// creations fit every window, given the creations made so far, newest
// first. In a window of Limit per Per, the creations after t-Per count at
// t (one at exactly t-Per has left, as GitHub counts); walking back from
// the newest, the first creation that leaves less than need room, and
// every older one, must have left: t is at least its At + Per.
func FitAt(now time.Time, created []Creation, windows []Window, need int) time.Time {
	at := now
	for _, w := range windows {
		if w.Limit <= 0 || w.Per <= 0 {
			continue
		}
		room := w.Limit - min(need, w.Limit)
		used := 0
		for _, c := range created {
			if !c.At.After(now.Add(-w.Per)) {
				break
			}
			if used += c.N; used > room {
				if end := c.At.Add(w.Per); end.After(at) {
					at = end
				}
				break
			}
		}
	}
	return at
}

// pace holds p, about to be filed, until one more creation fits its
// tracker's content limits: waiting in place for up to Config.MaxWait
// (and half the claim's lease, which the wait must not outlive), or else
// pausing the kind until then and giving p back. held says p was given
// back (so too when ctx ended during the wait): the caller files nothing.
func (s *Service) pace(ctx context.Context, log *slog.Logger, p Push) (held bool, err error) {
	if p.Destination.Kind != KindGitHub || len(s.cfg.Content) == 0 {
		return false, nil
	}
	var longest time.Duration
	most := 0
	for _, w := range s.cfg.Content {
		longest, most = max(longest, w.Per), max(most, w.Limit)
	}
	now, created, err := s.store.Creations(ctx, p.Destination.Kind, longest, most)
	if err != nil {
		if ctx.Err() != nil {
			return true, s.giveBack(ctx, p, time.Time{}, "the tick ended before the push")
		}
		return true, err
	}
	at := FitAt(now, created, s.cfg.Content, 1)
	wait := at.Sub(now)
	if wait <= 0 {
		return false, nil
	}
	why := "pacing " + p.Destination.Kind + "'s content limits"
	if wait > min(s.cfg.MaxWait, s.cfg.Lease/2) {
		log.Info("tasks: the tracker's content limits are spent; its pushes wait", "for", wait)
		// The database's clock, which the claim compares with: at is its.
		if err := s.store.Pause(ctx, p.Destination.Kind, at, why); err != nil {
			return true, err
		}
		return true, s.store.Defer(ctx, p, at, why)
	}
	log.Debug("tasks: paced", "wait", wait)
	if domain.Sleep(ctx, wait) != nil {
		return true, s.giveBack(ctx, p, at, why)
	}
	return false, nil
}

// giveBack defers p to notBefore (zero: due now) though ctx has ended,
// so that its claim does not hold it for a lease.
func (s *Service) giveBack(ctx context.Context, p Push, notBefore time.Time, why string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordWithin)
	defer cancel()
	if notBefore.IsZero() {
		notBefore = s.now()
	}
	return s.store.Defer(ctx, p, notBefore, why)
}

// awaitDue waits, when no push is due, for the next one if it comes due
// within Config.MaxWait (a pause or a push's not_before about to end):
// returning instead would leave it to the next tick, up to an interval
// later. It reports whether it waited, for the caller to claim again.
func (s *Service) awaitDue(ctx context.Context) (bool, error) {
	wait, ok, err := s.store.Due(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, err
	}
	if !ok || wait > s.cfg.MaxWait {
		return false, nil
	}
	// A floor, so that a push due now but not claimable (a row another
	// transaction holds) is not asked for in a busy loop.
	return domain.Sleep(ctx, max(wait, 10*time.Millisecond)) == nil, nil
}
