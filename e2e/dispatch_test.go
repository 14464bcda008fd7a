package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

const adminChat = -5001

// offerMessages are the bot's offer messages in a master's chat, edited
// ones included.
func offerMessages(env *e2e.Env, chatID int64) []tgfake.BotMessage {
	return offersHeaded(env, chatID, "New order #")
}

// offersHeaded are the offer messages in a chat whose first text holds
// header: "New order #" in English, "Новый заказ #" in Russian.
func offersHeaded(env *e2e.Env, chatID int64, header string) []tgfake.BotMessage {
	var out []tgfake.BotMessage
	for _, m := range env.TG.Messages(chatID) {
		if strings.Contains(originalText(m), header) {
			out = append(out, m)
		}
	}
	return out
}

// originalText is a message's text as first sent, before any edit.
func originalText(m tgfake.BotMessage) string {
	if len(m.Edits) > 0 {
		return m.Edits[0].Text
	}
	return m.Text
}

// liveLog is the admin chat's live log, one line each: lines that burst
// come gathered into one message.
func liveLog(env *e2e.Env) []string { return chatLines(env, adminChat) }

func createOrder(t *testing.T, env *e2e.Env, boss *tgfake.Person, args string) int64 {
	t.Helper()
	reply := ask(t, env, boss, boss.ID(), "/order "+args)
	m := regexp.MustCompile(`Order #(\d+)`).FindStringSubmatch(reply.Text)
	require.NotNil(t, m, reply.Text)
	id, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return id
}

func register(t *testing.T, env *e2e.Env, who *tgfake.Person, args string) {
	t.Helper()
	require.Contains(t, ask(t, env, who, who.ID(), "/master "+args).Text, "registered as a master")
}

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

// The scenario: an admin creates an order; master A's offer expires
// and their message says so; master B receives it and accepts; the live log
// shows every step in order.
func TestDispatchExpiryThenAccept(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Group(adminChat, "Dispatch log")
	p := env.Start(map[string]string{
		"ADMIN_CHAT_ID": fmt.Sprint(adminChat), "OFFER_SLA": "2s", "DISTRIBUTION_INTERVAL": "1h",
	})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(701, "Ann", "en")
	bob := env.TG.User(702, "Bob", "en")
	register(t, env, ann, `"Saint Petersburg" Center plumbing`)
	register(t, env, bob, `"saint petersburg" center plumbing,electrics`)
	// A non-admin cannot create orders.
	require.NotContains(t, ask(t, env, ann, ann.ID(), "/order X Y z 100 nope").Text, "created")

	order := createOrder(t, env, boss, `"Saint Petersburg" Center plumbing 1500 Leaking tap <b>urgent</b>`)
	first := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	require.Contains(t, first.Text, "Leaking tap <b>urgent</b>", "the description arrives literally")
	require.Len(t, first.ReplyMarkup.Buttons(), 3, "Accept, Decline, Details")
	require.Empty(t, offerMessages(env, bob.ID()), "one offer at a time")

	// Ann does not answer: within about a second of the SLA her message says
	// it expired and Bob has the order.
	// (Her closing edit and Bob's offer go to different chats, so either
	// may arrive first.)
	var expired tgfake.BotMessage
	env.TG.WaitFor(t, 15*time.Second, func() bool {
		expired, _ = env.TG.MessageByID(ann.ID(), first.MessageID)
		return len(offerMessages(env, bob.ID())) == 1 && strings.Contains(expired.Text, "expired")
	})
	require.Contains(t, expired.Text, "expired")
	require.Empty(t, expired.ReplyMarkup.Buttons(), "no buttons on an expired offer")
	lag := scalar[float64](t, pool, `SELECT extract(epoch FROM responded_at - expires_at) FROM offers WHERE master_id = 701`)
	// Typically milliseconds; the bound only tells the timer from the 60 s
	// tick without making a loaded CI machine fail the test.
	require.Less(t, lag, 10.0, "expired by the replica's timer, not the 60 s watchdog tick")
	p.WaitLog(`"msg":"expired_offers","component":"dispatch","count":1`, 5*time.Second)
	p.WaitLog(`"msg":"offer_expired"`, 5*time.Second)

	// The buttons are gone, but a stale client may still press Accept:
	// refused. Then Bob accepts.
	stale := ann.PressRaw(expired, first.ReplyMarkup.Buttons()[0].CallbackData)
	require.Contains(t, env.TG.WaitCallbackAnswer(t, stale.ID).Text, "expired")
	second := offerMessages(env, bob.ID())[0]
	// Ann forges Bob's button in her own chat: refused.
	forged := ann.PressRaw(first, second.ReplyMarkup.Buttons()[0].CallbackData)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)
	acc, err := bob.PressButton(second, "✅ Accept")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, acc.ID).ShowAlert)
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Equal(t, int64(702), scalar[int64](t, pool, `SELECT master_id FROM orders WHERE id = $1`, order))

	want := []string{"created", "sent to", "expired", "sent to", "accepted", "assigned to"}
	env.TG.WaitFor(t, 10*time.Second, func() bool { return len(liveLog(env)) >= len(want) })
	log := liveLog(env)
	require.Len(t, log, len(want), strings.Join(log, "\n"))
	for i, w := range want {
		require.Contains(t, log[i], fmt.Sprintf("#%d", order), log[i])
		require.Contains(t, log[i], w, "live log line %d", i)
	}
	require.Contains(t, log[1], "Ann")
	require.Contains(t, log[3], "Bob")
	require.Contains(t, log[5], "Bob")
}

