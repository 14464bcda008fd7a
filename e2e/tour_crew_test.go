package e2e_test

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

// A crew's week, as the people in it read it: three masters (ru, uk, en)
// in one district, two admins (en and uk) and the admin chat (in Russian,
// Moscow time), and the team's group. Orders are offered, looked at,
// declined, left to expire, accepted, worked through, given back, done,
// cancelled; commission falls due, is paid, is let lapse into a block and
// is paid again; the team's talk goes through an analysis run that is
// decided and closed. Every message and edit the bot sent is then read for
// what no reader should see (the first tour's checks, and a few more).
// With TOUR_OUT set the whole transcript, with the buttons and what each
// press answered, is written there for a person to read.
func TestCrewsWeekReadsRight(t *testing.T) {
	weekTour(t)
	bothWays(t, crewsWeek)
}

func crewsWeek(t *testing.T, mode tourMode) {
	const (
		petrID, olenaID, annID = 7_400_001, 7_400_002, 7_400_003
		oksanaID               = 7_400_010 // a second admin, who reads Ukrainian
		// the customers of orders #1 (Russian) and #3 (Ukrainian)
		mariaID, tarasID = 7_400_020, 7_400_021
		sla              = 20 * time.Second
		deadline         = 30 * time.Second
		// Past this, an expiry or a block that OFFER_SLA or
		// COMMISSION_DEADLINE brings has not come: not a healthy system.
		lapse = 90 * time.Second
	)
	env := mode.env(t, adminGroup)
	team := env.TG.Supergroup(teamChat, "Бригада", "")
	proposeTasks(env)
	env.Start(map[string]string{
		"ADMIN_IDS":           fmt.Sprintf("%d,%d", e2e.AdminID, oksanaID),
		"ADMIN_CHAT_LANGUAGE": "ru",
		"DISPATCH_TIMEZONE":   "Europe/Moscow",
		"DISPATCH_CURRENCY":   "RUB",
		"OFFER_SLA":           sla.String(),
		"COMMISSION_DEADLINE": deadline.String(),
		"COMMISSION_INTERVAL": "1s",
	})
	pool := db(t, env)
	petr := env.TG.User(petrID, "Пётр", "ru")
	olena := env.TG.User(olenaID, "Олена", "uk")
	ann := env.TG.User(annID, "Ann", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	oksana := env.TG.User(oksanaID, "Оксана", "uk")
	maria := env.TG.User(mariaID, "Мария", "ru")
	taras := env.TG.User(tarasID, "Тарас", "uk")

	readers := map[int64]crewReader{
		adminGroup:  {"ru", "admin chat"},
		teamChat:    {"", "group"},
		e2e.AdminID: {"en", "admin"},
		oksanaID:    {"uk", "admin"},
		petrID:      {"ru", "master"},
		olenaID:     {"uk", "master"},
		annID:       {"en", "master"},
		mariaID:     {"ru", "customer"},
		tarasID:     {"uk", "customer"},
	}
	if out := mode.out(); out != "" {
		// Written even when the tour stops half-way, to read what was sent.
		t.Cleanup(func() { _ = os.WriteFile(out, []byte(crewTranscript(env, readers)), 0o644) })
	}
	say := func(who *tgfake.Person, chat int64, text string) tgfake.BotMessage {
		t.Helper()
		return crewSay(t, env, who, chat, text, "")
	}
	sayWant := func(who *tgfake.Person, chat int64, text, want string) tgfake.BotMessage {
		t.Helper()
		return crewSay(t, env, who, chat, text, want)
	}

	// Monday. The masters arrive: /start, its button, a wrong and a right
	// /master, /help, their card.
	msk, err := locales.LoadZone("Europe/Moscow")
	require.NoError(t, err)
	for _, m := range []struct {
		who  *tgfake.Person
		args string
	}{
		{petr, "Москва Центр сантехника,электрика"},
		{olena, "Москва Центр сантехника"},
		{ann, "Москва Центр сантехника"},
	} {
		start := say(m.who, m.who.ID(), "/start")
		last := crewLastID(env, m.who.ID())
		crewPress(t, env, m.who, start, "ss:3")
		env.TG.WaitMessageAfter(t, m.who.ID(), last, nil)
		say(m.who, m.who.ID(), "/master Москва")
		say(m.who, m.who.ID(), "/master "+m.args)
		say(m.who, m.who.ID(), "/help")
		say(m.who, m.who.ID(), "/master")
		card := say(m.who, m.who.ID(), "/start")
		last = crewLastID(env, m.who.ID())
		crewPress(t, env, m.who, card, "ss:3")
		env.TG.WaitMessageAfter(t, m.who.ID(), last, nil)
	}
	require.Equal(t, 3, scalar[int](t, pool, `SELECT count(*) FROM masters`))
	// The admins: their first steps, the state of things.
	for _, a := range []*tgfake.Person{boss, oksana} {
		start := say(a, a.ID(), "/start")
		last := crewLastID(env, a.ID())
		crewPress(t, env, a, start, "ss:4")
		env.TG.WaitMessageAfter(t, a.ID(), last, nil)
		say(a, a.ID(), "/help")
	}
	sayWant(boss, adminGroup, "/status", `Состояние`)
	// The team talks in its group; someone types private and admin
	// commands there.
	for _, m := range []struct {
		who  *tgfake.Person
		text string
	}{
		{petr, "Коллеги, please закажите прокладки для смесителей"},
		{olena, "please оновіть графік чергувань на наступний тиждень"},
		{ann, "please send me the list of Friday's addresses"},
		{petr, "ок"},
		{ann, "please check the boiler pressure in the warehouse"},
	} {
		m.who.SendText(team.ID, m.text)
	}
	eventually(t, 30*time.Second, func() bool { return scalar[int](t, pool, `SELECT count(*) FROM group_messages`) == 5 })
	petr.SendText(team.ID, "/master")
	boss.SendText(team.ID, "/orders")
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(env.TG.Messages(team.ID)) >= 1 })

	// Tuesday. Order #1 carries the customer; Пётр looks and declines,
	// Олена lets it expire, Ann takes it. Order #2 only Пётр can do: he
	// lets it expire, and declines it in round 2.
	tomorrow := time.Now().In(msk).AddDate(0, 0, 1)
	firstReply := sayWant(boss, boss.ID(), fmt.Sprintf("/order Москва Центр сантехника 3000 Течёт кран на кухне\naddress: %s\nname: %s\nphone: %s\nwhen: %s 10-12",
		crewAddress, crewName, crewPhone, tomorrow.Format("02.01")), `#\d+`)
	first := crewOrder(t, firstReply)
	// Мария, whose kitchen it is, opens the link the admin forwarded.
	sayWant(maria, maria.ID(), "/start "+orderLinkOf(t, firstReply.Text), fmt.Sprintf(`Заказ #%d`, first))
	petrOffer := crewOffer(t, env, petr.ID(), first, 30*time.Second)
	crewPress(t, env, petr, petrOffer, "ov")
	crewWait(t, env, petrOffer, 30*time.Second, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "🔒") })
	crewPress(t, env, petr, petrOffer, "od")
	olenaOffer := crewOffer(t, env, olena.ID(), first, 30*time.Second)
	second := crewOrder(t, sayWant(boss, boss.ID(), "/order Москва Центр электрика 1500 Искрит розетка в спальне", `#\d+`))
	petrSecond := crewOffer(t, env, petr.ID(), second, 30*time.Second)
	say(boss, boss.ID(), "/orders")
	say(oksana, oksana.ID(), "/orders")
	crewWait(t, env, olenaOffer, lapse, offerClosed)
	annOffer := crewOffer(t, env, ann.ID(), first, lapse)
	require.False(t, crewPress(t, env, ann, annOffer, "oa").ShowAlert)
	// Мария hears who comes and asks a question through the bot; Ann
	// answers it the same way.
	mariaStatus := crewCustomerStatus(t, env, maria.ID(), first, "Ann")
	maria.Reply(mariaStatus, "Здравствуйте! Во сколько примерно будете?")
	question := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "✉️") })
	ann.Reply(question, "Hello! Around 11, I will call from the gate.")
	env.TG.WaitMessage(t, maria.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Around 11") })
	crewWait(t, env, petrSecond, lapse, offerClosed)
	var petrRound2 tgfake.BotMessage
	env.TG.WaitFor(t, lapse, func() bool {
		for _, m := range crewOffers(env, petr.ID(), second) {
			if m.MessageID != petrSecond.MessageID {
				petrRound2 = m
				return true
			}
		}
		return false
	})
	crewPress(t, env, petr, petrRound2, "od")
	// An old client still shows round 1's buttons: Accept is refused.
	round1 := petrSecond.Message
	if len(petrSecond.Edits) > 0 {
		round1 = petrSecond.Edits[0]
	}
	stale := petr.PressRaw(petrSecond, buttonData(t, tgfake.BotMessage{Message: round1}, "✅ Принять"))
	require.True(t, env.TG.WaitCallbackAnswer(t, stale.ID).ShowAlert)
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND unassignable_at IS NOT NULL`, second) == 1
	})
	sayWant(boss, adminGroup, "/orders", `Открытые заказы|Открытых заказов нет`)

	// Ann works order #1 through: on her way, there, Done (with a Back in
	// between), a photo of the work; her card; then a pause.
	crewAdvance(t, env, ann, annOffer, "aet")
	// On her way she shares her live location: Мария watches the map move
	// until Ann arrives, and it stops there.
	share := ann.ShareLiveLocation(ann.ID(), 55.7558, 37.6173, time.Hour)
	env.TG.WaitMessageAfter(t, ann.ID(), share.MessageID, nil)
	crewMap(t, env, maria.ID(), tgfake.LiveActive, 55.7558)
	ann.MoveLiveLocation(share, 55.757, 37.619)
	crewMap(t, env, maria.ID(), tgfake.LiveActive, 55.757)
	crewAdvance(t, env, ann, annOffer, "aa")
	crewMap(t, env, maria.ID(), tgfake.LiveStopped, 55.757)
	crewConfirmAfterBack(t, env, ann, annOffer, "ad", "adc", "🏁")
	photo := ann.SendPhoto(ann.ID(), "Tap replaced, no more leaks")
	env.TG.WaitMessageAfter(t, ann.ID(), photo.MessageID, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "📷") })
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		for _, m := range env.TG.Messages(adminGroup) {
			if m.File != nil {
				return true
			}
		}
		return false
	})
	// Мария got the photo too, rates the work and adds a word.
	rated := crewRate(t, env, maria, first, "5 ★")
	thanks := maria.Reply(rated, "Спасибо, всё сухо!")
	env.TG.WaitMessageAfter(t, maria.ID(), thanks.MessageID, nil)
	sayWant(ann, ann.ID(), "/master", crewProfile)
	say(ann, ann.ID(), "/pause")
	say(ann, ann.ID(), "/pause")
	say(boss, boss.ID(), fmt.Sprintf("/done %d", first))
	say(boss, boss.ID(), fmt.Sprintf("/cancel %d", first))

	// Wednesday. Order #3, typed in the admin chat: Олена takes it, sets
	// off, then cannot do it (Back once, then Yes); Пётр takes it, an
	// admin marks it done, another records his payment.
	thirdReply := sayWant(boss, adminGroup, "/order Москва Центр сантехника 2500 Засор в ванной", `создан: `)
	third := crewOrder(t, thirdReply)
	sayWant(taras, taras.ID(), "/start "+orderLinkOf(t, thirdReply.Text), fmt.Sprintf(`Замовлення #%d`, third))
	olenaThird := crewOffer(t, env, olena.ID(), third, 30*time.Second)
	crewPress(t, env, olena, olenaThird, "oa")
	crewAdvance(t, env, olena, olenaThird, "aet")
	olenaShare := olena.ShareLiveLocation(olena.ID(), 55.7601, 37.6185, 15*time.Minute)
	env.TG.WaitMessageAfter(t, olena.ID(), olenaShare.MessageID, nil)
	crewMap(t, env, taras.ID(), tgfake.LiveActive, 55.7601)
	crewConfirmAfterBack(t, env, olena, olenaThird, "ax", "axc", "🙅")
	env.TG.WaitMessage(t, taras.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔄") })
	// Her map stops where she gave the order back.
	crewMap(t, env, taras.ID(), tgfake.LiveStopped, 55.7601)
	petrThird := crewOffer(t, env, petr.ID(), third, 30*time.Second)
	crewPress(t, env, petr, petrThird, "oa")
	crewCustomerStatus(t, env, taras.ID(), third, "Пётр")
	sayWant(boss, adminGroup, fmt.Sprintf("/done %d", third), `к оплате|не взимается`)
	crewCustomerStatus(t, env, taras.ID(), third, "✅")
	crewRate(t, env, taras, third, "4 ★")
	sayWant(boss, boss.ID(), fmt.Sprintf("/thread %d", first), `Ann|Around 11`)
	crewWait(t, env, petrThird, 30*time.Second, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🏁") })
	sayWant(petr, petr.ID(), "/master", crewProfile)
	sayWant(boss, boss.ID(), fmt.Sprintf("/paid %d", petrID), `💵|owes`)
	env.TG.WaitMessage(t, petr.ID(), func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, "💵") || strings.HasPrefix(m.Text, "✅ Комисс")
	})

	// Order #4, by the Ukrainian admin, with the customer in Ukrainian
	// labels, is cancelled while it is offered; order #5 while assigned.
	fourth := crewOrder(t, sayWant(oksana, oksana.ID(), fmt.Sprintf("/order Москва Центр сантехника 1800 Засмічена раковина\nадреса: %s\nім'я: %s\nтелефон: %s\nколи: %s",
		crewAddress, crewName, crewPhone, tomorrow.Format("02.01.2006")), `#\d+`))
	offered4 := crewOfferAny(t, env, []*tgfake.Person{olena, petr}, fourth)
	sayWant(boss, adminGroup, fmt.Sprintf("/cancel %d", fourth), `отменён(\.|; назначенный)`)
	crewWait(t, env, offered4, 30*time.Second, offerClosed)
	fifth := crewOrder(t, sayWant(boss, boss.ID(), "/order Москва Центр сантехника 1200 Поменять смеситель", `#\d+`))
	offered5 := crewOfferAny(t, env, []*tgfake.Person{petr, olena}, fifth)
	taker := petr
	if offered5.Chat.ID == olenaID {
		taker = olena
	}
	crewPress(t, env, taker, offered5, "oa")
	sayWant(boss, adminGroup, fmt.Sprintf("/cancel %d", fifth), `отменён(\.|; назначенный)`)
	crewWait(t, env, offered5, 30*time.Second, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🚫") })
	say(oksana, oksana.ID(), "/orders")

	// Thursday. The team's talk becomes a run in the admin chat: approve
	// one, reject one, approve the rest (cancelled once, then confirmed),
	// close; the admins read it back.
	sayWant(boss, adminGroup, "/run_new 24h", `Прогон #1 создан`)
	sayWant(boss, adminGroup, "/run_new 7d", `Одновременно`)
	sayWant(boss, adminGroup, "/run_start 1", `запущен`)
	b := crewBoard(t, env, 60*time.Second, func(s string) bool { return strings.Contains(s, "завершён") && strings.Contains(s, "⏳ 4") })
	pressEach(t, boss, b, "1 ✅", "2 ❌")
	crewPress(t, env, boss, b, "ba")
	crewPress(t, env, boss, b, "bn")
	crewPress(t, env, boss, b, "ba")
	crewPress(t, env, boss, b, "by")
	crewBoard(t, env, 60*time.Second, func(s string) bool { return strings.Contains(s, "⏳ 0") })
	// /run_close typed in the admin chat is answered by the board.
	boss.SendText(adminGroup, "/run_close 1")
	crewBoard(t, env, 60*time.Second, func(s string) bool { return strings.Contains(s, "закрыт") })
	say(oksana, oksana.ID(), "/run 1")
	say(boss, boss.ID(), "/runs")
	sayWant(boss, adminGroup, "/run 1", `Прогон #1 — `)
	sayWant(boss, adminGroup, "/chats", `Группы`)

	// Friday. Ann's commission has lapsed: she is blocked and told; she
	// reads her card, resumes, thinks better of it and pauses again; the
	// Ukrainian admin records her payment while she is paused; she
	// resumes.
	env.TG.WaitFor(t, lapse, func() bool {
		for _, m := range env.TG.Messages(ann.ID()) {
			if strings.HasPrefix(m.Text, "⛔") {
				return true
			}
		}
		return false
	})
	sayWant(ann, ann.ID(), "/master", crewProfile)
	sayWant(ann, ann.ID(), "/resume", `(?i)resume|active|back to work|overdue`)
	sayWant(ann, ann.ID(), "/pause", `(?i)paused`)
	sayWant(oksana, oksana.ID(), fmt.Sprintf("/paid %d", annID), `💵`)
	env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "settled") })
	sayWant(ann, ann.ID(), "/master", crewProfile)
	sayWant(ann, ann.ID(), "/resume", `(?i)resume|active|back to work`)
	sayWant(boss, boss.ID(), fmt.Sprintf("/paid %d", olenaID), `(?i)owes|💵`)
	sayWant(boss, adminGroup, fmt.Sprintf("/done %d", second), `выполненным можно`)
	sayWant(petr, petr.ID(), "/master", crewProfile)
	sayWant(olena, olena.ID(), "/master", crewProfile)
	// The group's pointer button opens the private chat with this deep
	// link: it runs the command typed in the group.
	sayWant(petr, petr.ID(), "/start master", crewProfile)
	say(boss, boss.ID(), "/orders")
	sayWant(boss, adminGroup, "/orders", `Открытые заказы|Открытых заказов нет`)

	// Everything sent has been handled and delivered.
	env.TG.WaitUpdatesConsumed(t)
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE state = 'pending'`) == 0
	})
	assert.Empty(t, env.TG.UnansweredCallbacks(), "a press left spinning")
	mode.everyMessageInItsTopic(t, env, pool, adminGroup)

	crewReadChecks(t, env, readers)
	// Who never took order #1 or #4 never read the customer; neither did
	// the admin chat nor the group.
	for _, id := range []int64{adminGroup, teamChat, petrID} {
		for _, text := range everyText(env, id) {
			for _, mark := range []string{crewAddress, crewName, crewPhone} {
				assert.NotContains(t, text, mark, "chat %d (%s) read the customer's data", id, readers[id].role)
			}
		}
	}
	for _, c := range env.TG.Commands(tgfake.BotCommandScope{Type: "all_group_chats"}, "") {
		assert.NotContains(t, []string{"master", "pause", "resume", "order", "orders", "paid"}, c.Command, "a private or admin command in the groups' menu")
	}
}

// The customer of the tour's orders #1 and #4.
const (
	crewAddress = "Тверская 12, кв. 5"
	crewName    = "Марина Петровна"
	crewPhone   = "+7 999 123-45-67"
)

// crewReader is who reads a chat: the language and the role.
type crewReader struct {
	lang string // "" for a group, which everyone reads
	role string // master, admin, admin chat, group
}

// crewProfile is what a master's card begins with, in every language.
const crewProfile = `Your master profile|Ваш профиль мастера|Ваш профіль майстра`

var (
	crewOrderRx  = regexp.MustCompile(`#(\d+)`)
	crewStatusRx = regexp.MustCompile(`^(Status|Состояние|Стан) — `)
	crewHelpRx   = regexp.MustCompile(`^(What I can do for you|Что я умею|Що я вмію)\n`)
)

