package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Matcher reports whether a rule applies to a request. Matchers run on the
// request's handler goroutine before it is recorded; they must not modify
// the request.
type Matcher func(r *Request) bool

// SystemContains matches when the system prompt contains sub, ignoring case.
func SystemContains(sub string) Matcher {
	sub = strings.ToLower(sub)
	return func(r *Request) bool { return strings.Contains(r.systemLower(), sub) }
}

// PromptContains matches when the last user message contains sub, ignoring
// case. For embedding requests the "prompt" is the inputs joined by newlines.
func PromptContains(sub string) Matcher {
	sub = strings.ToLower(sub)
	return func(r *Request) bool { return strings.Contains(r.promptLower(), sub) }
}

// PromptHasWords matches when every one of words occurs as a whole word in
// the last user message, ignoring case and punctuation. Unlike
// PromptContains, "go" does not match "going".
func PromptHasWords(words ...string) Matcher {
	want := make([]string, 0, len(words))
	for _, w := range words {
		forEachWord(strings.ToLower(w), func(t string) { want = append(want, t) })
	}
	return func(r *Request) bool {
		have := r.promptWords()
		for _, w := range want {
			if _, ok := have[w]; !ok {
				return false
			}
		}
		return true
	}
}

// Model matches the request's model name exactly.
func Model(name string) Matcher {
	return func(r *Request) bool { return r.Model == name }
}

// ProviderIs matches requests arriving on the given provider's API.
func ProviderIs(p Provider) Matcher {
	return func(r *Request) bool { return r.Provider == p }
}

// Chat matches chat (generation) requests.
func Chat() Matcher { return func(r *Request) bool { return r.Kind == KindChat } }

// Embed matches embedding requests.
func Embed() Matcher { return func(r *Request) bool { return r.Kind == KindEmbed } }

// JSONMode matches chat requests that asked for JSON output.
func JSONMode() Matcher { return func(r *Request) bool { return r.JSON } }

// Streaming matches chat requests that asked for a streamed answer.
func Streaming() Matcher { return func(r *Request) bool { return r.Stream } }

// All matches when every matcher matches (and when there are none).
func All(ms ...Matcher) Matcher {
	return func(r *Request) bool {
		for _, m := range ms {
			if !m(r) {
				return false
			}
		}
		return true
	}
}

// Any matches when at least one matcher matches.
func Any(ms ...Matcher) Matcher {
	return func(r *Request) bool {
		for _, m := range ms {
			if m(r) {
				return true
			}
		}
		return false
	}
}

// Not inverts m.
func Not(m Matcher) Matcher { return func(r *Request) bool { return !m(r) } }

type faultKind uint8

const (
	faultNone faultKind = iota
	faultHTTP
	faultEmptyBody
	faultEmptyContent
	faultInvalidJSON
	faultHang
	faultRateLimit
	faultStreamCut
	// Refusals the server makes on its own, recorded like faults so a test
	// can see why a request got no answer.
	faultNoRule
	faultNoReply
	faultUnauthorized
	faultNoModel
	faultSchema
	// Refusals of the account or of one input that real servers make
	// with statuses the client also meets for other reasons.
	faultQuota
	faultCredits
	faultFlagged
)

// Fault is a misbehaviour the server can inject instead of a normal answer.
// The zero Fault means "answer normally".
type Fault struct {
	kind       faultKind
	status     int
	retryAfter time.Duration
	message    string // HTTPErrorSaying's; "" for the default
}

// HTTPError answers with the given status code and the provider's error
// body shape ({"error":"..."} for Ollama, {"error":{"message",...}} for
// OpenAI).
func HTTPError(status int) Fault { return Fault{kind: faultHTTP, status: status} }

// HTTPErrorSaying is HTTPError whose body says message, as a server's
// error may say anything: a NUL, a stack trace, the prompt back.
func HTTPErrorSaying(status int, message string) Fault {
	return Fault{kind: faultHTTP, status: status, message: message}
}

// ServerError is HTTPError(500).
func ServerError() Fault { return HTTPError(http.StatusInternalServerError) }

// EmptyBody answers 200 OK with no body at all.
func EmptyBody() Fault { return Fault{kind: faultEmptyBody} }

// EmptyContent answers with a well-formed response whose content is "" (for
// embeddings: no vectors).
func EmptyContent() Fault { return Fault{kind: faultEmptyContent} }

