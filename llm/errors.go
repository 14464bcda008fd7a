package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"

	"switchboard/domain"
	"switchboard/internal/clip"
)

// Sentinel errors; test with errors.Is. Each but ErrEmpty is also one of
// the domain's LLM error classes (see classed), which is what the
// workflows test for.
var (
	// ErrBreakerOpen: the circuit breaker rejected the call without
	// contacting the provider. It is a domain.ErrLLMDown.
	ErrBreakerOpen error = &classed{"llm: circuit breaker open", domain.ErrLLMDown}
	// ErrTimeout: the call exceeded its own timeout (Config.Timeout or
	// Request.Timeout). Errors wrapping it also match
	// context.DeadlineExceeded. It is a domain.ErrLLMTimeout.
	ErrTimeout error = &classed{"llm: call timed out", domain.ErrLLMTimeout}
	// ErrRateLimited: the provider answered 429; see RateLimitError. It is
	// a domain.ErrLLMBusy.
	ErrRateLimited error = &classed{"llm: rate limited", domain.ErrLLMBusy}
	// ErrInvalidJSON: JSON mode produced something that does not decode
	// into the target, or the target's Validate rejected it. It is a
	// domain.ErrLLMInvalidAnswer.
	ErrInvalidJSON error = &classed{"llm: invalid JSON from model", domain.ErrLLMInvalidAnswer}
	// ErrEmpty: the provider answered with no content. No class: whether
	// nothing is an invalid answer is the caller's to say (a letter's is).
	ErrEmpty = errors.New("llm: empty response")
)

// classed is a sentinel of this package that is also one of the domain's
// LLM error classes: errors.Is(err, domain.ErrLLMDown) holds wherever
// errors.Is(err, ErrBreakerOpen) does. The client's errors are thereby
// the domain's from the start, so the ports pass them on as they are.
type classed struct {
	msg   string
	class error
}

func (e *classed) Error() string { return e.msg }

// Is makes the sentinel match its class.
func (e *classed) Is(target error) bool { return target == e.class }

// RateLimitError is returned for HTTP 429. It matches ErrRateLimited.
type RateLimitError struct {
	// RetryAfter is the provider's Retry-After, zero if it sent none.
	RetryAfter time.Duration
	msg        string
}

