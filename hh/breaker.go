package hh

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"switchboard/domain/vacancy"
)

// HH's error types that refuse us as a client, not a request.
const (
	typeCaptcha   = "captcha_required"
	typeForbidden = "forbidden"
)

// typeBadArgument is HH refusing a request's parameter (400): the request
// is wrong, HH serves us; it never opens the breaker.
const typeBadArgument = "bad_argument"

// Breaker defaults: the first hold after a block, and the longest one
// failed probes grow it to.
const (
	DefaultBreakerOpenFor = time.Minute
	DefaultBreakerMaxOpen = 30 * time.Minute
)

// Block is HH blocking us as a client: a 403 captcha_required or
// forbidden (or a 403 without HH's envelope, a firewall's page), or a 429.
// Every request would meet it, so it opens the breaker; it matches
// vacancy.ErrHHBlocked.
type Block struct {
	Status int
	// Type is HH's errors[].type, or too_many_requests for a 429 and
	// forbidden for a 403 that was not HH's JSON.
	Type string
	// CaptchaURL is where a human solves the captcha, when HH gave one.
	CaptchaURL string
	// Detail is the rest of HH's errors[], for the log.
	Detail string
	// RetryAfter is a 429's Retry-After; the breaker holds at least that.
	RetryAfter time.Duration
	// Since is when the breaker opened for this block (zero on the
	// error a request returns).
	Since time.Time
	// Cause is HH's own error where there is one (a *TokenError when HH
	// refuses the application's credentials).
	Cause error
}

// Unwrap gives Cause, so errors.As finds a *TokenError behind a Block.
func (r *Block) Unwrap() error { return r.Cause }

func (r *Block) Error() string { return "HH refuses our requests: " + r.Describe() }

// Describe says how HH blocks us, e.g. `403 captcha_required (captcha:
// https://hh.ru/account/captcha?state=…)`: what /status and the admin chat
// show.
func (r *Block) Describe() string {
	if r.CaptchaURL != "" {
		return r.Short() + " (captcha: " + r.CaptchaURL + ")"
	}
	return r.Short()
}

// Short is Describe without the captcha's URL, for a message that shows
// the URL on its own line.
func (r *Block) Short() string {
	if r.Status == 0 {
		return r.Type + r.Detail
	}
	return fmt.Sprintf("%d %s%s", r.Status, r.Type, r.Detail)
}

// Is makes every Block match vacancy.ErrHHBlocked, and ErrUnavailable
// too: to a caller that only knows the older error, HH is unavailable.
func (r *Block) Is(target error) bool {
	return target == vacancy.ErrHHBlocked || target == vacancy.ErrUnavailable
}

// credentialsBlock is HH refusing the application's client id or secret
// (invalid_client, say): every request would go without its token, so it
// blocks us like a captcha, told to the admin chat the same way.
func credentialsBlock(te *TokenError) *Block {
	r := &Block{Status: te.Status, Type: "application token refused", Cause: te}
	if te.Code != "" {
		r.Type += ": " + te.Code
	}
	return r
}

// blockOf reads a 403's errors[]: captcha_required or forbidden refuse
// us; so does a 403 that is not HH's JSON (a firewall in front of it).
// Other 403s (bad_authorization, say) are errors of the request.
func blockOf(items []struct{ Type, Value string }) *Block {
	if len(items) == 0 {
		return &Block{Status: 403, Type: typeForbidden}
	}
	for _, it := range items {
		switch it.Type {
		case typeCaptcha:
			r := &Block{Status: 403, Type: typeCaptcha}
			if it.Value != typeCaptcha {
				r.CaptchaURL = it.Value // errorItems carries captcha_url here
			}
			return r
		case typeForbidden:
			return &Block{Status: 403, Type: typeForbidden, Detail: describeErrors(items)}
		}
	}
	return nil
}

// breaker holds requests back while HH blocks us. gobreaker decides the
// states (one block opens it, one probe at a time decides in half-open);
// the hold decides how long it stays open, which gobreaker's fixed Timeout
// cannot: each failed probe doubles it, up to maxOpen, and a 429 that says
// Retry-After is held exactly that long (HH said when). gobreaker's own
// Timeout is a millisecond, so the probe goes out as soon as the hold
// ends.
type breaker struct {
	cb      *gobreaker.CircuitBreaker[[]byte]
	openFor time.Duration
	maxOpen time.Duration
	gauge   prometheus.Gauge

	mu        sync.Mutex
	opens     int       // consecutive openings without a success between
	holdUntil time.Time // no request before this
	last      *Block    // the block that opened it; nil while closed
	pending   *Block    // the block being reported to gobreaker

	answered atomic.Bool // a request was answered since the client was built
}

