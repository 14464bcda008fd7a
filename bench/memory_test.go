package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The scenario end to end with a tiny run: the last line is the JSON
// summary, every run went the whole way once, and the database is gone.
func TestMemorySmoke(t *testing.T) {
	out, _, rep := smoke[memoryReport](t, "memory", "-runs", "40", "-users", "5", "-workers", "4", "-orchestrators", "2", "-stages")
	require.Equal(t, "memory", rep.Scenario)
	require.Equal(t, 40, rep.Runs)
	require.Positive(t, rep.RunsPerS)
	require.Positive(t, rep.OverheadP50MS)
	require.GreaterOrEqual(t, rep.OverheadP99MS, rep.OverheadP50MS)
	require.Positive(t, rep.PeakRSSMB)
	// verifyMemory has checked the database and the fakes; the report says so.
	require.Contains(t, out, "llm_calls analyzer=40 assembler=40 responder=40 archivist=40")
	require.Contains(t, out, "telegram answers=40 (distinct messages answered 40, duplicates 0) other_messages=0")
	require.Contains(t, out, "db CapturePipelineRun")
	require.Contains(t, out, "2 orchestrator(s) × 4 workers")
}

func TestMarkerOf(t *testing.T) {
	i, ok := markerOf("## New message\n" + memoryQuery(1234, 600000001) + "\n\n## Recent\nUser: " + memoryQuery(34, 600000001))
	require.True(t, ok)
	require.Equal(t, 1234, i)
	for _, s := range []string{"no marker", queryMarker + "12", queryMarker + "x1]"} {
		_, ok := markerOf(s)
		require.False(t, ok, s)
	}
}

func TestPercentile(t *testing.T) {
	d := durations{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	require.Equal(t, time.Duration(5), d.p(0.5))
	require.Equal(t, time.Duration(10), d.p(0.99))
	require.Equal(t, time.Duration(10), d.p(1))
	require.Equal(t, time.Duration(1), d.p(0.01))
	require.Zero(t, durations(nil).p(0.5))
}

func TestPercentileRow(t *testing.T) {
	var out strings.Builder
	durations{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond}.printRow(&out, 6, "lag")
	require.Equal(t, "  lag    p50     2.00ms  p90     4.00ms  p99     4.00ms  max     4.00ms\n", out.String())
}

// Replies are counted per replied-to message, in both of the ways the Bot
// API takes them; chat actions are answered with true.
func TestTelegramCountsReplies(t *testing.T) {
	tg := newTelegram(tgToken)
	defer tg.Close()
	post := tgPost(t, tg)
	post(200, "sendMessage", `{"chat_id":"42","text":"answer","reply_to_message_id":"7"}`)
	post(200, "sendMessage", `{"chat_id":42,"text":"answer","reply_parameters":{"message_id":8,"allow_sending_without_reply":true}}`)
	post(200, "sendMessage", `{"chat_id":"42","text":"again","reply_to_message_id":"7"}`)
	body := post(400, "sendMessage", `{"chat_id":"42","text":"x","reply_to_message_id":"0"}`)
	require.Contains(t, body, "message to be replied not found")

	body = post(200, "sendChatAction", `{"chat_id":"42","action":"typing"}`)
	require.JSONEq(t, `{"ok":true,"result":true}`, body)
	post(400, "sendChatAction", `{"chat_id":"42"}`)

	st := tg.stats()
	require.Equal(t, 3, st.Messages)
	require.Equal(t, 3, st.Replies)
	require.Equal(t, 2, st.ReplyDistinct)
	require.Equal(t, 1, st.ReplyDuplicates)
	require.Zero(t, st.Unmatched)
	require.Equal(t, 1, st.ChatActions)
	require.Equal(t, 2, st.Rejected)
	require.Equal(t, map[replyKey]int{{Chat: 42, MessageID: 7}: 2, {Chat: 42, MessageID: 8}: 1}, tg.replies())
}
