package locales

import (
	"strings"
	"testing"
	"time"
)

// Whatever a user sends to /timezone, ParseZone answers without a panic, and
// what it accepts is stored as a name that LoadZone reads back to the same
// clock and ParseZone to the same name. An offset is written only with
// digits after its one sign.
func FuzzParseZone(f *testing.F) {
	for _, s := range []string{
		"Europe/Berlin", "europe/berlin", "+3", "-05:30", "+0530", "UTC+3", "GMT+03:00", "UTC", "Z", "Berlin", "Москва",
		"Київ", "+15", "+3:07", "+-5", "--5", "UTC+ 3", "−3", "../../etc/passwd", "Local", "", "+", "America/Argentina/Buenos_Aires",
	} {
		f.Add(s)
	}
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		name, loc, err := ParseZone(s)
		if err != nil {
			return
		}
		if loc == nil || name == "" || name == "Local" {
			t.Fatalf("%q accepted as %q, %v", s, name, loc)
		}
		back, err := LoadZone(name)
		if err != nil {
			t.Fatalf("%q stored as %q, which LoadZone refuses: %v", s, name, err)
		}
		_, a := at.In(loc).Zone()
		if _, b := at.In(back).Zone(); a != b {
			t.Fatalf("%q stored as %q reads back %+d s off UTC, not %+d", s, name, b, a)
		}
		if again, _, err := ParseZone(name); err != nil || again != name {
			t.Fatalf("%q stored as %q, which reads as %q, %v", s, name, again, err)
		}
		if strings.HasPrefix(name, "UTC+") || strings.HasPrefix(name, "UTC-") {
			u := strings.ToUpper(strings.NewReplacer(" ", "", "−", "-", "UTC", "", "GMT", "").Replace(s))
			if strings.Count(u, "+")+strings.Count(u, "-") != 1 {
				t.Fatalf("%q accepted as the offset %q", s, name)
			}
		}
	})
}
