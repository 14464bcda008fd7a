// Package tracker holds the trackers approved analysis proposals are
// filed into, each implementing tasks.Tracker for one kind of
// destination: tracker/github (a repository's issues) and
// tracker/webhook (signed JSON posted to a URL). This package holds what
// they share: reading an answer's Retry-After and bounding the text of an
// error answer.
//
// A tracker neither retries nor waits: it sends what it is asked to, once,
// and says through the errors of package tasks (ErrAccess, ErrGone,
// ErrRefused, *RateLimited, anything else transient) what the worker
// should do next.
package tracker

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"switchboard/domain"
)

// DefaultRetryAfter is how long to wait when a refusal to go faster names
// no time: GitHub's advice for a secondary limit without Retry-After is
// "at least one minute", and a webhook receiver's 429 gets the same.
const DefaultRetryAfter = time.Minute

// RetryAfter reads h's Retry-After, in seconds or as an HTTP date, as the
// time before which nothing may be sent; ok is false when there is none
// or it cannot be read.
func RetryAfter(h http.Header, now time.Time) (until time.Time, ok bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return time.Time{}, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return time.Time{}, false
		}
		// A day is far above anything GitHub or a receiver means; a larger
		// figure is a mistake we should not park a push behind for ever.
		return now.Add(time.Duration(min(secs, 86400)) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// maxErrorText bounds what of an error answer goes into an error: enough
// for GitHub's message and a receiver's reason, not a proxy's HTML page.
const maxErrorText = 200

// ErrorText reads at most a few KiB of an error answer's body and returns
// its start on one line, for an error message. It never fails: the status
// says enough when the body cannot be read.
func ErrorText(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	// Cleaned: the text is stored with the push (last_error), and a write
	// refused for a NUL in it would be retried for ever.
	return Clip(domain.CleanText(strings.Join(strings.Fields(string(raw)), " ")), maxErrorText)
}

// Clip shortens s to at most n runes, ending in "…" when it cut.
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
