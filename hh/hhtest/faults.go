package hhtest

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Endpoint classifies requests for faults, latency and the request log.
type Endpoint int

const (
	// AnyEndpoint, in FailNext/SetLatency, means search and detail alike.
	AnyEndpoint Endpoint = iota
	// SearchEndpoint is GET /vacancies.
	SearchEndpoint
	// DetailEndpoint is GET /vacancies/{id}.
	DetailEndpoint
	// OtherEndpoint is any other path (answered 404); it only appears in
	// the request log.
	OtherEndpoint
	numEndpoints
)

func (e Endpoint) String() string {
	switch e {
	case AnyEndpoint:
		return "any"
	case SearchEndpoint:
		return "search"
	case DetailEndpoint:
		return "detail"
	case OtherEndpoint:
		return "other"
	}
	return "Endpoint(" + itoa64(int64(e)) + ")"
}

func (e Endpoint) covers(kind Endpoint) bool {
	return e == kind || e == AnyEndpoint && (kind == SearchEndpoint || kind == DetailEndpoint)
}

// Fault makes the next Count requests to On answer Status with Body instead
// of being served. Faults apply after latency and before user-agent checks,
// like a proxy failing in front of the API.
type Fault struct {
	Count  int
	Status int
	On     Endpoint
	// ContentType and Body default from Status: 503 → HH's JSON
	// service_unavailable, 403 → captcha_required, 404 → not_found, other
	// 5xx → an nginx HTML page (HH warns 5xx bodies may not be JSON), other
	// statuses → JSON {"errors":[{"type": <status text in snake_case>}]}.
	ContentType string
	Body        []byte
	// RetryAfter, when set, is sent as the Retry-After header (seconds
	// or an HTTP date), as HH does with a 429.
	RetryAfter string
	// Query, when set, narrows the fault to requests whose query has each
	// of its values: HH refusing one search's parameters refuses every
	// request of that search, however many ask at once, and no other.
	Query url.Values
}

// covers says whether f answers a request of kind with query q.
func (f Fault) covers(kind Endpoint, q url.Values) bool {
	if !f.On.covers(kind) {
		return false
	}
	for k, want := range f.Query {
		for _, v := range want {
			if !slices.Contains(q[k], v) {
				return false
			}
		}
	}
	return true
}

// InjectFault queues f; queued faults are consumed in order, each by the
// requests it covers. It panics on a Status net/http cannot send, so that
// the mistake shows in the test that made it rather than in a handler.
func (s *Server) InjectFault(f Fault) {
	if f.Status < 100 || f.Status > 999 {
		panic("hhtest: invalid fault status " + itoa64(int64(f.Status)))
	}
	if f.Count <= 0 {
		return
	}
	if f.Body == nil {
		f.ContentType, f.Body = defaultFaultBody(f.Status)
	} else if f.ContentType == "" {
		f.ContentType = jsonType
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Add(f.Count, f)
}

// FailNext makes the next n requests to on answer status with the default
// body for it (see Fault).
func (s *Server) FailNext(n, status int, on Endpoint) {
	s.InjectFault(Fault{Count: n, Status: status, On: on})
}

func defaultFaultBody(status int) (string, []byte) {
	switch {
	case status == http.StatusServiceUnavailable:
		return jsonType, serviceUnavailableBody()
	case status == http.StatusForbidden:
		return jsonType, captchaBody()
	case status == http.StatusNotFound:
		return jsonType, notFoundBody()
	case status >= 500:
		return "text/html", gatewayBody(status, http.StatusText(status))
	}
	typ := strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_")
	return jsonType, mustJSON(errorBody{Errors: []errorItem{{Type: typ}}})
}

// takeFault consumes one count of the first queued fault covering a
// request of kind with query q.
func (s *Server) takeFault(kind Endpoint, q url.Values) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Take(func(f Fault) bool { return f.covers(kind, q) })
}

// PendingFaults is the number of fault answers still queued.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Pending()
}

// SetLatency delays requests to on by d (zero removes it). A request gets
// the larger of the AnyEndpoint latency and its own endpoint's. The delay
// ends early when the client cancels (logged as StatusClientClosedRequest)
// or the server closes, so no handler outlives its client.
func (s *Server) SetLatency(d time.Duration, on Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency[on] = d
}

func (s *Server) latencyFor(kind Endpoint) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return max(s.latency[AnyEndpoint], s.latency[kind])
}

// DetailNotFound makes GET /vacancies/{id} answer 404 for the ids while they
// stay in search results: the race where a vacancy is removed between a
// search and its detail fetch.
func (s *Server) DetailNotFound(ids ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		s.notFound[id] = true
	}
}

// ClearFaults drops queued faults, latencies and DetailNotFound ids.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.Clear()
	s.latency = [numEndpoints]time.Duration{}
	s.notFound = map[string]bool{}
}
