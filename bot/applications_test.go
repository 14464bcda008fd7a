package bot_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/e2e/tgfake"
)

// stepData is a step button's callback data as the bot encodes it.
func stepData(t *testing.T, action string, matchID, from, to int64) string {
	t.Helper()
	d, err := bot.Encode(bot.Action{Name: action, IDs: 3}, matchID, from, to)
	require.NoError(t, err)
	return d
}

// After Applied the card offers the next steps; each press moves the
// match along the table and edits the card; a press on an older state's
// button, a second press, someone else's press and a step the table does
// not allow are refused with an alert and change nothing.
func TestApplicationStepsOnTheCard(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann, bob := env.annAndBob()
	env.ask(t, ann, "/start")
	env.ask(t, bob, "/start")
	d := sampleCard(0)
	id := env.queueVacancy(t, 42, d.Vacancy, d.Verdict)
	msg := env.waitCard(t, 42, id)
	press(t, env.srv, ann, msg, data(t, "va", id))

	card, _ := env.srv.MessageByID(42, msg.MessageID)
	require.Equal(t, []string{"🎉 Invited", "❌ Rejected", "🔇 No answer", "Open on hh.ru"}, card.ReplyMarkup.Labels())
	rejectFromApplied := stepData(t, "vs", id, 1, 5)
	require.Equal(t, rejectFromApplied, card.ReplyMarkup.Buttons()[1].CallbackData)

	// Bob forges Ann's step; Ann forges a step the table refuses.
	a := pressRaw(t, env.srv, bob, env.ask(t, bob, "/start"), stepData(t, "vs", id, 1, 3))
	require.Equal(t, "This button is not for you.", a.Text)
	a = pressRaw(t, env.srv, ann, card, stepData(t, "vs", id, 1, 4))
	requireAlert(t, a, "This application is already marked: Applied. Nothing changed.")
	a = pressRaw(t, env.srv, ann, card, stepData(t, "vs", id, 1, 9))
	require.Equal(t, "This button is no longer valid.", a.Text)
	require.Equal(t, "APPLIED", matchStatus(t, env.st, id))

	q, err := ann.PressButton(card, "🎉 Invited")
	require.NoError(t, err)
	a = answer(t, env.srv, q)
	requireToast(t, a, "Marked: invited.")
	require.Equal(t, "INVITED", matchStatus(t, env.st, id))
	card, _ = env.srv.MessageByID(42, msg.MessageID)
	require.Equal(t, sampleText+"\n\n🎉 Invited", card.Text)
	require.Equal(t, []string{"🏆 Offer", "❌ Rejected", "Open on hh.ru"}, card.ReplyMarkup.Labels())
	edits := len(card.Edits)

	// The Rejected of the Applied card, pressed on a stale client: INVITED →
	// REJECTED is allowed, but not what the presser saw.
	a = pressRaw(t, env.srv, ann, card, rejectFromApplied)
	require.Equal(t, "This application is already marked: Invited. Nothing changed.", a.Text)
	a = pressRaw(t, env.srv, ann, card, stepData(t, "vs", id, 1, 3))
	require.Equal(t, "This application is already marked: Invited. Nothing changed.", a.Text, "a second press")
	require.Equal(t, "INVITED", matchStatus(t, env.st, id))
	card, _ = env.srv.MessageByID(42, msg.MessageID)
	require.Len(t, card.Edits, edits, "a refused press edits nothing")

	q, err = ann.PressButton(card, "🏆 Offer")
	require.NoError(t, err)
	require.Equal(t, "Marked: offer.", answer(t, env.srv, q).Text)
	card, _ = env.srv.MessageByID(42, msg.MessageID)
	require.Equal(t, sampleText+"\n\n🏆 Offer received", card.Text)
	require.Equal(t, []string{"Open on hh.ru"}, card.ReplyMarkup.Labels(), "an offer is final")
	require.Equal(t, "OFFER", matchStatus(t, env.st, id))
	require.Zero(t, cardRows(t, env.st, id)-1, "presses queue nothing")
}

