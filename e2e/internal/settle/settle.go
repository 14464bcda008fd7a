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
