package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

// goDuration is how Go prints a duration ("5m58s", "1ms", "0s"): never
// what a Russian or Ukrainian reader should see.
var goDuration = regexp.MustCompile(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h|d)\b|\d+m\d+s|\d+h\d+m`)

// A Russian master in Moscow, a city DISPATCH_CITIES does not
// list (DISPATCH_TIMEZONE is left UTC), reads the commission's deadline
// in Moscow time with Russian month names, not "2026-11-26 01:07 UTC";
// /timezone says where that zone came from and changes it, and the next
// time shown follows.
func TestMasterReadsDeadlinesInTheirZone(t *testing.T) {
	t.Parallel()
	env, boss := startDispatchUnlogged(t)
	pool := db(t, env)
	ivan := env.TG.User(741, "Иван", "ru")
	require.Contains(t, ask(t, env, ivan, ivan.ID(), "/master Москва Центр сантехника").Text, "зарегистрированы как мастер")

	order := createOrder(t, env, boss, "Москва Центр сантехника 3000 Течёт кран")
	offer := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Новый заказ #") })
	acc, err := ivan.PressButton(offer, "✅ Принять")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, acc.ID)
	ask(t, env, boss, boss.ID(), "/done "+strconv.FormatInt(order, 10))

	due := scalar[time.Time](t, pool, `SELECT commission_due_at FROM orders WHERE id = $1`, order)
	msk, err := locales.LoadZone("Europe/Moscow")
	require.NoError(t, err)
	want := locales.Time("ru", due, msk, time.Now()) // "26 нояб., 04:07 (Москва)"
	require.Contains(t, want, "(Москва)")
	// The note is a message of its own; the offer's message is edited too.
	note := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool {
		return m.MessageID != offer.MessageID && strings.Contains(m.Text, "нужно оплатить до")
	})
	env.TG.WaitFor(t, 10*time.Second, func() bool {
		edited, _ := env.TG.MessageByID(ivan.ID(), offer.MessageID)
		return strings.Contains(edited.Text, "нужно оплатить до "+want)
	})
	require.Contains(t, note.Text, "Комиссию 300 нужно оплатить до "+want, note.Text)
	for _, m := range env.TG.Messages(ivan.ID()) {
		require.NotContains(t, m.Text, "UTC", "no time in UTC for a Moscow master: %q", m.Text)
		require.NotRegexp(t, goDuration, m.Text)
	}

	// /timezone: the zone is the master's city's (one DISPATCH_CITIES does
	// not list, but a known city) until one is chosen.
	cur := ask(t, env, ivan, ivan.ID(), "/timezone").Text
	require.Contains(t, cur, "Москва (UTC+03:00)", cur)
	require.Contains(t, cur, "в часовом поясе вашего города (Москва)", cur)
	require.Contains(t, cur, "/timezone +3", cur, "how to change it")

	// Refusals name what was wrong and show an example.
	bad := ask(t, env, ivan, ivan.ID(), "/timezone Марс/Олимп").Text
	require.Contains(t, bad, "Не знаю часовой пояс Марс/Олимп", bad)
	require.Contains(t, bad, "/timezone Europe/Moscow", bad)
	require.Contains(t, ask(t, env, ivan, ivan.ID(), "/timezone +15").Text, "от −12 до +14 часов")
	long := ask(t, env, ivan, ivan.ID(), "/timezone "+strings.Repeat("Ж", 300)).Text
	require.Contains(t, long, strings.Repeat("Ж", 39)+"…", "a short prefix of what was typed")
	require.NotContains(t, long, strings.Repeat("Ж", 41))

	// Berlin, by its Ukrainian name: the profile's next due date follows.
	set := ask(t, env, ivan, ivan.ID(), "/timezone Берлін").Text
	require.Contains(t, set, "Часовой пояс: Берлин", set)
	berlin, err := locales.LoadZone("Europe/Berlin")
	require.NoError(t, err)
	profile := ask(t, env, ivan, ivan.ID(), "/master").Text
	require.Contains(t, profile, "ближайший срок "+locales.Time("ru", due, berlin, time.Now()), profile)
	require.Contains(t, profile, "\nПредложения: принято — 1\nЗаказы: выполнен — 1", profile, "one colon a line")
	require.Contains(t, ask(t, env, ivan, ivan.ID(), "/timezone").Text, "в выбранном вами часовом поясе")
	require.Equal(t, "Europe/Berlin", scalar[string](t, pool, `SELECT time_zone FROM users WHERE id = $1`, ivan.ID()))
}

// The binary reads the year on CLOCK_START's clock, not the host's: set
// in 2031, the opening it names and the time /timezone shows are this
// year's, written without it, and a visit in 2032 is written with it.
func TestClockStartsYearIsTheBotsYear(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(map[string]string{
		"DISPATCH_TIMEZONE": "Europe/Moscow", "DISPATCH_HOURS": "10:00-20:00",
		"CLOCK_START": "2031-12-30T22:00:00+03:00",
	})
	require.NotEqual(t, 2031, time.Now().Year(), "the clock is in another year than the host")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	reply := ask(t, env, boss, boss.ID(), "/order Moscow Arbat electrician 900 Socket sparks\nwhen: 02.01 10-12").Text
	require.Contains(t, reply, "2 Jan 2032, 10:00–12:00", reply)
	require.Contains(t, reply, "it will be offered when they start, 31 Dec, 10:00 (Moscow)", reply)
	now := ask(t, env, boss, boss.ID(), "/timezone Europe/Moscow").Text
	require.Contains(t, now, "30 Dec, 22:0", now)
	require.NotContains(t, now, "2031", now)
}

// A master of a city DISPATCH_CITIES lists reads times in the city's zone
// until they choose one; "+3" is taken as an offset.
func TestMasterOfAListedCityReadsItsZone(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(map[string]string{"DISPATCH_CITIES": "Tashkent=Asia/Tashkent"})
	aziz := env.TG.User(742, "Aziz", "en")
	register(t, env, aziz, "Tashkent Chilonzor electrician")
	cur := ask(t, env, aziz, aziz.ID(), "/timezone").Text
	require.Contains(t, cur, "time zone of your city, Tashkent: Tashkent (UTC+05:00)", cur)
	require.Contains(t, ask(t, env, aziz, aziz.ID(), "/timezone utc+3").Text, "Time zone set: UTC+03:00. Now it is", "a zone named by its offset, once")
	require.Contains(t, ask(t, env, aziz, aziz.ID(), "/timezone auto").Text, "I use Tashkent (UTC+05:00)")
}

// A Russian reader's /memory: a page of numbered memories, each with
// when it was remembered, on Moscow time; /timezone moves it.
func TestMemoryListInTheReadersZone(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	pool := db(t, env)
	olga := env.TG.User(743, "Ольга", "ru")
	ask(t, env, olga, olga.ID(), "/start") // she is a user now
	for i, s := range []string{"Бегает по утрам.", "Готовится к марафону.", "Ищет кроссовки.", "Спрашивала про питание."} {
		_, err := pool.Exec(context.Background(), `INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary, created_at)
