package e2e_test

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
	"switchboard/locales"
)

// A user's first hour, as the people who meet the bot live it: three job
// seekers (ru, en, uk), a master, an admin with an admin chat, a team group.
// Each does what a newcomer does; then every message the bot sent is read
// for what no reader should see: a private profile in a group, a model's
// raw Markdown, a Go duration in Russian or Ukrainian, a UTC time to
// someone in Moscow or Kyiv, breaker jargon. With TOUR_OUT set, the whole
// transcript is written there to be read by a person.
func TestFirstHourReadsRightForEveryone(t *testing.T) { bothWays(t, firstHour) }

func firstHour(t *testing.T, mode tourMode) {
	const (
		ruID, enID, ukID = 7_300_001, 7_300_002, 7_300_003
		masterID         = 7_300_004
		secret           = "private note: looking to leave my current team"
	)
	env := mode.env(t, adminGroup)
	team := env.TG.Supergroup(teamChat, "Team", "")
	// Models write Markdown whatever they are asked (the first rule that
	// matches answers, so this one comes before the scripted memory's).
	env.LLM.On(llmtest.SystemContains("patient, practical mentor")).Named("markdown responder").
		Reply("**Got it.** You wrote about *running*.\n\n## Plan\n\n- run `3 km` on Monday\n- rest on <Tuesday> & stretch\n\nSee [the guide](https://example.com/guide).")
	scriptMemory(env)
	proposeTasks(env)
	relevantVacancies(env, 2, 7300)
	env.Start(map[string]string{
		"ADMIN_CHAT_LANGUAGE": "ru",
		"DISPATCH_TIMEZONE":   "Europe/Moscow", "FETCH_INTERVAL": "1h",
	})
	pool := db(t, env)
	ru := env.TG.User(ruID, "Иван", "ru")
	en := env.TG.User(enID, "Ann", "en")
	uk := env.TG.User(ukID, "Олена", "uk")
	master := env.TG.User(masterID, "Пётр", "ru")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")

	if out := mode.out(); out != "" {
		// Written even when the tour stops half-way, to read what was sent.
		t.Cleanup(func() {
			var sb strings.Builder
			for _, id := range []int64{adminGroup, teamChat, e2e.AdminID, ruID, enID, ukID, masterID} {
				fmt.Fprintf(&sb, "=== chat %d\n", id)
				for _, m := range env.TG.Messages(id) {
					fmt.Fprintf(&sb, "--- #%d%s%s\n%s\n", m.MessageID, topicLabel(env, id, m), buttonsOf(m), m.Shown())
				}
			}
			_ = os.WriteFile(out, []byte(sb.String()), 0o644)
		})
	}
	// step sends text and waits for the bot's first answer in that chat.
	step := func(who *tgfake.Person, chat int64, text string) tgfake.BotMessage {
		t.Helper()
		return ask(t, env, who, chat, text)
	}
	for _, who := range []*tgfake.Person{ru, en, uk} {
		mode.inTopic(t, env, who.ID(), step(who, who.ID(), "/start"), "")
		step(who, who.ID(), "/help")
		mode.inTopic(t, env, who.ID(), step(who, who.ID(), "/profile Senior Go developer, "+secret), domain.TopicVacancies)
		step(who, who.ID(), "/search https://hh.ru/search/vacancy?text=golang&area=1")
		step(who, who.ID(), "/searches")
		mode.inTopic(t, env, who.ID(), step(who, who.ID(), "/vacancies"), domain.TopicVacancies)
		q := who.SendText(who.ID(), "I run 3 km every morning")
		answer := env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q.MessageID })
		mode.inTopic(t, env, who.ID(), answer, domain.TopicMemory)
		mode.inTopic(t, env, who.ID(), step(who, who.ID(), "/memory"), domain.TopicMemory)
		step(who, who.ID(), "/lang de")
		step(who, who.ID(), "/"+strings.Repeat("x&", 300))
	}
	// A team member who also uses the bot in private types private commands
	// in the group.
	for _, text := range []string{"/profile", "/vacancies", "/help", "/memory", "hello team"} {
		ru.SendText(team.ID, text)
	}
	step(master, master.ID(), "/start")
	step(master, master.ID(), "/master Москва")
	mode.inTopic(t, env, master.ID(), step(master, master.ID(), `/master Москва Центр сантехника`), domain.TopicOrders)
	step(master, master.ID(), "/help")
	step(boss, boss.ID(), "/help")
	mode.inTopic(t, env, boss.ID(), step(boss, boss.ID(), "/status"), domain.TopicAdmin)
	step(boss, boss.ID(), "/order Moscow Center plumbing 3000")
	step(boss, boss.ID(), "/order Москва Центр сантехника 3000 Течёт кран на кухне")
	offered := env.TG.WaitMessage(t, master.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Новый заказ") })
	mode.inTopic(t, env, master.ID(), offered, domain.TopicOrders)
	step(boss, boss.ID(), "/orders")
	// The master takes the order and goes through its steps' first screen.
	offer := env.TG.Messages(master.ID())
	pressFirst(t, env, master, offer[len(offer)-1])
	env.TG.WaitFor(t, 60*time.Second, func() bool {
		m, _ := env.TG.MessageByID(master.ID(), offer[len(offer)-1].MessageID)
		return len(m.Edits) > 0 // the offer became the assigned order's steps
	})
	// A job seeker with cards presses one, then forgets everything, twice.
	step(ru, ru.ID(), "/search golang")
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ru.ID())) == 2 })
	pressFirst(t, env, ru, vacancyMessages(env, ru.ID())[0])
	confirm := step(ru, ru.ID(), "/forget")
	// A double tap: the second press is on its way before the first edit.
	data := confirm.ReplyMarkup.InlineKeyboard[0][0].CallbackData
	first, err := ru.Press(confirm, data)
	require.NoError(t, err)
	second := ru.PressRaw(confirm, data)
	env.TG.WaitCallbackAnswer(t, first.ID)
	env.TG.WaitCallbackAnswer(t, second.ID)
	step(boss, adminGroup, "/run_new 24h")
	step(boss, adminGroup, "/run_new 7d")
	step(boss, boss.ID(), "/runs")

	// Everything sent has been handled and delivered.
	env.TG.WaitUpdatesConsumed(t)
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE state = 'pending'`) == 0
	})

	mode.everyMessageInItsTopic(t, env, pool, adminGroup)
	chats := map[int64]string{ruID: "ru", enID: "en", ukID: "uk", masterID: "ru", e2e.AdminID: "en", adminGroup: "ru", teamChat: "group"}
	for _, id := range slices.Sorted(maps.Keys(chats)) {
		lang := chats[id]
		timesToldIn(t, env, id, locales.LangZone("ru"))
		for _, m := range env.TG.Messages(id) {
			text := m.Shown()
			readsRight(t, fmt.Sprintf("chat %d", id), lang, text)
			if id != e2e.AdminID { // an admin's /help lists every role's commands
				assert.LessOrEqual(t, len([]rune(text)), 1000, "chat %d got a wall of text: %q", id, text)
			}
			if id == adminGroup {
				assert.NotRegexp(t, `Run #|Order #|Only one run`, text, "the admin chat reads one language, English crept in")
			}
			if lang == "group" {
				assert.NotContains(t, text, secret, "a private profile shown in a group")
			}
		}
	}
	// A job seeker reads that a search is saved before anything about what
	// it found.
	for _, id := range []int64{ruID, enID, ukID} {
		saved, news := -1, -1
		for i, m := range env.TG.Messages(id) {
			if saved < 0 && regexp.MustCompile(`^(Saved|Сохранено|Збережено)`).MatchString(m.Text) {
				saved = i
			}
			if news < 0 && regexp.MustCompile(`(?i)nothing new|ничего нового|нічого нового`).MatchString(m.Text) {
				news = i
			}
		}
		assert.True(t, saved >= 0 && saved <= news, "chat %d: the search's news (%d) came before its saving (%d)", id, news, saved)
	}
	created := 0
	for _, m := range env.TG.Messages(adminGroup) {
		if strings.Contains(m.Text, "Прогон #1 создан") {
			created++
		}
	}
	assert.Equal(t, 1, created, "a run typed into the admin chat is announced there once")
	// The group's menu holds nothing private.
	for _, c := range env.TG.Commands(tgfake.BotCommandScope{Type: "all_group_chats"}, "") {
		assert.NotContains(t, []string{"profile", "search", "forget", "memory", "vacancies"}, c.Command, "private command in the groups' menu")
	}
}

