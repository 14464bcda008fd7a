package tgfake

import (
	"fmt"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	"switchboard/internal/testkit"
)

// Bucket is a token bucket: it holds at most Burst tokens, starts full and
// gains one token every Every; each accepted message takes one. A zero
// Burst or Every disables the bucket (no limit).
//
// The fake implements it as the equivalent GCRA (a "theoretical arrival
// time" per bucket) in integer nanoseconds, so the answers are exact: with
// Every = 3s a bucket that was emptied at t allows the next message at t+3s,
// not a rounding error later.
type Bucket struct {
	Burst int
	Every time.Duration
}

// PerSecond is a bucket refilling rate tokens per second (rate may be
// fractional, e.g. 1.0/3 for one every 3 s) with the given burst.
func PerSecond(rate float64, burst int) Bucket {
	if rate <= 0 || burst <= 0 {
		return Bucket{}
	}
	return Bucket{Burst: burst, Every: time.Duration(math.Round(float64(time.Second) / rate))}
}

func (b Bucket) enabled() bool { return b.Burst > 0 && b.Every > 0 }

// Limits are the flood limits the fake enforces on message-producing calls
// (see the package documentation for which calls those are).
type Limits struct {
	// Global applies to all chats together: the bot's overall rate.
	Global Bucket
	// Private applies to each private chat (chat id > 0) separately.
	Private Bucket
	// Group applies to each group, supergroup or channel (chat id < 0)
	// separately.
	Group Bucket
}

// DefaultLimits are Telegram's documented limits, which New enforces unless
// told otherwise: 30 messages per second overall (burst 30), one per
// second per private chat with short bursts of 3, and 20 per minute per
// group (burst 20, one token back every 3 s).
func DefaultLimits() Limits {
	return Limits{
		Global:  Bucket{Burst: 30, Every: time.Second / 30},
		Private: Bucket{Burst: 3, Every: time.Second},
		Group:   Bucket{Burst: 20, Every: 3 * time.Second},
	}
}

// AllChats, given as the chat id to AcceptedTimes and MaxInWindow, means
// every chat together (Telegram never uses chat id 0).
const AllChats int64 = 0

// limitedMethods are the message-producing methods, which are subject to
// Limits and to FailFor: lower-case name (the key of the methods table) to
// canonical name.
var limitedMethods = map[string]string{
	"sendmessage":             "sendMessage",
	"sendmessagedraft":        "sendMessageDraft",
	"sendphoto":               "sendPhoto",
	"senddocument":            "sendDocument",
	"editmessagetext":         "editMessageText",
	"editmessagecaption":      "editMessageCaption",
	"editmessagereplymarkup":  "editMessageReplyMarkup",
	"sendlocation":            "sendLocation",
	"editmessagelivelocation": "editMessageLiveLocation",
	"stopmessagelivelocation": "stopMessageLiveLocation",
}

// Throttle is one 429 Too Many Requests answered by the fake's rate
// limiter (FailNext's injected errors are not Throttles).
type Throttle struct {
	Time       time.Time // on the server's clock
	Method     string    // canonical name, e.g. "sendMessage"
	ChatID     int64
	RetryAfter int // the retry_after answered, in seconds
	// Global and Chat tell which scope refused: the bot's global bucket,
	// the chat's own bucket (private or group), or both.
	Global bool
	Chat   bool
	// Early is set when the call came while a retry_after the fake had
	// answered earlier for the same scope (that chat, or any chat for the
	// global bucket) had not yet passed: the bot did not wait as told.
	Early bool
}

func (th Throttle) String() string {
	var scopes []string
	if th.Global {
		scopes = append(scopes, "global")
	}
	if th.Chat {
		scopes = append(scopes, "chat")
	}
	early := ""
	if th.Early {
		early = " EARLY"
	}
	return fmt.Sprintf("%s %s chat %d: retry after %d (%s)%s",
		th.Time.Format("15:04:05.000"), th.Method, th.ChatID, th.RetryAfter, strings.Join(scopes, "+"), early)
}

// scopeState is the limiter's state for one scope (the bot, or one chat).
type scopeState struct {
	tat   time.Time // GCRA theoretical arrival time; zero means a full bucket
	until time.Time // end of the last retry_after answered for this scope
}