// crewSay sends text and waits for the bot's answer in that chat: the first
// message after it, or, with want, the first whose text matches want (in
// the admin chat the live log and the boards come between).
func crewSay(t *testing.T, env *e2e.Env, who *tgfake.Person, chat int64, text, want string) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(chat, text)
	var rx *regexp.Regexp
	if want != "" {
		rx = regexp.MustCompile(want)
	}
	return env.TG.WaitMessageAfter(t, chat, sent.MessageID, func(m tgfake.BotMessage) bool { return rx == nil || rx.MatchString(m.Shown()) })
}

// crewOrder is the order number an admin's /order reply names.
func crewOrder(t *testing.T, reply tgfake.BotMessage) int64 {
	t.Helper()
	m := crewOrderRx.FindStringSubmatch(reply.Text)
	require.NotNil(t, m, "no order number in %q", reply.Text)
	id, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return id
}

// crewLastID is the id of the bot's last message in a chat (0: none).
func crewLastID(env *e2e.Env, chat int64) int {
	if m, ok := env.TG.LastMessage(chat); ok {
		return m.MessageID
	}
	return 0
}

// crewAction is the action a button's callback data names ("" if none).
func crewAction(b tgfake.InlineKeyboardButton) string {
	name, _, err := bot.ReadData(b.CallbackData)
	if err != nil {
		return ""
	}
	return name
}