// pressFirst presses the first button of m and waits for the answer.
func pressFirst(t *testing.T, env *e2e.Env, who *tgfake.Person, m tgfake.BotMessage) tgfake.CallbackAnswer {
	t.Helper()
	require.NotNil(t, m.ReplyMarkup, "no buttons on %q", m.Text)
	q, err := who.Press(m, m.ReplyMarkup.InlineKeyboard[0][0].CallbackData)
	require.NoError(t, err)
	return env.TG.WaitCallbackAnswer(t, q.ID)
}

func buttonsOf(m tgfake.BotMessage) string {
	if m.ReplyMarkup == nil {
		return ""
	}
	var labels []string
	for _, row := range m.ReplyMarkup.InlineKeyboard {
		for _, b := range row {
			labels = append(labels, "["+b.Text+"]")
		}
	}
	return " " + strings.Join(labels, " ")
}

var (
	// utcTime is a time given in UTC, not an offset beside a zone's name
	// such as "Moscow (UTC+03:00)".
	utcTime = regexp.MustCompile(`UTC($|[^+\-−\d])`)
	// rawText is what a message shows when its markup, template or
	// catalog failed: an HTML tag or entity, a template's leftovers, a key.
	rawText = regexp.MustCompile(`</?(b|i|u|s|code|pre|a|tg-spoiler|tg-time)\b[^>]*>|&(lt|gt|amp|quot|nbsp|#\d+);|\{\{|\}\}|<no value>|%!|` +
		`\b(rhythm|letter|vacancy|vacancies|application|applications|memories|memory|cv|export|incognito|skills|help|start|search|searches|` +
		`profile|time|error|chat|chats|text|offer|assigned|master|order|orders|dispatch|note|run|runs|board|analysis|proposal|paid|done|cancel|` +
		`pause|resume|status|cmd|photo|run_new|run_start|run_close)\.[a-z_]+(\.[A-Za-z_]+)?\b`)
)