// wait is how long the bucket b needs before it admits a message at now;
// zero if it admits it at once.
func (st *scopeState) wait(b Bucket, now time.Time) time.Duration {
	tat := st.tat
	if tat.Before(now) {
		tat = now
	}
	tolerance := time.Duration(b.Burst-1) * b.Every
	if d := tat.Sub(now) - tolerance; d > 0 {
		return d
	}
	return 0
}

// take consumes a token; the caller checked wait first.
func (st *scopeState) take(b Bucket, now time.Time) {
	if st.tat.Before(now) {
		st.tat = now
	}
	st.tat = st.tat.Add(b.Every)
}

// limiter holds the rate limiting state. It is guarded by Server.mu.
type limiter struct {
	limits    Limits
	global    scopeState
	chats     map[int64]*scopeState
	throttles []Throttle
	accepted  map[int64][]time.Time // per chat, in order; AllChats holds all
}

func newLimiter(l Limits) *limiter {
	return &limiter{limits: l, chats: map[int64]*scopeState{}, accepted: map[int64][]time.Time{}}
}

func (l *limiter) chatBucket(chatID int64) Bucket {
	if chatID > 0 {
		return l.limits.Private
	}
	return l.limits.Group
}

// retryAfterSeconds rounds a wait up to whole seconds, at least 1, as the
// retry_after a client must honour.
func retryAfterSeconds(d time.Duration) int {
	n := int((d + time.Second - 1) / time.Second)
	return max(n, 1)
}

// admitLocked applies the limits to one message-producing call to chatID,
// just before it takes effect (after every other check passed, so refused
// and invalid calls consume nothing). All buckets are checked first and
// tokens are taken from all of them only if every one admits the call. A
// call into a scope whose announced retry_after has not passed yet is
// refused as an early send, whatever its bucket says.
func (s *Server) admitLocked(r *request, chatID int64) *APIError {
	l := s.limiter
	now := s.now()
	chat := l.chats[chatID]
	if chat == nil {
		chat = &scopeState{}
		l.chats[chatID] = chat
	}
	scopes := []struct {
		st     *scopeState
		bucket Bucket
		global bool
	}{{&l.global, l.limits.Global, true}, {chat, l.chatBucket(chatID), false}}

	th := Throttle{Time: now, Method: limitedMethods[r.method], ChatID: chatID}
	var longest time.Duration
	var newly []int            // scopes whose bucket refuses (not already closed)
	var waits [2]time.Duration // each refusing scope's own wait
	for i, sc := range scopes {
		if !sc.bucket.enabled() {
			continue
		}
		var w time.Duration
		if now.Before(sc.st.until) {
			w = sc.st.until.Sub(now)
			th.Early = true
		} else if w = sc.st.wait(sc.bucket, now); w > 0 {
			newly = append(newly, i)
		}
		if w > 0 {
			waits[i] = w
			longest = max(longest, w)
			if sc.global {
				th.Global = true
			} else {
				th.Chat = true
			}
		}
	}
	if longest == 0 {
		for _, sc := range scopes {
			if sc.bucket.enabled() {
				sc.st.take(sc.bucket, now)
			}
		}
		l.accepted[chatID] = append(l.accepted[chatID], now)
		l.accepted[AllChats] = append(l.accepted[AllChats], now)
		return nil
	}
	// Each scope that ran out is blocked for its own retry_after: a bot
	// that waits what it was told never sends early, and one that backs
	// off only the chat it was refused in is not blamed for the global
	// bucket's shorter wait.
	for _, i := range newly {
		scopes[i].st.until = now.Add(time.Duration(retryAfterSeconds(waits[i])) * time.Second)
	}
	th.RetryAfter = retryAfterSeconds(longest)
	l.throttles = append(l.throttles, th)
	return tooManyRequests(th.RetryAfter)
}

// SetLimits replaces the limits from now on; Limits{} lifts them all. Every
// bucket starts full again and pending retry_after periods are forgotten;
// the counters (RateLimited, EarlySends, AcceptedTimes) are kept.
func (s *Server) SetLimits(l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.limiter
	s.limiter = newLimiter(l)
	s.limiter.throttles, s.limiter.accepted = old.throttles, old.accepted
}

// Throttles returns the 429s the rate limiter answered, oldest first.
func (s *Server) Throttles() []Throttle {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Throttle(nil), s.limiter.throttles...)
}

