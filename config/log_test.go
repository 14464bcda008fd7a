package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoggerRedactsSecretsEverywhere(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"TELEGRAM_TOKEN": "123456:AAH-secret-token",
		"LLM_API_KEY":    "sk-live-key",
		"DATABASE_URL":   "postgres://app:p%40ss-word@db:5432/sb",
	}, "dev")
	var buf bytes.Buffer
	log := NewLogger("debug", &buf, &cfg)

	// The shape telebot produces: the token inside a URL inside an error.
	netErr := &url.Error{Op: "Post", URL: "https://api.telegram.org/bot123456:AAH-secret-token/getMe", Err: errors.New("refused")}
	log.Warn("Telegram not reachable 123456:AAH-secret-token", "err", fmt.Errorf("telebot: %w", netErr))
	log.With("key", "sk-live-key").WithGroup("g").Info("x", "nested", []any{"p@ss-word"}, "s", "p%40ss-word")
	log.Info("config", "config", cfg)

	out := buf.String()
	for _, secret := range []string{"AAH-secret-token", "sk-live-key", "p@ss-word", "p%40ss-word"} {
		require.NotContains(t, out, secret)
	}
	require.Contains(t, out, "[redacted]")
	require.Contains(t, out, "api.telegram.org/bot[redacted]/getMe", "the rest of the message stays useful")
}
