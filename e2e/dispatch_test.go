package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
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
	// A master's /help has their own commands right after the general ones.
	help := ask(t, env, ann, ann.ID(), "/help").Text
	master, jobs := strings.Index(help, "\n\nMaster\n"), strings.Index(help, "\n\nJob search\n")
	require.True(t, master > 0 && jobs > master, "Master before Job search:\n%s", help)
	require.Less(t, strings.Index(help, "\n\nGeneral\n"), master)
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
	require.Equal(t, []string{"⌛ Time ran out"}, expired.ReplyMarkup.Labels(), "an expired offer's one button says so")
	require.NotNil(t, expired.ReplyMarkup.Buttons()[0].Disabled, "and does nothing")
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
			out = append(out, v.Shown())
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
	env, pool, boss := startDispatch(t, nil)
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
	require.Contains(t, offer.Text, "📍 Odesa, Center\n🗓 6 May 2099, 09:00–11:00\n")
	details := ann.PressAndWait(t, offer, "📄 Details")
	require.Equal(t, "The whole order is shown above. The address and contact come once you accept.", details.Text)
	offer = waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "🔒") })
	require.Contains(t, offer.Text, "💸 Commission if you take it: 200 (10% of the price)")
	ann.PressAndWait(t, offer, "❌ Decline")

	// Bob accepts: the address, the customer, the visit and the steps.
	bobOffer := env.TG.WaitMessage(t, bob.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	for _, mark := range customer {
		require.NotContains(t, bobOffer.Text, mark)
	}
	require.Equal(t, "Accepted. The order is yours!", bob.PressAndWait(t, bobOffer, "✅ Accept").Text)
	assigned, _ := env.TG.MessageByID(bob.ID(), bobOffer.MessageID)
	require.Contains(t, assigned.Text, "📍 Odesa, Center\n🏠 "+markAddress+"\n👤 "+markName+"\n📞 "+markPhone+"\n🗓 6 May 2099, 09:00–11:00\n")
	require.Equal(t, []string{"📋 Copy address", "📋 Copy phone", "🚗 15 min", "🚗 30 min", "🚗 1 h", "📍 Arrived", "✅ Done", "🙅 Can't do it"},
		assigned.ReplyMarkup.Labels())
	require.Equal(t, []string{markAddress, markPhone},
		[]string{assigned.ReplyMarkup.Buttons()[0].Copies(), assigned.ReplyMarkup.Buttons()[1].Copies()})

	// Each step moves the order once and edits Bob's message.
	require.Equal(t, "Noted: you are on your way.", bob.PressAndWait(t, assigned, "🚗 30 min").Text)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND en_route_at IS NOT NULL AND arrived_at IS NULL`, order))
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 5 })
	require.Contains(t, assigned.Text, "🚗 You are on your way.")
	stale := bob.PressRaw(assigned, bobOffer.ReplyMarkup.Buttons()[0].CallbackData) // Accept, from before
	require.Equal(t, "You have already accepted this offer.", env.TG.WaitCallbackAnswer(t, stale.ID).Text)
	require.Equal(t, "Noted: you have arrived.", bob.PressAndWait(t, assigned, "📍 Arrived").Text)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM orders WHERE id = $1 AND arrived_at IS NOT NULL`, order))
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 4 })
	doneData := buttonData(t, assigned, "✅ Done")

	// Ann forges Bob's Done in her own chat: refused, nothing moves.
	forged := ann.PressRaw(offer, doneData)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))

	// Bob cannot do it after all: Can't do it asks, and only Yes gives the
	// order back to dispatch, at once to Carl.
	text := assigned.Text
	require.Equal(t, "Tap “Yes” to confirm, or “Back” if you pressed by mistake.", bob.PressAndWait(t, assigned, "🙅 Can't do it").Text)
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool {
		return len(m.ReplyMarkup.Buttons()) == 2 && m.ReplyMarkup.Buttons()[1].Text == "↩️ Back"
	})
	require.Equal(t, text, assigned.Text, "the text stays")
	require.Equal(t, []string{"🙅 Yes, give it back", "↩️ Back"}, assigned.ReplyMarkup.Labels())
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Equal(t, "The order is given back.", bob.PressAndWait(t, assigned, "🙅 Yes, give it back").Text)
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
	carl.PressAndWait(t, carlOffer, "❌ Decline")
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
	dora.PressAndWait(t, doraOffer, "✅ Accept")
	require.Equal(t, int64(744), scalar[int64](t, pool, `SELECT master_id FROM orders WHERE id = $1`, order))
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1 AND master_id = 742`, order), "still once")
	require.Len(t, offerMessages(env, bob.ID()), 1)
	doraAssigned, _ := env.TG.MessageByID(dora.ID(), doraOffer.MessageID)
	require.Contains(t, doraAssigned.Text, "🏠 "+markAddress)

	// Dora finishes: DONE with /done's commission; her message drops the
	// customer; her photo reaches the admins.
	require.Equal(t, "Tap “Yes” to confirm, or “Back” if you pressed by mistake.", dora.PressAndWait(t, doraAssigned, "✅ Done").Text)
	require.Equal(t, "ASSIGNED", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order), "Done only asks")
	doraConfirm := waitEdited(t, env, doraAssigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 2 })
	require.Equal(t, doraAssigned.Text, doraConfirm.Text, "the text stays")
	require.Equal(t, []string{"✅ Yes, it's done", "↩️ Back"}, doraConfirm.ReplyMarkup.Labels())
	require.Equal(t, "Done. Thank you!", dora.PressAndWait(t, doraConfirm, "✅ Yes, it's done").Text)
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

// A Bot API server older than copy buttons (7.11): the assigned master's
// message comes all the same, without its Copy buttons, the address and
// phone in its text; the steps work; /status names what the server lacks.
// The next edit does not ask the server again.
func TestDispatchCopyButtonsFallBackOnAnOlderServer(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.TG.Group(adminChat, "Dispatch log")
	env.TG.SetUnsupported(true, tgfake.FeatureCopyText)
	env.Start(map[string]string{"ADMIN_CHAT_ID": fmt.Sprint(adminChat), "OFFER_SLA": "1h", "DISTRIBUTION_INTERVAL": "1h"})
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	eve := env.TG.User(761, "Eve", "en")
	register(t, env, eve, "Mykolaiv Center plumbing")
	createOrder(t, env, boss, orderWithCustomer("Mykolaiv Center", 700))
	offer := env.TG.WaitMessage(t, eve.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })

	require.Equal(t, "Accepted. The order is yours!", eve.PressAndWait(t, offer, "✅ Accept").Text)
	assigned := waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "is yours") })
	require.Contains(t, assigned.Text, "🏠 "+markAddress+"\n👤 "+markName+"\n📞 "+markPhone+"\n")
	require.Equal(t, []string{"🚗 15 min", "🚗 30 min", "🚗 1 h", "📍 Arrived", "✅ Done", "🙅 Can't do it"}, assigned.ReplyMarkup.Labels())
	refused := func() int {
		n := 0
		for _, c := range env.TG.CallsTo("editMessageText") {
			if c.Err != nil && strings.Contains(c.Err.Description, "Text buttons are unallowed") {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, refused(), "the server refused the copy buttons once")

	eve.PressAndWait(t, assigned, "🚗 30 min")
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 3 })
	require.Contains(t, assigned.Text, "🚗 You are on your way.")
	require.Equal(t, []string{"📍 Arrived", "✅ Done", "🙅 Can't do it"}, assigned.ReplyMarkup.Labels())
	require.Equal(t, 1, refused(), "believed: not asked again")

	status := ask(t, env, boss, boss.ID(), "/status")
	require.Contains(t, status.Shown(), "⚠️ This Bot API server lacks copy buttons (Bot API 7.11): messages go without them; "+
		"their text still holds what the buttons would copy.")
	require.NotContains(t, status.Shown(), "message drafts")
}

// Retention: once an order is closed (here autoclosed a second after Done)
// and RETAIN_ORDER_CONTACTS has passed, no table holds the customer's
// address, name or phone: the order's are cleared by the prune job, and the
// outbox rows that carried them (the admin's confirmation, the master's
// message after a step) are gone with OUTBOX_RETENTION. The order stays.
// The outbox keeps its rows 10 s: the test looks for the step's row once
// it has seen the edit, which a loaded CI host did more than 2 s after the
// send, when a 2 s retention had pruned the row already.
func TestDispatchCustomerDataGoesWithRetention(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t, map[string]string{
		"AUTOCLOSE_AFTER": "1s", "AUTOCLOSE_INTERVAL": "1s",
		"RETAIN_ORDER_CONTACTS": "2s", "OUTBOX_RETENTION": "10s", "PRUNE_INTERVAL": "1s",
	})
	dan := env.TG.User(751, "Dan", "en")
	register(t, env, dan, "Kherson Center plumbing")
	order := createOrder(t, env, boss, orderWithCustomer("Kherson Center", 500))
	offer := env.TG.WaitMessage(t, dan.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	dan.PressAndWait(t, offer, "✅ Accept")
	assigned, _ := env.TG.MessageByID(dan.ID(), offer.MessageID)
	dan.PressAndWait(t, assigned, "🚗 30 min")
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 5 })
	require.Contains(t, assigned.Text, markAddress, "the step's edit, an outbox row, carried the address")
	require.Positive(t, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE kind = 'assigned' AND strpos(body::text, $1) > 0`, markName))
	dan.PressAndWait(t, assigned, "✅ Done")
	assigned = waitEdited(t, env, assigned, func(m tgfake.BotMessage) bool { return len(m.ReplyMarkup.Buttons()) == 2 })
	require.Equal(t, "Done. Thank you!", dan.PressAndWait(t, assigned, "✅ Yes, it's done").Text)

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
	clock, err := time.Parse(time.RFC3339, hours["CLOCK_START"])
	require.NoError(t, err)
	opens := locales.Time("en", time.Date(2026, 11, 26, 10, 0, 0, 0, msk), msk, clock) // "26 Nov, 10:00 (Moscow)"
	require.Contains(t, reply.Text, "Masters in Moscow work from 10:00 to 20:00 local time, so it will be offered when they start, "+opens)
	require.NotContains(t, reply.Text, "It is being offered")
	// The handler takes the order's first step before it answers: had the
	// step offered it, the offer would be in the database by now.
	order := scalar[int64](t, pool, `SELECT id FROM orders WHERE city = 'Moscow'`)
	require.Zero(t, scalar[int64](t, pool, `SELECT count(*) FROM offers WHERE order_id = $1`, order), "22:00 in Moscow: no offer")
	require.True(t, scalar[bool](t, pool, `SELECT unassignable_at IS NULL AND NOT EXISTS (SELECT 1 FROM offers WHERE order_id = $1) FROM orders WHERE id = $1`, order),
		"still owed its first step: no offer, no unassignable report")

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

