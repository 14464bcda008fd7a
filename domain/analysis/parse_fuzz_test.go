package analysis

import (
	"errors"
	"testing"
	"unicode/utf8"

	"switchboard/domain"
)

// Whatever an admin types after /run_new, ParseRunArgs refuses with a
// reason the admin can read or returns filters within the limits the run's
// query is built for.
func FuzzParseRunArgs(f *testing.F) {
	for _, s := range []string{
		"", "7d", "24h chat=-1001234 keywords=release,deploy min_len=20 mentions", "7d 24h", "chat=5", "keywords=,,",
		"min_len=-1", "min_len=99999999999999999999", "3d", "KEYWORDS=A,b", "chat=-9223372036854775808", "mentions=yes",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		fl, err := ParseRunArgs(args)
		if err != nil {
			var ie *domain.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("%q refused with %v, which the admin cannot be told", args, err)
			}
			return
		}
		if fl.Window != windows["24h"] && fl.Window != windows["7d"] {
			t.Fatalf("%q accepted with a window of %v", args, fl.Window)
		}
		if fl.ChatID > 0 || fl.MinLen < 0 || fl.MinLen > MaxMinLen || len(fl.Keywords) > MaxKeywords {
			t.Fatalf("%q accepted as %+v", args, fl)
		}
		for _, k := range fl.Keywords {
			if k == "" || utf8.RuneCountInString(k) > MaxKeywordLen {
				t.Fatalf("%q accepted with the keyword %q", args, k)
			}
		}
	})
}
