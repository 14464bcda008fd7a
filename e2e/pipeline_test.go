package e2e_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// pressFor presses the button reading text on msg as who and returns the
// answer to the press.
func pressFor(t *testing.T, env *e2e.Env, who *tgfake.Person, msg tgfake.BotMessage, text string) tgfake.CallbackAnswer {
	t.Helper()
	q, err := who.PressButton(msg, text)
	require.NoError(t, err, describe(msg))
	return env.TG.WaitCallbackAnswer(t, q.ID)
}

// The card's buttons move an application Applied → Invited → Offer, each
// press editing the card; a stale press and a forged one change nothing;
// /applications counts it, overall and for the search that found it, and
// lists the application still waiting.
func TestPipelineButtonsAndApplications(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	env.HH.Add(golangVacancies(2, 7600)...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})
	pool := db(t, env)

	ann := env.TG.User(641, "Ann", "en")
	subscribe(t, env, ann, "golang")
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 2 })
	cards := vacancyMessages(env, ann.ID())
	card, other := cards[0], cards[1]

	require.False(t, pressFor(t, env, ann, card, "✅ Applied").ShowAlert)
	card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
	require.Contains(t, card.Text, "Applied")
	require.Contains(t, describe(card), "🎉 Invited")
	require.Contains(t, describe(card), "🔇 No answer")
	rejected := buttonData(t, card, "❌ Rejected")

	require.Equal(t, "Marked: Invited.", pressFor(t, env, ann, card, "🎉 Invited").Text)
	card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
	require.Contains(t, card.Text, "🎉 Invited")
	require.NotContains(t, describe(card), "No answer")
	offer := buttonData(t, card, "🏆 Offer")

	// Rejected as the Applied card offered it: not what the card shows now.
	stale := env.TG.WaitCallbackAnswer(t, ann.PressRaw(card, rejected).ID)
	require.True(t, stale.ShowAlert)
	require.Equal(t, "This application is already marked: Invited. Nothing changed.", stale.Text)

	// Bob forges Ann's Offer on a message of his own chat.
	bob := env.TG.User(642, "Bob", "en")
	forged := env.TG.WaitCallbackAnswer(t, bob.PressRaw(ask(t, env, bob, bob.ID(), "/start"), offer).ID)
	require.Equal(t, "This button is not for you.", forged.Text)
	require.Equal(t, map[string]int{"INVITED": 1, "SENT_TO_USER": 1}, statuses(t, pool))

	require.Equal(t, "Marked: Offer.", pressFor(t, env, ann, card, "🏆 Offer").Text)
	card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
	require.Contains(t, card.Text, "🏆 Offer received")
	require.NotContains(t, describe(card), "Rejected", "an offer is final")
	require.False(t, pressFor(t, env, ann, other, "✅ Applied").ShowAlert)
	require.Equal(t, map[string]int{"OFFER": 1, "APPLIED": 1}, statuses(t, pool))

	report := ask(t, env, ann, ann.ID(), "/applications")
	require.Contains(t, report.Text, "Your applications over the last 30 days\nApplied: 2\nAnswered: 1\nInvited: 1\nOffers: 1")
	require.Contains(t, report.Text, "By search\ngolang\napplied: 2 · answered: 1 · invited: 1 · offers: 1")
	require.Contains(t, report.Text, "Waiting for an answer: 1\n1. ")
	require.Equal(t, "1 · 🎉 Invited", report.ReplyMarkup.Buttons()[0].Text)

	// A step pressed in the report redraws it with the new counts.
	require.Equal(t, "Marked: Rejected.", pressFor(t, env, ann, report, "1 · ❌ Rejected").Text)
	report, _ = env.TG.MessageByID(ann.ID(), report.MessageID)
	require.Contains(t, report.Text, "Applied: 2\nAnswered: 2\nInvited: 1\nOffers: 1")
	require.NotContains(t, report.Text, "Waiting for an answer")
	require.Empty(t, report.ReplyMarkup.Buttons())
	require.Equal(t, map[string]int{"OFFER": 1, "REJECTED": 1}, statuses(t, pool))
	// The card tells the same story as the report.
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		other, _ = env.TG.MessageByID(ann.ID(), other.MessageID)
		return strings.Contains(other.Text, "❌ Rejected")
	})
	require.NotContains(t, describe(other), "No answer", "a rejection is final")
}

