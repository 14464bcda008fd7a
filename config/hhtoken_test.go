package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHHTokenConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"id without secret", map[string]string{"HH_CLIENT_ID": "a"}, "HH_CLIENT_SECRET: required with HH_CLIENT_ID"},
		{"secret without id", map[string]string{"HH_CLIENT_SECRET": "b"}, "HH_CLIENT_ID: required with HH_CLIENT_SECRET"},
		{"token and credentials", map[string]string{"HH_CLIENT_ID": "a", "HH_CLIENT_SECRET": "b", "HH_APP_TOKEN": "c"}, "HH_APP_TOKEN: set either"},
		{"token with a space", map[string]string{"HH_APP_TOKEN": "ab cd"}, "HH_APP_TOKEN: contains spaces"},
		{"bad oauth url", map[string]string{"HH_OAUTH_URL": "hh.ru"}, "HH_OAUTH_URL: not a valid URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"TELEGRAM_TOKEN": "1:x"}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := Load(lookupMap(env), "dev")
			require.ErrorContains(t, err, tc.want)
		})
	}

	cfg := mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "1:x"}, "dev")
	require.Equal(t, "https://hh.ru", cfg.HHOAuthURL)
	require.Empty(t, cfg.HHClientID+cfg.HHClientSecret+cfg.HHAppToken)

	// Secrets from files, never in the logs.
	dir := t.TempDir()
	write := func(name, v string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o600))
		return p
	}
	cfg = mustLoad(t, map[string]string{
		"TELEGRAM_TOKEN": "1:x", "HH_CLIENT_ID_FILE": write("id", "CLIENTIDVALUE"), "HH_CLIENT_SECRET_FILE": write("secret", "CLIENTSECRETVALUE"),
	}, "dev")
	require.Equal(t, "CLIENTIDVALUE", cfg.HHClientID)
	require.Equal(t, "CLIENTSECRETVALUE", cfg.HHClientSecret)
	var buf bytes.Buffer
	NewLogger("info", &buf, &cfg).Info("config", "config", cfg, "oops", "secret is CLIENTSECRETVALUE")
	require.NotContains(t, buf.String(), "CLIENTSECRETVALUE")
	require.NotContains(t, buf.String(), "CLIENTIDVALUE")

	cfg = mustLoad(t, map[string]string{"TELEGRAM_TOKEN": "1:x", "HH_APP_TOKEN_FILE": write("token", "APPTOKENVALUE")}, "dev")
	require.Equal(t, "APPTOKENVALUE", cfg.HHAppToken)
	buf.Reset()
	NewLogger("info", &buf, &cfg).Info("config", "config", cfg, "oops", "APPTOKENVALUE")
	require.NotContains(t, buf.String(), "APPTOKENVALUE")

	var help bytes.Buffer
	PrintHelp(&help)
	require.True(t, strings.Contains(help.String(), "HH_CLIENT_SECRET, HH_APP_TOKEN, GITHUB_TOKEN, TASKS_WEBHOOK_SECRET) may also be given as a file path"), help.String())
}