// killGroup is a kind of order in TestDispatchKilledReplicaLosesNoOffer,
// with the masters of its district and what they do with an offer.
type killGroup struct {
	name string
	// masters in the order distribution reaches them (idle longest, then
	// by id: all are new, so by id); accepts says who presses Accept.
	masters []*tgfake.Person
	accepts map[int64]bool
	order   int64
}

// killOffer is one offer as the database has it at the end.
type killOffer struct {
	ID, Order, Master int64
	Round             int
	State             string
	Chat, Message     int64
}

func killOffers(t *testing.T, pool *pgxpool.Pool) []killOffer {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id, order_id, master_id, round, state,
    COALESCE(chat_id, 0), COALESCE(message_id, 0) FROM offers ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []killOffer
	for rows.Next() {
		var f killOffer
		require.NoError(t, rows.Scan(&f.ID, &f.Order, &f.Master, &f.Round, &f.State, &f.Chat, &f.Message))
		out = append(out, f)
	}
	require.NoError(t, rows.Err())
	return out
}

// offerOfMessage is the offer a message was sent for, read from the
// buttons it was first sent with (its callback data name the offer); 0 for
// a message without them.
func offerOfMessage(m tgfake.BotMessage) int64 {
	first := m.Message
	if len(m.Edits) > 0 {
		first = m.Edits[0]
	}
	for _, b := range first.ReplyMarkup.Buttons() {
		if _, ids, err := bot.ReadData(b.CallbackData); err == nil && len(ids) == 1 {
			return ids[0]
		}
	}
	return 0
}

