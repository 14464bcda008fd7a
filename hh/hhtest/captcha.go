package hhtest

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"sync"
	"time"
)

// CaptchaURL is where the fake's captcha answers send a human; HH's own
// points at hh.ru/account/captcha with a state of its own.
const CaptchaURL = "https://hh.ru/account/captcha?state="

// captcha is HH's answer to clients it distrusts: a 403 captcha_required
// until a human solves the captcha, or (anonymous clients) until they ask
// less often.
type captcha struct {
	mu sync.Mutex
	on bool
	// anonymous clients past limit requests within window are refused.
	limit  int
	window time.Duration
	recent []time.Time // anonymous requests within the window, oldest first
}

// SetCaptcha turns captcha mode on or off: while on, every search and
// detail request answers 403 captcha_required with a captcha_url, as HH
// answers a client it has flagged, authorized or not.
func (s *Server) SetCaptcha(on bool) {
	s.captcha.mu.Lock()
	defer s.captcha.mu.Unlock()
	s.captcha.on = on
}

// LimitAnonymous refuses, with 403 captcha_required, requests without an
// Authorization header past n within any window: HH's treatment of busy
// anonymous clients. n ≤ 0 removes the limit.
func (s *Server) LimitAnonymous(n int, window time.Duration) {
	s.captcha.mu.Lock()
	defer s.captcha.mu.Unlock()
	s.captcha.limit, s.captcha.window, s.captcha.recent = n, window, nil
}

// refuses reports whether the captcha answers r instead of the API.
func (c *captcha) refuses(r *http.Request, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on {
		return true
	}
	if c.limit <= 0 || r.Header.Get("Authorization") != "" {
		return false
	}
	keep := c.recent[:0]
	for _, t := range c.recent {
		if now.Sub(t) < c.window {
			keep = append(keep, t)
		}
	}
	c.recent = keep
	if len(c.recent) >= c.limit {
		return true
	}
	c.recent = append(c.recent, now)
	return false
}

// captchaBody is HH's captcha refusal: the item carries captcha_url (and
// a fallback), which a client shows a human who can solve it.
func captchaBody() []byte {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	state := hex.EncodeToString(b)
	type item struct {
		Type        string `json:"type"`
		Value       string `json:"value"`
		CaptchaURL  string `json:"captcha_url"`
		FallbackURL string `json:"fallback_url"`
	}
	return mustJSON(struct {
		Errors    []item `json:"errors"`
		RequestID string `json:"request_id"`
	}{
		Errors:    []item{{Type: "captcha_required", Value: "captcha_required", CaptchaURL: CaptchaURL + state, FallbackURL: CaptchaURL + state}},
		RequestID: state,
	})
}
