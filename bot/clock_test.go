package bot_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/config"
	"switchboard/domain/dispatch"
	"switchboard/e2e/tgfake"
)

// setupDispatchAt is setupDispatch with a dispatch calendar and a clock
// that reads at when the test starts and runs at real speed from there
// (CLOCK_START's), the admin chat's zone adminZone. As in app.go, the
// calendar reads that clock and everything else the real one.
func setupDispatchAt(t *testing.T, cal dispatch.Calendar, at time.Time, adminZone *time.Location) dispEnv {
	t.Helper()
	real := clockwork.NewRealClock()
	clock := config.ShiftedClock(real, at.Sub(real.Now()))
	rc := bot.RenderConfig{AdminChatID: adminChat, AdminLang: "en", AdminZone: adminZone, Calendar: cal, CalendarClock: clock}
	return dispatchBot(t, rc, dispatch.Config{OfferSLA: 10 * time.Minute, CommissionRate: 10, Calendar: cal}, clock)
}

// stamp is a date_time entity of a message: its words and its moment.
type stamp struct {
	Words  string
	At     time.Time
	Format string
}

// stamps are m's date_time entities, in order.
func stamps(m tgfake.BotMessage) []stamp {
	text := utf16.Encode([]rune(m.Text))
	var out []stamp
	for _, e := range m.Entities {
		if e.Type != "date_time" {
			continue
		}
		words := string(utf16.Decode(text[e.Offset : e.Offset+e.Length]))
		out = append(out, stamp{Words: words, At: time.Unix(e.UnixTime, 0), Format: e.DateTimeFormat})
	}
	return out
}

// On the day Berlin's clocks go back (25 Oct 2026, 03:00 → 02:00) the
// day is 25 hours long: a city open 10:00–20:00 opens at 10:00 on its
// clocks, and a visit "10-12" is 10:00 on them, not ten hours after
// midnight (09:00).
func TestOpeningAndVisitOnTheDayClocksGoBack(t *testing.T) {
	t.Parallel()
	cal, err := dispatch.ParseCalendar("Europe/Berlin", "10:00-20:00", "")
	require.NoError(t, err)
	berlin := cal.Zone("Berlin")
	env := setupDispatchAt(t, cal, time.Date(2026, 10, 25, 7, 0, 0, 0, berlin), berlin)

	reply := env.ask(t, env.admin, "/order Berlin Mitte plumbing 3000 Tap drips\nwhen: 25.10 10-12")
	require.Contains(t, reply.Text, "Masters in Berlin work from 10:00 to 20:00 local time, so it will be offered when they start, 25 Oct, 10:00 (Berlin)", reply.Text)
	ten := time.Date(2026, 10, 25, 10, 0, 0, 0, berlin)
	var opens, from bool
	for _, s := range stamps(reply) {
		switch {
		case strings.HasPrefix(s.Words, "25 Oct, 10:00"):
			opens = true
			require.Equal(t, ten.Unix(), s.At.Unix(), "the opening's moment is 10:00 on Berlin's clocks")
		case s.Words == "10:00" && s.Format == "t":
			from = true
			require.Equal(t, ten.Unix(), s.At.Unix(), "the visit's start is 10:00 on Berlin's clocks, not %s", s.At.In(berlin))
		case s.Words == "10:00":
			require.Equal(t, ten.Unix(), s.At.Unix(), "the hours' opening is 10:00 on Berlin's clocks, not %s", s.At.In(berlin))
		}
	}
	require.True(t, opens && from, "the reply has the opening and the visit: %q", reply.Text)
	open, at, _ := env.svc.Opening("Berlin")
	require.False(t, open)
	require.Equal(t, ten, at.In(berlin))
}

// Whether a date names its year is read on the bot's clock, not the
// host's: on a clock set in another year (CLOCK_START), a time in its year
// goes without one and a visit in the next has it.
func TestTheYearIsReadOnTheBotsClock(t *testing.T) {
	t.Parallel()
	cal, err := dispatch.ParseCalendar("Europe/Berlin", "10:00-20:00", "")
	require.NoError(t, err)
	berlin := cal.Zone("Berlin")
	eve := time.Date(2031, 12, 31, 7, 0, 0, 0, berlin)
	require.NotEqual(t, time.Now().Year(), eve.Year(), "the clock is in another year than the host")
	env := setupDispatchAt(t, cal, eve, berlin)

	reply := env.ask(t, env.admin, "/order Berlin Mitte plumbing 3000 Tap drips\nwhen: 02.01 10-12")
	require.Contains(t, reply.Text, "it will be offered when they start, 31 Dec, 10:00 (Berlin)", reply.Text)
	require.Contains(t, reply.Text, "2 Jan 2032, 10:00–12:00", reply.Text)
}

// An admin's command answered in their private chat is read by them
// alone: its times are in the zone they chose, as every other reply to
// them is; in the admin chat, in the admin chat's (ADMIN_CHAT_TIMEZONE).
func TestAdminRepliesInPrivateAreInTheAdminsZone(t *testing.T) {
	t.Parallel()
	moscow, err := time.LoadLocation("Europe/Moscow")
	require.NoError(t, err)
	pace := delivery.DefaultLimits()
	pace.GroupBurst = 20
	env := setupAnalysisIn(t, moscow, pace)
	team, ann := env.teamAndAnn("Team")
	require.Contains(t, env.ask(t, env.admin, "/timezone Europe/Berlin").Text, "Time zone set: Berlin")
	said := ann.SendText(team.ID, "the deploy failed again")
	eventually(t, func() bool { _, ok := storedMessage(t, env.st, team.ID, said.MessageID); return ok }, "the message stored")

	inZone := func(text, zone, notZone string) {
		t.Helper()
		require.Contains(t, text, "("+zone+")", text)
		require.NotContains(t, text, "("+notZone+")", text)
	}
	for _, cmd := range []string{"/chats", "/run_new 24h", "/runs", "/run 1"} {
		inZone(env.ask(t, env.admin, cmd).Text, "Berlin", "Moscow")
	}

	asked := env.admin.SendText(adminChat, "/chats")
	inZone(env.srv.WaitMessageAfter(t, adminChat, asked.MessageID, nil).Text, "Moscow", "Berlin")
}

// A zone /timezone names by its abbreviation names a time with the
// abbreviation in force at that time: a memory of July, read in
// December in Rome, was at 14:00 CEST, not "14:00 (CET)", an hour off.
func TestAZoneAbbreviationIsTheTimesOwn(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann, _ := env.annAndBob()
	require.Contains(t, env.ask(t, ann, "/timezone Europe/Rome").Text, "Time zone set: CET (UTC+01:00)")
	insertSummary(t, env.st, 42, "2026-07-06T00:00:00Z", []string{}, "Likes espresso.")
	exec(t, env.st, `UPDATE lsm_storage SET created_at = '2026-07-10T12:00:00Z'`)
	page := env.ask(t, ann, "/memory")
	require.Contains(t, page.Text, "1. 10 Jul, 14:00 (CEST)\nLikes espresso.", page.Text)
}