func (s *Server) countThrottles(match func(Throttle) bool) int {
	n := 0
	for _, th := range s.Throttles() {
		if match(th) {
			n++
		}
	}
	return n
}

// RateLimited is the number of 429 answers the rate limiter gave, early
// sends included. 429s injected with FailNext are not counted (they are in
// the call log).
func (s *Server) RateLimited() int {
	return s.countThrottles(func(Throttle) bool { return true })
}

// RateLimitedIn is RateLimited for calls to one chat.
func (s *Server) RateLimitedIn(chatID int64) int {
	return s.countThrottles(func(th Throttle) bool { return th.ChatID == chatID })
}

// EarlySends is the number of message-producing calls made before a
// retry_after the fake had answered for the same scope had passed (that
// chat for a chat's bucket, any chat for the global bucket). A bot that
// honours retry_after keeps it at zero. Each was refused with 429 and the
// remaining time, and is also counted by RateLimited.
func (s *Server) EarlySends() int {
	return s.countThrottles(func(th Throttle) bool { return th.Early })
}

// EarlySendsIn is EarlySends for calls to one chat.
func (s *Server) EarlySendsIn(chatID int64) int {
	return s.countThrottles(func(th Throttle) bool { return th.Early && th.ChatID == chatID })
}

// AcceptedTimes returns when (on the server's clock) the message-producing
// calls (sends and edits) to a chat took effect, oldest first; AllChats
// gives those of every chat. Refused calls, whether by the limiter or for
// any other reason, are not included; calls made while limits were lifted
// are.
func (s *Server) AcceptedTimes(chatID int64) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.limiter.accepted[chatID]...)
}

// MaxInWindow is the largest number of accepted message-producing calls to
// a chat (AllChats: to all chats) within any window of the given length
// (half-open: [t, t+window)), for assertions such as "the group never got
// more than 20 messages in a minute". Note that the buckets alone do not
// guarantee such a bound: a full group bucket followed by its steady refill
// admits 20 + 19 = 39 messages within one minute.
func (s *Server) MaxInWindow(chatID int64, window time.Duration) int {
	times := s.AcceptedTimes(chatID)
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	return testkit.MostWithin(times, window)
}

// FailFor makes every message-producing call fail for d from now (on the
// server's clock) with the given HTTP status, as the nginx reverse proxy in
// front of the Bot API answers on a bad day: an HTML error page, not a JSON
// Bot API error (see ProxyError). The calls have no effect and do not reach
// the rate limiter. FailFor(0, 0) ends such a period early.
func (s *Server) FailFor(d time.Duration, code int) {
	s.t.Helper()
	if d > 0 && (code < 400 || code > 599) {
		s.t.Fatalf("tgfake: FailFor: HTTP status %d is not an error status", code)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failUntil, s.failCode = s.now().Add(d), code
	s.hub.NotifyLocked()
}

func (s *Server) proxyFailure() *APIError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.now().Before(s.failUntil) {
		return ProxyError(s.failCode)
	}
	return nil
}

// nginxStatusText is how nginx titles its error pages where that differs
// from net/http's wording.
var nginxStatusText = map[int]string{
	http.StatusServiceUnavailable: "Service Temporarily Unavailable",
	http.StatusGatewayTimeout:     "Gateway Time-out",
}

func proxyStatusText(code int) string {
	if t, ok := nginxStatusText[code]; ok {
		return t
	}
	if t := http.StatusText(code); t != "" {
		return t
	}
	return "Error"
}

// ProxyError is an error answered by the reverse proxy in front of the Bot
// API rather than by the Bot API itself: the HTTP status code with nginx's
// HTML error page as the body (Content-Type text/html), not the Bot API's
// JSON, so clients fail to parse it. Give it to FailNextWith to inject a
// single one; FailFor answers it for a period.
func ProxyError(code int) *APIError {
	return &APIError{Code: code, Description: proxyStatusText(code), proxy: true}
}

// proxyServer is the Server header of api.telegram.org's error pages.
const proxyServer = "nginx/1.18.0"

func writeProxyError(w http.ResponseWriter, code int) {
	title := fmt.Sprintf("%d %s", code, proxyStatusText(code))
	body := "<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
		"</h1></center>\r\n<hr><center>" + proxyServer + "</center>\r\n</body>\r\n</html>\r\n"
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Server", proxyServer)
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body)) // the client may have gone away; nothing to do about it
}
