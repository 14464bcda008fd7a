package bot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/storage/storagetest"
)

// A refused /tracker argument is echoed as typed, escaped once: the
// admin reads what they sent, not its HTML entities.
func TestTrackerEchoesARefusedArgumentAsTyped(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	tb := setupDeps(t, bot.Config{}, st, bot.Deps{Tasks: st.Tasks()}, nil)
	boss := tb.srv.User(adminID, "Boss", "en")
	got := tb.ask(t, boss, "/tracker -100123 github a<b&c").Text
	require.Contains(t, got, "“a<b&c” is not a GitHub repository")
	require.Contains(t, got, "Usage")
}