// crewHas reports whether m, as it is, has a button doing action.
func crewHas(m tgfake.BotMessage, action string) bool {
	for _, b := range m.ReplyMarkup.Buttons() {
		if crewAction(b) == action || b.CallbackData == action {
			return true
		}
	}
	return false
}

// crewOffers are the offer messages of an order in a master's chat: sent
// with Accept, naming the order.
func crewOffers(env *e2e.Env, chat, order int64) []tgfake.BotMessage {
	rx := regexp.MustCompile(fmt.Sprintf(`#%d\b`, order))
	var out []tgfake.BotMessage
	for _, m := range env.TG.Messages(chat) {
		first := m.Message
		if len(m.Edits) > 0 {
			first = m.Edits[0]
		}
		if !rx.MatchString(first.Text) {
			continue
		}
		for _, b := range first.ReplyMarkup.Buttons() {
			if crewAction(b) == "oa" {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// crewOffer waits for the master's first offer of the order.
func crewOffer(t *testing.T, env *e2e.Env, chat, order int64, within time.Duration) tgfake.BotMessage {
	t.Helper()
	var got tgfake.BotMessage
	env.TG.WaitFor(t, within, func() bool {
		if offers := crewOffers(env, chat, order); len(offers) > 0 {
			got = offers[0]
			return true
		}
		return false
	})
	return got
}

// crewOfferAny waits for the order's offer in whichever master's chat it
// comes to first.
func crewOfferAny(t *testing.T, env *e2e.Env, masters []*tgfake.Person, order int64) tgfake.BotMessage {
	t.Helper()
	var got tgfake.BotMessage
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		for _, m := range masters {
			if offers := crewOffers(env, m.ID(), order); len(offers) > 0 {
				got = offers[0]
				return true
			}
		}
		return false
	})
	return got
}

// crewWait waits until the bot's message reads as ok says and returns it.
func crewWait(t *testing.T, env *e2e.Env, msg tgfake.MessageRef, within time.Duration, ok func(tgfake.BotMessage) bool) tgfake.BotMessage {
	t.Helper()
	chat, id := msg.Ref()
	var got tgfake.BotMessage
	env.TG.WaitFor(t, within, func() bool {
		got, _ = env.TG.MessageByID(chat, id)
		return ok(got)
	})
	return got
}

// crewPress waits until the message has a button doing action, presses it
// and waits for the answer.
func crewPress(t *testing.T, env *e2e.Env, who *tgfake.Person, msg tgfake.MessageRef, action string) tgfake.CallbackAnswer {
	t.Helper()
	m := crewWait(t, env, msg, 30*time.Second, func(m tgfake.BotMessage) bool { return crewHas(m, action) })
	for _, b := range m.ReplyMarkup.Buttons() {
		if crewAction(b) == action || b.CallbackData == action {
			q, err := who.Press(m, b.CallbackData)
			require.NoError(t, err)
			return env.TG.WaitCallbackAnswer(t, q.ID)
		}
	}
	panic("unreachable: crewWait saw the button")
}

// crewAdvance presses action on msg and waits until the message no longer
// offers it: the step it stands for has been taken.
func crewAdvance(t *testing.T, env *e2e.Env, who *tgfake.Person, msg tgfake.MessageRef, action string) {
	t.Helper()
	crewPress(t, env, who, msg, action)
	crewWait(t, env, msg, 30*time.Second, func(m tgfake.BotMessage) bool { return !crewHas(m, action) })
}

// crewConfirmAfterBack asks for a step that wants confirming (ask), goes
// Back once, asks again, confirms (confirm) and waits for the message to
// read as the step done (its text starting with done).
func crewConfirmAfterBack(t *testing.T, env *e2e.Env, who *tgfake.Person, msg tgfake.MessageRef, ask, confirm, done string) {
	t.Helper()
	for _, action := range []string{ask, "ab", ask, confirm} {
		crewPress(t, env, who, msg, action)
	}
	crewWait(t, env, msg, 30*time.Second, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, done) })
}

