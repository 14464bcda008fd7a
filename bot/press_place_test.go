package bot_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/vacancy"
	"switchboard/storage/storagetest"
)

// A job seeker's button is answered only in their private chat: forged
// onto a message of the admin chat (any member may press any data on any
// message there), it would overwrite a message that is not theirs with
// their ban list or hidden employers, for the whole chat to read.
func TestPersonalButtonOutsideThePressersPrivateChatIsRefused(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	svc, err := vacancy.NewService(vacancy.Config{}, vacancy.Deps{
		Matches: st.Matches(), Profiles: st.Users(), Searches: st.Searches(), Applications: st.Applications(),
		Source: stubSource{}, LLM: &stubLLM{}, Notifier: testRenderer(bot.RenderConfig{}), Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	rc := bot.RenderConfig{AdminChatID: adminChat, AdminLang: "en"}
	env := setupDeps(t, bot.Config{RateLimit: 1000, RateBurst: 1000, RenderConfig: rc}, st, bot.Deps{Vacancies: svc}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "note", Desc: "cmd.help", Role: bot.RoleAdmin, Handle: func(r *bot.Request) error {
			return r.Reply("Standup moved to 10:00", nil)
		}})
	})
	env.srv.Supergroup(adminChat, "Admins", "")
	admin := env.srv.User(adminID, "Boss", "en")
	ann, _ := env.annAndBob() // a member of the admin chat, not an admin

	banned := env.ask(t, ann, "/ban secretword")
	require.Contains(t, banned.Text, "Banned: secretword.")
	_, err = st.Searches().HideEmployer(context.Background(), 42, "Acme Secret Ltd", vacancy.MaxHiddenEmployers)
	require.NoError(t, err)
	hidden, err := svc.HiddenEmployers(context.Background(), 42)
	require.NoError(t, err)
	require.Len(t, hidden, 1)

	note := admin.SendText(adminChat, "/note")
	posted := env.srv.WaitMessageAfter(t, adminChat, note.MessageID, nil)
	require.Equal(t, "Standup moved to 10:00", posted.Text)

	for _, d := range []string{data(t, "vb", 0), data(t, "vk", hidden[0].ID, 0)} {
		a := pressRaw(t, env.srv, ann, posted, d)
		env.settle(t)
		require.Equal(t, "This button is not for you.", refusedInGroup(t, env.srv, adminChat, ann, a), d)
		now, ok := env.srv.MessageByID(adminChat, posted.MessageID)
		require.True(t, ok)
		require.Empty(t, now.Edits, "%s: the admin's message is left as it was", d)
		require.Equal(t, posted.Message, now.Message, d)
	}
	after, err := svc.HiddenEmployers(context.Background(), 42)
	require.NoError(t, err)
	require.Equal(t, hidden, after, "refused before anything changed")

	// In her own chat the same press is hers to make.
	a := pressRaw(t, env.srv, ann, banned, data(t, "vb", 0))
	require.Empty(t, a.Text)
	mine, ok := env.srv.MessageByID(ann.ID(), banned.MessageID)
	require.True(t, ok)
	require.Contains(t, mine.Text, "Acme Secret Ltd")
}
