package e2e_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// moscowAt is today's date in Moscow at hh:mm:ss, as CLOCK_START takes it,
// and the instant.
func moscowAt(t *testing.T, days, hh, mm, ss int) (string, time.Time) {
	t.Helper()
	msk, err := time.LoadLocation("Europe/Moscow")
	require.NoError(t, err)
	y, m, d := time.Now().In(msk).Date()
	at := time.Date(y, m, d+days, hh, mm, ss, 0, msk)
	return at.Format(time.RFC3339), at
}

// rhythmBundle is a rhythm test's scene: the bot started with its wall
// clock at a Moscow time and digests checked every second, and Ann with her
// settings open in Moscow's zone.
type rhythmBundle struct {
	env      *e2e.Env
	ann      *tgfake.Person
	settings tgfake.BotMessage
	// start is the bot's clock when it started; since is the real time
	// just before, so that a moment of the bot's clock is no earlier than
	// since + (moment − start).
	start, since time.Time
}

// setupRhythm starts the bot with n relevant vacancies (ids from first) and
// its clock at hh:mm:ss in Moscow today, and opens the settings of Ann
// (user first+1).
func setupRhythm(t *testing.T, n int, first int64, hh, mm, ss int) *rhythmBundle {
	t.Helper()
	env := e2e.New(t)
	relevantVacancies(env, n, first)
	clock, start := moscowAt(t, 0, hh, mm, ss)
	// Built first: the build (once per test process) is none of the bot's
	// time, and since must be just before its start.
	e2e.Binary(t)
	since := time.Now()
	env.Start(map[string]string{"FETCH_INTERVAL": "1h", "DIGEST_INTERVAL": "1s", "CLOCK_START": clock})
	ann := env.TG.User(first+1, "Ann", "en")
	return &rhythmBundle{env: env, ann: ann, settings: openSettings(t, env, ann), start: start, since: since}
}

// choose presses a settings button, checks the settings now say want, and
// subscribes Ann to golang.
func (b *rhythmBundle) choose(t *testing.T, button, want string) {
	t.Helper()
	b.ann.PressAndWait(t, b.settings, button)
	require.Contains(t, current(t, b.env, b.ann.ID(), b.settings.MessageID).Text, want)
	subscribe(t, b.env, b.ann, "golang")
}

// openSettings sets Moscow as the user's zone and opens /settings.
func openSettings(t *testing.T, env *e2e.Env, who *tgfake.Person) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(who.ID(), "/timezone Europe/Moscow")
	env.TG.WaitMessageAfter(t, who.ID(), sent.MessageID, nil)
	sent = who.SendText(who.ID(), "/settings")
	return env.TG.WaitMessageAfter(t, who.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "How vacancies reach you")
	})
}

// current is a message as it is now, after edits.
func current(t *testing.T, env *e2e.Env, chatID int64, id int) tgfake.BotMessage {
	t.Helper()
	for _, m := range env.TG.Messages(chatID) {
		if m.MessageID == id {
			return m
		}
	}
	t.Fatalf("message %d not in chat %d", id, chatID)
	return tgfake.BotMessage{}
}

func digestMessages(env *e2e.Env, chatID int64) []tgfake.BotMessage {
	var out []tgfake.BotMessage
	for _, m := range env.TG.Messages(chatID) {
		if strings.Contains(m.Text, "New vacancies for you") {
			out = append(out, m)
		}
	}
	return out
}

