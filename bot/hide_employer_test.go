package bot_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/e2e/tgfake"
)

// A card's *Hide this employer*: only its owner may press it; the press
// marks the card Not interested and says, in a pop-up with the name as
// written, how to undo it; /bans lists the employer with a button that
// shows it again and edits the list to what is left.
func TestHideEmployerFromTheCardAndShowItAgain(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	c := annsCard(t, env)
	ann, bob, bobs, d, msg := c.ann, c.bob, c.bobs, c.d, c.msg
	require.Equal(t, []string{"✍️ Cover letter", "🙈 Hide this employer"},
		[]string{msg.ReplyMarkup.InlineKeyboard[1][0].Text, msg.ReplyMarkup.InlineKeyboard[1][1].Text})
	hide := data(t, "vh", d.MatchID)
	require.Equal(t, hide, msg.ReplyMarkup.InlineKeyboard[1][1].CallbackData)

	c.requireForgeryRefused(t, env, hide, "SENT_TO_USER")

	a := press(t, env.srv, ann, msg, hide)
	requireAlert(t, a, "Vacancies from ACME <Ltd> will not be sent to you any more. /bans lists hidden employers and shows them again.")
	require.LessOrEqual(t, len([]rune(a.Text)), 200, "Telegram's limit for a pop-up")
	require.Equal(t, "NOT_INTERESTED", matchStatus(t, env.st, d.MatchID))
	edited, _ := env.srv.MessageByID(42, msg.MessageID)
	require.True(t, strings.HasSuffix(edited.Text, "\n\n🚫 Not interested"), edited.Text)

	// A press from a client still showing the old buttons.
	a = pressRaw(t, env.srv, ann, msg, hide)
	require.Equal(t, "ACME <Ltd> is hidden already; /bans shows it again.", a.Text)

	list := env.ask(t, ann, "/bans")
	require.Equal(t, "You have no ban words. Add one: /ban 1C\n\nHidden employers (1):\n• ACME <Ltd>", list.Text)
	buttons := list.ReplyMarkup.Buttons()
	require.Len(t, buttons, 1)
	require.Equal(t, "👁 Show ACME <Ltd> again", buttons[0].Text)

	a = pressRaw(t, env.srv, bob, bobs, buttons[0].CallbackData)
	require.Equal(t, "This employer is not hidden any more.", a.Text, "Bob has no such hiding: nothing of Ann's changes")
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM hidden_employers WHERE user_id = 42`))

	a = press(t, env.srv, ann, list, buttons[0].CallbackData)
	require.Equal(t, "Vacancies from ACME <Ltd> will be sent to you again.", a.Text)
	edited, _ = env.srv.MessageByID(42, list.MessageID)
	require.Equal(t, "You have no ban words. Add one: /ban 1C", edited.Text)
	require.Empty(t, edited.ReplyMarkup.Buttons())
	a = pressRaw(t, env.srv, ann, list, buttons[0].CallbackData)
	require.Equal(t, "This employer is not hidden any more.", a.Text)
}

// The button, the pop-up and /bans read in the user's language.
func TestHideEmployerInRussianAndUkrainian(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	for _, tc := range []struct {
		id                          int64
		lang, button, popup, header string
	}{
		{51, "ru", "🙈 Скрыть работодателя", "Вакансии ACME <Ltd> больше не будут приходить. /bans покажет скрытых работодателей и вернёт их.",
			"Скрытые работодатели (1):\n• ACME <Ltd>"},
		{52, "uk", "🙈 Сховати роботодавця", "Вакансії ACME <Ltd> більше не надходитимуть. /bans покаже прихованих роботодавців і поверне їх.",
			"Приховані роботодавці (1):\n• ACME <Ltd>"},
	} {
		who, d, msg := langCard(t, env, tc.id, tc.lang, 2000+tc.id)
		require.Equal(t, tc.button, msg.ReplyMarkup.InlineKeyboard[1][1].Text)
		a := press(t, env.srv, who, msg, data(t, "vh", d.MatchID))
		require.Equal(t, tc.popup, a.Text)
		require.True(t, strings.HasSuffix(env.ask(t, who, "/bans").Text, tc.header), tc.lang)
	}
}

// cardScene is Ann's card, delivered, and Bob, with a message of his own
// whose buttons he can replace with data naming Ann's rows: a forged press.
type cardScene struct {
	ann, bob  *tgfake.Person
	bobs, msg tgfake.BotMessage
	d         vacancy.CardData
}

func annsCard(t *testing.T, env vacEnv) cardScene {
	t.Helper()
	c := cardScene{ann: env.srv.User(42, "Ann", "en"), bob: env.srv.User(43, "Bob", "en"), d: sampleCard(0)}
	env.ask(t, c.ann, "/start")
	c.bobs = env.ask(t, c.bob, "/start")
	c.d.MatchID = env.queueVacancy(t, 42, c.d.Vacancy, c.d.Verdict)
	c.msg = env.waitCard(t, 42, c.d.MatchID)
	return c
}

// requireForgeryRefused presses data from Bob's own chat: a card's buttons
// are its owner's alone, so the press is refused and the match stays at
// status.
func (c cardScene) requireForgeryRefused(t *testing.T, env vacEnv, data, status string) {
	t.Helper()
	a := pressRaw(t, env.srv, c.bob, c.bobs, data)
	require.Equal(t, "This button is not for you.", a.Text)
	require.Equal(t, status, matchStatus(t, env.st, c.d.MatchID))
}

// langCard is the card of vacancy vacancyID delivered to user id, who
// started the bot in lang: where the tests of a button's wording in each
// language start.
func langCard(t *testing.T, env vacEnv, id int64, lang string, vacancyID int64) (*tgfake.Person, vacancy.CardData, tgfake.BotMessage) {
	t.Helper()
	who := env.srv.User(id, "Олена", lang)
	env.ask(t, who, "/start")
	d := sampleCard(0)
	d.UserID, d.Lang = id, lang
	d.Vacancy.ID = vacancyID
	d.MatchID = env.queueVacancy(t, id, d.Vacancy, d.Verdict)
	return who, d, env.waitCard(t, id, d.MatchID)
}