// crewBoard waits for the Russian admin chat's board of run #1 to read as
// ok says.
func crewBoard(t *testing.T, env *e2e.Env, within time.Duration, ok func(string) bool) tgfake.BotMessage {
	t.Helper()
	var b tgfake.BotMessage
	env.TG.WaitFor(t, within, func() bool {
		for _, m := range env.TG.Messages(adminGroup) {
			if strings.Contains(m.Text, "Прогон #1") && strings.ContainsAny(m.Text, "▓░") && ok(m.Text) {
				b = m
				return true
			}
		}
		return false
	})
	return b
}

// crewReadChecks reads every version of every message as its reader
// would: the first tour's checks, and no raw HTML, template or locale key.
func crewReadChecks(t *testing.T, env *e2e.Env, readers map[int64]crewReader) {
	t.Helper()
	for _, id := range slices.Sorted(maps.Keys(readers)) {
		r := readers[id]
		timesToldIn(t, env, id, locales.LangZone("ru")) // DISPATCH_TIMEZONE
		for _, text := range everyText(env, id) {
			readsRight(t, fmt.Sprintf("chat %d (%s)", id, r.role), r.lang, text)
			// An admin's /help and /status list everything, in private and
			// in the admin chat (/status there: 1010 characters here).
			// A master's /help too: their own commands first, then
			// everyone's (1012 characters in Ukrainian).
			wall := r.role == "admin" || crewStatusRx.MatchString(text) || r.role == "master" && crewHelpRx.MatchString(text)
			if !wall {
				assert.LessOrEqual(t, len([]rune(text)), 1000, "chat %d got a wall of text: %q", id, text)
			}
			switch r.role {
			case "admin chat":
				assert.NotRegexp(t, `Run #|Order #|Only one run`, text, "the admin chat reads one language, English crept in: %q", text)
			case "group":
				assert.NotContains(t, text, "₽", "money, a master's or an order's, shown in a group: %q", text)
			case "customer":
				// The order's city has a zone: the customer's times are in
				// it; they read only their language.
				assert.NotContains(t, text, "UTC", "customer %d (%s) reads a UTC time: %q", id, r.lang, text)
				assert.False(t, goDuration.MatchString(text), "customer %d (%s) reads a Go duration: %q", id, r.lang, text)
				assert.NotRegexp(t, `Order #|Your master|on the way`, text, "customer %d (%s) reads English: %q", id, r.lang, text)
			case "master":
				// A master's city has a zone: their times are in it, in
				// words, whatever their language.
				assert.NotContains(t, text, "UTC", "master %d (%s) reads a UTC time: %q", id, r.lang, text)
				assert.False(t, goDuration.MatchString(text), "master %d (%s) reads a Go duration: %q", id, r.lang, text)
			}
		}
	}
}

