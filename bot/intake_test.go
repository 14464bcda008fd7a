package bot_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// A body PostgreSQL refuses, each followed by an ordinary update of
// another chat: every one is answered 200 (an error status would have
// Telegram send it for ever) and stored — cleaned, so it can be handled.
func TestWebhookStoresWhatPostgreSQLWouldRefuse(t *testing.T) {
	st := storagetest.New(t)
	h := bot.WebhookHandler("s", st.Inbox(), "", storage.AboutData, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	post := func(body string) int {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(body))
		r.Header.Set(bot.SecretHeader, "s")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	msg := func(id, chat int64, text string) string {
		return `{"update_id":` + itoa(id) + `,"message":{"message_id":1,"date":1,"chat":{"id":` + itoa(chat) +
			`,"type":"private"},"from":{"id":` + itoa(chat) + `,"is_bot":false,"first_name":"A\u0000"},"text":"` + text + `"}}`
	}
	bad := []string{`/start\u200b\u0000`, `hi \ud83d`, `\ude00`, `a\u0000`}
	for i, text := range bad {
		require.Equal(t, http.StatusOK, post(msg(int64(100+2*i), 5, text)), text)
		require.Equal(t, http.StatusOK, post(msg(int64(101+2*i), int64(6+i), "fine")), "the next update")
	}
	var n int
	require.NoError(t, st.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM inbox WHERE state = 'pending' AND refused IS NULL`).Scan(&n))
	require.Equal(t, 2*len(bad), n, "every update stored, none as a skeleton")
	var text string
	require.NoError(t, st.Pool().QueryRow(context.Background(),
		`SELECT body->'message'->>'text' FROM inbox WHERE update_id = 100`).Scan(&text))
	require.Equal(t, "/start\u200b\uFFFD", text)
}

// A body PostgreSQL refuses even cleaned (a number past numeric's range,
// which no Telegram update holds) is kept as a skeleton: its worker fails
// it at once and tells the sender once, in their language; the chat's next update is answered as usual.
func TestRefusedUpdateIsFailedAndItsSenderToldOnce(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	tb := setupStore(t, bot.Config{}, st, nil)
	ann := tb.srv.User(42, "Ann", "uk")
	require.Contains(t, tb.ask(t, ann, "/start").Text, "Ann")

	h := bot.WebhookHandler("s", st.Inbox(), "", storage.AboutData, tb.bot.WakeInbox, slog.New(slog.NewTextHandler(io.Discard, nil)))
	body := `{"update_id":1000000000,"message":{"message_id":900,"date":1,"chat":{"id":42,"type":"private"},` +
		`"from":{"id":42,"is_bot":false,"first_name":"Ann","language_code":"uk"},"text":"hello","x":1e1000000}}`
	r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(body))
	r.Header.Set(bot.SecretHeader, "s")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusOK, w.Code, "answered, so Telegram does not send it again")

	// In reply to message 900, which the fake never saw, so it is sent
	// without the reply (allow_sending_without_reply).
	told := tb.srv.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "символи") })
	require.Equal(t, "У цьому повідомленні є символи, які неможливо зберегти, тож нічого не зроблено. Будь ласка, напишіть його ще раз звичайним текстом.", told.Text)
	require.Contains(t, tb.ask(t, ann, "/start").Text, "Ann", "the chat goes on")
	var state, why string
	require.NoError(t, st.Pool().QueryRow(context.Background(),
		`SELECT state, last_error FROM inbox WHERE update_id = 1000000000`).Scan(&state, &why))
	require.Equal(t, "failed", state)
	require.Contains(t, why, "22003")
	n := 0
	for _, m := range tb.srv.Messages(ann.ID()) {
		if strings.Contains(m.Text, "неможливо зберегти") {
			n++
		}
	}
	require.Equal(t, 1, n)
}

// A replica that cannot take its webhook's address ends at once with the
// error, naming the address, instead of running with no intake; Telegram
// never hears of it.
func TestWebhookReplicaWhosePortIsTakenEnds(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	st := storagetest.New(t)
	srv := tgfake.New(t)
	b, err := bot.New(bot.Config{URL: srv.URL(), Token: srv.Token(), Webhook: &bot.WebhookConfig{
		URL: "https://bot.example.com/telegram", Secret: "s", Listen: taken.Addr().String(), MaxConnections: 40}},
		bot.Deps{Users: st.Users(), Inbox: st.Inbox(), Catalog: locales.MustLoad(), Replica: "test", Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = b.Run(ctx)
	require.ErrorContains(t, err, "webhook: listen tcp "+taken.Addr().String())
	require.NoError(t, ctx.Err(), "it ended by itself")
	require.Empty(t, srv.Calls(), "Telegram was never called")
}
