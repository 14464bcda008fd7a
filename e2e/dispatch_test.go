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