// InvalidJSON answers with a well-formed chat response whose content is not
// valid JSON — a model ignoring JSON mode. For embeddings, whose body is the
// payload, the body itself is malformed.
func InvalidJSON() Fault { return Fault{kind: faultInvalidJSON} }

// Hang never answers: the handler blocks until the client gives up or the
// server is closed.
func Hang() Fault { return Fault{kind: faultHang} }

// StreamCut answers a streamed request with the first half of its chunks
// and then ends the body without the final line (Ollama's done, OpenAI's
// finish_reason and [DONE]): a runner that crashed mid-answer. A request
// that does not stream gets an empty body.
func StreamCut() Fault { return Fault{kind: faultStreamCut} }

// RateLimit answers 429 with a Retry-After header of retryAfter (rounded up
// to whole seconds, as the header carries seconds).
func RateLimit(retryAfter time.Duration) Fault {
	return Fault{kind: faultRateLimit, status: http.StatusTooManyRequests, retryAfter: retryAfter}
}

// QuotaExceeded answers as OpenAI does when the account's quota or
// credit is spent: 429 with type and code "insufficient_quota" and no
// Retry-After, since waiting does not help; only billing does. Ollama has
// no accounts, and answers it as a plain 429.
func QuotaExceeded() Fault { return Fault{kind: faultQuota, status: http.StatusTooManyRequests} }

// CreditsSpent answers as OpenRouter does when the account or the key
// has no credit left: 402 {"error":{"code":402,"message":"Insufficient
// credits. …"}}.
func CreditsSpent() Fault { return Fault{kind: faultCredits, status: http.StatusPaymentRequired} }

// Flagged answers as OpenRouter does when the model requires moderation
// and this request's input was flagged: 403 with the reasons and the
// flagged input in error.metadata. The status is a 403 like a key
// refused, but only this input is refused.
func Flagged(reasons ...string) Fault {
	return Fault{kind: faultFlagged, status: http.StatusForbidden, message: strings.Join(reasons, "\x00")}
}

// IsZero reports whether f is "no fault".
func (f Fault) IsZero() bool { return f.kind == faultNone }

// String names the fault as it appears in Request.Fault.
func (f Fault) String() string {
	switch f.kind {
	case faultNone:
		return ""
	case faultHTTP:
		return "http_" + strconv.Itoa(f.status)
	case faultEmptyBody:
		return "empty_body"
	case faultEmptyContent:
		return "empty_content"
	case faultInvalidJSON:
		return "invalid_json"
	case faultHang:
		return "hang"
	case faultRateLimit:
		return "rate_limit"
	case faultStreamCut:
		return "stream_cut"
	case faultNoRule:
		return "no_rule"
	case faultNoReply:
		return "no_reply"
	case faultUnauthorized:
		return "unauthorized"
	case faultNoModel:
		return "model_not_found"
	case faultSchema:
		return "schema_refused"
	case faultQuota:
		return "insufficient_quota"
	case faultCredits:
		return "insufficient_credits"
	case faultFlagged:
		return "flagged"
	}
	return "unknown"
}

func (f Fault) retryAfterHeader() string {
	secs := (f.retryAfter + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(secs), 10)
}

// Rule scripts how the server answers the requests it matches. Configure it
// with the chained methods; they may be called while the server is serving.
type Rule struct {
	matchers []Matcher

	// mu guards the scripted behaviour below. It is held only to snapshot
	// or advance it, never while a request waits, so one slow rule cannot
	// stall others or itself.
	mu         sync.Mutex
	touched    bool // configured by the test; decides whether Default() counts as a match
	name       string
	replies    []string
	replyFn    func(Request) string
	hasReply   bool
	next       int
	latency    time.Duration
	chunkDelay time.Duration
	fault      Fault
	faultNext  Fault
	faultN     int
	cut        int  // with length: answer at most this many bytes of the reply
	length     bool // report done_reason / finish_reason "length"
	thinking   string
	refusal    string
}

// ruleSnapshot is what one request needs from its rule, taken in one short
// critical section.
type ruleSnapshot struct {
	touched    bool
	name       string
	hasReply   bool
	latency    time.Duration
	chunkDelay time.Duration
	fault      Fault
	cut        int
	length     bool
	thinking   string
	refusal    string
}

func (r *Rule) matches(req *Request) bool {
	for _, m := range r.matchers {
		if !m(req) {
			return false
		}
	}
	return true
}

