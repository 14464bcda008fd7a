package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/analysis"
	"switchboard/llm/llmtest"
)

// The scenario end to end with a small run and a filtered second run: the
// last line is the JSON summary with the counts the report printed, verify
// found everything once, and the database is gone.
func TestAnalysisSmoke(t *testing.T) {
	out, last, rep := smoke[analysisReport](t, "analysis", "-n", "600", "-chats", "3", "-filters", "keywords=deploy,bug min_len=20",
		"-timeout", "1m", "-stages")
	require.True(t, strings.HasPrefix(last, `{"scenario":"analysis","messages":600,"total_s":`), "the headline keys come first: %s", last)
	require.Equal(t, "analysis", rep.Scenario)
	require.Equal(t, 600, rep.Messages)
	require.Equal(t, 3, rep.Chats)
	require.Positive(t, rep.TotalS)
	require.Positive(t, rep.MessagesPerS)
	require.Positive(t, rep.Batches)
	// One or two proposals per batch.
	require.GreaterOrEqual(t, rep.Proposals, rep.Batches)
	require.LessOrEqual(t, rep.Proposals, 2*rep.Batches)
	require.Positive(t, rep.FilteredMessages)
	require.Less(t, rep.FilteredMessages, 600)
	require.Positive(t, rep.FilteredBatches)
	require.Positive(t, rep.FilteredTotalS)
	require.Positive(t, rep.PeakRSSMB)

	// verify has checked the run, the database and the fakes; the report
	// says so, with the JSON line's counts.
	require.Contains(t, out, fmt.Sprintf("messages=600 filtered=600 batches=%d proposals=%d", rep.Batches, rep.Proposals))
	require.Contains(t, out, fmt.Sprintf("llm_calls=%d prompt_lines=600 proposals=%d", rep.Batches, rep.Proposals))
	// The admin chat gets four messages (three event lines and the board),
	// no message per proposal; board edits still waiting when a newer one
	// is written are replaced, so at most one per batch plus the last go
	// out (with the board's pacing, far fewer).
	require.Equal(t, 4, rep.AdminMessages)
	require.LessOrEqual(t, rep.BoardEdits, rep.Batches+1)
	require.Contains(t, last, fmt.Sprintf(`"admin_messages":4,"board_edits":%d,`, rep.BoardEdits))
	m := regexp.MustCompile(`telegram messages=4 \(admin chat 4: event lines and the board; proposal messages 0\) board_edits=(\d+)`).
		FindAllStringSubmatch(out, -1)
	require.Len(t, m, 2, "telegram lines of both runs")
	edits, err := strconv.Atoi(m[0][1])
	require.NoError(t, err)
	require.Equal(t, rep.BoardEdits, edits)
	require.Contains(t, out, fmt.Sprintf("filtered=%d batches=%d", rep.FilteredMessages, rep.FilteredBatches))
	require.Contains(t, out, fmt.Sprintf("prompt_lines=%d", rep.FilteredMessages))
	require.Equal(t, 2, strings.Count(out, "not_modified=0 refused=0"))
	require.Contains(t, out, fmt.Sprintf("pg_notify events=%d", 4+2*rep.Batches))
	require.Regexp(t, `\d+ batches, [1-9]\d* started by a gap, [1-9]\d* by the cap; largest 50`, out)
	require.Contains(t, out, "db SaveProposalBatch")
	require.Contains(t, out, "render Board")
	require.Contains(t, out, "approved and embedded")
}

// The conversations are what the issue asks for: n messages in the last
// 24 hours, ids counting up per group, texts of varied length with
// @mentions and keywords, and batching split both by the gap and by the
// cap.
func TestGenerateConversations(t *testing.T) {
	end := time.Now()
	msgs := generateConversations(10_000, 20, 1, end)
	require.Len(t, msgs, 10_000)
	last := map[int64]analysis.GroupMessage{}
	chars, mentions, keywords := 0, 0, 0
	for _, m := range msgs {
		require.True(t, m.Date.After(end.Add(-24*time.Hour)) && m.Date.Before(end), "%v", m.Date)
		require.Equal(t, m.Date, m.Date.Truncate(time.Microsecond), "dates round-trip through PostgreSQL")
		require.NotEmpty(t, strings.TrimSpace(m.Text))
		require.NotEmpty(t, m.Author)
		if prev, ok := last[m.ChatID]; ok {
			require.Equal(t, prev.MessageID+1, m.MessageID)
			require.False(t, m.Date.Before(prev.Date))
		}
		last[m.ChatID] = m
		chars += len([]rune(m.Text))
		if benchMentionRx.MatchString(m.Text) {
			mentions++
		}
		if strings.Contains(strings.ToLower(m.Text), "deploy") {
			keywords++
		}
	}
	require.Len(t, last, 20)
	require.Greater(t, mentions, 500)
	require.Greater(t, keywords, 100)
	require.Len(t, analysis.Prefilter(msgs, analysis.Filters{Mentions: true}), mentions, "the domain sees the same @mentions")
	p := planBatches(msgs, analysisBatchGap, analysisBatchSize)
	require.Positive(t, p.byGap)
	require.Positive(t, p.byCap)
	require.Equal(t, analysisBatchSize, p.largest)
	require.Len(t, analysis.Batch(msgs, analysisBatchGap, analysisBatchSize), p.batches, "the bench batches as the domain does")
	require.Equal(t, msgs, generateConversations(10_000, 20, 1, end), "the seed decides everything")
}