VALUES ($1, '2026-11-23T00:00:00Z', '2026-11-30T00:00:00Z', '{}', $2, '2026-11-26T01:07:00Z'::timestamptz + $3::int * interval '1 minute')`,
			olga.ID(), s, i)
		require.NoError(t, err)
	}
	list := ask(t, env, olga, olga.ID(), "/memory").Text
	require.True(t, strings.HasPrefix(list, "Что я о вас помню, сначала новое (1–4 из 4):"), list)
	msk, _ := locales.LoadZone("Europe/Moscow")
	first := locales.Time("ru", time.Date(2026, 11, 26, 1, 7, 0, 0, time.UTC), msk, time.Now())
	require.Contains(t, first, "04:07 (Москва)")
	require.Contains(t, list, first+"\nБегает по утрам.", list)

	guess := ask(t, env, olga, olga.ID(), "/timezone").Text
	require.Contains(t, guess, "Москва (UTC+03:00) — это предположение по вашему языку", guess)
	ask(t, env, olga, olga.ID(), "/timezone Europe/Kyiv")
	kyiv, _ := locales.LoadZone("Europe/Kyiv")
	list = ask(t, env, olga, olga.ID(), "/memory").Text
	require.Contains(t, list, locales.Time("ru", time.Date(2026, 11, 26, 1, 7, 0, 0, time.UTC), kyiv, time.Now())+"\nБегает по утрам.", list)
}

// An admin's /status in Russian and in Ukrainian: durations, counts and
// times in the reader's words, never "5m58s", "1ms", "0s" or "~0 строк";
// the AI model is named in plain words.
func TestStatusInRussianAndUkrainianHasNoGoDurations(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	boss := env.TG.User(e2e.AdminID, "Начальник", "ru")
	ru := ask(t, env, boss, boss.ID(), "/status").Shown()
	require.Contains(t, ru, "Состояние — реплика", ru)
	require.NotRegexp(t, goDuration, ru)
	require.NotContains(t, ru, "~")
	require.Contains(t, ru, "Модель ИИ", ru)
	require.NotContains(t, ru, "LLM")
	require.Regexp(t, `работает (\d+\x{a0}(д|ч|мин|с)( \d+\x{a0}(ч|мин|с))?|меньше секунды)`, ru)

	ask(t, env, boss, boss.ID(), "/lang uk")
	uk := ask(t, env, boss, boss.ID(), "/status").Shown()
	require.Contains(t, uk, "Стан — репліка", uk)
	require.NotRegexp(t, goDuration, uk)
	require.Contains(t, uk, "Модель ШІ", uk)
}

// /orders heads what it lists with what it is: a done order is not
// listed as open.
func TestOrdersListSaysWhichAreOpen(t *testing.T) {
	t.Parallel()
	env, boss := startDispatchUnlogged(t)
	ann := env.TG.User(744, "Ann", "en")
	register(t, env, ann, "Kyiv Podil tiling")
	order := createOrder(t, env, boss, "Kyiv Podil tiling 500 Bathroom")
	offer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	acc, err := ann.PressButton(offer, "✅ Accept")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, acc.ID)
	require.Contains(t, ask(t, env, boss, boss.ID(), "/orders").Text, "Open orders (1)\n\n#"+strconv.FormatInt(order, 10)+" assigned")
	ask(t, env, boss, boss.ID(), "/done "+strconv.FormatInt(order, 10))

	list := ask(t, env, boss, boss.ID(), "/orders").Text
	require.NotContains(t, list, "Open orders", list)
	require.True(t, strings.HasPrefix(list, "No open orders.\n\nDone, not yet closed (1)\n\n#"+strconv.FormatInt(order, 10)+" done"), list)
}

// Dispatch commands name the missing or wrong part with an example
// instead of repeating the usage, in the user's language, and quote at
// most a short prefix of what was typed.
func TestDispatchErrorsNameThePart(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	petr := env.TG.User(745, "Пётр", "ru")

	m := ask(t, env, petr, petr.ID(), "/master Москва").Text
	require.True(t, strings.HasPrefix(m, "Не хватает района и навыков. После города Москва укажите район"), m)
	require.Contains(t, m, "/master Москва Центр сантехника,электрика")
	require.NotContains(t, m, "Использование")
	require.Contains(t, ask(t, env, petr, petr.ID(), "/master Москва Центр").Text, "Не хватает навыков. После района Центр")

	o := ask(t, env, boss, boss.ID(), "/order Moscow Center plumbing 3000").Text
	require.True(t, strings.HasPrefix(o, "The description is missing: after the price, say what needs doing, e.g. /order Moscow Center plumbing 3000"), o)
	require.NotContains(t, o, "Usage")
	price := ask(t, env, boss, boss.ID(), "/order Moscow Center plumbing три_тысячи Tap").Text
	require.True(t, strings.HasPrefix(price, "три_тысячи is not a price: the fourth word"), price)
	long := ask(t, env, boss, boss.ID(), "/order "+strings.Repeat("x", 500)).Text
	require.Contains(t, long, "After the city "+strings.Repeat("x", 39)+"… give them in that order")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/done first").Text, "first is not an order number")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/paid @a @b").Text, "@a @b is not one master")
}

// Times in the reader's clock: the bot writes an absolute time as a
// date_time entity whose moment is what its words say, in the zone they
// name, and a visit window in the city's zone; a server older than Bot API
// 9.5 refuses <tg-time>, and the same words go without it (one refused
// call, then believed), while /status names what the server lacks.
func TestTimesCarryTheirMomentAndFallBackOnAnOlderServer(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(map[string]string{"OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h", "DISPATCH_TIMEZONE": "Europe/Kyiv"})
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	olena := env.TG.User(742, "Олена", "uk")
	kyiv := locales.LangZone("uk")

	before := time.Now().Add(-time.Minute)
	zone := ask(t, env, olena, olena.ID(), "/timezone Київ")
	require.Len(t, zone.Entities, 2, "the zone in bold and the time: %q", zone.Text)
	now := zone.Entities[1]
	require.Equal(t, "date_time", now.Type)
	require.Equal(t, "dt", now.DateTimeFormat)
	require.True(t, now.UnixTime > before.Unix() && now.UnixTime < time.Now().Add(time.Minute).Unix(), "now is %d", now.UnixTime)
	timesTold(t, "/timezone", zone.Text, zone.Entities, kyiv)
	require.Regexp(t, `Зараз \d+ \S+, \d\d:\d\d \(Київ\);`, zone.Text)

	// A visit's window is the city's local time: a date and two times.
	require.Contains(t, ask(t, env, olena, olena.ID(), "/master Київ Поділ сантехніка").Text, "майстер")
	day := time.Now().In(kyiv).AddDate(0, 0, 2)
	createOrder(t, env, boss, fmt.Sprintf("Київ Поділ сантехніка 900 Кран\nwhen: %s 10-12", day.Format("02.01.2006")))
	offer := env.TG.WaitMessage(t, olena.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "10:00–12:00") })
	timesTold(t, "the offer", offer.Text, offer.Entities, kyiv)
	var stamps []string
	for _, e := range offer.Entities {
		if e.Type == "date_time" {
			stamps = append(stamps, e.DateTimeFormat+" "+time.Unix(e.UnixTime, 0).In(kyiv).Format("02.01 15:04"))
		}
	}
	require.Equal(t, []string{"d " + day.Format("02.01") + " 12:00", "t " + day.Format("02.01") + " 10:00", "t " + day.Format("02.01") + " 12:00"}, stamps)

	env.TG.SetUnsupported(true, tgfake.FeatureDateTime)
	refused := func() int {
		n := 0
		for _, c := range env.TG.CallsTo("sendMessage") {
			if c.Err != nil && strings.Contains(c.Err.Description, `Unsupported start tag "tg-time"`) {
				n++
			}
		}
		return n
	}
	old := ask(t, env, olena, olena.ID(), "/timezone")
	for _, e := range old.Entities {
		require.NotEqual(t, "date_time", e.Type, "no date_time entity on a server without them: %q", old.Text)
	}
	require.Regexp(t, `Зараз \d+ \S+, \d\d:\d\d \(Київ\)\.`, old.Text, "the words stay, in the reader's zone")
	require.Equal(t, 1, refused())
	ask(t, env, olena, olena.ID(), "/timezone")
	require.Equal(t, 1, refused(), "believed: not asked again")

	status := ask(t, env, boss, boss.ID(), "/status")
	require.Contains(t, status.Shown(), "⚠️ This Bot API server lacks date and time entities (Bot API 9.5)")
	readsRight(t, "/status", "en", status.Shown())
}