// A digest set to 22:00 with quiet hours 22:00–08:00 goes at 08:00, once,
// listing every vacancy judged by then, best first; no card goes before it;
// a number sends that vacancy's card, once, whose buttons work as ever.
func TestRhythmDigestAtItsTimeWithQuietHours(t *testing.T) {
	t.Parallel()
	b := setupRhythm(t, 3, 9100, 7, 59, 25)
	env, ann, settings, start, since := b.env, b.ann, b.settings, b.start, b.since
	pool := db(t, env)

	require.Contains(t, settings.Text, "Mode: a card for each vacancy")
	require.Contains(t, settings.Text, "Times are in your zone: Moscow (UTC+03:00). /timezone changes it.")
	// Someone who never chose a zone is told it is a guess.
	boris := env.TG.User(ann.ID()+100, "Борис", "ru")
	require.Contains(t, ask(t, env, boris, boris.ID(), "/settings").Text,
		"Время указано в поясе Москва (UTC+03:00), угаданном по языку: свой пояс можно задать командой /timezone.")
	require.Contains(t, ann.PressAndWait(t, settings, "Digest").Text, "Saved")
	ann.PressAndWait(t, settings, "22:00")
	ann.PressAndWait(t, settings, "✓ 09:00")
	ann.PressAndWait(t, settings, "✓ 18:00")
	ans := ann.PressAndWait(t, settings, "✓ 22:00")
	require.True(t, ans.ShowAlert, "the last time stays")
	require.Contains(t, ans.Text, "at least one time")
	ann.PressAndWait(t, settings, "22:00–08:00")
	settings = current(t, env, ann.ID(), settings.MessageID)
	require.Contains(t, settings.Text, "Digest times: 22:00")
	require.Contains(t, settings.Text, "Quiet hours: 22:00–08:00")
	require.Contains(t, settings.Text, "Next digest: ")
	require.Contains(t, settings.Text, "08:00 (Moscow)", "22:00 is inside quiet hours: the digest moves to their end")

	subscribe(t, env, ann, "golang")
	// The search's reply promises the digest, not a word within a minute.
	var saved []string
	for _, m := range env.TG.Messages(ann.ID()) {
		if strings.HasPrefix(m.Text, "Saved: golang") {
			saved = append(saved, m.Text)
		}
	}
	require.Len(t, saved, 1)
	require.Regexp(t, `^Saved: golang\nI'm checking hh\.ru now\. You get vacancies as digests, so what I find comes in the next one, \d+ \w{3}( \d{4})?, 08:00 \(Moscow\)\.$`, saved[0])
	eventually(t, 20*time.Second, func() bool {
		return countBy(t, pool, `SELECT card, count(*) FROM vacancy_matches WHERE status = 'ANALYZED' GROUP BY card`)["digest"] == 3
	})
	require.Empty(t, digestMessages(env, ann.ID()), "nothing before 08:00")
	stats := ask(t, env, ann, ann.ID(), "/vacancies").Text
	require.Contains(t, stats, "\nRelevant, waiting for your next digest: 3\n")
	require.NotContains(t, stats, "being sent", "nothing is on its way before the digest")
	require.Empty(t, vacancyMessages(env, ann.ID()), "no card in digest mode")

	env.TG.WaitFor(t, 45*time.Second, func() bool { return len(digestMessages(env, ann.ID())) > 0 })
	require.GreaterOrEqual(t, time.Since(since), time.Date(start.Year(), start.Month(), start.Day(), 8, 0, 0, 0, start.Location()).Sub(start),
		"the digest went at 08:00 by the bot's clock, not before")
	digest := digestMessages(env, ann.ID())[0]
	require.Contains(t, digest.Text, "New vacancies for you: 3")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "\nIn a digest, not opened: 3\n")
	require.Contains(t, digest.Text, "1. Golang developer", "one line per vacancy")
	require.Contains(t, digest.Text, "⭐ 87")
	var buttons []string
	for _, b := range digest.ReplyMarkup.Buttons() {
		buttons = append(buttons, b.Text)
	}
	require.Equal(t, []string{"1", "2", "3"}, buttons, "a button per vacancy, no page button for three")

	// Later ticks of the job write no second digest.
	seen := time.Now()
	eventually(t, 10*time.Second, func() bool {
		var at time.Time
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT started_at FROM job_runs WHERE name = 'vacancy-digest'`).Scan(&at))
		return at.After(seen.Add(1500 * time.Millisecond))
	})
	require.Len(t, digestMessages(env, ann.ID()), 1)
	require.Equal(t, map[string]int{"listed": 3}, countBy(t, pool, `SELECT card, count(*) FROM vacancy_matches GROUP BY card`))

	ann.PressAndWait(t, digest, "1")
	card := env.TG.WaitMessageAfter(t, ann.ID(), digest.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Score: 87") })
	require.Contains(t, card.Text, "Golang developer")
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["SENT_TO_USER"] == 1 })
	again := ann.PressAndWait(t, digest, "1")
	require.True(t, again.ShowAlert)
	require.Contains(t, again.Text, "already been sent")
	require.False(t, ann.PressAndWait(t, card, "✅ Applied").ShowAlert)
	require.Equal(t, 1, statuses(t, pool)["APPLIED"])
	require.Len(t, vacancyMessages(env, ann.ID()), 1, "one card for one press")

	// Another user may not open Ann's vacancies.
	bob := env.TG.User(9102, "Bob", "en")
	hello := bob.SendText(bob.ID(), "/settings")
	bobs := env.TG.WaitMessageAfter(t, bob.ID(), hello.MessageID, nil)
	var matchID int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT min(id) FROM vacancy_matches WHERE status = 'ANALYZED'`).Scan(&matchID))
	forged := bob.PressRaw(bobs, "vo:"+strconv.FormatInt(matchID, 36))
	require.True(t, env.TG.WaitCallbackAnswer(t, forged.ID).ShowAlert)
	require.Len(t, vacancyMessages(env, bob.ID()), 0)
	require.Len(t, vacancyMessages(env, ann.ID()), 1)
}