// crewTranscript is every chat as its reader saw it: the people's messages
// and the bot's, each bot message in every version with its buttons, and
// under it each press on it with the bot's answer.
func crewTranscript(env *e2e.Env, readers map[int64]crewReader) string {
	var sb strings.Builder
	for _, id := range []int64{adminGroup, teamChat, e2e.AdminID, 7_400_010, 7_400_001, 7_400_002, 7_400_003, 7_400_020, 7_400_021} {
		r := readers[id]
		fmt.Fprintf(&sb, "=== chat %d (%s, %s)\n", id, r.role, r.lang)
		presses := map[int][]tgfake.Callback{}
		for _, c := range env.TG.Callbacks(id) {
			if c.Query.Message != nil {
				presses[c.Query.Message.MessageID] = append(presses[c.Query.Message.MessageID], c)
			}
		}
		bots := map[int]tgfake.BotMessage{}
		for _, m := range env.TG.Messages(id) {
			bots[m.MessageID] = m
		}
		var order []int
		people := map[int]tgfake.Message{}
		for _, m := range env.TG.History(id) {
			if _, ok := bots[m.MessageID]; !ok {
				people[m.MessageID] = m
				order = append(order, m.MessageID)
			}
		}
		for mid := range bots {
			order = append(order, mid)
		}
		sort.Ints(order)
		for _, mid := range order {
			if m, ok := people[mid]; ok {
				text := m.Shown() // a location as its map
				if len(m.Photo) > 0 {
					text = "[photo] " + m.Caption
				}
				fmt.Fprintf(&sb, ">>> #%d %s: %s\n", mid, m.From.FirstName, text)
				continue
			}
			m := bots[mid]
			sb.WriteString(topicHeading(env, id, m))
			versions := append(append([]tgfake.Message(nil), m.Edits...), m.Message)
			for i, v := range versions {
				label := ""
				if len(versions) > 1 {
					label = fmt.Sprintf(" (version %d of %d)", i+1, len(versions))
				}
				text := v.Shown()
				if m.File != nil {
					text = "[" + m.File.Kind + "] " + v.Caption
				}
				fmt.Fprintf(&sb, "--- #%d%s%s\n%s\n", mid, label, buttonsOf(tgfake.BotMessage{Message: v}), text)
			}
			for _, c := range presses[mid] {
				label := c.Query.Data
				for _, v := range versions {
					for _, b := range v.ReplyMarkup.Buttons() {
						if b.CallbackData == c.Query.Data {
							label = b.Text
						}
					}
				}
				answer := c.Answer.Text
				if c.Answer.ShowAlert {
					answer = "(alert) " + answer
				}
				fmt.Fprintf(&sb, "    * %s pressed [%s] → %q\n", c.Query.From.FirstName, label, answer)
			}
		}
	}
	return sb.String()
}