// A week after Applied, by the binary's injected clock (CLOCK_START,
// restarted eight days later), a reminder asks how it went, once; its
// Invited button moves the application and edits the reminder, and the
// invitation's own waiting period gets its own reminder a week on.
func TestFollowUpReminderOnInjectedClock(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	env.HH.Add(golangVacancies(1, 7700)...)
	start := time.Now().UTC().Truncate(time.Second)
	over := map[string]string{
		"FETCH_INTERVAL": "1h", "APPLICATION_FOLLOW_UP_INTERVAL": "1s",
		"CLOCK_START": start.Format(time.RFC3339),
	}
	p := env.Start(over)
	pool := db(t, env)
	ann := env.TG.User(651, "Ann", "en")
	subscribe(t, env, ann, "golang")
	card := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Score: 87/100") })
	require.False(t, pressFor(t, env, ann, card, "✅ Applied").ShowAlert)
	require.Equal(t, map[string]int{"APPLIED": 1}, statuses(t, pool))
	p.Signal(syscall.SIGTERM)
	require.Zero(t, p.Wait(30*time.Second))
	require.Zero(t, reminders(t, pool, ann.ID()), "not due within the week")

	over["CLOCK_START"] = start.Add(8*24*time.Hour + time.Hour).Format(time.RFC3339)
	p = env.Start(over)
	reminder := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔔") })
	require.Contains(t, reminder.Text, "How did it go? Days without news: 8. Did the employer answer?")
	require.Contains(t, reminder.Text, "Golang developer 7700\n")
	require.Contains(t, reminder.Text, "Status: Applied")
	require.Contains(t, describe(reminder), "🎉 Invited")
	require.Contains(t, describe(reminder), "https://hh.ru/vacancy/7700")
	var reminded bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT followed_up_at IS NOT NULL FROM vacancy_matches`).Scan(&reminded))
	require.True(t, reminded)

	require.Equal(t, "Marked: Invited.", pressFor(t, env, ann, reminder, "🎉 Invited").Text)
	reminder, _ = env.TG.MessageByID(ann.ID(), reminder.MessageID)
	require.Contains(t, reminder.Text, "Status: Invited")
	require.NotContains(t, reminder.Text, "🔔", "the question is answered")
	require.Contains(t, describe(reminder), "🏆 Offer")
	var invitedDays float64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM invited_at - applied_at) / 86400 FROM vacancy_matches WHERE status = 'INVITED' AND followed_up_at IS NULL`).Scan(&invitedDays))
	require.InDelta(t, 8, invitedDays, 0.1, "reported on the injected clock")
	require.Equal(t, 1, reminders(t, pool, ann.ID()), "one reminder per waiting period")
	p.Signal(syscall.SIGTERM)
	require.Zero(t, p.Wait(30*time.Second))

	// A week after the invitation.
	over["CLOCK_START"] = start.Add(16*24*time.Hour + 2*time.Hour).Format(time.RFC3339)
	env.Start(over)
	second := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔔 How did the interview go?") })
	require.Contains(t, describe(second), "🏆 Offer")
	require.Equal(t, "Marked: Offer.", pressFor(t, env, ann, second, "🏆 Offer").Text)
	require.Equal(t, map[string]int{"OFFER": 1}, statuses(t, pool))
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
		return strings.Contains(card.Text, "🏆 Offer received")
	})
	require.NotContains(t, describe(card), "Rejected", "the card offers no step after an offer")
	require.Equal(t, 2, reminders(t, pool, ann.ID()))
}

// reminders counts the follow-up reminders queued for the chat (the
// messages themselves are edited once answered).
func reminders(t *testing.T, pool *pgxpool.Pool, chatID int64) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE chat_id = $1 AND body->>'text' LIKE '🔔%'`, chatID).Scan(&n))
	return n
}
