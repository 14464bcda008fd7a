package bot

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// packPages fills a page up to its budget and its buttons, in order; a
// list that fits is one page; a line over budget stands alone.
func TestPackPages(t *testing.T) {
	lines := func(spec ...int) []pageLine { // negative: a line with a button
		out := make([]pageLine, len(spec))
		for i, u := range spec {
			out[i] = pageLine{units: max(u, -u), button: u < 0}
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		lines   []pageLine
		budget  int
		buttons int
		want    []int
	}{
		{"empty", nil, 10, 2, []int{0, 0}},
		{"fits", lines(3, 3, 4), 10, 2, []int{0, 3}},
		{"by length", lines(3, 3, 5, 5, 1), 10, 2, []int{0, 2, 4, 5}},
		{"by buttons", lines(1, -1, -1, 1, -1, -1), 100, 2, []int{0, 4, 6}},
		{"a line over budget alone", lines(2, 30, 2), 10, 2, []int{0, 1, 2, 3}},
	} {
		require.Equal(t, tc.want, packPages(tc.lines, tc.budget, tc.buttons), tc.name)
	}
}

// fairShares gives the short what they want and the long equal parts of
// the rest, never more than there is.
func TestFairShares(t *testing.T) {
	require.Equal(t, []int{100, 450, 450}, fairShares([]int{100, 900, 900}, 1000))
	require.Equal(t, []int{10, 20, 30}, fairShares([]int{10, 20, 30}, 1000))
	require.Equal(t, []int{334, 50, 333}, fairShares([]int{900, 50, 800}, 717))
	require.Equal(t, []int{0, 0}, fairShares([]int{5, 5}, -3))
	require.Empty(t, fairShares(nil, 10))
}

// Every edit the bot builds fits one message: a text too long is cut to
// its first part, well-formed, rather than refused by Telegram.
func TestEditOfFitsOneMessage(t *testing.T) {
	long := "<b>" + strings.Repeat("ж", MaxMessageLen) + "</b>"
	m := EditOf(1, "reply", 0, "k", long, nil, "")
	require.LessOrEqual(t, utf16Len(m.Text), MaxMessageLen)
	require.True(t, strings.HasPrefix(m.Text, "<b>жж"))
	require.True(t, strings.HasSuffix(m.Text, "</b>"))
	require.Equal(t, "short", EditOf(1, "reply", 0, "k", "short", nil, "").Text)
}
