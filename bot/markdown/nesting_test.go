package markdown_test

import (
	"html"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot/markdown"
)

// A line that opens more lists or quotes than anyone can read is shown as
// typed, escaped: rendering it would cost the square of its depth.
func TestNestingPastTheLimitIsShownAsTyped(t *testing.T) {
	t.Parallel()
	for _, marker := range []string{"- ", "* ", "+ ", "> ", ">", "1. ", "2) ", "-\t"} {
		deep := strings.Repeat(marker, 17) + "<b>x</b>"
		require.Equal(t, html.EscapeString(deep), markdown.HTML(deep), "%q", marker)
		require.Equal(t, deep, markdown.Text(deep), "%q", marker)

		within := "Intro\n\n" + strings.Repeat(marker, 16) + "x **y**"
		require.Contains(t, markdown.HTML(within), "<b>y</b>", "%q: 16 deep is still Markdown", marker)
	}
	mixed := strings.Repeat("- > 1. ", 6) + "x"
	require.Equal(t, html.EscapeString(mixed), markdown.HTML(mixed), "18 markers of three kinds")
	require.Contains(t, markdown.HTML("-5 degrees, *cold*\n10.5 km, -- dashes"), "<i>cold</i>", "no marker without its space")
}

// BenchmarkHTMLDeepList is the answer that took 5 s: "- " 16 384 times.
func BenchmarkHTMLDeepList(b *testing.B) {
	src := strings.Repeat("- ", 16384) + "x"
	for b.Loop() {
		markdown.HTML(src)
	}
}

// BenchmarkHTMLAnswer is a long answer of the usual shape, for comparison.
func BenchmarkHTMLAnswer(b *testing.B) {
	src := strings.Repeat("## Plan\n\n- **Run** 5 km, then *stretch*\n  - twice a week\n> a quote with `code`\n\n1. one\n2. two [link](https://example.com)\n\n", 100)
	for b.Loop() {
		markdown.HTML(src)
	}
}
