package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The scenario end to end with a tiny run: the last line is the JSON
// summary, every message arrived once and in order in both runs, and both
// bench databases are gone. 20 chats of 3 keep the limited run near 2 s:
// a chat's 10 would take 8 s at one message a second.
func TestOutboxSmoke(t *testing.T) {
	out, last, rep := smoke[outboxReport](t, "outbox", "-n", "60", "-chats", "20", "-workers", "8")
	require.True(t, strings.HasPrefix(last, `{"scenario":"outbox","messages":60,"per_s":`), "the headline keys come first: %s", last)
	require.Equal(t, "outbox", rep.Scenario)
	require.Equal(t, 60, rep.Messages)
	require.Positive(t, rep.PerS)
	require.InDelta(t, rep.PerS/30, rep.Efficiency, 0.001)
	require.GreaterOrEqual(t, rep.RateLimited, 0.0)
	require.Less(t, rep.RateLimited, 1.0)
	require.Positive(t, rep.UnlimitedPerS)
	require.Contains(t, out, "60 messages to 20 private chats (3 each")
	require.Contains(t, out, "limited: verified: 60 messages arrived, each exactly once, every chat's in the order written")
	require.Contains(t, out, "unlimited: verified: 60 messages arrived, each exactly once, every chat's in the order written")
	require.Contains(t, out, "fake Telegram: 30 msg/s (burst 30) and 1 msg/s per private chat (burst 3); sender: 16 workers")
	require.Contains(t, out, "fake Telegram: no limits; sender: 8 workers")
	names := regexp.MustCompile(`database (switchboard_bench_[0-9a-f]+)`).FindAllStringSubmatch(out, -1)
	require.Len(t, names, 2, out)
	for _, name := range names {
		requireDropped(t, context.Background(), postgresServer(t), name[1])
	}
}

// The messages are spread as evenly as they divide, in the order asked.
func TestOutboxMessages(t *testing.T) {
	msgs, want := outboxMessages(outboxConfig{n: 7, chats: 3, order: "round"})
	require.Len(t, want, 3)
	require.Len(t, want[outboxFirstChat], 3)
	require.Len(t, want[outboxFirstChat+2], 2)
	var chats []int64
	for _, m := range msgs {
		chats = append(chats, m.ChatID-outboxFirstChat)
	}
	require.Equal(t, []int64{0, 1, 2, 0, 1, 2, 0}, chats)
	msgs, _ = outboxMessages(outboxConfig{n: 7, chats: 3, order: "chat"})
	chats = chats[:0]
	for _, m := range msgs {
		chats = append(chats, m.ChatID-outboxFirstChat)
	}
	require.Equal(t, []int64{0, 0, 0, 1, 1, 2, 2}, chats)
	require.Equal(t, "Outbox bench: chat 1, message 2 of 3", msgs[1].Text)
}

// The check fails a chat that lost, repeated or reordered a message, or
// got one meant for nobody.
func TestOutboxTranscriptCheck(t *testing.T) {
	want := map[int64][]string{1: {"a", "b"}, 2: {"c"}}
	require.Empty(t, checkTranscript(map[int64][]string{1: {"a", "b"}, 2: {"c"}}, want))
	for _, tc := range []struct {
		got  map[int64][]string
		says string
	}{
		{map[int64][]string{1: {"a"}, 2: {"c"}}, "1 messages missing"},
		{map[int64][]string{1: {"a", "b", "b"}, 2: {"c"}}, "1 duplicates"},
		{map[int64][]string{1: {"b", "a"}, 2: {"c"}}, "1 chats out of order"},
		{map[int64][]string{1: {"a", "b"}, 2: {"c"}, 3: {"x"}}, "1 stray messages"},
		{map[int64][]string{1: {"a", "b", "c"}, 2: {"c"}}, "1 stray messages"},
	} {
		require.Contains(t, checkTranscript(tc.got, want), tc.says, "%v", tc.got)
	}
}

// With flood limits the fake answers a message over a bucket 429 as
// Telegram does, retry_after rounded up to whole seconds; without them (the
// other scenarios) it never does. Rates of one message per 10 s keep the
// buckets from refilling while the test runs.
func TestTelegramFloodLimits(t *testing.T) {
	tg := newTelegram(tgToken, withFloodLimits(floodLimits{Global: tgBucket{Rate: 0.1, Burst: 5}, Private: tgBucket{Rate: 0.1, Burst: 2}}))
	defer tg.Close()
	post := tgPost(t, tg)
	send := func(status int, chat string) string {
		return post(status, "sendMessage", `{"chat_id":"`+chat+`","text":"hi"}`)
	}
	tooMany := `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 10","parameters":{"retry_after":10}}`
	for range 2 {
		send(200, "42")
	}
	require.JSONEq(t, tooMany, send(429, "42"), "a private chat's burst is spent")
	for _, chat := range []string{"43", "44", "-100"} {
		send(200, chat)
	}
	require.JSONEq(t, tooMany, send(429, "45"), "the bot's burst is spent")
	st := tg.stats()
	require.Equal(t, 7, st.SendRequests)
	require.Equal(t, 5, st.Messages)
	require.Equal(t, 2, st.Throttled)
	require.Equal(t, 1, st.ThrottledChat)
	require.Equal(t, 1, st.ThrottledGlobal, "the chat's refusal came while the bot's bucket still had tokens")
	require.Zero(t, st.Early)
	require.False(t, st.FirstSent.IsZero())
	require.False(t, st.LastSent.Before(st.FirstSent))

	plain := newTelegram(tgToken)
	defer plain.Close()
	post = tgPost(t, plain)
	for range 40 {
		post(200, "sendMessage", `{"chat_id":"42","text":"hi"}`)
	}
	require.Zero(t, plain.stats().Throttled)
}
