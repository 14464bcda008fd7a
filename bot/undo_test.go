package bot_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A card marked Not interested carries Undo above its links; only its
// owner may press it; the press brings the card back with its decision
// buttons and a toast, and a press from a client still showing Undo after
// the card was decided anew is an alert that changes nothing.
func TestUndoBringsANotInterestedCardBack(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	c := annsCard(t, env)
	ann, d, msg := c.ann, c.d, c.msg
	undo := data(t, "vu", d.MatchID)
	require.NotContains(t, msg.ReplyMarkup.Labels(), "↩️ Undo", "nothing to undo before a decision")

	press(t, env.srv, ann, msg, data(t, "vn", d.MatchID))
	decided, _ := env.srv.MessageByID(42, msg.MessageID)
	require.True(t, strings.HasSuffix(decided.Text, "\n\n🚫 Not interested"), decided.Text)
	require.Equal(t, "↩️ Undo", decided.ReplyMarkup.InlineKeyboard[0][0].Text)
	require.Equal(t, undo, decided.ReplyMarkup.InlineKeyboard[0][0].CallbackData)
	require.Len(t, decided.ReplyMarkup.InlineKeyboard, 2, "Undo, then the links")

	c.requireForgeryRefused(t, env, undo, "NOT_INTERESTED")

	a := press(t, env.srv, ann, decided, undo)
	requireToast(t, a, "Back among your vacancies: decide again.")
	require.Equal(t, "SENT_TO_USER", matchStatus(t, env.st, d.MatchID))
	back, _ := env.srv.MessageByID(42, msg.MessageID)
	require.Equal(t, msg.Text, back.Text, "the card as it first came")
	require.Equal(t, msg.ReplyMarkup.Labels(), back.ReplyMarkup.Labels())

	press(t, env.srv, ann, back, data(t, "va", d.MatchID))
	a = pressRaw(t, env.srv, ann, decided, undo)
	requireAlert(t, a, "Nothing to undo: this vacancy is no longer marked Not interested.")
	require.Equal(t, "APPLIED", matchStatus(t, env.st, d.MatchID))
}

// Undo and its answers read in the user's language.
func TestUndoInRussianAndUkrainian(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	for _, tc := range []struct {
		id                  int64
		lang, button, toast string
	}{
		{51, "ru", "↩️ Вернуть", "Вакансия снова ждёт вашего решения."},
		{52, "uk", "↩️ Повернути", "Вакансія знову чекає на ваше рішення."},
	} {
		who, d, msg := langCard(t, env, tc.id, tc.lang, 3000+tc.id)
		press(t, env.srv, who, msg, data(t, "vn", d.MatchID))
		decided, _ := env.srv.MessageByID(tc.id, msg.MessageID)
		require.Equal(t, tc.button, decided.ReplyMarkup.InlineKeyboard[0][0].Text, tc.lang)
		a := press(t, env.srv, who, decided, data(t, "vu", d.MatchID))
		require.Equal(t, tc.toast, a.Text, tc.lang)
	}
}
