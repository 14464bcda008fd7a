package bot_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// The webhook answers Telegram only for what it stored, and only Telegram
// (the secret token) may feed it.
func TestWebhookHandlerStoresBeforeItAnswers(t *testing.T) {
	st := storagetest.New(t)
	woken := 0
	h := bot.WebhookHandler("s3cret", st.Inbox(), "", storage.AboutData, func() { woken++ }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	post := func(secret, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(body))
		if secret != "" {
			r.Header.Set(bot.SecretHeader, secret)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	update := `{"update_id": 41, "message": {"message_id": 1, "date": 1, "chat": {"id": 77, "type": "private"}, "from": {"id": 77, "is_bot": false, "first_name": "A"}, "text": "hi"}}`
	require.Equal(t, http.StatusForbidden, post("", update))
	require.Equal(t, http.StatusForbidden, post("s3creT", update))
	require.Equal(t, http.StatusBadRequest, post("s3cret", `{"message": {}}`), "no update_id")
	require.Equal(t, http.StatusBadRequest, post("s3cret", `not json`))
	require.Equal(t, http.StatusRequestEntityTooLarge, post("s3cret", `{"update_id": 1, "x": "`+strings.Repeat("a", 2<<20)+`"}`))
	require.Zero(t, woken)

	require.Equal(t, http.StatusOK, post("s3cret", update))
	require.Equal(t, http.StatusOK, post("s3cret", update), "Telegram sending it again is answered, and stored once")
	require.Equal(t, 2, woken)
	var n int
	var chat int64
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT count(*), max(chat_id) FROM inbox WHERE update_id = 41`).Scan(&n, &chat))
	require.Equal(t, 1, n)
	require.EqualValues(t, 77, chat)

	r := httptest.NewRequest(http.MethodGet, "/telegram", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)

	// The database refusing: 503, so Telegram sends it again later.
	st.Close()
	require.Equal(t, http.StatusServiceUnavailable, post("s3cret", strings.Replace(update, "41", "42", 1)))
}
