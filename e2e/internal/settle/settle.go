// Package settle is how the e2e fakes wait: until a condition on their
// state holds, re-evaluated on each change of that state rather than on a
// poll, bounded by a timeout and by the fake's closing. Hub is that
// plumbing whole, as each fake (Telegram's, GitHub's) holds it.
package settle

import (
	"sync"
	"testing"
	"time"
)

// Until reports whether cond held within timeout. changes is the channel
// the fake closes on its next change; it is taken before cond runs, so a
// change while cond is evaluated still wakes the loop. closing ends the
// wait early (the fake shuts down) with cond's last word.
func Until(timeout time.Duration, changes func() <-chan struct{}, closing <-chan struct{}, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		wake := changes()
		if cond() {
			return true
		}
		select {
		case <-wake:
		case <-deadline.C:
			return cond()
		case <-closing:
			return cond()
		}
	}
}

// Signal is a fake's "its state changed": the fake calls Notify under its
// own lock on every change, and a waiter takes C (under that lock) before
// looking at the state. The zero Signal is ready to use.
type Signal struct{ ch chan struct{} }

// Notify wakes every waiter of the channel C last gave.
func (s *Signal) Notify() {
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
}

// C is the channel the next Notify closes.
func (s *Signal) C() <-chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Hub is a fake's waiting side: its change Signal, guarded by the fake's
// own lock, and its closing, which ends every wait.
type Hub struct {
	mu      sync.Locker
	changed Signal
	closing chan struct{}
	once    sync.Once
}

// NewHub is the hub of a fake whose state mu guards.
func NewHub(mu sync.Locker) *Hub {
	return &Hub{mu: mu, closing: make(chan struct{})}
}

// NotifyLocked wakes every waiter: the fake's state changed. The caller
// holds the fake's lock.
func (h *Hub) NotifyLocked() { h.changed.Notify() }

// ChangedLocked is the channel the next NotifyLocked closes, for a loop of
// the fake's own that waits on more than a condition. The caller holds
// the fake's lock.
func (h *Hub) ChangedLocked() <-chan struct{} { return h.changed.C() }

// Closing is closed when the fake closes.
func (h *Hub) Closing() <-chan struct{} { return h.closing }

// Close closes Closing, releasing every wait, then runs stop (the fake's
// server shutting down), the first time only.
func (h *Hub) Close(stop func()) {
	h.once.Do(func() {
		close(h.closing)
		stop()
	})
}

// Until reports whether cond held within timeout (see Until), woken by
// each change of the fake's state.
func (h *Hub) Until(timeout time.Duration, cond func() bool) bool {
	return Until(timeout, h.changes, h.closing, cond)
}

func (h *Hub) changes() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed.C()
}

// Must fails t unless cond holds within timeout; the failure shows the
// fake's traffic, titled: fake is the fake's name, title what log lists.
func (h *Hub) Must(t testing.TB, timeout time.Duration, cond func() bool, fake, title string, log func() string) {
	t.Helper()
	if !h.Until(timeout, cond) {
		t.Fatalf("%s: condition not met within %s\n%s:\n%s", fake, timeout, title, log())
	}
}