// In instant mode a card judged in quiet hours waits for their end; the
// reply to the user's command does not wait behind it.
func TestRhythmQuietHoursHoldACard(t *testing.T) {
	t.Parallel()
	b := setupRhythm(t, 1, 9200, 7, 59, 35)
	env, ann, pool := b.env, b.ann, db(t, b.env)
	b.choose(t, "22:00–08:00", "Quiet hours: 22:00–08:00")

	eventually(t, 20*time.Second, func() bool { return statuses(t, pool)["ANALYZED"] == 1 })
	held := countBy(t, pool, `SELECT lane, count(*) FROM outbox WHERE kind = 'vacancy' AND state = 'pending' GROUP BY lane`)
	require.Len(t, held, 1)
	for lane := range held {
		require.True(t, strings.HasPrefix(lane, "held:"), "a held card has a lane of its own: %q", lane)
	}
	sent := ann.SendText(ann.ID(), "/vacancies")
	env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	require.Empty(t, vacancyMessages(env, ann.ID()), "held until 08:00")

	env.TG.WaitFor(t, 45*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 1 })
	eight := time.Date(b.start.Year(), b.start.Month(), b.start.Day(), 8, 0, 0, 0, b.start.Location())
	require.GreaterOrEqual(t, time.Since(b.since), eight.Sub(b.start), "the card went at 08:00 by the bot's clock")
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["SENT_TO_USER"] == 1 })
}

// With a daily cap of 10, the day's first ten cards go and the rest wait
// for the next local day; nothing is lost.
func TestRhythmDailyCapHoldsTheRestUntilTomorrow(t *testing.T) {
	t.Parallel()
	b := setupRhythm(t, 12, 9300, 23, 59, 30)
	env, ann, pool := b.env, b.ann, db(t, b.env)
	b.choose(t, "10 a day", "Daily limit: 10 cards")

	env.TG.WaitFor(t, 20*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 10 })
	midnight := b.start.Add(30 * time.Second)
	require.Less(t, time.Since(b.since), midnight.Sub(b.start), "the ten went before midnight")
	eventually(t, 10*time.Second, func() bool {
		return countBy(t, pool, `SELECT state, count(*) FROM outbox WHERE kind = 'vacancy' AND lane LIKE 'held:%' GROUP BY state`)["pending"] == 2
	})
	require.Len(t, vacancyMessages(env, ann.ID()), 10)

	env.TG.WaitFor(t, 45*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 12 })
	require.GreaterOrEqual(t, time.Since(b.since), midnight.Sub(b.start), "the other two went at midnight by the bot's clock")
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["SENT_TO_USER"] == 12 })
}
