package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The scenario end to end with tiny runs: the last line is the JSON
// summary, the rates are positive and the bench database is gone.
func TestVacanciesSmoke(t *testing.T) {
	out, _, rep := smoke[vacanciesReport](t, "vacancies", "-n", "30", "-llm-concurrency", "4", "-latency-n", "8", "-stages")
	require.Equal(t, "vacancies", rep.Scenario)
	require.Positive(t, rep.ZeroLatencyPerS)
	require.Positive(t, rep.Latency200msPerS)
	require.Positive(t, rep.Efficiency)
	require.LessOrEqual(t, rep.Efficiency, 1.05, "8 matches at LLM concurrency 4 and 200 ms cannot beat 20/s by much")
	require.Positive(t, rep.PeakRSSMB)
	require.Contains(t, out, "telegram_messages=30 (distinct matches 30, duplicates 0)")
	require.Contains(t, out, "telegram_messages=8 (distinct matches 8, duplicates 0)")
	require.Contains(t, out, "llm ")
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "scenarios:"},
		{[]string{"nope"}, 2, `unknown scenario "nope"`},
		{[]string{"-h"}, 0, "vacancies"},
		{[]string{"vacancies", "-h"}, 0, "-latency-n"},
		{[]string{"vacancies", "-n", "0"}, 2, "must be positive"},
		{[]string{"vacancies", "-bogus"}, 2, "flag provided but not defined"},
		{[]string{"vacancies", "extra"}, 2, "unexpected arguments"},
		{[]string{"-h"}, 0, "memory"},
		{[]string{"memory", "-h"}, 0, "-orchestrators"},
		{[]string{"memory", "-runs", "0"}, 2, "must be positive"},
		{[]string{"memory", "-users", "-1"}, 2, "must be positive"},
		{[]string{"memory", "extra"}, 2, "unexpected arguments"},
		{[]string{"-h"}, 0, "dispatch"},
		{[]string{"dispatch", "-h"}, 0, "-sweep-n"},
		{[]string{"dispatch", "-n", "0"}, 2, "must be positive"},
		{[]string{"dispatch", "-sla-min", "2s", "-sla-max", "1s"}, 2, "-sla-max must not be less than -sla-min"},
		{[]string{"dispatch", "extra"}, 2, "unexpected arguments"},
		{[]string{"-h"}, 0, "analysis"},
		{[]string{"analysis", "-h"}, 0, "-filters"},
		{[]string{"analysis", "-n", "0"}, 2, "must be positive"},
		{[]string{"analysis", "-chats", "-1"}, 2, "must be positive"},
		{[]string{"analysis", "-llm-latency", "-1s"}, 2, "-llm-latency not negative"},
		{[]string{"analysis", "-filters", "keywords="}, 2, "not what /run_new takes"},
		{[]string{"analysis", "extra"}, 2, "unexpected arguments"},
		{[]string{"-h"}, 0, "outbox"},
		{[]string{"outbox", "-h"}, 0, "-chats"},
		{[]string{"outbox", "-n", "1"}, 2, "-n must be at least 2"},
		{[]string{"outbox", "-n", "10", "-chats", "20"}, 2, "-chats must not exceed -n"},
		{[]string{"outbox", "-order", "random"}, 2, "want chat or round"},
		{[]string{"outbox", "extra"}, 2, "unexpected arguments"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, tc.args, &stdout, &stderr)
		require.Equal(t, tc.code, code, "%q: %s", tc.args, stderr.String())
		require.Contains(t, stderr.String(), tc.want, "%q", tc.args)
		require.Empty(t, stdout.String(), "%q", tc.args)
	}
}

// The fake Telegram refuses what a broken delivery would send.
func TestTelegramRefusesBrokenMessages(t *testing.T) {
	tg := newTelegram(tgToken)
	defer tg.Close()
	post := tgPost(t, tg)
	body := post(400, "sendMessage", `{"chat_id":"42","text":""}`)
	require.Contains(t, body, "message text is empty")
	body = post(400, "sendMessage", `{"chat_id":"42","text":"hi","reply_markup":"{not json"}`)
	require.Contains(t, body, "reply keyboard markup")
	post(400, "sendMessage", `{"text":"hi"}`)

	body = post(200, "sendMessage", `{"chat_id":"42","text":"<b>hi</b>","parse_mode":"HTML","reply_markup":"{\"inline_keyboard\":[[{\"text\":\"Applied\",\"callback_data\":\"va:2n9c\"}]]}"}`)
	require.JSONEq(t, `{"id":42,"type":"private"}`, string(mustField(t, body, "result", "chat")))
	body = post(200, "getMe", `{}`)
	require.Contains(t, body, `"is_bot":true`)
	body = post(200, "setMyCommands", `{}`)
	require.JSONEq(t, `{"ok":true,"result":true}`, body)
	post(404, "../other/getMe", `{}`)

	st := tg.stats()
	require.Equal(t, 1, st.Messages)
	require.Equal(t, 3, st.Rejected)
	require.Equal(t, map[int64]int{123456: 1}, tg.delivered())
}

func mustField(t *testing.T, body string, path ...string) json.RawMessage {
	t.Helper()
	raw := json.RawMessage(body)
	for _, k := range path {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		raw = m[k]
	}
	return raw
}
