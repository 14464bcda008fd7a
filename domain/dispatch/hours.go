package dispatch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Hours are when a city's masters take offers: a daily window of local
// time in the city's time zone. Open == Close means around the clock.
type Hours struct {
	Zone *time.Location
	// Open and Close are offsets from local midnight; Close may be 24h.
	Open, Close time.Duration
}

// AlwaysOpen reports whether the window is the whole day.
func (h Hours) AlwaysOpen() bool {
	return h.Open == h.Close || (h.Open == 0 && h.Close == 24*time.Hour)
}

func (h Hours) zone() *time.Location {
	if h.Zone == nil {
		return time.UTC
	}
	return h.Zone
}

// IsOpen reports whether t falls within the window, in the city's zone.
// A window whose close is before its open runs past midnight.
func (h Hours) IsOpen(t time.Time) bool {
	if h.AlwaysOpen() {
		return true
	}
	// The time of day on the city's clocks, not the time since midnight:
	// the two differ by an hour after a DST change that day.
	since := sinceMidnight(t.In(h.zone()))
	if h.Open < h.Close {
		return since >= h.Open && since < h.Close
	}
	return since >= h.Open || since < h.Close
}

// NextOpen is the first instant at or after t when the window is open.
func (h Hours) NextOpen(t time.Time) time.Time {
	if h.IsOpen(t) {
		return t
	}
	local := t.In(h.zone())
	y, m, d := local.Date()
	// Today's opening, else tomorrow's, on the city's clocks: a DST
	// change moves the instant, not the local time.
	for day := 0; day < 3; day++ {
		at := OnClock(y, m, d+day, h.Open, h.zone())
		if !at.Before(t) {
			return at
		}
	}
	return t
}

// OnClock is the moment the clocks of zone show clock (a time of day,
// 24h the next midnight) on the day y-m-d. Adding clock to midnight
// instead is an hour off on a day whose clocks change: 10:00 would be
// 09:00 on a 25-hour day and 11:00 on a 23-hour one.
func OnClock(y int, m time.Month, d int, clock time.Duration, zone *time.Location) time.Time {
	return time.Date(y, m, d, int(clock/time.Hour), int(clock%time.Hour/time.Minute), int(clock%time.Minute/time.Second), int(clock%time.Second), zone)
}

// sinceMidnight is the time of day local's clocks show.
func sinceMidnight(local time.Time) time.Duration {
	return time.Duration(local.Hour())*time.Hour + time.Duration(local.Minute())*time.Minute +
		time.Duration(local.Second())*time.Second + time.Duration(local.Nanosecond())
}

// Window renders the window as "10:00–20:00".
func (h Hours) Window() string { return h.From() + "–" + h.To() }

// From and To are the window's ends as "10:00".
func (h Hours) From() string { return clockTime(h.Open) }
func (h Hours) To() string   { return clockTime(h.Close) }

func clockTime(d time.Duration) string {
	return fmt.Sprintf("%02d:%02d", int(d/time.Hour), int(d%time.Hour/time.Minute))
}

// Calendar holds every city's hours: those configured by name
// (case-insensitive), and the default for the rest.
type Calendar struct {
	Default Hours
	Cities  map[string]Hours // key: lower-case city
}

// For returns the city's hours.
func (c Calendar) For(city string) Hours {
	if h, ok := c.Cities[strings.ToLower(strings.TrimSpace(city))]; ok {
		return h
	}
	return c.Default
}

// Has reports whether the city has an entry of its own (DISPATCH_CITIES),
// rather than the default's.
func (c Calendar) Has(city string) bool {
	_, ok := c.Cities[strings.ToLower(strings.TrimSpace(city))]
	return ok
}

// Zone is the city's time zone, for every time shown about it.
func (c Calendar) Zone(city string) *time.Location { return c.For(city).zone() }

// Gate is the calendar at one instant, in the shape storage filters with:
// the configured cities, those of them closed, and whether the rest are.
// The zero Gate lets everything through.
type Gate struct {
	Configured    []string // lower-case
	Closed        []string // lower-case, a subset of Configured
	DefaultClosed bool
}

