package ghfake

import (
	"testing"
	"time"
)

// WaitFor blocks until cond holds, re-evaluating it whenever the server's
// state changes (a request answered, a test hook), and fails the test if
// timeout passes first. cond should read only the server's state, since
// nothing else wakes the wait.
func (s *Server) WaitFor(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	s.hub.Must(t, timeout, cond, "ghfake", "requests", s.RequestLog)
}

// WaitRequests waits (up to the wait timeout) until n requests have been
// answered and returns them all.
func (s *Server) WaitRequests(t testing.TB, n int) []Request {
	t.Helper()
	s.WaitFor(t, s.waitTimeout, func() bool { return len(s.Requests()) >= n })
	return s.Requests()
}

// WaitIssue waits (up to the wait timeout) until an issue of the
// repository satisfies match, and returns it.
func (s *Server) WaitIssue(t testing.TB, repo string, match func(Issue) bool) Issue {
	t.Helper()
	var found Issue
	s.WaitFor(t, s.waitTimeout, func() bool {
		for _, is := range s.Issues(repo) {
			if match(is) {
				found = is
				return true
			}
		}
		return false
	})
	return found
}
