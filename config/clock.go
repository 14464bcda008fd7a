package config

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// Clock is the real clock, or (CLOCK_START, for tests and demos)
// one that reads start when the process starts and runs at real speed
// from there: an end-to-end test can create an order at 22:00 city time
// and, restarting the binary at 09:59, see it offered at 10:00, or apply
// for a vacancy and, restarted a week later, be asked how it went. The
// dispatch calendar (dispatch.Deps.CalendarClock), the vacancy workflow
// (vacancy.Deps.CalendarClock) and the renderers (bot.RenderConfig.CalendarClock:
// a date of another year than this clock's names it) read it; timers run at
// real speed, and leases and expiries that replicas compare in SQL stay on
// the database's now().
func (c Config) Clock() clockwork.Clock {
	start := c.ClockStart
	real := clockwork.NewRealClock()
	at, err := time.Parse(time.RFC3339, start)
	if start == "" || err != nil {
		return real
	}
	return ShiftedClock(real, at.Sub(real.Now()))
}

// ShiftedClock is c with its wall time moved by shift (Now, Since and
// Until; timers and tickers run as c's): the CLOCK_START clock, and in
// tests a replica whose clock disagrees with its peers'.
func ShiftedClock(c clockwork.Clock, shift time.Duration) clockwork.Clock {
	return shiftedClock{Clock: c, shift: shift}
}

type shiftedClock struct {
	clockwork.Clock
	shift time.Duration
}

func (c shiftedClock) Now() time.Time                  { return c.Clock.Now().Add(c.shift) }
func (c shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c shiftedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
