package dispatch_test

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// fuzzNow is the day the fuzzed dates are read against.
var fuzzNow = time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)

// inputRefusal fails the fuzz run unless err is a refusal the user can be
// shown (a localized InputError), not an internal failure.
func inputRefusal(t *testing.T, in string, err error) {
	t.Helper()
	var ie *domain.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("%q refused with %v, which the user cannot be told", in, err)
	}
}

// Whatever an admin types after /order, ParseOrder answers without a panic,
// refuses with a reason the admin can read, and keeps what it accepts
// within the limits the order's messages are written for.
func FuzzParseOrder(f *testing.F) {
	for _, s := range []string{
		"Moscow Center plumbing 3000 The kitchen tap is leaking",
		"Kyiv Podil plumber 800 Fix the sink\naddress: Khreshchatyk 1\nname: Olena\nphone: +380 44 123-45-67\nwhen: 2026-11-27 10:00-12:00",
		"Sumy Center painter 800 Walls\nwhen: 27.11 10-12", "Lviv Center electrician 1e9 x", "a b c -5 d", "a b c 0x10 d",
		"a b c 100 \nphone: ++1", "a b c 100 x\nwhen: 31.02", "a b c 100 x\nwhen: 2026-11-27 23:00-01:00", "a b", "",
		"a b c 100 x\nname:\nname: y", "a b c 99999999999999999999 x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		o, err := dispatch.ParseOrder(args, fuzzNow)
		if err != nil {
			inputRefusal(t, args, err)
			return
		}
		if o.Price <= 0 || o.Price > dispatch.MaxPrice {
			t.Fatalf("%q accepted with price %d", args, o.Price)
		}
		if utf8.RuneCountInString(o.Description) > dispatch.MaxDescription {
			t.Fatalf("%q accepted with a description of %d characters", args, utf8.RuneCountInString(o.Description))
		}
		if o.City == "" || o.District == "" || o.Skill == "" {
			t.Fatalf("%q accepted without its place or skill: %+v", args, o)
		}
		if v := o.Visit; v.To != 0 && (v.From < 0 || v.To > 24*time.Hour) {
			t.Fatalf("%q accepted with a window outside the day: %+v", args, v)
		}
	})
}

// /master's arguments, a phone and a visit likewise; a phone accepted is
// accepted again as it was kept.
func FuzzParseMasterPhoneVisit(f *testing.F) {
	for _, s := range []string{
		"Kyiv Podil plumber,electrician", "Moscow Center", "+7 (495) 123-45-67", "8.800.555.35.35", "+", "((((",
		"2026-11-27 10:00-12:00", "27.11.2026", "27.11 10-12", "2026-02-30", "27.11 12-10", "0.0 0-0", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if city, district, skills, err := dispatch.ParseMaster(s); err != nil {
			inputRefusal(t, s, err)
		} else if city == "" || district == "" || len(skills) == 0 {
			t.Fatalf("/master %q accepted without a place or a skill", s)
		}
		if p, err := dispatch.ParsePhone(s); err != nil {
			inputRefusal(t, s, err)
		} else if again, err := dispatch.ParsePhone(p); err != nil || again != p {
			t.Fatalf("phone %q kept as %q, which reads as %q, %v", s, p, again, err)
		}
		if v, err := dispatch.ParseVisit(s, fuzzNow); err != nil {
			inputRefusal(t, s, err)
		} else if v.Date.Before(fuzzNow.AddDate(0, 0, -2)) {
			t.Fatalf("visit %q accepted for %s, before yesterday", s, v.Date)
		}
	})
}

// Working hours as an operator writes them in the settings: no panic, and
// an accepted window lies within the day.
func FuzzParseHours(f *testing.F) {
	for _, s := range []string{"10:00-20:00", "10-20", "22:00-06:00", "24h", "24/7", "00:00-24:00", "25-26", "9:60-10", "-", "",
		"2700000-0", // the fuzzer's first find: an hour that overflowed into a negative time of day
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := dispatch.ParseHours(s, time.UTC)
		if err != nil {
			return
		}
		if h.Open < 0 || h.Open > 24*time.Hour || h.Close < 0 || h.Close > 24*time.Hour {
			t.Fatalf("%q accepted as %v-%v", s, h.Open, h.Close)
		}
	})
}
