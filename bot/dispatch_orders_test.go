package bot_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/dispatch"
)

// /orders' counts are the true ones: a section's heading counts all its
// orders, and what it does not list is counted under it, so the entries
// shown and the "… and N more" add up to the heading.

var (
	entryRx = regexp.MustCompile(`\n\n#\d+ `)
	moreRx  = regexp.MustCompile(`\n\n… and (\d+) more that do(?:es)? not fit here`)
)

// section is what one section of /orders says: the entries it lists and
// the count under it (0: none).
type section struct{ listed, more int }

// ordersSections splits /orders at the done heading.
func ordersSections(t *testing.T, text string) (open, done section, hasDone bool) {
	t.Helper()
	read := func(s string) section {
		out := section{listed: len(entryRx.FindAllString(s, -1))}
		if m := moreRx.FindAllStringSubmatch(s, -1); len(m) > 0 {
			require.Len(t, m, 1, "one count per section: %q", s)
			n, err := strconv.Atoi(m[0][1])
			require.NoError(t, err)
			out.more = n
		}
		return out
	}
	head, tail, hasDone := strings.Cut(text, "\n\nDone, not yet closed")
	open = read(head)
	if hasDone {
		done = read(tail)
	}
	return open, done, hasDone
}

func insertOpen(t *testing.T, env dispEnv, city string, n int) {
	t.Helper()
	_, err := env.st.Pool().Exec(context.Background(), `
INSERT INTO orders (created_by, city, district, skill, price, description)
SELECT 1, $1, 'Centre', 'tiling', 100, 'x' FROM generate_series(1, $2)`, city, n)
	require.NoError(t, err)
}

// insertDone adds n orders DONE by master 42, who must be registered.
func insertDone(t *testing.T, env dispEnv, n int) {
	t.Helper()
	_, err := env.st.Pool().Exec(context.Background(), `
INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at)
SELECT 1, 'Kyiv', 'Podil', 'plumbing', 100, 'x', 'DONE', 42, now(), now() FROM generate_series(1, $1)`, n)
	require.NoError(t, err)
}

// ordersOf is the admin's /orders over done orders of master Ann (42),
// registered for them, and open ones in Lviv.
func ordersOf(t *testing.T, done, open int) string {
	t.Helper()
	env := setupDispatch(t)
	env.register(t, "Kyiv Podil plumbing", env.srv.User(42, "Ann", "en"))
	insertDone(t, env, done)
	insertOpen(t, env, "Lviv", open)
	return env.ask(t, env.admin, "/orders").Text
}

// 100 open orders: the heading says 100, not the 30 loaded, and the ones
// not listed are counted.
func TestOrdersCountEveryOpenOrder(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	insertOpen(t, env, "Kyiv", 100)
	text := env.ask(t, env.admin, "/orders").Text
	require.True(t, strings.HasPrefix(text, "Open orders (100)\n\n#"), text[:40])
	open, _, hasDone := ordersSections(t, text)
	require.False(t, hasDone)
	require.Positive(t, open.listed)
	require.LessOrEqual(t, open.listed, dispatch.MaxListedOrders)
	require.Equal(t, 100, open.listed+open.more, "listed and counted add up to the heading")
	require.Regexp(t, `more that do(?:es)? not fit here$`, text)
	require.LessOrEqual(t, len(utf16.Encode([]rune(text))), bot.MaxMessageLen)
}

// Done orders older than the open ones do not take their place: 30 done
// and 5 searching show the 5 under "Open orders (5)", then the done ones.
func TestOrdersDoneDoNotHideOpen(t *testing.T) {
	t.Parallel()
	text := ordersOf(t, 30, 5)
	require.NotContains(t, text, "No open orders.")
	require.True(t, strings.HasPrefix(text, "Open orders (5)\n\n#"), text[:40])
	require.Contains(t, text, "\n\nDone, not yet closed (30)")
	open, done, hasDone := ordersSections(t, text)
	require.True(t, hasDone)
	require.Equal(t, section{listed: 5}, open, "every open order listed, none counted")
	require.Equal(t, 30, done.listed+done.more)
	require.LessOrEqual(t, len(utf16.Encode([]rune(text))), bot.MaxMessageLen)
}

// Open orders that fill the message still leave room to say that done
// ones wait too, and how many.
func TestOrdersFullOpenStillCountDone(t *testing.T) {
	t.Parallel()
	text := ordersOf(t, 4, 100)
	require.True(t, strings.HasPrefix(text, "Open orders (100)\n\n#"), text[:40])
	open, done, hasDone := ordersSections(t, text)
	require.True(t, hasDone, "the done heading is there")
	require.Contains(t, text, "\n\nDone, not yet closed (4)")
	require.Equal(t, 100, open.listed+open.more)
	require.Equal(t, 4, done.listed+done.more)
	require.LessOrEqual(t, len(utf16.Encode([]rune(text))), bot.MaxMessageLen)
}

// Only done orders: no open one, and the done ones are listed.
func TestOrdersOnlyDone(t *testing.T) {
	t.Parallel()
	text := ordersOf(t, 2, 0)
	require.True(t, strings.HasPrefix(text, "No open orders.\n\nDone, not yet closed (2)\n\n#"), text)
	_, done, _ := ordersSections(t, text)
	require.Equal(t, section{listed: 2}, done)
}