// offerClosed reports whether an offer's message was edited to say how it
// ended: nothing left to press, its one button (disabled) saying so.
func offerClosed(m tgfake.BotMessage) bool {
	if len(m.Edits) == 0 {
		return false
	}
	for _, b := range m.ReplyMarkup.Buttons() {
		if b.Disabled == nil {
			return false
		}
	}
	return true
}

// crewCustomerStatus waits for a customer's status message of order to
// hold want.
func crewCustomerStatus(t *testing.T, env *e2e.Env, chat, order int64, want string) tgfake.BotMessage {
	t.Helper()
	rx := regexp.MustCompile(fmt.Sprintf(`^📋 .*#%d\b`, order))
	var got tgfake.BotMessage
	env.TG.WaitFor(t, 60*time.Second, func() bool {
		for _, m := range env.TG.Messages(chat) {
			if rx.MatchString(m.Text) && strings.Contains(m.Text, want) {
				got = m
				return true
			}
		}
		return false
	})
	return got
}

// crewRate has a customer press a star under their order's done note and
// waits for their status to show the rating.
func crewRate(t *testing.T, env *e2e.Env, who *tgfake.Person, order int64, label string) tgfake.BotMessage {
	t.Helper()
	note := env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, "✅") && strings.Contains(m.Text, fmt.Sprintf("#%d", order)) && len(m.ReplyMarkup.Labels()) == 5
	})
	require.False(t, who.PressAndWait(t, note, label).ShowAlert)
	crewCustomerStatus(t, env, who.ID(), order, "★")
	return note
}

// crewMap waits until the one map in a customer's chat is live or stopped
// at latitude lat.
func crewMap(t *testing.T, env *e2e.Env, chatID int64, state tgfake.LiveState, lat float64) {
	t.Helper()
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		locs := env.TG.Locations(chatID)
		return len(locs) == 1 && locs[0].Live == state && locs[0].Location.Latitude == lat
	})
}
