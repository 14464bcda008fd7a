package llm

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

func TestParseRetryAfter(t *testing.T) {
	assert.Equal(t, 7*time.Second, parseRetryAfter("7"))
	assert.Zero(t, parseRetryAfter(""))
	assert.Zero(t, parseRetryAfter("soon"))
	assert.Zero(t, parseRetryAfter("-3"))
	d := parseRetryAfter(time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat))
	assert.InDelta(t, 90*time.Second, d, float64(2*time.Second), "HTTP-date form")
	assert.Zero(t, parseRetryAfter(time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)))
}

func TestSnippetBoundsOutput(t *testing.T) {
	// 151 ASCII bytes put byte 200 in the middle of a two-byte rune.
	long := strings.Repeat("a", 151) + strings.Repeat("é", 60)
	s := snippet(long)
	assert.LessOrEqual(t, len(s), 200+len("…"))
	assert.True(t, utf8.ValidString(s), "cut on a rune boundary")
	assert.Equal(t, "short", snippet("short"))
}
