package ghfake

import (
	"net/http"
	"strings"

	"switchboard/internal/testkit"
)

// Fault is a failure in front of the API for the next requests: the
// gateway answers instead of GitHub, so the request has no effect and
// counts against no limit.
type Fault struct {
	// Status is the answer: 500 carries GitHub's JSON "Server Error",
	// 502-504 an HTML page a client cannot parse. Ignored with Hang.
	Status int
	// Hang holds the request, answering nothing, until the client gives
	// up (its deadline) or the server closes.
	Hang bool
	// LoseAnswer lets the API do what the request asks (an issue is
	// created) and then loses the answer on its way back: the request
	// hangs as with Hang. A client that crashed or gave up then cannot
	// know its request took effect.
	LoseAnswer bool
	// Method and Path restrict the fault ("" matches any); Path is a
	// prefix of the request's path, e.g. "/search/issues".
	Method string
	Path   string
}

// InjectFault queues f for the next n requests it matches; queued faults
// are used in order.
func (s *Server) InjectFault(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Add(n, f)
}

// LoseNextAnswer makes the next n requests of method to paths under path
// take effect and their answers get lost (see Fault.LoseAnswer).
func (s *Server) LoseNextAnswer(n int, method, path string) {
	s.InjectFault(n, Fault{LoseAnswer: true, Method: method, Path: path})
}

// FailNext makes the next n requests answer status (see Fault).
func (s *Server) FailNext(n, status int) { s.InjectFault(n, Fault{Status: status}) }

// HangNext makes the next n requests hang until the client gives up.
func (s *Server) HangNext(n int) { s.InjectFault(n, Fault{Hang: true}) }

// PendingFaults is the number of fault answers still queued.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Pending()
}

func (s *Server) takeFault(r *http.Request) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Take(func(f Fault) bool {
		return (f.Method == "" || strings.EqualFold(f.Method, r.Method)) && strings.HasPrefix(r.URL.Path, f.Path)
	})
}

// serveFault answers a fault and returns the status logged.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, f Fault) int {
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-s.hub.Closing():
		}
		return StatusClientClosedRequest
	}
	if f.Status >= 502 && f.Status <= 504 {
		return testkit.WriteBody(w, f.Status, "text/html; charset=utf-8", gatewayPage(f.Status))
	}
	msg := http.StatusText(f.Status)
	if f.Status == http.StatusInternalServerError {
		msg = MsgServerError
	}
	return writeAnswer(w, errAnswer(newError(f.Status, msg, docRest)))
}
