package bot

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
)

// The limiter's defaults: 1 a second, a burst of 20.
func newDefaultLimiter() (*rateLimiter, *clockwork.FakeClock) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	return newRateLimiter(1, 20, clock), clock
}

// A backlog handled all at once (after an outage, a failover) is judged by
// when the user sent each message: forty written over forty seconds pass.
func TestRateLimiterJudgesABacklogByItsDates(t *testing.T) {
	l, clock := newDefaultLimiter()
	sent := clock.Now().Add(-time.Hour) // written during an hour-long outage…
	clock.Advance(time.Minute)          // …and handled now, in one go
	for i := range 40 {
		ok, warn := l.allow(7, sent.Add(time.Duration(i)*time.Second))
		require.True(t, ok, "message %d", i+1)
		require.False(t, warn)
	}
}

// Forty messages dated within one second are a flood however they arrive:
// the burst passes, the rest are cut, and only the first cut one warns.
func TestRateLimiterCutsAFloodDatedWithinASecond(t *testing.T) {
	l, clock := newDefaultLimiter()
	sent := clock.Now().Add(-time.Minute)
	var passed, warnings int
	for range 40 {
		ok, warn := l.allow(7, sent)
		if ok {
			passed++
		}
		if warn {
			warnings++
		}
	}
	require.Equal(t, 20, passed)
	require.Equal(t, 1, warnings, "one warning per burst")

	// A message dated a second later earns one token, and a later cut warns
	// again: it is a new burst.
	ok, _ := l.allow(7, sent.Add(time.Second))
	require.True(t, ok)
	ok, warn := l.allow(7, sent.Add(time.Second))
	require.False(t, ok)
	require.True(t, warn)

	// Another user has a bucket of their own.
	ok, _ = l.allow(8, sent)
	require.True(t, ok)
}

// Dates that go back (a button press counted at handling time, then older
// messages of the backlog) take tokens but never refill them.
func TestRateLimiterTimeOnlyMovesForward(t *testing.T) {
	l, clock := newDefaultLimiter()
	ok, _ := l.allow(7, clock.Now()) // a press, counted now
	require.True(t, ok)
	old := clock.Now().Add(-time.Hour)
	passed := 0
	for i := range 40 {
		if ok, _ := l.allow(7, old.Add(time.Duration(i)*time.Second)); ok {
			passed++
		}
	}
	require.Equal(t, 19, passed, "the rest of the burst, nothing earned by going back in time")
}

// A user idle for a while is forgotten; coming back, they have a full burst.
func TestRateLimiterForgetsIdleUsers(t *testing.T) {
	l, clock := newDefaultLimiter()
	for range 25 {
		l.allow(7, clock.Now())
	}
	clock.Advance(11 * time.Minute)
	l.allow(8, clock.Now()) // any call collects
	require.NotContains(t, l.users, int64(7))
	for i := range 20 {
		ok, _ := l.allow(7, clock.Now())
		require.True(t, ok, "message %d", i+1)
	}
}
