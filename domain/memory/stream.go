package memory

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Drafts shows an answer while the model writes it, as Telegram's message
// drafts (sendMessageDraft): ephemeral, replaced by the final message. The
// delivery client implements it.
type Drafts interface {
	// Draft shows text, the answer so far as the model wrote it, in r's
	// chat. ErrDraftsRefused: the server takes no drafts (for this chat, or
	// at all); the run then streams into a placeholder message. Any other
	// error (the chat's pacing, a 429, a network blink) only skips this
	// showing: the next one carries the text further.
	Draft(ctx context.Context, r PipelineRun, text string) error
}

// ErrDraftsRefused is the Drafts error that turns a run to a placeholder.
var ErrDraftsRefused = errors.New("message drafts refused")

// stream shows one answer as it grows: a draft at most every
// Config.StreamEvery, or, where drafts are refused, a placeholder message
// queued in the outbox and then edited at the same pace. What is shown is
// cosmetic (the final answer is queued with the COMPLETED step either
// way), so a failure to show only skips a showing; a stream never holds up
// the model: show only records the latest text, and one goroutine sends.
type stream struct {
	s *Service
	r PipelineRun

	mu     sync.Mutex
	latest string
	wake   chan struct{}
	stop   chan struct{}
	done   chan struct{}
	ended  sync.Once
	// cancelDraft ends a draft call in flight when the answer is done: a
	// slow Telegram must not hold up the answer's commit. The placeholder's
	// statements are not cut short, so whether it exists is always known.
	draftCtx    context.Context
	cancelDraft context.CancelFunc

	// Owned by the sending goroutine until done is closed.
	drafts      bool // still trying drafts
	placeholder bool // a placeholder message is queued: later showings edit it
}

// startStream begins showing r's answer; nil when streaming is off.
func (s *Service) startStream(ctx context.Context, r PipelineRun) *stream {
	if s.cfg.StreamEvery <= 0 {
		return nil
	}
	st := &stream{s: s, r: r, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		drafts: s.deps.Drafts != nil && !r.Placeholder, placeholder: r.Placeholder}
	st.draftCtx, st.cancelDraft = context.WithCancel(ctx)
	go st.run(ctx)
	return st
}

// show records text as the answer so far; it never blocks.
func (st *stream) show(text string) {
	st.mu.Lock()
	st.latest = text
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// end stops the showing and reports whether the answer has a placeholder
// message, which the final answer then replaces (Change.Placeholder). It
// may be called again: the responder defers it for a call that panics.
func (st *stream) end() bool {
	if st == nil {
		return false
	}
	st.ended.Do(func() {
		st.cancelDraft()
		close(st.stop)
	})
	<-st.done
	return st.placeholder
}

// run sends the latest text whenever there is new text and StreamEvery has
// passed since the last showing, or since the start: an answer the model
// writes faster than that is never streamed, only sent.
func (st *stream) run(ctx context.Context) {
	defer close(st.done)
	clock := st.s.deps.Clock
	next := clock.Now().Add(st.every())
	shown := ""
	for {
		select {
		case <-st.stop:
			return
		case <-ctx.Done():
			return
		case <-st.wake:
		}
		if d := next.Sub(clock.Now()); d > 0 {
			t := clock.NewTimer(d)
			select {
			case <-st.stop:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.Chan():
			}
		}
		st.mu.Lock()
		text := st.latest
		st.mu.Unlock()
		if text == shown {
			continue
		}
		var sent bool
		// A showing is cosmetic: one that panics (the renderer on a
		// partial answer) is skipped as one that failed, and the stream,
		// on a goroutine of its own, does not take the process down.
		_ = st.s.m.panics.Contain(st.s.log, "memory_stream", st.r.ID, func() { sent = st.send(ctx, text) })
		if sent {
			shown = text
		}
		next = clock.Now().Add(st.every())
	}
}

// every is the pace of the showings: StreamEvery for drafts, and no faster
// than Telegram paces one private chat (about a message a second) for a
// placeholder's edits, which are messages.
func (st *stream) every() time.Duration {
	if st.drafts {
		return st.s.cfg.StreamEvery
	}
	return max(st.s.cfg.StreamEvery, placeholderEvery)
}

// send shows text once: a draft, or the placeholder (queued with the run's
// mark that it has one) or its edit. False when nothing was shown.
func (st *stream) send(ctx context.Context, text string) bool {
	s, r := st.s, st.r
	if st.drafts {
		err := s.deps.Drafts.Draft(st.draftCtx, r, text)
		switch {
		case err == nil:
			s.m.streamed.WithLabelValues("draft").Inc()
			return true
		case !errors.Is(err, ErrDraftsRefused):
			s.log.Debug("draft not shown", "run", r.ID, "err", err)
			return false
		}
		s.log.Info("drafts refused; the answer streams into a placeholder message", "run", r.ID, "err", err)
		st.drafts = false
	}
	msgs := s.deps.Notifier.Partial(r, text, !st.placeholder)
	if !st.placeholder {
		ok, err := s.deps.Runs.QueuePlaceholder(ctx, r.ID, msgs)
		if err != nil || !ok {
			if err != nil && ctx.Err() == nil {
				s.log.Warn("queue the answer's placeholder", "run", r.ID, "err", err)
			}
			return false
		}
		st.placeholder = true
	} else if err := s.deps.Outbox.EnqueueAsync(ctx, msgs); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("queue the placeholder's edit", "run", r.ID, "err", err)
		}
		return false
	}
	s.m.streamed.WithLabelValues("placeholder").Inc()
	return true
}

// placeholderEvery is Telegram's pace for one private chat.
const placeholderEvery = time.Second
