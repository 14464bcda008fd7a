package ghfake

import (
	"net/http"
	"strconv"
	"time"
)

// Limits are the rate limits the fake enforces per user (all of a user's
// tokens share them, as on GitHub).
type Limits struct {
	// Core is the primary limit of the REST API per hour (5000 for a
	// personal access token).
	Core int
	// Search is the search limit per minute (30 authenticated).
	Search int
	// ContentPerMinute and ContentPerHour bound content-creating requests
	// (new issues and labels): GitHub's secondary limits of 80 a minute
	// and 500 an hour. Zero lifts that bound.
	ContentPerMinute int
	ContentPerHour   int
}

// DefaultLimits are GitHub's documented limits for a personal access token.
func DefaultLimits() Limits {
	return Limits{Core: 5000, Search: 30, ContentPerMinute: 80, ContentPerHour: 500}
}

// anonymousCore is the unauthenticated primary limit GitHub reports on a
// refused credential's answer.
const anonymousCore = 60

// window is one primary-limit window: it opens at the first counted
// request and resets a period later.
type window struct {
	limit int
	used  int
	reset time.Time
}

// windowLocked returns the user's window of resource ("" is none: a
// window with no limit, never refused), opening a new one if the last has
// reset.
func (s *Server) windowLocked(a *account, resource string, now time.Time) *window {
	var w *window
	var limit int
	var period time.Duration
	switch resource {
	case "core":
		w, limit, period = &a.core, s.limits.Core, s.period(time.Hour)
	case "search":
		w, limit, period = &a.search, s.limits.Search, s.period(time.Minute)
	default:
		return &window{limit: 1 << 30}
	}
	if !now.Before(w.reset) {
		// X-RateLimit-Reset speaks whole epoch seconds; a window that
		// ended inside its second would call a client that trusts the
		// header early.
		*w = window{reset: ceilSecond(now.Add(period))}
	}
	w.limit = limit
	return w
}

func (s *Server) rateHeadersLocked(w http.ResponseWriter, win *window, resource string) {
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(win.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(win.limit-win.used, 0)))
	h.Set("X-RateLimit-Used", strconv.Itoa(win.used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(win.reset.Unix(), 10))
	h.Set("X-RateLimit-Resource", resource)
}

// anonymousRateHeaders are the figures GitHub sends with a 401: those of
// an unauthenticated client. The fake does not count them down.
func (s *Server) anonymousRateHeaders(w http.ResponseWriter) {
	s.rateHeadersLocked(w, &window{limit: anonymousCore, reset: s.now().Add(s.period(time.Hour))}, "core")
}

// TripSecondaryLimit makes every mutating request (POST, PATCH, PUT,
// DELETE) answer the secondary-limit refusal for d from now, with
// Retry-After counting down to its end. Reads are served meanwhile, but a
// request of any kind from a user before the Retry-After they were given
// has passed is recorded as early.
func (s *Server) TripSecondaryLimit(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secondaryTill = s.now().Add(d)
}

// SetLimits changes the limits at run time; windows already open keep
// their reset time.
func (s *Server) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = l
}

// secondaryLocked decides a mutation against the secondary limits: the
// tripped window first, then, for content creation, the content limits.
// It returns how long the user must wait when refused.
func (s *Server) secondaryLocked(a *account, creates bool, now time.Time) (time.Duration, bool) {
	if now.Before(s.secondaryTill) {
		return s.secondaryTill.Sub(now), false
	}
	if !creates {
		return 0, true
	}
	minute, hour := s.period(time.Minute), s.period(time.Hour)
	// Forget creations older than the longest window.
	keep := a.created[:0]
	for _, t := range a.created {
		if now.Sub(t) < hour {
			keep = append(keep, t)
		}
	}
	a.created = keep
	if wait, ok := overLimit(a.created, now, minute, s.limits.ContentPerMinute); !ok {
		return wait, false
	}
	if wait, ok := overLimit(a.created, now, hour, s.limits.ContentPerHour); !ok {
		return wait, false
	}
	return 0, true
}

// ceilSecond is t rounded up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if w := t.Truncate(time.Second); w.Before(t) {
		return w.Add(time.Second)
	}
	return t
}

// period is a limit's period d as the fake runs it: d shortened by the
// time scale (WithTimeScale).
func (s *Server) period(d time.Duration) time.Duration {
	if s.timeScale == 1 {
		return d
	}
	return time.Duration(float64(d) / s.timeScale)
}

// overLimit reports whether one more creation fits limit within period;
// if not, how long until the oldest one counted leaves the period.
func overLimit(times []time.Time, now time.Time, period time.Duration, limit int) (time.Duration, bool) {
	if limit <= 0 {
		return 0, true
	}
	var in []time.Time
	for _, t := range times {
		if now.Sub(t) < period {
			in = append(in, t)
		}
	}
	if len(in) < limit {
		return 0, true
	}
	return in[len(in)-limit].Add(period).Sub(now), false
}

// RateLimitStatus is GET /rate_limit's answer.
type RateLimitStatus struct {
	Resources map[string]RateLimitResource `json:"resources"`
	Rate      RateLimitResource            `json:"rate"`
}

// RateLimitResource is one resource's figures in RateLimitStatus.
type RateLimitResource struct {
	Limit     int   `json:"limit"`
	Used      int   `json:"used"`
	Remaining int   `json:"remaining"`
	Reset     int64 `json:"reset"`
}

// rateLimit answers GET /rate_limit, which counts against no primary
// limit.
func (s *Server) rateLimit(req request) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accountLocked(req.login)
	now := s.now()
	res := func(w *window) RateLimitResource {
		return RateLimitResource{Limit: w.limit, Used: w.used, Remaining: max(w.limit-w.used, 0), Reset: w.reset.Unix()}
	}
	core := res(s.windowLocked(a, "core", now))
	return answer{status: http.StatusOK, body: RateLimitStatus{
		Resources: map[string]RateLimitResource{"core": core, "search": res(s.windowLocked(a, "search", now))},
		Rate:      core,
	}}
}
