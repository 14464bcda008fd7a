package tracker_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/tracker"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		value string
		want  time.Time
		ok    bool
	}{
		{"", time.Time{}, false},
		{"30", now.Add(30 * time.Second), true},
		{"0", now, true},
		{"-5", time.Time{}, false},
		{"9999999", now.Add(24 * time.Hour), true},
		{"Sun, 01 Mar 2026 12:05:00 GMT", now.Add(5 * time.Minute), true},
		{"soon", time.Time{}, false},
	} {
		got, ok := tracker.RetryAfter(http.Header{"Retry-After": {c.value}}, now)
		require.Equal(t, c.ok, ok, c.value)
		require.True(t, c.want.Equal(got), "%q: %s", c.value, got)
	}
}

func TestClipAndErrorText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", tracker.Clip("abc", 3))
	require.Equal(t, "ab…", tracker.Clip("abcd", 3))
	require.Equal(t, "яё…", tracker.Clip("яёжз", 3))
	require.Equal(t, "a b c", tracker.ErrorText(strings.NewReader("a\n  b\tc\n")))
	require.Len(t, []rune(tracker.ErrorText(strings.NewReader(strings.Repeat("x", 10000)))), 200)
}