// heldTelegram stands between one replica and the fake Telegram: it
// forwards every call at once, but holds the answer to a call of the held
// methods (sendMessage and editMessageText unless named) back for hold.
// While it holds one, Telegram has the message and the replica does not
// know yet: a kill then leaves a row the README's duplicate window covers
// (sent, not marked sent).
type heldTelegram struct {
	srv  *httptest.Server
	held atomic.Int64 // answers being held now
}

func newHeldTelegram(t *testing.T, target string, hold time.Duration, methods ...string) *heldTelegram {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	if len(methods) == 0 {
		methods = []string{"sendMessage", "editMessageText"}
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	h := &heldTelegram{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(methods, path.Base(r.URL.Path)) {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		h.held.Add(1)
		select {
		case <-time.After(hold):
		case <-r.Context().Done(): // the replica is gone
		}
		h.held.Add(-1)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(h.srv.Close)
	return h
}

var offerExpiredLogRx = regexp.MustCompile(`"msg":"offer_expired".*?"oid":(\d+)`)

// loggedExpiries counts the offer_expired log lines per offer id.
func loggedExpiries(logs ...string) map[int64]int {
	n := map[int64]int{}
	for _, l := range logs {
		for _, m := range offerExpiredLogRx.FindAllStringSubmatch(l, -1) {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			n[id]++
		}
	}
	return n
}

// A burst of orders on two replicas sharing the database and Redis: some
// offers are accepted at once, some expire and go to the next master, some
// expire twice and leave their order unassignable. The replica that does
// not poll Telegram (its timer expires offers and offers the orders on,
// its sender delivers offers) is killed with SIGKILL just after it expired
// its first offer. The other carries on, and at the end:
//   - every order is where its masters' behaviour takes it (no offer lost):
//     the A orders and the B orders assigned to the master who accepts, the
//     C orders unassignable after both rounds; no offer is left open and
//     no order is SEARCHING without an offer unless it is unassignable;
//   - each order's offers follow the rules: one open at a time, each master
//     at most once a round, all EXPIRED but the accepted last one;
//   - no offer is in two states: an ACCEPTED offer's message never showed
//     an expiry, an EXPIRED one's never an acceptance, and each expiry was
//     processed (logged) at most once across both replicas;
//   - every offer's message reached its master, and no master got one
//     twice beyond the README's duplicate window: a copy more only where a
//     row of that chat was in flight (claimed, not yet marked sent) at the
//     kill.
//
// The killed replica's claims (an Accept being handled, an offer's message
// being sent) go on within seconds, once its liveness lock is seen gone:
// INBOX_LEASE is ten minutes here, so a press stranded on the dead replica
// would otherwise outlive its offer and the B order would end unassignable.
// A kill can still delay an offer's message past its SLA (8 s) under load;
// the offer then expires and the order comes back to the master in round 2,
// which the rules allow, and ends the same.
func TestDispatchKilledReplicaLosesNoOffer(t *testing.T) {
	t.Parallel()
	const perGroup = 4
	env := e2e.New(t, e2e.WithRedis())
	admins := userRange(env, 9101, 4, "Boss")
	over := map[string]string{
		"ADMIN_IDS": adminIDs(admins), "OFFER_SLA": "8s",
		// The guarantees behind the timer and the follow-up, as in
		// production but sooner: a distribution step the kill rolled back
		// is redone by the next pass, an expiry by the next sweep.
		"DISTRIBUTION_INTERVAL": "2s", "WATCHDOG_INTERVAL": "5s",
		"INBOX_LEASE": "10m",
	}
	poller := env.Start(over)
	poller.WaitLog("polling lease acquired", 60*time.Second)
	// The replica to be killed talks to Telegram through heldTelegram.
	held := newHeldTelegram(t, env.TG.URL(), 500*time.Millisecond)
	workerEnv := map[string]string{"TELEGRAM_API_URL": held.srv.URL}
	for k, v := range over {
		workerEnv[k] = v
	}
	worker := env.Start(workerEnv)
	pool := db(t, env)

	// Group A: one master, who accepts. B: two masters, the first lets the
	// offer expire, the second accepts. C: one master, who never answers.
	var groups []*killGroup
	var masters []*tgfake.Person
	var args []string
	id := int64(8101)
	person := func(name string) *tgfake.Person {
		p := env.TG.User(id, name, "en")
		id++
		return p
	}
	for i := range perGroup {
		a := person(fmt.Sprintf("A%d", i))
		x, y := person(fmt.Sprintf("Bx%d", i)), person(fmt.Sprintf("By%d", i))
		c := person(fmt.Sprintf("C%d", i))
		groups = append(groups,
			&killGroup{name: fmt.Sprintf("A%d", i), masters: []*tgfake.Person{a}, accepts: map[int64]bool{a.ID(): true}},
			&killGroup{name: fmt.Sprintf("B%d", i), masters: []*tgfake.Person{x, y}, accepts: map[int64]bool{y.ID(): true}},
			&killGroup{name: fmt.Sprintf("C%d", i), masters: []*tgfake.Person{c}, accepts: map[int64]bool{}})
	}
	for _, g := range groups {
		for _, m := range g.masters {
			masters = append(masters, m)
			args = append(args, "Kharkiv "+g.name+" plumbing")
		}
	}
	registerMasters(t, env, masters, func(i int) string { return args[i] })

	// Every admin sends their orders at once; the orders are created as
	// their confirmations take their turn in each admin's chat.
	byDistrict := map[string]*killGroup{}
	for _, g := range groups {
		byDistrict[g.name] = g
	}
	for k := 0; k*len(admins) < len(groups); k++ {
		sendAllAtOnce(admins, func(i int) string {
			if j := k*len(admins) + i; j < len(groups) {
				return fmt.Sprintf("/order Kharkiv %s plumbing %d job %s", groups[j].name, 100+j, groups[j].name)
			}
			return "/help"
		})
	}
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM orders`) == len(groups)
	})
	rows, err := pool.Query(context.Background(), `SELECT id, district FROM orders`)
	require.NoError(t, err)
	for rows.Next() {
		var oid int64
		var district string
		require.NoError(t, rows.Scan(&oid, &district))
		byDistrict[district].order = oid
	}
	require.NoError(t, rows.Err())

	// The masters who accept press Accept on every offer message that
	// comes with buttons (a second copy included: that press is refused).
	pressed := map[string]bool{}
	press := func() {
		for _, g := range groups {
			for _, m := range g.masters {
				if !g.accepts[m.ID()] {
					continue
				}
				for _, msg := range env.TG.Messages(m.ID()) {
					key := fmt.Sprint(m.ID(), "/", msg.MessageID)
					if pressed[key] || len(msg.ReplyMarkup.Buttons()) == 0 {
						continue
					}
					if _, err := m.PressButton(msg, "✅ Accept"); err == nil {
						pressed[key] = true
					}
				}
			}
		}
	}

	// Kill the replica that does not poll once it has expired an offer
	// and while Telegram has a message of its that it has not heard back
	// about: its timer, its follow-up and its sender are mid-flow. Its
	// sender may have nothing on the way then (the other one's took the
	// rows): after 3 s it is killed all the same.
	var expiredAt time.Time
	eventually(t, 60*time.Second, func() bool {
		press()
		if expiredAt.IsZero() && worker.HasLog(`"msg":"offer_expired"`) {
			expiredAt = time.Now()
		}
		return !expiredAt.IsZero() && (held.held.Load() > 0 || time.Since(expiredAt) > 3*time.Second)
	})
	heldAtKill := held.held.Load()
	worker.Kill()
	// The dead replica's claims stay until their lease ends; another
	// sender may then send them again. Read them before that.
	inflight := countBy(t, pool, `SELECT chat_id::text, count(*) FROM outbox
WHERE state = 'pending' AND claim_token IS NOT NULL AND claimed_until > now() GROUP BY chat_id`)
	var open, expired, handling int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state IN ('SENT', 'VIEWED')),
    count(*) FILTER (WHERE state = 'EXPIRED'),
    (SELECT count(*) FROM inbox WHERE state = 'pending' AND claimed_until > now() AND claimed_by LIKE $1 || '#%')
    FROM offers`, worker.Name).Scan(&open, &expired, &handling))
	t.Logf("killed %s with %d offers open, %d expired, %d updates being handled, %d of its sends answered by Telegram but not to it; outbox rows in flight per chat: %v",
		worker.Name, open, expired, handling, heldAtKill, inflight)

	final := func() bool {
		press()
		var done int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM orders o
WHERE (o.state = 'ASSIGNED' OR o.unassignable_at IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ('SENT', 'VIEWED'))`).Scan(&done))
		return done == len(groups)
	}
	eventually(t, 90*time.Second, final, func() string {
		return fmt.Sprint(countBy(t, pool, `SELECT state || ' round ' || round || CASE WHEN unassignable_at IS NULL THEN '' ELSE ' unassignable' END,
    count(*) FROM orders GROUP BY 1`), countBy(t, pool, `SELECT state, count(*) FROM offers GROUP BY state`))
	})

	// Final states, and each order's offers by the rules.
	offers := killOffers(t, pool)
	byOrder := map[int64][]killOffer{}
	for _, f := range offers {
		byOrder[f.Order] = append(byOrder[f.Order], f)
	}
	for _, g := range groups {
		var state string
		var round int
		var master int64
		var unassignable bool
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT state, round, COALESCE(master_id, 0), unassignable_at IS NOT NULL
FROM orders WHERE id = $1`, g.order).Scan(&state, &round, &master, &unassignable))
		list := byOrder[g.order]
		require.NotEmpty(t, list, "order %s", g.name)
		seen := map[string]bool{}
		for i, f := range list {
			who := fmt.Sprint(f.Round, "/", f.Master)
			require.False(t, seen[who], "order %s: master %d offered twice in round %d", g.name, f.Master, f.Round)
			seen[who] = true
			if i > 0 {
				require.GreaterOrEqual(t, f.Round, list[i-1].Round, "order %s: rounds go forward", g.name)
			}
			if i < len(list)-1 {
				require.Equal(t, "EXPIRED", f.State, "order %s: offer %d is not its last and not EXPIRED", g.name, f.ID)
			}
			// Within a round, the masters in the order distribution reaches them.
			require.Equal(t, g.masters[i%len(g.masters)].ID(), f.Master, "order %s: offer %d went to the wrong master", g.name, f.ID)
		}
		last := list[len(list)-1]
		switch g.name[0] {
		case 'A', 'B':
			accepter := g.masters[len(g.masters)-1].ID()
			require.Equal(t, "ASSIGNED", state, "order %s", g.name)
			require.Equal(t, accepter, master, "order %s", g.name)
			require.Equal(t, "ACCEPTED", last.State, "order %s", g.name)
			require.Equal(t, accepter, last.Master, "order %s", g.name)
		case 'C':
			require.Equal(t, "SEARCHING", state, "order %s", g.name)
			require.True(t, unassignable, "order %s is unassignable", g.name)
			require.Equal(t, 2, round, "order %s", g.name)
			require.Len(t, list, 2, "order %s: one offer a round", g.name)
			require.Equal(t, "EXPIRED", last.State, "order %s", g.name)
		}
	}
	expiries := loggedExpiries(poller.Logs(), worker.Logs())
	for _, f := range offers {
		if f.State == "EXPIRED" {
			require.LessOrEqual(t, expiries[f.ID], 1, "offer %d: its expiry processed more than once", f.ID)
		} else {
			require.Zero(t, expiries[f.ID], "offer %d is %s but was logged as expired", f.ID, f.State)
		}
	}

	// Every offer's message reached its master, once, or twice where its
	// chat had a row in flight at the kill; and it shows how the offer
	// ended, never the other way.
	// An offer's message id is recorded when its send is marked sent,
	// which for a row the dead replica held waits out the lease.
	unsettled := func() ([]string, []int64) {
		var out []string
		var chats []int64
		offers = killOffers(t, pool)
		for _, f := range offers {
			m, ok := env.TG.MessageByID(f.Chat, int(f.Message))
			if f.Message == 0 || !ok || (f.State == "EXPIRED") != strings.Contains(m.Text, "expired") {
				out = append(out, fmt.Sprintf("offer %d (%s, master %d, message %d: %q)", f.ID, f.State, f.Master, f.Message, m.Text))
				chats = append(chats, f.Master)
			}
		}
		return out, chats
	}
	eventually(t, 30*time.Second, func() bool { l, _ := unsettled(); return len(l) == 0 }, func() string {
		l, chats := unsettled()
		var calls []string
		for _, c := range env.TG.Calls() {
			for _, chat := range chats {
				if c.Params["chat_id"] == strconv.FormatInt(chat, 10) {
					calls = append(calls, c.String())
				}
			}
		}
		rows := countBy(t, pool, `SELECT chat_id || ' ' || kind || ' ref ' || ref || ' ' || state || ' claimed ' || (claim_token IS NOT NULL),
    count(*) FROM outbox WHERE chat_id = ANY ($1) GROUP BY 1`, chats)
		return strings.Join(l, "; ") + fmt.Sprintf("\noutbox: %v\ncalls:\n", rows) + strings.Join(calls, "\n")
	})
	dups := 0
	for _, m := range masters {
		copies := map[int64]int{}
		for _, msg := range env.TG.Messages(m.ID()) {
			if id := offerOfMessage(msg); id != 0 {
				copies[id]++
			}
		}
		extra := 0
		for _, f := range offers {
			if f.Master != m.ID() {
				continue
			}
			msg, _ := env.TG.MessageByID(f.Chat, int(f.Message))
			if offerOfMessage(msg) == 0 {
				// Sent after it had ended, showing how (the closing edit
				// took the waiting send's place): it has no buttons to
				// count copies by.
				copies[f.ID] = max(copies[f.ID], 1)
			}
			require.GreaterOrEqual(t, copies[f.ID], 1, "offer %d never reached master %d", f.ID, m.ID())
			extra += copies[f.ID] - 1
			for _, v := range append(msg.Edits, msg.Message) {
				if f.State == "ACCEPTED" {
					require.NotContains(t, v.Text, "expired", "offer %d is ACCEPTED", f.ID)
				} else {
					require.NotContains(t, v.Text, "is yours", "offer %d is %s", f.ID, f.State)
				}
			}
		}
		require.LessOrEqual(t, extra, inflight[strconv.FormatInt(m.ID(), 10)],
			"master %d got %d offer messages twice with %v of their rows in flight at the kill", m.ID(), extra, inflight)
		dups += extra
	}
	require.LessOrEqual(t, dups, 16, "at most OUTBOX_WORKERS (16) duplicates for one killed replica")
	t.Logf("offers: %d; offer messages sent twice: %d (rows in flight at the kill: %v)", len(offers), dups, inflight)
}

