package testkit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// WriteBody answers status with body of contentType, its length declared,
// and returns status for the fake's request log. A client gone meanwhile
// is no error: the status is logged anyway.
func WriteBody(w http.ResponseWriter, status int, contentType string, body []byte) int {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	return status
}

// JSON is v as the services the fakes play send it: HTML in strings as it
// is ("<p>", not "\u003cp\u003e"), no newline after. The fakes encode only
// their own types, so a v that cannot be encoded is the fake's bug: it
// panics, naming fake.
func JSON(fake string, v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fake + ": " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// Faults is a fake's queue of injected faults of type F: each answers the
// next n requests it covers, in the order queued. The zero Faults is
// empty. It is not safe for concurrent use: the fake holds its own lock.
type Faults[F any] struct{ queued []*queuedFault[F] }

type queuedFault[F any] struct {
	f    F
	left int
}

// Add queues f for the next n requests it covers; n below 1 queues
// nothing.
func (q *Faults[F]) Add(n int, f F) {
	if n > 0 {
		q.queued = append(q.queued, &queuedFault[F]{f: f, left: n})
	}
}

// Take uses up one answer of the first queued fault that covers the
// request and returns that fault; false when none covers it.
func (q *Faults[F]) Take(covers func(F) bool) (F, bool) {
	for i, qf := range q.queued {
		if !covers(qf.f) {
			continue
		}
		qf.left--
		if qf.left == 0 {
			q.queued = append(q.queued[:i], q.queued[i+1:]...)
		}
		return qf.f, true
	}
	var none F
	return none, false
}

// Pending is the number of fault answers still queued.
func (q *Faults[F]) Pending() int {
	n := 0
	for _, qf := range q.queued {
		n += qf.left
	}
	return n
}

// Clear drops every queued fault.
func (q *Faults[F]) Clear() { q.queued = nil }

// MostWithin is the most of times, sorted oldest first, within any
// half-open span [t, t+d): what a rate limit over d bounds.
func MostWithin(times []time.Time, d time.Duration) int {
	most, j := 0, 0
	for i := range times {
		for j < len(times) && times[j].Sub(times[i]) < d {
			j++
		}
		most = max(most, j-i)
	}
	return most
}
