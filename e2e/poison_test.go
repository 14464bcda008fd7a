package e2e_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// Updates PostgreSQL's jsonb would refuse as Telegram sends them — a NUL in
// a text, a caption, a button's data and a first name, a lone surrogate
// escape, "/start" with a zero-width space and a NUL — each followed by an
// ordinary message from another chat, through the built binary in polling
// and in webhook mode. Every ordinary message is answered at once (nothing
// waits behind a bad update), each bad one is answered (its characters
// replaced) or refused like any forged press, none is tried twice, and the
// webhook answers every request with a success, so Telegram does not send
// them again and again.
func TestPoisonUpdatesNeverStopTheBot(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"polling", "webhook"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			env := e2e.New(t)
			scriptMemory(env)
			var p *e2e.Process
			if mode == "webhook" {
				front := e2e.NewFront(t)
				p = env.Start(front.WebhookEnv("e2e-poison"))
				front.Add(p)
				p.WaitLog("webhook set", 60*time.Second)
			} else {
				p = env.Start(nil)
			}
			eve := env.TG.User(8101, "Eve\x00", "en")
			others := make([]*tgfake.Person, 6)
			for i := range others {
				others[i] = env.TG.User(int64(8200+i), "Friend", "en")
			}
			next := 0
			// ordinary is another chat's message right behind a bad one: it
			// is answered as if the bad one were not there.
			ordinary := func() {
				t.Helper()
				o := others[next]
				next++
				require.Contains(t, ask(t, env, o, o.ID(), "/start").Text, "Hello, Friend!")
			}

			hello := ask(t, env, eve, eve.ID(), "/start")
			require.Contains(t, hello.Text, "Hello, Eve\uFFFD!", "a NUL in a first name")
			ordinary()

			q := eve.SendText(eve.ID(), "hello\x00 there")
			ordinary()
			require.Equal(t, "Mentor says: hello\uFFFD there", env.TG.WaitMessageAfter(t, eve.ID(), q.MessageID, func(m tgfake.BotMessage) bool {
				return strings.HasPrefix(m.Text, "Mentor says")
			}).Text)

			s := eve.SendRawText(eve.ID(), `half a smile \ud83d`)
			ordinary()
			require.Equal(t, "Mentor says: half a smile \uFFFD", env.TG.WaitMessageAfter(t, eve.ID(), s.MessageID, func(m tgfake.BotMessage) bool {
				return strings.HasPrefix(m.Text, "Mentor says")
			}).Text)

			z := eve.SendText(eve.ID(), "/start\u200b\x00")
			ordinary()
			require.NotEmpty(t, env.TG.WaitMessageAfter(t, eve.ID(), z.MessageID, nil).Text, "answered, whatever it is taken for")

			eve.PressRaw(hello, "oa:1\x00")
			ordinary()
			eve.SendPhoto(eve.ID(), "my work\x00")
			ordinary()

			pool := db(t, env)
			quiet(t, pool)
			require.Zero(t, scalar[int64](t, pool, `SELECT count(*) FROM inbox WHERE state <> 'done' OR attempts <> 1`),
				"every update handled, each at its first attempt")
			require.Zero(t, scalar[int64](t, pool, `SELECT count(*) FROM inbox WHERE refused IS NOT NULL`),
				"none needed a skeleton: cleaning kept them all")
			for _, m := range env.TG.Messages(eve.ID()) {
				require.NotContains(t, m.Text, "could not be carried out")
				t.Logf("Eve reads: %q", m.Text)
			}
			require.True(t, p.HasLog("replaced with U+FFFD"), "the cleaning is logged")
			if mode == "webhook" {
				_, lastErr := env.TG.Webhook()
				require.Empty(t, lastErr, "Telegram was answered 2xx every time")
			}
		})
	}
}
