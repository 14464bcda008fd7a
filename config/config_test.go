package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// mustLoad is the configuration env gives, which must be valid.
func mustLoad(t *testing.T, env map[string]string, version string) Config {
	t.Helper()
	cfg, err := Load(lookupMap(env), version)
	require.NoError(t, err)
	return cfg
}

func TestConfigDefaults(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "123:abc"}, "1.2.3")
	require.Equal(t, "https://api.telegram.org", cfg.TelegramAPIURL)
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/switchboard?sslmode=disable", cfg.DatabaseURL)
	require.Equal(t, "ollama", cfg.LLMProvider)
	require.Equal(t, "qwen2.5:7b", cfg.LLMStrongModel, "strong model defaults to LLM_MODEL")
	require.Equal(t, 30*time.Second, cfg.LLMTimeout)
	require.Equal(t, 7*24*time.Hour, cfg.ApplicationFollowUp)
	require.Equal(t, 2, cfg.LLMMaxConcurrency)
	require.Equal(t, "switchboard/1.2.3", cfg.HHUserAgent)
	require.Equal(t, 15*time.Minute, cfg.FetchInterval)
	require.Equal(t, 60*time.Second, cfg.WatchdogInterval)
	require.Equal(t, 2*time.Minute, cfg.OfferSLA)
	require.Equal(t, time.Hour, cfg.AutocloseInterval)
	require.Equal(t, 720*time.Hour, cfg.RetainOrderContacts)
	require.Equal(t, "127.0.0.1:8080", cfg.HTTPAddr)
	require.Empty(t, cfg.RedisURL)
	zone, err := cfg.AdminLocation()
	require.NoError(t, err)
	require.Equal(t, "UTC", zone.String(), "the admin chat's zone follows DISPATCH_TIMEZONE")

	cfg = mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "1:a", "DISPATCH_TIMEZONE": "Europe/Kyiv"}, "1.2.3")
	zone, err = cfg.AdminLocation()
	require.NoError(t, err)
	require.Equal(t, "Europe/Kyiv", zone.String())
	cfg = mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "1:a", "ADMIN_CHAT_TIMEZONE": "+3"}, "1.2.3")
	zone, err = cfg.AdminLocation()
	require.NoError(t, err)
	require.Equal(t, "UTC+03:00", zone.String())
}

func TestConfigRejectsBadValuesNamingTheVariable(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"missing token", map[string]string{}, []string{"TELEGRAM_TOKEN: required"}},
		{"bad duration", map[string]string{"TELEGRAM_TOKEN": "x", "FETCH_INTERVAL": "soon"}, []string{"FETCH_INTERVAL:", `"soon"`}},
		{"negative duration", map[string]string{"TELEGRAM_TOKEN": "x", "OFFER_SLA": "-5s"}, []string{"OFFER_SLA: -5s"}},
		{"bad url", map[string]string{"TELEGRAM_TOKEN": "x", "TELEGRAM_API_URL": "not a url"}, []string{"TELEGRAM_API_URL: not a valid URL"}},
		{"bad db scheme", map[string]string{"TELEGRAM_TOKEN": "x", "DATABASE_URL": "mysql://h/db"}, []string{"DATABASE_URL: scheme \"mysql\""}},
		{"bad number", map[string]string{"TELEGRAM_TOKEN": "x", "LLM_MAX_CONCURRENCY": "two"}, []string{"LLM_MAX_CONCURRENCY:", `"two" is not a valid number`}},
		{"bad admin ids", map[string]string{"TELEGRAM_TOKEN": "x", "ADMIN_IDS": "1,bob"}, []string{"ADMIN_IDS:"}},
		{"bad currency", map[string]string{"TELEGRAM_TOKEN": "x", "DISPATCH_CURRENCY": "roubles"}, []string{`DISPATCH_CURRENCY: "roubles": want a three-letter ISO code`}},
		{"bad provider", map[string]string{"TELEGRAM_TOKEN": "x", "LLM_PROVIDER": "gemini"}, []string{"LLM_PROVIDER:"}},
		{"bad level", map[string]string{"TELEGRAM_TOKEN": "x", "LOG_LEVEL": "loud"}, []string{"LOG_LEVEL:"}},
		{"customer data kept for ever", map[string]string{"TELEGRAM_TOKEN": "x", "RETAIN_ORDER_CONTACTS": "0"}, []string{"RETAIN_ORDER_CONTACTS: 0s: want a positive duration"}},
		{"bad admin chat zone", map[string]string{"TELEGRAM_TOKEN": "x", "ADMIN_CHAT_TIMEZONE": "Mars/Olympus"}, []string{"ADMIN_CHAT_TIMEZONE:", `"Mars/Olympus"`}},
		{"stream too fast", map[string]string{"TELEGRAM_TOKEN": "x", "MEMORY_STREAM_EVERY": "50ms"}, []string{"MEMORY_STREAM_EVERY: 50ms: want 250ms to 20s, or 0"}},
		{"stream slower than a draft lives", map[string]string{"TELEGRAM_TOKEN": "x", "MEMORY_STREAM_EVERY": "45s"}, []string{"MEMORY_STREAM_EVERY: 45s: want 250ms to 20s"}},
		{"follow-up too soon", map[string]string{"TELEGRAM_TOKEN": "x", "APPLICATION_FOLLOW_UP": "10m"}, []string{"APPLICATION_FOLLOW_UP: 10m0s: want 1h to 2160h"}},
		{"follow-up after the prune", map[string]string{"TELEGRAM_TOKEN": "x", "APPLICATION_FOLLOW_UP": "720h", "RETAIN_VACANCY_MATCHES": "480h"},
			[]string{"APPLICATION_FOLLOW_UP: 720h0m0s: want less than RETAIN_VACANCY_MATCHES"}},
		{"several at once", map[string]string{"WATCHDOG_INTERVAL": "1x", "HTTP_ADDR": "nowhere"}, []string{"TELEGRAM_TOKEN:", "WATCHDOG_INTERVAL:", "HTTP_ADDR:"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(lookupMap(tc.env), "dev")
			require.Error(t, err)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestConfigSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(p, []byte("42:secret\n"), 0o600))
	cfg := mustLoad(t, map[string]string{"TELEGRAM_TOKEN_FILE": p, "ADMIN_IDS": "1, 2"}, "dev")
	require.Equal(t, "42:secret", cfg.TelegramToken)
	require.Equal(t, []int64{1, 2}, cfg.AdminIDs)

	_, err := Load(lookupMap(map[string]string{"TELEGRAM_TOKEN_FILE": filepath.Join(dir, "missing")}), "dev")
	require.ErrorContains(t, err, "TELEGRAM_TOKEN_FILE:")

	// Every secret may come from a file, the tracker's too.
	gh, hook := filepath.Join(dir, "github"), filepath.Join(dir, "hook")
	require.NoError(t, os.WriteFile(gh, []byte("github_pat_x\n"), 0o600))
	require.NoError(t, os.WriteFile(hook, []byte("s3cret\n"), 0o600))
	cfg = mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "x", "GITHUB_TOKEN_FILE": gh, "TASKS_WEBHOOK_SECRET_FILE": hook}, "dev")
	require.Equal(t, "github_pat_x", cfg.GitHubToken)
	require.Equal(t, "s3cret", cfg.TasksWebhookSecret)
}