func TestPlanBatches(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	var msgs []analysis.GroupMessage
	add := func(chat int64, n int, every time.Duration, from time.Time) {
		for i := range n {
			msgs = append(msgs, analysis.GroupMessage{ChatID: chat, MessageID: int64(len(msgs) + 1), Date: from.Add(time.Duration(i) * every)})
		}
	}
	add(-1, 120, time.Minute, t0)                   // 50 + 50 + 20: two cap splits
	add(-1, 3, 10*time.Minute, t0.Add(5*time.Hour)) // exactly the gap: no split; a gap before it
	add(-2, 2, 11*time.Minute, t0)                  // more than the gap: split
	p := planBatches(msgs, 10*time.Minute, 50)
	require.Equal(t, batchPlan{batches: 6, byGap: 2, byCap: 2, largest: 50, singletons: 2}, p)
	require.Len(t, analysis.Batch(msgs, 10*time.Minute, 50), 6)
}

// The model reads the batch's ids from the prompt and cites them; its
// answer has the shape the domain asks for.
func TestProposerReadsPrompt(t *testing.T) {
	prompt := "## Messages\n" +
		"[id=41 2026-03-02 09:15 Mon] Anna: Can someone look at the login page?\n" +
		"[id=42 2026-03-02 09:16 Mon] Boris: @olga_qa please check\n    it has a second line\n" +
		"[id=43 2026-03-02 09:20 Mon] Olga: ok\n"
	p := &proposer{}
	var a analysis.Answer
	require.NoError(t, json.Unmarshal([]byte(p.reply(llmtest.Request{Prompt: prompt})), &a))
	require.Len(t, a.Proposals, 2, "an odd first id gets two proposals")
	require.Equal(t, []int64{41, 42, 43}, a.Proposals[0].Sources)
	require.Equal(t, []int64{42, 43}, a.Proposals[1].Sources)
	require.Equal(t, "Follow up: Can someone look at the login page?", a.Proposals[0].Title)
	require.Equal(t, "@olga_qa", a.Proposals[0].Assignee)
	for _, pr := range a.Proposals {
		require.Contains(t, []string{"low", "medium", "high"}, pr.Priority)
	}
	c := p.snapshot()
	require.Equal(t, proposerCounts{calls: 1, lines: 3, proposed: 2, cited: 5, withProposals: 1}, c)

	require.NoError(t, json.Unmarshal([]byte(p.reply(llmtest.Request{Prompt: "[id=40 2026-03-02 09:15 Mon] Anna: deploy\n"})), &a))
	require.Len(t, a.Proposals, 1)
	require.Equal(t, "2026-03-04", a.Proposals[0].Deadline, "id 40 is a multiple of 4: a deadline two days on")
}

// The fake Telegram edits messages it sent, as Telegram does: the edited
// message comes back, an edit changing nothing is "not modified", an
// unknown message or another chat's is not found; a proposal's Approve
// button is read back.
func TestTelegramEdits(t *testing.T) {
	tg := newTelegram(tgToken)
	defer tg.Close()
	post := tgPost(t, tg)
	body := post(200, "sendMessage", `{"chat_id":"-100","text":"progress 0%"}`)
	require.JSONEq(t, `1`, string(mustField(t, body, "result", "message_id")))
	post(200, "sendMessage", `{"chat_id":"-100","text":"proposal","reply_markup":"{\"inline_keyboard\":[[{\"text\":\"Approve\",\"callback_data\":\"pa:7\"},{\"text\":\"Reject\",\"callback_data\":\"pj:7\"}]]}"}`)

	body = post(200, "editMessageText", `{"chat_id":"-100","message_id":"1","text":"progress 50%","parse_mode":"HTML"}`)
	require.JSONEq(t, `"progress 50%"`, string(mustField(t, body, "result", "text")))
	require.NotEmpty(t, mustField(t, body, "result", "edit_date"))
	body = post(400, "editMessageText", `{"chat_id":"-100","message_id":"1","text":"progress 50%"}`)
	require.Contains(t, body, "message is not modified")
	body = post(400, "editMessageText", `{"chat_id":"-100","message_id":"9","text":"x"}`)
	require.Contains(t, body, "message to edit not found")
	post(400, "editMessageText", `{"chat_id":"-200","message_id":"1","text":"x"}`)
	post(400, "editMessageText", `{"chat_id":"-100","message_id":"1","text":""}`)
	post(200, "editMessageText", `{"chat_id":"-100","message_id":"1","text":"progress 100%"}`)

	st := tg.stats()
	require.Equal(t, 2, st.Messages)
	require.Equal(t, 1, st.Unmatched)
	require.Equal(t, 1, st.Proposals)
	require.Equal(t, 1, st.ProposalDistinct)
	require.Equal(t, 2, st.Edits)
	require.Equal(t, 1, st.EditedMessages)
	require.Equal(t, 1, st.NotModified)
	require.Equal(t, 3, st.Rejected)
	require.Equal(t, 2, tg.messagesTo(-100))
	require.Equal(t, map[int64][]int{7: {2}}, tg.proposals())
	edits, text, ok := tg.edited(-100, 1)
	require.True(t, ok)
	require.Equal(t, 2, edits)
	require.Equal(t, "progress 100%", text)
	_, _, ok = tg.edited(-200, 1)
	require.False(t, ok)

	d := tg.stats().minus(st)
	require.Zero(t, d.Messages)
	require.Zero(t, d.Edits)
}
