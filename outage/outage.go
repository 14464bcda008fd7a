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
// to the outbox in the same transaction (storage's admin_notices).
type Notices interface {
	Once(ctx context.Context, key, text string, tell domain.Render[string]) (bool, error)
	End(ctx context.Context, key string, tell domain.Render[string]) (bool, error)
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
	over   func() bool
	notice func(reason, extra string) []domain.Message
	// ended, if set, runs once the end is told.
	ended func()
	// every is how often the state is read (0: pollEvery).
	every time.Duration
}

// pollEvery is how often a watch reads its client's state.
const pollEvery = 5 * time.Second

// Run polls the service's state until ctx ends.
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
	refused := false
	for {
		reason, extra := w.reason()
		switch {
		case reason != "":
			if !refused {
				w.deps.Log.Error(w.what, "reason", reason)
			}
			refused = true
			w.tell(ctx, reason, extra)
		case refused && w.over():
			refused = !w.tellEnd(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tell records the outage, telling the admin chat if no replica has yet.
func (w *Watch) tell(ctx context.Context, reason, extra string) {
	if _, err := w.deps.Notices.Once(ctx, w.key, reason, domain.Fixed[string](w.notice(reason, extra)...)); err != nil && ctx.Err() == nil {
		w.deps.Log.Warn("tell the admin chat", "notice", w.key, "err", err)
	} else {
		w.deps.Wake()
	}
}

// tellEnd tells the admin chat the outage is over, once across replicas;
// whether that is recorded.
func (w *Watch) tellEnd(ctx context.Context) bool {
	if _, err := w.deps.Notices.End(ctx, w.key, domain.Fixed[string](w.notice("", "")...)); err != nil {
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