// readsRight asserts what no reader of lang ("group" for a group) should
// see in text, a message's, an edit's, a draft's or a press's answer
// (where names it): a model's raw Markdown, markup or a key shown as text,
// breaker jargon, and, to a Russian or Ukrainian reader, a Go duration or
// a time in UTC. Every tour reads every text through it.
func readsRight(t *testing.T, where, lang, text string) {
	t.Helper()
	assert.NotContains(t, text, "**", "%s shows a model's raw Markdown: %q", where, text)
	assert.NotContains(t, text, "closed (working)", "breaker jargon in %s", where)
	assert.NotContains(t, text, "замкнут", "breaker jargon in %s", where)
	assert.False(t, rawText.MatchString(text), "%s shows raw markup or a key: %q in %q", where, rawText.FindString(text), text)
	if lang == "ru" || lang == "uk" {
		assert.False(t, goDuration.MatchString(text), "%s (%s) reads a Go duration: %q", where, lang, text)
		assert.False(t, utcTime.MatchString(text), "%s (%s) reads a UTC time: %q", where, lang, text)
	}
}

// timesToldIn reads every version of every message a chat received
// through timesTold.
func timesToldIn(t *testing.T, env *e2e.Env, chat int64, localZone *time.Location) {
	t.Helper()
	for _, m := range env.TG.Messages(chat) {
		for i, v := range append(append([]tgfake.Message(nil), m.Edits...), m.Message) {
			where := fmt.Sprintf("chat %d, message #%d, version %d", chat, m.MessageID, i+1)
			timesTold(t, where, v.Text, v.Entities, localZone)
			timesTold(t, where+"'s caption", v.Caption, v.CaptionEntities, localZone)
		}
	}
}