// Buttons that say what they do: an offer's Accept and Decline are
// coloured, and a declined offer keeps one disabled button saying so where
// its buttons stood; a server without disabled buttons (older than Bot
// API 10.3) refuses it once, and the closed offer loses its buttons as
// before, which /status names.
func TestDispatchButtonsSayWhatTheyDo(t *testing.T) {
	t.Parallel()
	env, boss := startDispatchUnlogged(t)
	fay := env.TG.User(762, "Fay", "en")
	register(t, env, fay, "Poltava Center plumbing")
	offerOf := func() tgfake.BotMessage {
		last := 0
		if ms := env.TG.Messages(fay.ID()); len(ms) > 0 {
			last = ms[len(ms)-1].MessageID
		}
		createOrder(t, env, boss, "Poltava Center plumbing 600 A dripping tap")
		return env.TG.WaitMessage(t, fay.ID(), func(m tgfake.BotMessage) bool {
			return m.MessageID > last && strings.Contains(m.Text, "New order #")
		})
	}
	offer := offerOf()
	buttons := offer.ReplyMarkup.Buttons()
	require.Equal(t, "✅ Accept", buttons[0].Text)
	require.Equal(t, "success", buttons[0].Style)
	require.Equal(t, "danger", buttons[1].Style)

	fay.PressAndWait(t, offer, "❌ Decline")
	closed := waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "❌ You declined") })
	require.Equal(t, []string{"❌ Declined"}, closed.ReplyMarkup.Labels())
	require.NotNil(t, closed.ReplyMarkup.Buttons()[0].Disabled)
	_, err := fay.PressButton(closed, "❌ Declined")
	require.Error(t, err, "a disabled button cannot be pressed")

	env.TG.SetUnsupported(true, tgfake.FeatureDisabledButtons)
	second := offerOf()
	fay.PressAndWait(t, second, "❌ Decline")
	closed = waitEdited(t, env, second, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "❌ You declined") })
	require.Nil(t, closed.ReplyMarkup, "without disabled buttons, the buttons go as before")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/status").Shown(), "⚠️ This Bot API server lacks disabled buttons (Bot API 10.3)")
}