// At evaluates the calendar at t.
func (c Calendar) At(t time.Time) Gate {
	g := Gate{Configured: []string{}, Closed: []string{}, DefaultClosed: !c.Default.IsOpen(t)}
	for city, h := range c.Cities {
		g.Configured = append(g.Configured, city)
		if !h.IsOpen(t) {
			g.Closed = append(g.Closed, city)
		}
	}
	slices.Sort(g.Configured)
	slices.Sort(g.Closed)
	return g
}

// Allows reports whether the gate lets an order of city be offered.
func (g Gate) Allows(city string) bool {
	c := strings.ToLower(strings.TrimSpace(city))
	if slices.Contains(g.Configured, c) {
		return !slices.Contains(g.Closed, c)
	}
	return !g.DefaultClosed
}

// ParseHours reads "10:00-20:00" (also "10-20", "22:00-06:00" past
// midnight, "24h" or "00:00-24:00" for the whole day) in zone.
func ParseHours(s string, zone *time.Location) (Hours, error) {
	s = strings.TrimSpace(s)
	if s == "24h" || s == "24/7" {
		return Hours{Zone: zone}, nil
	}
	from, to, ok := strings.Cut(strings.NewReplacer("–", "-", "—", "-").Replace(s), "-")
	if !ok {
		return Hours{}, fmt.Errorf("hours %q: want HH:MM-HH:MM", s)
	}
	open, err := parseClock(from, false)
	if err != nil {
		return Hours{}, fmt.Errorf("hours %q: %w", s, err)
	}
	closeAt, err := parseClock(to, true)
	if err != nil {
		return Hours{}, fmt.Errorf("hours %q: %w", s, err)
	}
	return Hours{Zone: zone, Open: open, Close: closeAt}, nil
}

func parseClock(s string, end bool) (time.Duration, error) {
	s = strings.TrimSpace(s)
	hh, mm, hasMin := strings.Cut(s, ":")
	h, err := strconv.Atoi(hh)
	if err != nil {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	m := 0
	if hasMin {
		if m, err = strconv.Atoi(mm); err != nil || len(mm) != 2 {
			return 0, fmt.Errorf("%q is not a time of day", s)
		}
	}
	// The hour is bounded before it is multiplied: 2700000 hours would
	// overflow into a negative duration that passes every later check.
	if h < 0 || h > 24 || m < 0 || m > 59 {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	if d > 24*time.Hour || (d == 24*time.Hour && !end) {
		return 0, fmt.Errorf("%q is not a time of day", s)
	}
	return d, nil
}

// ParseCalendar reads the default zone and hours and the per-city list
// "Moscow=Europe/Moscow; Kyiv=Europe/Kyiv 09:00-19:00": a city takes the
// default hours unless it names its own, and the default zone unless it
// names its own.
func ParseCalendar(zone, hours, cities string) (Calendar, error) {
	loc, err := time.LoadLocation(strings.TrimSpace(zone))
	if err != nil {
		return Calendar{}, fmt.Errorf("time zone %q: %w", zone, err)
	}
	def, err := ParseHours(hours, loc)
	if err != nil {
		return Calendar{}, err
	}
	c := Calendar{Default: def, Cities: map[string]Hours{}}
	for _, item := range strings.FieldsFunc(cities, func(r rune) bool { return r == ';' || r == '\n' }) {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, spec, ok := strings.Cut(item, "=")
		name = strings.ToLower(strings.Join(strings.Fields(strings.Trim(strings.TrimSpace(name), `"'«»“”`)), " "))
		if !ok || name == "" {
			return Calendar{}, fmt.Errorf("city %q: want City=Zone [HH:MM-HH:MM]", item)
		}
		h := def
		f := strings.Fields(spec)
		if len(f) == 0 || len(f) > 2 {
			return Calendar{}, fmt.Errorf("city %q: want City=Zone [HH:MM-HH:MM]", item)
		}
		if h.Zone, err = time.LoadLocation(f[0]); err != nil {
			return Calendar{}, fmt.Errorf("city %q: time zone %q: %w", name, f[0], err)
		}
		if len(f) == 2 {
			if h, err = ParseHours(f[1], h.Zone); err != nil {
				return Calendar{}, fmt.Errorf("city %q: %w", name, err)
			}
		}
		if _, dup := c.Cities[name]; dup {
			return Calendar{}, fmt.Errorf("city %q is listed twice", name)
		}
		c.Cities[name] = h
	}
	return c, nil
}
