package locales

import (
	"testing"
	"time"
)

// Resolving a reader's zone happens for every update; this shows what the
// cache saves over loading the zone from the tz database each time.
func BenchmarkLangZone(b *testing.B) {
	for b.Loop() {
		_ = LangZone("ru")
	}
}

func BenchmarkLoadLocationUncached(b *testing.B) {
	for b.Loop() {
		_, _ = time.LoadLocation("Europe/Moscow")
	}
}
