// Package outage tells the admin chat when an outside service this replica
// depends on starts refusing us, and again when it answers: the LLM (a
// model missing, a key refused) and HH (a captcha, a ban, a 429). Each
// replica follows its own clients; admin_notices (storage) makes the chat
// hear each start and each end once across replicas.
package outage

import (
	"context"
	"log/slog"
	"time"

	"switchboard/domain"
)

// Notices records a condition once across replicas and writes its notice
// to the outbox in the same transaction (storage's admin_notices). Each
// start is a generation: Once returns the open one (a new one if this call
// told it), End ends only the generation named, and Open finds the one a
// process before this one told and did not live to end.
type Notices interface {
	Once(ctx context.Context, key, text string, tell domain.Render[string]) (gen int64, told bool, err error)
	End(ctx context.Context, key string, gen int64, tell domain.Render[string]) (bool, error)
	Open(ctx context.Context, key string) (gen int64, ok bool, err error)
}

// Deps is what every watch needs.
type Deps struct {
	Notices Notices
	// Wake wakes the outbox sender, so that a notice goes out at once.
	Wake func()
	Log  *slog.Logger
}

// Watch follows one outside service: a condition the admin chat hears of
// once when it starts and once when it ends, across replicas.
type Watch struct {
	deps            Deps
	key, what, back string
	// start, if set, runs once before the first poll.
	start func(ctx context.Context)
	// reason is why the service refuses us ("" while it does not) and an
	// extra the notice may show (a captcha's URL).
	reason func() (reason, extra string)
	// over says the end is certain (the LLM: its breaker closed, not
	// merely probing).
	over func() bool
	// answered says this replica's client has had an answer since it
	// started: the proof of an end it did not see begin (nil: none needed).
	answered func() bool
	notice   func(reason, extra string) []domain.Message
	// ended, if set, runs once the end is told.
	ended func()
	// every is how often the state is read (0: pollEvery).
	every time.Duration
}

// pollEvery is how often a watch reads its client's state.
const pollEvery = 5 * time.Second

// Run polls the service's state until ctx ends.
//
// The replica joins the outage its client shows (gen), telling it if no
// replica has; it tells the end when its client shows the end, of that
// generation only. So a replica whose breaker is still open when another
// told the end does not tell the outage anew. A notice left open by a
// process that died is joined at start and ended once this replica's
// client has answered.
func (w *Watch) Run(ctx context.Context) {
	if w.start != nil {
		w.start(ctx)
	}
	every := w.every
	if every == 0 {
		every = pollEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var (
		gen       int64 // the told outage this replica is in; 0: none
		refused   bool  // this replica's client refuses (logged once)
		inherited bool  // gen was left open by another process: end it on an answer
		looked    bool  // whether an open notice was looked for
	)
	for {
		if !looked {
			g, ok, err := w.deps.Notices.Open(ctx, w.key)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					w.deps.Log.Warn("read the admin chat's open notice", "notice", w.key, "err", err)
				}
			case ok && gen == 0:
				gen, inherited = g, true
				looked = true
			default:
				looked = true
			}
		}
		reason, extra := w.reason()
		switch {
		case reason != "":
			if !refused {
				w.deps.Log.Error(w.what, "reason", reason)
			}
			refused, inherited = true, false
			if gen == 0 {
				gen = w.tell(ctx, reason, extra)
			}
		case gen != 0 && w.over() && (!inherited || w.answered == nil || w.answered()):
			if w.tellEnd(ctx, gen) {
				gen, refused, inherited = 0, false, false
			}
		case gen == 0 && refused && w.over():
			refused = false // never recorded, so nobody was told of it
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tell records the outage, telling the admin chat if no replica has yet:
// the generation it joined, 0 if it could not be recorded (tried again
// at the next poll).
func (w *Watch) tell(ctx context.Context, reason, extra string) int64 {
	gen, _, err := w.deps.Notices.Once(ctx, w.key, reason, domain.Fixed[string](w.notice(reason, extra)...))
	if err != nil {
		if ctx.Err() == nil {
			w.deps.Log.Warn("tell the admin chat", "notice", w.key, "err", err)
		}
		return 0
	}
	w.deps.Wake()
	return gen
}

// tellEnd tells the admin chat the outage gen is over, once across
// replicas; whether that is recorded.
func (w *Watch) tellEnd(ctx context.Context, gen int64) bool {
	if _, err := w.deps.Notices.End(ctx, w.key, gen, domain.Fixed[string](w.notice("", "")...)); err != nil {
		if ctx.Err() == nil {
			w.deps.Log.Warn("tell the admin chat it is over", "notice", w.key, "err", err)
		}
		return false
	}
	w.deps.Log.Info(w.back)
	w.deps.Wake()
	if w.ended != nil {
		w.ended()
	}
	return true
}