// /applications: the funnel of the last 30 days overall and per search,
// and the applications waiting longest without news, numbered, with their
// steps; a step pressed there redraws the whole report.
func TestApplicationsReport(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	ann, _ := env.annAndBob()
	require.Equal(t, "You have marked no application in the last 30 days. When you apply for a vacancy, press ✅ Applied on its card and I will keep track of it.",
		env.ask(t, ann, "/applications").Text)

	ctx := context.Background()
	sr, _, err := env.svc.AddSearch(ctx, 42, vacancy.Params{Text: "golang"})
	require.NoError(t, err)
	now := time.Now()
	walk := func(v int64, title string, start time.Time, steps ...vacancy.Status) int64 {
		insertVacancy(t, env.st, vacancy.Vacancy{ID: v, Title: title, Employer: "ACME", URL: "https://hh.ru/vacancy/" + title})
		id := insertMatch(t, env.st, 42, v, vacancy.SentToUser, &vacancy.Verdict{IsRelevant: relevant(), Score: 80})
		from := vacancy.SentToUser
		for i, to := range steps {
			_, ok, err := env.st.Applications().Move(ctx, id, from, to, start.Add(time.Duration(i)*24*time.Hour))
			require.NoError(t, err)
			require.True(t, ok)
			from = to
		}
		return id
	}
	walk(1, "one", now.Add(-5*24*time.Hour), vacancy.Applied, vacancy.Invited, vacancy.Offer)
	second := walk(2, "two", now.Add(-12*24*time.Hour-time.Hour), vacancy.Applied, vacancy.NoAnswer)
	walk(3, "three", now.Add(-3*24*time.Hour-time.Hour), vacancy.Applied)
	exec(t, env.st, `INSERT INTO search_hits (search_key, vacancy_id) VALUES ($1, 1), ($1, 2)`, sr.Key)

	msg := env.ask(t, ann, "/applications")
	require.Equal(t, "Your applications over the last 30 days\nApplied: 3\nAnswered: 1\nInvited: 1\nOffers: 1\n\n"+
		"By search\ngolang\napplied: 2 · answered: 1 · invited: 1 · offers: 1\n\n"+
		"Waiting for an answer: 2\n1. two — ACME\nNo answer · days without news: 11\n2. three — ACME\nApplied · days without news: 3\n\n"+
		"Mark what happened with the buttons: each carries the number of its application.", msg.Text)
	require.Equal(t, []string{"1 · 🎉 Invited", "1 · ❌ Rejected", "2 · 🎉 Invited", "2 · ❌ Rejected", "2 · 🔇 No answer"}, msg.ReplyMarkup.Labels())
	require.Equal(t, stepData(t, "vw", second, 2, 3), msg.ReplyMarkup.Buttons()[0].CallbackData)

	q, err := ann.PressButton(msg, "1 · 🎉 Invited")
	require.NoError(t, err)
	require.Equal(t, "Marked: invited.", answer(t, env.srv, q).Text)
	require.Equal(t, "INVITED", matchStatus(t, env.st, second))
	redrawn, _ := env.srv.MessageByID(42, msg.MessageID)
	require.Contains(t, redrawn.Text, "Applied: 3\nAnswered: 2\nInvited: 2\nOffers: 1")
	require.Contains(t, redrawn.Text, "1. three — ACME\nApplied · days without news: 3\n2. two — ACME\nInvited · days without news: 0")
	require.Equal(t, []string{"1 · 🎉 Invited", "1 · ❌ Rejected", "1 · 🔇 No answer", "2 · 🏆 Offer", "2 · ❌ Rejected"}, redrawn.ReplyMarkup.Labels())

	// The old message's button, pressed again on a stale client.
	a := pressRaw(t, env.srv, ann, redrawn, stepData(t, "vw", second, 2, 3))
	require.Equal(t, "This application is already marked: Invited. Nothing changed.", a.Text)
}

// A reminder asks by what the application waits for, in the user's
// language, with the steps it may take and the link; pressing one edits
// it to the application as it now stands.
func TestFollowUpReminder(t *testing.T) {
	t.Parallel()
	rd := testRenderer(bot.RenderConfig{})
	app := vacancy.Application{
		Match:   vacancy.Match{ID: 5, UserID: 42, Status: vacancy.Applied},
		Vacancy: vacancy.Vacancy{Title: "Go <dev>", Employer: "ACME", URL: "https://hh.ru/vacancy/5"},
	}
	msgs := rd.FollowUp(vacancy.FollowUp{Application: app, Lang: "ru", Days: 8})
	require.Len(t, msgs, 1)
	require.Equal(t, domain.KindReply, msgs[0].Kind)
	require.EqualValues(t, 42, msgs[0].ChatID)
	require.Equal(t, "🔔 <b>Как дела с откликом?</b> Дней без новостей: 8. Работодатель ответил?\n\n<b>Go &lt;dev&gt;</b>\nACME\nСтатус: <b>Отклик отправлен</b>",
		msgs[0].Text)
	var texts []string
	for _, row := range msgs[0].Buttons {
		for _, b := range row {
			texts = append(texts, b.Text)
		}
	}
	require.Equal(t, []string{"🎉 Пригласили", "❌ Отказ", "🔇 Нет ответа", "Открыть на hh.ru"}, texts)
	require.True(t, strings.HasPrefix(msgs[0].Buttons[0][0].Data, "vf:"))

	app.Match.Status = vacancy.Invited
	msgs = rd.FollowUp(vacancy.FollowUp{Application: app, Lang: "en", Days: 7})
	require.True(t, strings.HasPrefix(msgs[0].Text, "🔔 <b>How did the interview go?</b> Days without news: 7."), msgs[0].Text)

	app.Match.Status = vacancy.NoAnswer
	require.Empty(t, rd.FollowUp(vacancy.FollowUp{Application: app, Lang: "en"}), "no reminder for an answered question")
}