func (e *RateLimitError) Error() string {
	s := ErrRateLimited.Error()
	if e.RetryAfter > 0 {
		s += " (retry after " + e.RetryAfter.String() + ")"
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	return s
}

// Is makes errors.Is(err, ErrRateLimited) hold, and so its class's.
func (e *RateLimitError) Is(target error) bool {
	return target == ErrRateLimited || errors.Is(ErrRateLimited, target)
}

// Outcomes, as used in the llm_calls_total "outcome" label.
const (
	outcomeOK          = "ok"
	outcomeEmpty       = "empty"
	outcomeInvalidJSON = "invalid_json"
	outcomeTimeout     = "timeout"
	outcomeRateLimited = "rate_limited"
	outcomeServerError = "server_error"
	outcomeClientError = "client_error"
	outcomeError       = "error"
	outcomeCanceled    = "canceled"
	outcomeBreakerOpen = "breaker_open"
	outcomeRefused     = "refused"
)

// callError carries a classified failure through the breaker (which reads
// tripsBreaker) to the metrics (which read outcome). It is transparent to
// errors.Is/As.
type callError struct {
	outcome      string
	tripsBreaker bool
	err          error
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

func outcomeOf(err error) string {
	if err == nil {
		return outcomeOK
	}
	var ce *callError
	if errors.As(err, &ce) {
		return ce.outcome
	}
	return outcomeError
}

// errCallTimeout is the cause attached to our own per-call deadline, which
// is how a timeout of ours is told apart from the caller's context ending.
var errCallTimeout = errors.New("llm per-call timeout")

// classify turns whatever langchaingo returned into a callError. The two
// clients report HTTP failures very differently (ollama: only the error
// text; openai: "API returned unexpected status code: N", and it rewrites
// context errors), so the decision rests on the call context and on the
// status the observing transport saw, not on error strings.
//
// A 401, 403 or 404 becomes a *RefusedError naming the fix; it counts
// against the breaker (and opens it at once, see Client.noteOutcome),
// because until someone acts every call would be refused the same way.
func classify(err error, callCtx context.Context, obs *observation, cl call, provider string) error {
	timeout := cl.timeout
	if err == nil {
		return nil
	}
	var ce *callError
	if errors.As(err, &ce) {
		return err
	}
	if callCtx.Err() != nil {
		if context.Cause(callCtx) == errCallTimeout {
			return &callError{outcomeTimeout, true,
				fmt.Errorf("%w after %s: %w", ErrTimeout, timeout, context.DeadlineExceeded)}
		}
		// The caller's context ended (cancelled, or its own deadline): not
		// the backend's fault.
		return &callError{outcomeCanceled, false, fmt.Errorf("%w (%v)", context.Cause(callCtx), err)}
	}
	if isEmptyResponse(err) {
		return &callError{outcomeEmpty, true, fmt.Errorf("%w: %v", ErrEmpty, err)}
	}
	status, retryAfter := obs.get()
	switch {
	case errors.Is(err, errFlagged):
		// The request was at fault, like any other 4xx: the key and the
		// model are fine for every other input.
		return &callError{outcomeClientError, false, err}
	case quotaSpent(status, err):
		return &callError{outcomeRefused, true, refusalFor(provider, status, cl.model, err.Error())}
	case status == http.StatusTooManyRequests:
		return &callError{outcomeRateLimited, true, &RateLimitError{RetryAfter: parseRetryAfter(retryAfter), msg: err.Error()}}
	case status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusNotFound:
		return &callError{outcomeRefused, true, refusalFor(provider, status, cl.model, err.Error())}
	case status >= 500:
		return &callError{outcomeServerError, true, fmt.Errorf("provider HTTP %d: %w", status, err)}
	case status >= 400:
		return &callError{outcomeClientError, false, fmt.Errorf("provider HTTP %d: %w", status, err)}
	}
	// Connection refused/reset, truncated or undecodable bodies.
	return &callError{outcomeError, true, err}
}

// errQuotaSpent marks OpenAI's 429 insufficient_quota; errFlagged an
// input a provider's moderation refused (OpenRouter's 403 with reasons).
var (
	errQuotaSpent = errors.New("the account's quota is spent")
	errFlagged    = errors.New("the provider's moderation flagged the input")
)

// quotaSpent reports whether a call was refused for the account's quota
// or credit: OpenRouter's 402, or a 429 that says insufficient_quota
// (marked by our chat client; langchaingo's, which embeds, keeps only the
// message). No wait brings it back, unlike a rate limit: only billing.
func quotaSpent(status int, err error) bool {
	if status == http.StatusPaymentRequired {
		return true
	}
	if status != http.StatusTooManyRequests {
		return false
	}
	s := err.Error()
	return errors.Is(err, errQuotaSpent) || strings.Contains(s, "insufficient_quota") || strings.Contains(s, "exceeded your current quota")
}

// isEmptyResponse recognises "the provider answered with nothing" in its
// various langchaingo spellings. The openai client's internal
// openaiclient.ErrEmptyResponse (no choices, no embedding data) cannot be
// matched with errors.Is from outside, hence the text comparison.
func isEmptyResponse(err error) bool {
	return errors.Is(err, ErrEmpty) || errors.Is(err, ollama.ErrEmptyResponse) ||
		errors.Is(err, openai.ErrEmptyResponse) || strings.HasSuffix(err.Error(), "empty response")
}

func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// observation records the last HTTP response status of one call (Ollama
// embeddings make one request per text).
type observation struct {
	mu         sync.Mutex
	status     int
	retryAfter string
}

func (o *observation) set(status int, retryAfter string) {
	o.mu.Lock()
	o.status, o.retryAfter = status, retryAfter
	o.mu.Unlock()
}

func (o *observation) get() (int, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.status, o.retryAfter
}

type observationKey struct{}

// observingTransport lets classify see HTTP statuses that langchaingo's
// clients flatten into error strings.
type observingTransport struct{ base http.RoundTripper }

func (t observingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if o, ok := r.Context().Value(observationKey{}).(*observation); ok && resp != nil {
		o.set(resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	return resp, err
}

// serverSaid is what a provider's error says, as errors carry it: clipped
// to n, and with what PostgreSQL cannot hold (a NUL, bytes that are not
// UTF-8) made U+FFFD, since the error text is stored (a run's failure, an
// admin notice) and a write refused for it would be retried for ever.
func serverSaid(s string, n int) string { return domain.CleanText(clip.Clip(s, n)) }