var (
	// clockTime is a time of day as the bot writes one, "09:05"; not
	// an offset ("UTC+03:00"), which is no moment.
	clockTime = regexp.MustCompile(`(^|[^+\-−\d:])(\d{2}):(\d{2})\b`)
	// zoneLabel is the zone a time names at its end, "(Москва)".
	zoneLabel  = regexp.MustCompile(`\(([^()]+)\)$`)
	dayOfMonth = regexp.MustCompile(`^(\d{1,2}) ([^\s,]+)(?: (\d{4}))?`)
)

// timesTold asserts that every absolute time in a text is a date_time
// entity whose moment is the time its text says: the day, month, year
// and time of day read from the entity's text, in the zone the text
// names ("26 нояб., 04:07 (Москва)") or, for what names none, in
// localZone: a city's hours and a visit's window are the city's local
// time, a job seeker's digest times and quiet hours their own zone's.
// And no time of day or date stands outside one.
func timesTold(t *testing.T, where, text string, entities []tgfake.MessageEntity, localZone *time.Location) {
	t.Helper()
	if text == "" {
		return
	}
	u16 := utf16.Encode([]rune(text))
	covered := make([]bool, len(u16)+1)
	for _, e := range entities {
		if e.Type != "date_time" {
			continue
		}
		for i := e.Offset; i < e.Offset+e.Length && i < len(covered); i++ {
			covered[i] = true
		}
		said := string(utf16.Decode(u16[e.Offset : e.Offset+e.Length]))
		zone := localZone
		if m := zoneLabel.FindStringSubmatch(said); m != nil {
			_, loc, err := locales.ParseZone(m[1])
			if !assert.NoError(t, err, "%s: %q names a zone nobody knows", where, said) {
				continue
			}
			zone = loc
		}
		at := time.Unix(e.UnixTime, 0).In(zone)
		clock := clockTime.FindStringSubmatch(said)
		day := dayOfMonth.FindStringSubmatch(said)
		assert.True(t, clock != nil || day != nil, "%s: the date_time entity %q says no time", where, said)
		if clock != nil {
			assert.Equal(t, clock[2]+":"+clock[3], at.Format("15:04"), "%s: %q is %v (%s)", where, said, at, zone)
		}
		if day != nil {
			assert.Equal(t, day[1], strconv.Itoa(at.Day()), "%s: %q is %v (%s)", where, said, at, zone)
			assert.Equal(t, at.Month(), months()[day[2]], "%s: %q is %v (%s)", where, said, at, zone)
			if day[3] != "" {
				assert.Equal(t, day[3], strconv.Itoa(at.Year()), "%s: %q is %v (%s)", where, said, at, zone)
			}
		}
	}
	outside := func(pos int) bool { // pos: a byte offset in text
		return !covered[len(utf16.Encode([]rune(text[:pos])))]
	}
	for _, m := range clockTime.FindAllStringSubmatchIndex(text, -1) {
		assert.False(t, outside(m[4]), "%s: the time %q is no date_time entity: %q", where, text[m[4]:m[7]], text)
	}
	for _, m := range monthDate().FindAllStringIndex(text, -1) {
		assert.False(t, outside(m[0]), "%s: the date %q is no date_time entity: %q", where, text[m[0]:m[1]], text)
	}
}

// months are the names a date the bot writes gives each month, in all
// its languages ("нояб.", "лист.", "Nov"), read from the bot's own dates.
var months = sync.OnceValue(func() map[string]time.Month {
	out := map[string]time.Month{}
	for _, lang := range locales.Languages {
		for m := time.January; m <= time.December; m++ {
			day := time.Date(2000, m, 1, 0, 0, 0, 0, time.UTC)
			out[strings.Fields(locales.Date(lang, day, day))[1]] = m
		}
	}
	return out
})

// monthDate matches a date the bot writes in any of its languages,
// "26 нояб.", "3 Dec 2025".
var monthDate = sync.OnceValue(func() *regexp.Regexp {
	var names []string
	for name := range months() {
		names = append(names, regexp.QuoteMeta(name))
	}
	return regexp.MustCompile(`\b\d{1,2} (` + strings.Join(names, "|") + `)`)
})
