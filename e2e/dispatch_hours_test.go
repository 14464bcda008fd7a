package e2e_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

// Issue 22: offers go out only within the city's working hours, and the
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