// Two replicas on one database and Redis: never two open offers for one
// order, and each expiry processed (logged, edited) exactly once.
func TestDispatchTwoReplicasExpireOnce(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithRedis())
	over := map[string]string{"OFFER_SLA": "1s", "DISTRIBUTION_INTERVAL": "1h", "WATCHDOG_INTERVAL": "2s"}
	a := env.Start(over)
	b := env.Start(over)
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	masters := []*tgfake.Person{env.TG.User(711, "M1", "en"), env.TG.User(712, "M2", "en"), env.TG.User(713, "M3", "en")}
	for _, m := range masters {
		register(t, env, m, "Kyiv Podil tiling")
	}
	const orders = 3
	for i := range orders {
		createOrder(t, env, boss, fmt.Sprintf("Kyiv Podil tiling %d job %d", 100+i, i))
	}
	// Nobody answers: each order goes to each master twice (two rounds),
	// then it is reported unassignable.
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM orders WHERE unassignable_at IS NOT NULL`) == orders
	})
	total := scalar[int](t, pool, `SELECT count(*) FROM offers`)
	require.Equal(t, orders*len(masters)*2, total)
	require.Equal(t, total, scalar[int](t, pool, `SELECT count(*) FROM offers WHERE state = 'EXPIRED'`))
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM offers x JOIN offers y ON x.order_id = y.order_id AND x.id < y.id
		WHERE x.sent_at < y.responded_at AND y.sent_at < x.responded_at`), "two offers of one order open at once")
	eventually(t, 10*time.Second, func() bool {
		return strings.Count(a.Logs(), `"msg":"offer_expired"`)+strings.Count(b.Logs(), `"msg":"offer_expired"`) >= total
	})
	require.Equal(t, total, strings.Count(a.Logs(), `"msg":"offer_expired"`)+strings.Count(b.Logs(), `"msg":"offer_expired"`),
		"each expiry logged once")
	// Every offer's message ends showing its expiry, edited at most once:
	// an expiry's edit may trail the order's moving on (each master's
	// chat takes its offers and their edits at one a second), and an
	// offer that expired before its message went out is sent showing
	// the expiry (the edit took the queued send's place).
	expired := func() int {
		n := 0
		for _, m := range masters {
			for _, msg := range env.TG.Messages(m.ID()) {
				require.LessOrEqual(t, len(msg.Edits), 1, "an offer message edited twice")
				if strings.Contains(msg.Text, "⌛ The offer of order #") {
					n++
				}
			}
		}
		return n
	}
	env.TG.WaitFor(t, 30*time.Second, func() bool { return expired() >= total })
	n := 0
	for _, m := range masters {
		for _, msg := range env.TG.Messages(m.ID()) {
			if strings.Contains(originalText(msg), "New order #") || strings.Contains(originalText(msg), "⌛ The offer of order #") {
				n++
			}
		}
	}
	require.Equal(t, total, n, "one message per offer")
}