func newBreaker(openFor, maxOpen time.Duration, gauge prometheus.Gauge, log func(from, to gobreaker.State)) *breaker {
	if openFor <= 0 {
		openFor = DefaultBreakerOpenFor
	}
	maxOpen = max(maxOpen, openFor)
	b := &breaker{openFor: openFor, maxOpen: maxOpen, gauge: gauge}
	b.cb = gobreaker.NewCircuitBreaker[[]byte](gobreaker.Settings{
		Name:        "hh",
		MaxRequests: 1,
		Timeout:     time.Millisecond,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		// Only a block is a failure: a 5xx or a timeout is one request's
		// bad luck, which the match's own retry (SKIPPED, recovery) covers,
		// and a 404 is HH answering.
		IsSuccessful: func(err error) bool {
			return err == nil || !errors.Is(err, vacancy.ErrHHBlocked)
		},
		IsExcluded: func(err error) bool {
			return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		},
		// Runs under gobreaker's lock: record only.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.changed(to)
			log(from, to)
		},
	})
	gauge.Set(0)
	return b
}

// changed keeps hold and last in step with gobreaker's state.
func (b *breaker) changed(to gobreaker.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	switch to {
	case gobreaker.StateOpen:
		b.opens++
		hold := b.openFor << min(b.opens-1, 16)
		hold = min(hold, b.maxOpen)
		if r := b.pending; r != nil {
			if r.RetryAfter > 0 {
				hold = r.RetryAfter
			}
			if b.last == nil {
				cp := *r
				cp.Since = now
				b.last = &cp
			} else if r.CaptchaURL != "" {
				b.last.CaptchaURL = r.CaptchaURL
			}
		}
		b.holdUntil = now.Add(hold)
		b.gauge.Set(2)
	case gobreaker.StateHalfOpen:
		b.gauge.Set(1)
	case gobreaker.StateClosed:
		b.opens, b.last, b.holdUntil = 0, nil, time.Time{}
		b.gauge.Set(0)
	}
}

// do sends one request through the breaker: held back (a Block naming
// the one that opened it) while open or another probe is out.
func (b *breaker) do(send func() ([]byte, error)) ([]byte, error) {
	if err := b.held(); err != nil {
		return nil, err
	}
	body, err := b.cb.Execute(func() ([]byte, error) {
		body, err := send()
		// A 400 is HH reading our request and judging it: as much an
		// answer as a 200, whatever it says of the request.
		var ae *APIError
		if err == nil || errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
			b.answered.Store(true)
		}
		var r *Block
		if errors.As(err, &r) {
			b.mu.Lock()
			b.pending = r
			b.mu.Unlock()
		}
		return body, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, b.heldError()
	}
	return body, err
}

// held is the error for a request sent before the hold ends; nil after.
func (b *breaker) held() error {
	b.mu.Lock()
	until := b.holdUntil
	b.mu.Unlock()
	if time.Now().Before(until) {
		return b.heldError()
	}
	return nil
}

func (b *breaker) heldError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := Block{Status: 0, Type: "breaker_open"}
	if b.last != nil {
		r = *b.last
	}
	return fmt.Errorf("not sent, HH refused us (breaker open until %s): %w", b.holdUntil.UTC().Format(time.TimeOnly), &r)
}

// holding reports whether a request sent now would be held back: before
// the hold ends, or while the one probe is out.
func (b *breaker) holding() bool {
	if b.held() != nil {
		return true
	}
	return b.cb.State() == gobreaker.StateHalfOpen && b.cb.Counts().Requests > 0
}

// block is the block in force (with Since), or nil while HH answers.
func (b *breaker) block() *Block {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.last == nil {
		return nil
	}
	cp := *b.last
	return &cp
}

// Answered reports whether HH has answered a request since the client
// was built: what proves, to a replica that did not see a block begin,
// that it is over.
func (c *Client) Answered() bool { return c.br.answered.Load() }

// Block is the block in force while the breaker is open or probing
// (nil while HH answers us): what the admin chat and /status are told.
func (c *Client) Block() *Block { return c.br.block() }

// Blocked implements vacancy.Source: whether HH blocks us, and why.
func (c *Client) Blocked() (bool, string) {
	r := c.br.block()
	if r == nil {
		return false, ""
	}
	return true, r.Describe()
}

// Holding implements vacancy.Source: whether a request now would not be
// sent. Past the hold it is false until a probe goes out, so the work that
// needs HH makes that probe.
func (c *Client) Holding() bool { return c.br.holding() }

// call is get through the breaker.
func (c *Client) call(ctx context.Context, u string, notFoundArchived bool) ([]byte, error) {
	return c.br.do(func() ([]byte, error) { return c.get(ctx, u, notFoundArchived) })
}
