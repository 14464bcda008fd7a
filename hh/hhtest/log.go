package hhtest

import (
	"context"
	"net/url"
	"slices"
	"time"
)

// Request is one served request as the fake saw it.
type Request struct {
	Method      string
	Path        string
	Query       url.Values
	Endpoint    Endpoint
	VacancyID   string    // for DetailEndpoint
	UserAgent   string    // User-Agent header as received ("" if absent)
	HHUserAgent string    // HH-User-Agent header as received
	Status      int       // StatusClientClosedRequest if the client went away
	At          time.Time // when it reached the server

	// Authorization is the header as received ("Bearer …"; "" if absent).
	Authorization string
}

// arrive counts a request as soon as it reaches the server, so counters
// include requests that later fail, are faulted or get cancelled: they
// measure the client's attempts.
func (s *Server) arrive(kind Endpoint, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case SearchEndpoint:
		s.searchCalls++
	case DetailEndpoint:
		s.detailCalls[id]++
	}
}

// record appends to the log when a request completes and wakes WaitRequests.
func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, r)
	close(s.logChanged)
	s.logChanged = make(chan struct{})
}

// Requests returns the completed requests in completion order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// WaitRequests blocks until at least n requests have completed since the
// last ResetLog, then returns the log. It lets tests wait for a background
// client without sleeping.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		if len(s.log) >= n {
			out := slices.Clone(s.log)
			s.mu.Unlock()
			return out, nil
		}
		ch := s.logChanged
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// SearchCalls counts GET /vacancies requests received.
func (s *Server) SearchCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.searchCalls
}

// DetailCalls counts GET /vacancies/{id} requests received for id.
func (s *Server) DetailCalls(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.detailCalls[id]
}

// DetailCallsTotal counts GET /vacancies/{id} requests received for any id.
func (s *Server) DetailCallsTotal() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.detailCalls {
		n += c
	}
	return n
}

// ResetLog clears the request log and the counters (not the faults).
func (s *Server) ResetLog() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
	s.searchCalls = 0
	s.detailCalls = map[string]int{}
}