// The process is down for three minutes while offers fall due; on start
// the first thing it does expires them all.
func TestDispatchRestartExpiresAccumulated(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	over := map[string]string{"OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h"}
	p := env.Start(over)
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	var masters []*tgfake.Person
	for i := range 3 {
		m := env.TG.User(int64(721+i), fmt.Sprint("M", i), "en")
		register(t, env, m, fmt.Sprintf("Town%d Center roofing", i))
		createOrder(t, env, boss, fmt.Sprintf("Town%d Center roofing 100 roof %d", i, i))
		masters = append(masters, m)
	}
	env.TG.WaitFor(t, 10*time.Second, func() bool {
		for _, m := range masters {
			if len(offerMessages(env, m.ID())) == 0 {
				return false
			}
		}
		return true
	})
	p.Signal(syscall.SIGTERM)
	require.Equal(t, 0, p.Wait(20*time.Second))
	_, err := pool.Exec(context.Background(), `UPDATE offers SET sent_at = now() - interval '1 hour', expires_at = now() - interval '3 minutes'`)
	require.NoError(t, err)

	q := env.Start(over)
	q.WaitLog(`"msg":"expired_offers","component":"dispatch","count":3`, 10*time.Second)
	require.Equal(t, 3, scalar[int](t, pool, `SELECT count(*) FROM offers WHERE state = 'EXPIRED'`))
	for _, m := range masters {
		env.TG.WaitFor(t, 10*time.Second, func() bool {
			msgs := offerMessages(env, m.ID())
			return len(msgs) > 0 && len(msgs[0].Edits) == 1
		})
	}
}

// Markers of one customer's data, each unlike anything else the bot writes.
const (
	markAddress = "Deribasivska 7 zq-addr-7731"
	markName    = "Marta zq-name-7731"
	markPhone   = "+380 48 777 31 31"
)

var customer = []string{markAddress, markName, markPhone}

// orderWithCustomer is /order's text for an order with the customer's data
// and a visit.
func orderWithCustomer(place string, price int) string {
	return fmt.Sprintf("%s plumbing %d The boiler leaks\naddress: %s\nname: %s\nphone: %s\nwhen: 2099-05-06 09:00-11:00",
		place, price, markAddress, markName, markPhone)
}

// everyText is every version of every message a chat received: the text
// as first sent and after each edit, and captions.
func everyText(env *e2e.Env, chatID int64) []string {
	var out []string
	for _, m := range env.TG.Messages(chatID) {
		for _, v := range append(m.Edits, m.Message) {
			out = append(out, v.Text+v.Caption)
		}
	}
	return out
}

// requireNoCustomer fails if any message or edit a chat received holds any
// of the customer's data.
func requireNoCustomer(t *testing.T, env *e2e.Env, chatID int64, who string) {
	t.Helper()
	for _, text := range everyText(env, chatID) {
		for _, mark := range customer {
			require.NotContains(t, text, mark, "%s saw the customer's data", who)
		}
	}
}

// pressAndWait presses a button by its label and waits for the answer.
func pressAndWait(t *testing.T, env *e2e.Env, who *tgfake.Person, msg tgfake.BotMessage, label string) tgfake.CallbackAnswer {
	t.Helper()
	q, err := who.PressButton(msg, label)
	require.NoError(t, err)
	return env.TG.WaitCallbackAnswer(t, q.ID)
}

// waitEdited waits until a message of the bot's reads as want says.
func waitEdited(t *testing.T, env *e2e.Env, msg tgfake.BotMessage, want func(tgfake.BotMessage) bool) tgfake.BotMessage {
	t.Helper()
	chat, id := msg.Ref()
	var got tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		got, _ = env.TG.MessageByID(chat, id)
		return want(got)
	})
	return got
}

