package bot_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
)

// memoryText is a memory of about 900 characters, numbered i.
func memoryText(i int) string { return fmt.Sprintf("Memory %02d: ", i) + strings.Repeat("ж", 890) }

// Ten memories of 900 characters: a page of five is one message, each
// summary cut to its share of it; the page turn and Delete on the second
// page are edits Telegram takes, the confirmation shows the whole memory,
// and Delete deletes the memory of the number pressed, not another.
func TestMemoryPagesOfLongMemoriesTurnAndDelete(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann, _ := env.annWithMemories(t, []string{"tag"}, 10, memoryText)
	sent := ann.SendText(ann.ID(), "/memory")
	page := env.srv.WaitMessageAfter(t, 42, sent.MessageID, nil)
	requireOneMessage(t, env.srv, 42, sent.MessageID, page)
	require.True(t, strings.HasPrefix(page.Text, "What I remember about you, newest first (1–5 of 10):\n\n1. "), page.Text)
	requireClippedMemories(t, page.Text, 10, 9, 8, 7, 6)
	require.Equal(t, []string{"🗑 Delete 1", "✏️ Correct 1", "🗑 Delete 2", "✏️ Correct 2", "🗑 Delete 3", "✏️ Correct 3",
		"🗑 Delete 4", "✏️ Correct 4", "🗑 Delete 5", "✏️ Correct 5", "›"}, page.ReplyMarkup.Labels())

	next := env.pressed(t, ann, page, "›", "What I remember about you, newest first (6–10 of 10):")
	requireClippedMemories(t, next.Text, 5, 4, 3, 2, 1)
	require.Equal(t, []string{"🗑 Delete 6", "✏️ Correct 6", "🗑 Delete 7", "✏️ Correct 7", "🗑 Delete 8", "✏️ Correct 8",
		"🗑 Delete 9", "✏️ Correct 9", "🗑 Delete 10", "✏️ Correct 10", "‹"}, next.ReplyMarkup.Labels())
	requireEditsAccepted(t, env.srv)

	// Number 7 is the second of page two: memory 4.
	confirm := env.pressed(t, ann, next, "🗑 Delete 7", "Delete this memory?")
	require.True(t, strings.HasPrefix(confirm.Text, "Delete this memory?\n\n"+memoryText(4)+"\n\nI will also delete"), confirm.Text)
	done := env.pressed(t, ann, confirm, "Delete", "Deleted:")
	require.True(t, strings.HasPrefix(done.Text, "Deleted: memory versions: 1, conversations: 0.\n\nWhat I remember about you, newest first (6–9 of 9):\n\n6. "), done.Text)
	require.LessOrEqual(t, len(utf16.Encode([]rune(done.Text))), bot.MaxMessageLen)
	requireClippedMemories(t, done.Text, 5, 3, 2, 1)
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM lsm_storage WHERE summary = $1`, memoryText(4)))
	require.Equal(t, 9, count(t, env.st, `SELECT count(*) FROM lsm_storage WHERE user_id = 42`))
	require.Equal(t, []string{"🗑 Delete 6", "✏️ Correct 6", "🗑 Delete 7", "✏️ Correct 7", "🗑 Delete 8", "✏️ Correct 8",
		"🗑 Delete 9", "✏️ Correct 9", "‹"}, done.ReplyMarkup.Labels())
	requireEditsAccepted(t, env.srv)
	require.Empty(t, env.srv.UnansweredCallbacks())
}

// requireClippedMemories asserts that a page shows the memories numbered
// want, in that order, each cut with "…" (none fits whole beside four
// others) to a good part of its text.
func requireClippedMemories(t *testing.T, text string, want ...int) {
	t.Helper()
	rest := text
	for _, i := range want {
		head := fmt.Sprintf("Memory %02d: ", i)
		at := strings.Index(rest, head)
		require.GreaterOrEqual(t, at, 0, "memory %d in %q", i, text)
		line := rest[at:]
		line = line[:strings.IndexByte(line, '\n')]
		require.True(t, strings.HasSuffix(line, "…"), "memory %d is not cut: %q", i, line)
		require.Greater(t, len([]rune(line)), 500, "memory %d keeps most of its share", i)
		require.True(t, strings.HasPrefix(memoryText(i), strings.TrimSuffix(line, "…")))
		rest = rest[at+len(line):]
	}
	require.NotRegexp(t, `Memory \d\d: `, rest, "no other memory")
}

// A memory corrected five times, each version 900 characters: History is
// one edit Telegram takes, showing the newest versions whole, newest
// first, and saying how many older ones did not fit; Back returns to the
// page.
func TestMemoryHistoryOfManyLongVersions(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann, _ := env.annWithMemories(t, []string{}, 6, memoryText)
	// Each version superseded by the next.
	exec(t, env.st, `UPDATE lsm_storage m SET invalid_at = now(), superseded_by = n.id
FROM lsm_storage n WHERE n.user_id = 42 AND m.user_id = 42 AND n.id = m.id + 1`)
	page := env.ask(t, ann, "/memory")
	require.Equal(t, []string{"🗑 Delete 1", "✏️ Correct 1", "🕘 History 1"}, page.ReplyMarkup.Labels())
	history := env.pressed(t, ann, page, "🕘 History 1", "History of this memory")
	requireEditsAccepted(t, env.srv)
	require.LessOrEqual(t, len(utf16.Encode([]rune(history.Text))), bot.MaxMessageLen)

	parts := strings.Split(history.Text, "\n\n")
	require.Equal(t, "History of this memory, newest first:", parts[0])
	versions := parts[1 : len(parts)-1]
	require.GreaterOrEqual(t, len(versions), 3, "three versions of 900 characters fit a message")
	require.Less(t, len(versions), 6)
	for i, v := range versions {
		if i == 0 {
			require.True(t, strings.HasPrefix(v, "Now, since "), v)
		} else {
			require.True(t, strings.HasPrefix(v, "From "), v)
		}
		require.True(t, strings.HasSuffix(v, ":\n"+memoryText(6-i)), "version %d whole: %q", 6-i, v)
	}
	require.Equal(t, fmt.Sprintf("… and earlier versions that do not fit here: %d. /export has every version.", 6-len(versions)), parts[len(parts)-1])
	require.Equal(t, []string{"‹ Back"}, history.ReplyMarkup.Labels())

	env.pressed(t, ann, history, "‹ Back", "What I remember about you, newest first (1–1 of 1):")
	requireEditsAccepted(t, env.srv)
}