func (r *Rule) take() ruleSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ruleSnapshot{
		touched:    r.touched,
		name:       r.name,
		hasReply:   r.hasReply,
		latency:    r.latency,
		chunkDelay: r.chunkDelay,
		fault:      r.fault,
		cut:        r.cut,
		length:     r.length,
		thinking:   r.thinking,
		refusal:    r.refusal,
	}
	if r.faultN > 0 {
		r.faultN--
		s.fault = r.faultNext
	}
	return s
}

// reply picks the answer for one request. The sequence advances only when
// an answer is actually served, so faulted or abandoned calls do not skip
// scripted replies.
func (r *Rule) reply(req Request) string {
	r.mu.Lock()
	if fn := r.replyFn; fn != nil {
		r.mu.Unlock()
		return fn(req)
	}
	var s string
	if len(r.replies) > 0 {
		s = r.replies[r.next]
		if r.next < len(r.replies)-1 {
			r.next++
		}
	}
	r.mu.Unlock()
	return s
}

// set changes the rule under its lock and marks it scripted.
func (r *Rule) set(change func()) *Rule {
	r.mu.Lock()
	r.touched = true
	change()
	r.mu.Unlock()
	return r
}

// Named sets the name used in the record (Request.Rule) and by Calls and
// RequestsFor. Unnamed rules are called "rule1", "rule2", ... in the order
// they were added.
func (r *Rule) Named(name string) *Rule { return r.set(func() { r.name = name }) }

// Reply answers every matched chat request with s.
func (r *Rule) Reply(s string) *Rule { return r.Replies(s) }

// Replies answers successive matched chat requests with successive replies;
// once they run out the last one repeats.
func (r *Rule) Replies(replies ...string) *Rule {
	if len(replies) == 0 {
		panic("llmtest: Replies needs at least one reply")
	}
	return r.set(func() {
		r.replies = append([]string(nil), replies...)
		r.replyFn = nil
		r.next = 0
		r.hasReply = true
	})
}

// ReplyFunc computes the answer from the request. fn is called concurrently
// for concurrent requests and must be safe for that.
func (r *Rule) ReplyFunc(fn func(Request) string) *Rule {
	return r.set(func() {
		r.replyFn = fn
		r.replies = nil
		r.hasReply = fn != nil
	})
}

// ReplyJSON answers with v marshalled to JSON. It panics if v cannot be
// marshalled, which is a bug in the test.
func (r *Rule) ReplyJSON(v any) *Rule {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmtest: ReplyJSON: %v", err))
	}
	return r.Reply(string(b))
}

// Latency delays every matched request by d before it is answered (or
// faulted), replacing the server-wide latency; zero defers to it. The wait
// ends early if the client gives up.
func (r *Rule) Latency(d time.Duration) *Rule { return r.set(func() { r.latency = d }) }

// ChunkDelay pauses d between streamed chunks, so tests can observe chunks
// arriving over time or time out mid-stream.
func (r *Rule) ChunkDelay(d time.Duration) *Rule { return r.set(func() { r.chunkDelay = d }) }

// Fault makes every matched request fail with f. Fault(Fault{}) clears it.
func (r *Rule) Fault(f Fault) *Rule { return r.set(func() { r.fault = f }) }

// FaultNext makes the next n matched requests fail with f; later ones are
// answered normally. It replaces any earlier FaultNext on this rule.
func (r *Rule) FaultNext(n int, f Fault) *Rule {
	return r.set(func() {
		r.faultN = n
		r.faultNext = f
	})
}

// CutAt answers as a model that hit its answer budget: the reply is cut
// to its first n bytes (0: the reply as scripted, for a test that scripts
// the cut text itself) and done_reason / finish_reason is "length"
// instead of "stop".
func (r *Rule) CutAt(n int) *Rule { return r.set(func() { r.cut, r.length = n, true }) }

// Refusal answers as an OpenAI model that declines under structured
// outputs: message.content null and message.refusal s, finish_reason
// "stop", HTTP 200. Ollama has no such field; its model answers the reply.
func (r *Rule) Refusal(s string) *Rule { return r.set(func() { r.refusal = s }) }

// Thinking sends s as the model's reasoning in the field servers split it
// into: Ollama message.thinking, OpenAI-compatible
// message.reasoning_content. The reply stays the content.
func (r *Rule) Thinking(s string) *Rule { return r.set(func() { r.thinking = s }) }