// A master blocked for commission takes no new work. Ann is offered an
// order, then her commission for an earlier one falls overdue and the
// commission job blocks her: she is told, and the offer she holds is
// withdrawn at once. Her Accept pressed on it from a client that still
// shows its buttons is refused with why and what to do about it; the
// offer's message says it is withdrawn and why, and the order goes on to
// Bob, who takes it.
func TestDispatchBlockedMasterCannotTakeAnEarlierOffer(t *testing.T) {
	t.Parallel()
	env, pool, boss := startDispatch(t, map[string]string{
		"COMMISSION_DEADLINE": "1h", "COMMISSION_INTERVAL": "1s",
	})
	ann := env.TG.User(751, "Ann", "en")
	bob := env.TG.User(752, "Bob", "en")
	register(t, env, ann, "Kyiv Podil plumbing")

	// Ann's earlier job, done: she owes 200 within the hour.
	first := createOrder(t, env, boss, "Kyiv Podil plumbing 2000 Replace the mixer")
	firstOffer := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	ann.PressAndWait(t, firstOffer, "✅ Accept")
	require.Contains(t, ask(t, env, boss, boss.ID(), fmt.Sprintf("/done %d", first)).Text, fmt.Sprintf("#%d", first))
	env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Commission of 200") })

	// The next order is offered to her; Bob registers after, and waits.
	order := createOrder(t, env, boss, "Kyiv Podil plumbing 1500 Leaking tap")
	var offer tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		offers := offerMessages(env, ann.ID())
		if len(offers) < 2 {
			return false
		}
		offer = offers[1]
		return true
	})
	require.Contains(t, offer.Text, fmt.Sprintf("New order #%d", order))
	accept := buttonData(t, offer, "✅ Accept")
	register(t, env, bob, "Kyiv Podil plumbing")
	require.Empty(t, offerMessages(env, bob.ID()), "Ann holds the order's offer")

	// The commission falls overdue: the job blocks Ann and tells her.
	_, err := pool.Exec(context.Background(), `UPDATE orders SET commission_due_at = now() - interval '1 minute' WHERE id = $1`, first)
	require.NoError(t, err)
	blocked := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "⛔ Commission") })
	require.Equal(t, "⛔ Commission of 200 is overdue. No new offers come until it is paid; once you have paid, an admin records it with /paid.", blocked.Text)

	// Her client still shows the offer's Accept: refused, and told why and
	// what to do about it.
	press := ann.PressRaw(offer, accept)
	answer := env.TG.WaitCallbackAnswer(t, press.ID)
	require.Equal(t, "⛔ Your commission is overdue: you can't take new orders until it is paid. "+
		"Once you have paid, an admin records it with /paid and offers come again. /master shows what you owe.", answer.Text)
	require.True(t, answer.ShowAlert)
	require.Equal(t, "WITHDRAWN", scalar[string](t, pool, `SELECT state FROM offers WHERE order_id = $1 AND master_id = 751`, order))

	// The offer's message says it is withdrawn and why; the order goes on
	// to Bob.
	withdrawn := waitEdited(t, env, offer, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "⛔") })
	require.Equal(t, fmt.Sprintf("⛔ The offer of order #%d is withdrawn: your commission is overdue. "+
		"Once it is paid and an admin records it with /paid, offers come again.\n"+
		"📍 Kyiv, Podil\n🛠 plumbing\n💰 1,500\n📝 Leaking tap", order), withdrawn.Text)
	require.Equal(t, []string{"⛔ Commission overdue"}, withdrawn.ReplyMarkup.Labels())
	require.NotNil(t, withdrawn.ReplyMarkup.Buttons()[0].Disabled, "a button that does nothing")
	bobOffer := env.TG.WaitMessage(t, bob.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "New order #") })
	require.Contains(t, bobOffer.Text, fmt.Sprintf("New order #%d", order))
	require.Equal(t, "SEARCHING", scalar[string](t, pool, `SELECT state FROM orders WHERE id = $1`, order))
	require.Equal(t, "Accepted. The order is yours!", bob.PressAndWait(t, bobOffer, "✅ Accept").Text)
	require.Equal(t, int64(752), scalar[int64](t, pool, `SELECT master_id FROM orders WHERE id = $1`, order))

	// The admins read the block, the withdrawal and why, and the order's
	// way on to Bob.
	annOffer := scalar[int64](t, pool, `SELECT id FROM offers WHERE order_id = $1 AND master_id = 751`, order)
	bobOfferID := scalar[int64](t, pool, `SELECT id FROM offers WHERE order_id = $1 AND master_id = 752`, order)
	want := []string{
		fmt.Sprintf("🆕 Order #%d created", order),
		fmt.Sprintf("📤 Order #%d: offer #%d sent to Ann (id 751), round 1", order, annOffer),
		"⛔ Ann (id 751) blocked: commission 200 overdue",
		fmt.Sprintf("↩️ Order #%d: offer #%d to Ann (id 751) withdrawn, commission overdue", order, annOffer),
		fmt.Sprintf("📤 Order #%d: offer #%d sent to Bob (id 752), round 1", order, bobOfferID),
		fmt.Sprintf("🤝 Order #%d: Bob (id 752) accepted offer #%d", order, bobOfferID),
		fmt.Sprintf("✅ Order #%d assigned to Bob (id 752)", order),
	}
	var log []string
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		log = nil
		for _, l := range liveLog(env) {
			if strings.Contains(l, fmt.Sprintf("#%d", order)) || strings.Contains(l, "blocked") {
				log = append(log, l)
			}
		}
		return len(log) >= len(want)
	})
	require.Equal(t, want, log)
}
