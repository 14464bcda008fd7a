package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// lastOnlyFor is the last message of the bot's in a group that only who
// sees (an ephemeral message), waited for.
func lastOnlyFor(t *testing.T, env *e2e.Env, chat int64, who *tgfake.Person, n int) tgfake.BotMessage {
	t.Helper()
	var got tgfake.BotMessage
	env.TG.WaitFor(t, 60*time.Second, func() bool {
		eph := env.TG.EphemeralMessages(chat)
		if len(eph) < n {
			return false
		}
		got = eph[n-1]
		return true
	})
	require.Equal(t, who.ID(), got.ReceiverUser.ID, "seen by the wrong member: %q", got.Text)
	return got
}

// Only the asker sees it: in a group the bot administers, a member who
// types a private command gets the pointer to the private chat, and one
// who types an admin command in the admin chat gets the refusal, as
// messages only they see; a member who presses the board's buttons gets
// the refusal so too. Where the bot is no administrator, the pointer goes
// to the group as before; on a server without ephemeral messages (which
// ignores the parameter) everything goes to the group, and /status says so.
func TestOnlyTheAskerSeesPointersAndRefusals(t *testing.T) {
	t.Parallel()
	env, team := teamEnv(t)
	env.Start(nil)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(811, "Ann", "en")
	boss.SetBotStatus(team.ID, tgfake.StatusAdministrator)
	boss.SetBotStatus(adminGroup, tgfake.StatusAdministrator)

	ann.SendText(team.ID, "/profile")
	pointer := lastOnlyFor(t, env, team.ID, ann, 1)
	require.Contains(t, pointer.Text, "/profile")
	require.Equal(t, []string{"Open the private chat"}, pointer.ReplyMarkup.Labels())
	require.NotZero(t, pointer.ReplyToID(), "it answers Ann's command")

	ann.SendText(adminGroup, "/status")
	refusal := lastOnlyFor(t, env, adminGroup, ann, 1)
	require.Equal(t, "This command is for admins only.", refusal.Text)

	// A run's board; Ann presses it.
	ann.SendText(team.ID, "Bob, please fix the login page")
	board := completedRun(t, env, boss)
	answer := ann.PressAndWait(t, board, "1 ✅")
	require.Empty(t, answer.Text, "no alert: the refusal is a message")
	require.Equal(t, "This button is not for you.", lastOnlyFor(t, env, adminGroup, ann, 2).Text)
	for _, m := range env.TG.Messages(adminGroup) {
		require.NotContains(t, m.Text, "admins only", "the refusal reached the whole admin chat")
	}
	require.Empty(t, env.TG.Messages(team.ID), "the group saw nothing")

	// No administrator: the pointer is the group's, as before.
	boss.SetBotStatus(team.ID, tgfake.StatusMember)
	ann.SendText(team.ID, "/vacancies")
	public := env.TG.WaitMessage(t, team.ID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "/vacancies") })
	require.Nil(t, public.ReceiverUser)

	// A server that knows no ephemeral messages posts them for everyone.
	env.TG.SetUnsupported(true, tgfake.FeatureEphemeral)
	ann.SendText(adminGroup, "/orders")
	env.TG.WaitMessage(t, adminGroup, func(m tgfake.BotMessage) bool { return m.Text == "This command is for admins only." })
	require.Contains(t, ask(t, env, boss, boss.ID(), "/status").Shown(),
		"⚠️ This Bot API server lacks ephemeral messages (Bot API 10.3): pointers to the private chat and refusals in groups are seen by the whole group.")
	answer = ann.PressAndWait(t, board, "1 ✅")
	require.Equal(t, "This button is not for you.", answer.Text, "known to lack them: an alert, as before")
	require.Len(t, env.TG.EphemeralMessages(adminGroup), 2)
}
