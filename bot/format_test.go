package bot

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestEscape(t *testing.T) {
	require.Equal(t, "&lt;b&gt;Go &amp; Rust&lt;/b&gt;", Escape("<b>Go & Rust</b>"))
}

func TestSplitTenThousandCharactersIntoThree(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n" // 100 characters a line
	text := strings.Repeat(line, 100)      // 10 000 characters
	parts := Split(text, MaxMessageLen)
	require.Len(t, parts, 3)
	total := 0
	for _, p := range parts {
		require.LessOrEqual(t, utf16Len(p), MaxMessageLen)
		require.True(t, strings.HasSuffix(p, strings.Repeat("x", 99)), "cut on a line boundary")
		total += strings.Count(p, "x")
	}
	require.Equal(t, 9900, total, "nothing lost")
}

func TestSplitShortTextIsOneMessage(t *testing.T) {
	require.Equal(t, []string{"hello\nworld"}, Split("hello\nworld", MaxMessageLen))
}

func TestSplitOverlongLineAvoidsEntitiesAndTags(t *testing.T) {
	// One line, no newlines, with entities and tags everywhere.
	unit := "ab &amp; <b>cd</b> "
	text := strings.Repeat(unit, 1000)
	parts := Split(text, 100)
	var joined strings.Builder
	for _, p := range parts {
		require.LessOrEqual(t, utf16Len(p), 100)
		require.Equal(t, strings.Count(p, "<b>"), strings.Count(p, "</b>"), "tag split across chunks: %q", p)
		require.NotRegexp(t, `&[a-z]*$`, p, "entity split")
		joined.WriteString(p)
	}
	require.Equal(t, strings.ReplaceAll(text, " ", ""), strings.ReplaceAll(joined.String(), " ", ""))
}

func TestSplitCountsUTF16LikeTelegram(t *testing.T) {
	// Each emoji is two UTF-16 units: 3000 of them cannot fit in one message.
	text := strings.Repeat("😀", 3000)
	parts := Split(text, MaxMessageLen)
	require.Len(t, parts, 2)
	for _, p := range parts {
		require.True(t, utf8.ValidString(p))
		require.LessOrEqual(t, utf16Len(p), MaxMessageLen)
	}
	cyr := strings.Repeat("щ", 4096)
	require.Len(t, Split(cyr, MaxMessageLen), 1, "Cyrillic counts as one unit per letter")
}