// MEMORY_STREAM_EVERY=0 sends answers whole, as its help says, instead of
// being refused as a duration that must be positive.
func TestConfigStreamEveryZeroSendsAnswersWhole(t *testing.T) {
	cfg := mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "x", "MEMORY_STREAM_EVERY": "0"}, "dev")
	require.Zero(t, cfg.MemoryStreamEvery)
	_, err := Load(lookupMap(map[string]string{"TELEGRAM_TOKEN": "x", "MEMORY_STREAM_EVERY": "-1s"}), "dev")
	require.ErrorContains(t, err, "MEMORY_STREAM_EVERY: -1s")
}

func TestConfigNeverLogsSecrets(t *testing.T) {
	cfg := mustLoad(t, map[string]string{
		"TELEGRAM_TOKEN": "123:supersecret",
		"DATABASE_URL":   "postgres://app:hunter2@db:5432/sb",
		"LLM_API_KEY":    "sk-verysecret",
		"REDIS_URL":      "redis://:redispass@cache:6379/0",
	}, "dev")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", cfg)
	out := buf.String()
	for _, secret := range []string{"supersecret", "hunter2", "sk-verysecret", "redispass"} {
		require.NotContains(t, out, secret)
	}
	require.Contains(t, out, "db:5432", "non-secret parts of URLs stay readable")
}

func TestHelpListsEveryVariable(t *testing.T) {
	var buf bytes.Buffer
	PrintHelp(&buf)
	for _, f := range configFields() {
		require.Contains(t, buf.String(), f.key)
	}
	for _, want := range []string{"TELEGRAM_API_URL", "https://api.telegram.org", "LLM_MAX_CONCURRENCY", "HEARTBEAT_INTERVAL", "5m"} {
		require.True(t, strings.Contains(buf.String(), want), want)
	}
}

// The bench runs the production defaults through Defaults: every envDefault
// tag must parse, and they must be the values Load gives.
func TestDefaultsAreLoadsDefaults(t *testing.T) {
	d, err := Defaults()
	if err != nil {
		t.Fatal(err)
	}
	if d.PruneBatch != 1000 || d.RetainGroupMessages != 720*time.Hour {
		t.Fatalf("PRUNE_BATCH %d, RETAIN_GROUP_MESSAGES %s", d.PruneBatch, d.RetainGroupMessages)
	}
	loaded, err := Load(func(k string) (string, bool) {
		if k == "TELEGRAM_TOKEN" {
			return "123:abc", true
		}
		return "", false
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if loaded.PruneStatementTimeout != d.PruneStatementTimeout || loaded.OutboxRetention != d.OutboxRetention {
		t.Fatalf("Load %s/%s, Defaults %s/%s", loaded.PruneStatementTimeout, loaded.OutboxRetention, d.PruneStatementTimeout, d.OutboxRetention)
	}
}