// The items 6 and 7 end to end: Ann only looks and declines and
// never sees where or whom; Bob accepts and sees the address, the customer
// and the visit, goes and arrives, then cannot do it and gives the order
// back; it goes to Carl, who declines, and through round 2 never to Bob
// again; Dora, registering later, takes it, finishes it and sends a photo
// the admins see. Every step is in the database and the live log.
func TestDispatchOrderDetailsAndMasterSteps(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Group(adminChat, "Dispatch log")
	env.Start(map[string]string{"ADMIN_CHAT_ID": fmt.Sprint(adminChat), "OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h"})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(741, "Ann", "en")
	bob := env.TG.User(742, "Bob", "en")
	carl := env.TG.User(743, "Carl", "en")
	for _, m := range []*tgfake.Person{ann, bob, carl} {
		register(t, env, m, "Odesa Center plumbing")
	}

	// A bad field is refused with its name and an example; nothing is created.
	bad := ask(t, env, boss, boss.ID(), "/order Odesa Center plumbing 900 Tap\nwhen: 31.02.2099")
	require.True(t, strings.HasPrefix(bad.Text, "There is no date 31.02.2099 (when:); write it as 2026-11-27, 27.11.2026 or 27.11."), bad.Text)
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM orders`))

	order := createOrder(t, env, boss, orderWithCustomer("Odesa Center", 2000))
	require.Equal(t, []string{markAddress, markName, markPhone, "2099-05-06", "09:00:00", "11:00:00"},
		[]string{scalar[string](t, pool, `SELECT address FROM orders`), scalar[string](t, pool, `SELECT customer_name FROM orders`),
			scalar[string](t, pool, `SELECT customer_phone FROM orders`), scalar[string](t, pool, `SELECT visit_date::text FROM orders`),
			scalar[string](t, pool, `SELECT visit_from::text FROM orders`), scalar[string](t, pool, `SELECT visit_to::text FROM orders`)})
	require.Equal(t, "The boiler leaks", scalar[string](t, pool, `SELECT description FROM orders`), "the fields left the description")

	// Ann is offered it: the district and the visit, nothing of the customer.
	offer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	require.Contains(t, offer.Text, "📍 Odesa, Center\n🗓 2099-05-06, 09:00–11:00\n")
	details := pressAndWait(t, env, ann, offer, "📄 Details")
	require.Equal(t, "The whole order is shown above. The address and contact come once you accept.", details.Text)
	offer = waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "🔒") })
	require.Contains(t, offer.Text, "💸 Commission if you take it: 200 (10% of the price)")
	pressAndWait(t, env, ann, offer, "❌ Decline")

	// Bob accepts: the address, the customer, the visit and the steps.
	bobOffer := env.TG.WaitMessage(t, bob.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	for _, mark := range customer {
		require.NotContains(t, bobOffer.Text, mark)
	}
	require.Equal(t, "Accepted. The order is yours!", pressAndWait(t, env, bob, bobOffer, "✅ Accept").Text)
	assigned, _ := env.TG.MessageByID(bob.ID(), bobOffer.MessageID)
	require.Contains(t, assigned.Text, "📍 Odesa, Center\n🏠 "+markAddress+"\n👤 "+markName+"\n📞 "+markPhone+"\n🗓 2099-05-06, 09:00–11:00\n")
	require.Equal(t, []string{"🚗 On my way", "📍 Arrived", "✅ Done", "🙅 Can't do it"}, buttonLabels(assigned))

	// Each step moves the order once and edits Bob's message.
	require.Equal(t, "Noted: you are on your way.", pressAndWait(t, env, bob, assigned, "🚗 On my way").Text)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND en_route_at IS NOT NULL AND arrived_at IS NULL`, order))
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 3 })
	require.Contains(t, assigned.Text, "🚗 You are on your way.")
	stale := bob.PressRaw(assigned, bobOffer.ReplyMarkup.Buttons()[0].CallbackData) // Accept, from before
	require.Equal(t, "You have already accepted this offer.", env.TG.WaitCallbackAnswer(t, stale.ID).Text)
	require.Equal(t, "Noted: you have arrived.", pressAndWait(t, env, bob, assigned, "📍 Arrived").Text)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND arrived_at IS NOT NULL`, order))
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 2 })
	doneData := buttonData(t, assigned, "✅ Done")

	// Ann forges Bob's Done in her own chat: refused, nothing moves.
	forged := ann.PressRaw(offer, doneData)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))

	// Bob cannot do it after all: Can't do it asks, and only Yes gives the
	// order back to dispatch, at once to Carl.
	text := assigned.Text
	require.Equal(t, "Tap “Yes” to confirm, or “Back” if you pressed by mistake.", pressAndWait(t, env, bob, assigned, "🙅 Can't do it").Text)
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool {
		return len(m.ReplyMarkup.Buttons()) == 2 && m.ReplyMarkup.Buttons()[1].Text == "↩️ Back"
	})
	require.Equal(t, text, assigned.Text, "the text stays")
	require.Equal(t, []string{"🙅 Yes, give the order back", "↩️ Back"}, buttonLabels(assigned))
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Equal(t, "The order is given back.", pressAndWait(t, env, bob, assigned, "🙅 Yes, give the order back").Text)
	require.Equal(t, "SEARCHING", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE master_id IS NOT NULL OR en_route_at IS NOT NULL`))
	gaveBack := waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🙅 You gave order #") })
	for _, mark := range customer {
		require.NotContains(t, gaveBack.Text, mark, "nothing of the customer stays in Bob's message")
	}
	require.Empty(t, gaveBack.ReplyMarkup.Buttons())
	late := bob.PressRaw(gaveBack, doneData)
	require.Equal(t, fmt.Sprintf("Order #%d is no longer yours: you gave it back.", order), env.TG.WaitCallbackAnswer(t, late.ID).Text)

	// Carl declines: Ann declined, Bob gave it back, so nobody is left, in
	// round 2 either, and the admins are told. Bob is never offered it
	// again. Then Dora registers and takes it.
	carlOffer := env.TG.WaitMessage(t, carl.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	pressAndWait(t, env, carl, carlOffer, "❌ Decline")
	eventually(t, 20*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND unassignable_at IS NOT NULL AND round = 2`, order) == 1
	})
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1 AND master_id = 742`, order), "Bob was offered it once")
	require.Len(t, offerMessages(env, bob.ID()), 1)
	dora := env.TG.User(744, "Dora", "en")
	// (Her offer may come before the welcome: the registration wakes
	// distribution before the reply is written.)
	dora.SendText(dora.ID(), "/master Odesa Center plumbing")
	env.TG.WaitMessage(t, dora.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "registered as a master") })
	doraOffer := env.TG.WaitMessage(t, dora.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	for _, mark := range customer {
		require.NotContains(t, doraOffer.Text, mark)
	}
	pressAndWait(t, env, dora, doraOffer, "✅ Accept")
	require.Equal(t, int64(744), scalar[int64](t, pool, `SELECT master_id FROM orders WHERE id = $1`, order))
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1 AND master_id = 742`, order), "still once")
	require.Len(t, offerMessages(env, bob.ID()), 1)
	doraAssigned, _ := env.TG.MessageByID(dora.ID(), doraOffer.MessageID)
	require.Contains(t, doraAssigned.Text, "🏠 "+markAddress)

	// Dora finishes: DONE with /done's commission; her message drops the
	// customer; her photo reaches the admins.
	require.Equal(t, "Tap “Yes” to confirm, or “Back” if you pressed by mistake.", pressAndWait(t, env, dora, doraAssigned, "✅ Done").Text)
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order), "Done only asks")
	doraConfirm := waitEdited(t, env, doraAssigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 2 })
	require.Equal(t, doraAssigned.Text, doraConfirm.Text, "the text stays")
	require.Equal(t, []string{"✅ Yes, the work is done", "↩️ Back"}, buttonLabels(doraConfirm))
	require.Equal(t, "Done. Thank you!", pressAndWait(t, env, dora, doraConfirm, "✅ Yes, the work is done").Text)
	require.Equal(t, "DONE", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Equal(t, int64(200), scalar[int64](t, pool, `SELECT commission FROM orders WHERE id = $1`, order))
	doraDone := waitEdited(t, env, doraAssigned, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🏁 Order #") })
	require.Contains(t, doraDone.Text, "send photos of it here within 1 h")
	for _, mark := range customer {
		require.NotContains(t, doraDone.Text, mark)
	}
	photo := dora.SendPhoto(dora.ID(), "boiler fixed")
	env.TG.WaitMessageAfter(t, dora.ID(), photo.MessageID, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "📷 Thank you!") })
	var inAdmins tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		for _, m := range env.TG.Messages(adminChat) {
			if m.File != nil {
				inAdmins = m
				return true
			}
		}
		return false
	})
	require.Equal(t, photo.Photo[0].FileID, inAdmins.File.FileID, "the master's photo itself")
	require.Equal(t, fmt.Sprintf("📷 Order #%d: the finished work, from Dora (id 744)\nboiler fixed", order), inAdmins.Caption)

	// The live log has each step, with who did it.
	want := []string{"created", "sent to Ann", "opened the details", "Ann (id 741) declined", "sent to Bob", "Bob (id 742) accepted",
		"assigned to Bob", "Bob (id 742) is on the way", "Bob (id 742) has arrived", "Bob (id 742) can't do it and gave it back",
		"sent to Carl", "Carl (id 743) declined", "nobody left to offer it to", "sent to Dora", "Dora (id 744) accepted",
		"assigned to Dora", "Dora (id 744) reports it done; commission 200"}
	var log []string
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		log = nil
		for _, m := range env.TG.Messages(adminChat) {
			if m.File == nil {
				log = append(log, strings.Split(m.Text, "\n")...)
			}
		}
		return len(log) >= len(want)
	})
	require.Len(t, log, len(want), strings.Join(log, "\n"))
	for i, w := range want {
		require.Contains(t, log[i], fmt.Sprintf("#%d", order))
		require.Contains(t, log[i], w, "live log line %d", i)
	}

	// Ann and Carl, offered it and never taking it, never saw the customer
	// in any message or edit; nor did the admin chat (live log, photo).
	requireNoCustomer(t, env, ann.ID(), "Ann")
	requireNoCustomer(t, env, carl.ID(), "Carl")
	requireNoCustomer(t, env, adminChat, "the admin chat")
}

func buttonLabels(m tgfake.BotMessage) []string {
	var out []string
	for _, b := range m.ReplyMarkup.Buttons() {
		out = append(out, b.Text)
	}
	return out
}

// Retention: once an order is closed (here autoclosed a second after Done)
// and RETAIN_ORDER_CONTACTS has passed, no table holds the customer's
// address, name or phone: the order's are cleared by the prune job, and the
// outbox rows that carried them (the admin's confirmation, the master's
// message after a step) are gone with OUTBOX_RETENTION. The order stays.
func TestDispatchCustomerDataGoesWithRetention(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Group(adminChat, "Dispatch log")
	env.Start(map[string]string{
		"ADMIN_CHAT_ID": fmt.Sprint(adminChat), "OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h",
		"AUTOCLOSE_AFTER": "1s", "AUTOCLOSE_INTERVAL": "1s",
		"RETAIN_ORDER_CONTACTS": "2s", "OUTBOX_RETENTION": "2s", "PRUNE_INTERVAL": "1s",
	})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	dan := env.TG.User(751, "Dan", "en")
	register(t, env, dan, "Kherson Center plumbing")
	order := createOrder(t, env, boss, orderWithCustomer("Kherson Center", 500))
	offer := env.TG.WaitMessage(t, dan.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	pressAndWait(t, env, dan, offer, "✅ Accept")
	assigned, _ := env.TG.MessageByID(dan.ID(), offer.MessageID)
	pressAndWait(t, env, dan, assigned, "🚗 On my way")
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 3 })
	require.Contains(t, assigned.Text, markAddress, "the step's edit, an outbox row, carried the address")
	require.Positive(t, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE kind = 'assigned' AND strpos(body::text, $1) > 0`, markName))
	pressAndWait(t, env, dan, assigned, "✅ Done")
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 2 })
	require.Equal(t, "Done. Thank you!", pressAndWait(t, env, dan, assigned, "✅ Yes, the work is done").Text)

	// noID matches no id column: only the markers are looked for.
	const noID = 987_654_321_987
	eventually(t, 60*time.Second, func() bool {
		for _, mark := range customer {
			if len(holding(t, pool, mark, noID)) > 0 {
				return false
			}
		}
		return true
	}, func() string {
		var out []string
		for _, mark := range customer {
			out = append(out, fmt.Sprintf("%s: %v", mark, holding(t, pool, mark, noID)))
		}
		return strings.Join(out, "; ")
	})
	require.Equal(t, "CLOSED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND contacts_pruned_at IS NOT NULL
		AND address IS NULL AND customer_name IS NULL AND customer_phone IS NULL AND visit_date = '2099-05-06'`, order),
		"the order stays, without the customer")
	require.Positive(t, scalar[int64](t, pool, `SELECT total FROM prune_runs WHERE kind = 'order_contacts'`))
}

// Offers go out only within the city's working hours, and the
// admins read every time in the city's zone. The binary's calendar clock
// starts at 22:00 Moscow time (CLOCK_START): the admin's order is
// confirmed as waiting for 10:00 and nobody is offered it; restarted at
// 09:59:58 the next morning, the binary offers it at 10:00. The other
// city, open at that instant, is served at once all along.
func TestDispatchOrderAfterHoursIsOfferedAtOpening(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Group(adminChat, "Dispatch log")
	hours := map[string]string{
		"ADMIN_CHAT_ID":     fmt.Sprint(adminChat),
		"DISPATCH_TIMEZONE": "Europe/Moscow",
		"DISPATCH_HOURS":    "10:00-20:00",
		// 22:00 in Moscow is 02:00 in Almaty: open there around the clock.
		"DISPATCH_CITIES": "Almaty=Asia/Almaty 24h",
		"CLOCK_START":     "2026-11-25T22:00:00+03:00",
	}
	p := env.Start(hours)
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ivan := env.TG.User(731, "Иван", "ru")
	aigul := env.TG.User(732, "Aigul", "en")
	require.Contains(t, ask(t, env, ivan, ivan.ID(), "/master Moscow Arbat electrician").Text, "зарегистрированы как мастер")
	register(t, env, aigul, "Almaty Medeu electrician")

	reply := ask(t, env, boss, boss.ID(), "/order Moscow Arbat electrician 900 Socket sparks")
	msk, err := locales.LoadZone("Europe/Moscow")
	require.NoError(t, err)
	opens := locales.Time("en", time.Date(2026, 11, 26, 10, 0, 0, 0, msk), msk) // "26 Nov, 10:00 (Moscow)"
	require.Contains(t, reply.Text, "Masters in Moscow work from 10:00 to 20:00 local time, so it will be offered when they start, "+opens)
	require.NotContains(t, reply.Text, "It is being offered")
	// The handler takes the order's first step before it answers: had the
	// step offered it, the offer would be in the database by now.
	order := scalar[int64](t, pool, `SELECT id FROM orders WHERE city = 'Moscow'`)
	require.Zero(t, scalar[int64](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1`, order), "22:00 in Moscow: no offer")
	require.True(t, scalar[bool](t, pool, `SELECT waiting FROM orders WHERE id = $1`, order), "still owed its first step")

	// Almaty is open: its order is offered at once, on the same replica.
	ask(t, env, boss, boss.ID(), "/order Almaty Medeu electrician 700 Lamp")
	env.TG.WaitMessage(t, aigul.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })

	list := ask(t, env, boss, boss.ID(), "/orders").Text
	require.Contains(t, list, "outside working hours: offered at opening, "+opens, list)
	require.Zero(t, scalar[int64](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1`, order), "a pass later: still no offer")
	require.Empty(t, offersHeaded(env, ivan.ID(), "Новый заказ #"))

	p.Signal(syscall.SIGTERM)
	require.Zero(t, p.Wait(30*time.Second))

	// The next morning, two seconds before opening.
	hours["CLOCK_START"] = "2026-11-26T09:59:58+03:00"
	env.Start(hours)
	offer := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Новый заказ #") })
	require.Contains(t, offer.Text, "Socket sparks")
	require.Len(t, offersHeaded(env, ivan.ID(), "Новый заказ #"), 1)
	require.Equal(t, int64(1), scalar[int64](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1`, order))
}
