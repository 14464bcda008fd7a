// Package settle is how the e2e fakes wait: until a condition on their
// state holds, re-evaluated on each change of that state rather than on a
// poll, bounded by a timeout and by the fake's closing.
package settle

import "time"

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
