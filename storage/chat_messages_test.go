package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/analysis"
)

func TestAnalysisWindowMessages(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	at := func(min int) time.Time { return winFrom.Add(time.Duration(min) * time.Minute) }
	f.message(1, 1, at(-1), "before the window")
	f.message(1, 2, at(0), "first, on the boundary")
	f.message(2, 1, at(5), "chat 2 at 5")
	f.message(1, 3, at(5), "chat 1 at 5")
	f.message(1, 4, at(10), "cited by run A")
	f.message(2, 2, at(20), "cited by run B")
	f.message(1, 5, at(60), "at the end: outside")
	to := at(60)
	refs := func(ms []analysis.GroupMessage) []analysis.Ref {
		out := []analysis.Ref{}
		for _, m := range ms {
			out = append(out, analysis.Ref{ChatID: m.ChatID, MessageID: m.MessageID})
		}
		return out
	}

	a := f.running()
	all, err := f.st.GroupChats().Window(f.ctx, a.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(1, 2), ref(1, 3), ref(2, 1), ref(1, 4), ref(2, 2)}, refs(all))
	require.Equal(t, analysis.GroupMessage{ChatID: 1, MessageID: 2, AuthorID: 102, Author: "user2", Text: "first, on the boundary",
		Date: at(0)}, all[0])

	_, ps, err := f.st.Runs().SaveProposalBatch(f.ctx, a.ID, 1, 2, []analysis.Proposal{proposal("a", analysis.Ref{ChatID: 1, MessageID: 4})}, nil)
	require.NoError(t, err)
	// Run A still sees the message its own proposal cites.
	got, err := f.st.GroupChats().Window(f.ctx, a.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, refs(all), refs(got))
	f.complete(a.ID)
	f.decide(ps[0].ID, analysis.Approved)
	f.closeRun(a.ID)

	b := f.running()
	got, err = f.st.GroupChats().Window(f.ctx, b.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(1, 2), ref(1, 3), ref(2, 1), ref(2, 2)}, refs(got), "run A's citation left out")
	got, err = f.st.GroupChats().Window(f.ctx, b.ID, winFrom, to, 2)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(2, 1), ref(2, 2)}, refs(got), "one chat")
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, b.ID, 1, 1, []analysis.Proposal{proposal("b", analysis.Ref{ChatID: 2, MessageID: 2})}, nil)
	require.NoError(t, err)
	got, err = f.st.GroupChats().Window(f.ctx, a.ID, winFrom, to, 0)
	require.NoError(t, err)
	require.Equal(t, []analysis.Ref{ref(1, 2), ref(1, 3), ref(2, 1), ref(1, 4)}, refs(got), "run B's citation left out of A's window")
	got, err = f.st.GroupChats().Window(f.ctx, b.ID, at(100), at(200), 0)
	require.NoError(t, err)
	require.Empty(t, got)
}

// A benchmark pushes 10 000 messages through a run in ≤ 10 s: reading the
// window must stay a small part of that.
func TestAnalysisWindowMessages10k(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	f.exec(`INSERT INTO group_messages (chat_id, message_id, author_id, author, text, date)
SELECT i % 5, i, i % 50, 'user', 'message number ' || i, $1::timestamptz + i * interval '1 second'
FROM generate_series(1, 12000) AS i`, winFrom)
	f.exec(`ANALYZE group_messages`)
	r := f.running()
	// An earlier run's proposals cite 1 000 of them.
	f.exec(`INSERT INTO analysis_runs (id, state, created_by, window_from, window_to, error_log)
VALUES (1000, 'failed', 1, $1, $1, '{}')`, winFrom)
	f.exec(`INSERT INTO analysis_proposals (id, run_id, ordinal, batch, title, priority) VALUES (1000, 1000, 1, 1, 'old', 'low')`)
	f.exec(`INSERT INTO analysis_proposal_sources (proposal_id, run_id, chat_id, message_id)
SELECT 1000, 1000, i % 5, i FROM generate_series(1, 10000, 10) AS i`)
	start := time.Now()
	got, err := f.st.GroupChats().Window(f.ctx, r.ID, winFrom, winFrom.Add(10000*time.Second+time.Millisecond), 0)
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, got, 9000)
	for i := 1; i < len(got); i++ {
		require.True(t, got[i-1].Date.Before(got[i].Date))
	}
	require.Less(t, took, 2*time.Second)
	t.Logf("10 000-message window read in %v", took)
}

func TestAnalysisMessagesAndChats(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	require.NoError(t, f.st.GroupChats().Track(f.ctx, -1, "Alpha", true))
	require.NoError(t, f.st.GroupChats().Track(f.ctx, -2, "Beta", false))
	f.message(-1, 1, winFrom, "one")
	f.message(-1, 2, winFrom.Add(time.Hour), "two")
	f.message(-1, 3, winFrom.Add(2*time.Hour), "three")
	f.message(-3, 1, winFrom.Add(3*time.Hour), "from a group not tracked yet")

	// The same message again is an edit; EditMessage too.
	f.message(-1, 2, winFrom.Add(time.Hour), "two, edited")
	edited, err := f.st.GroupChats().EditMessage(f.ctx, -1, 3, "three, edited")
	require.NoError(t, err)
	require.True(t, edited)
	edited, err = f.st.GroupChats().EditMessage(f.ctx, -1, 99, "unknown")
	require.NoError(t, err)
	require.False(t, edited)
	f.message(-1, 1, winFrom, "one") // unchanged: not an edit
	texts := f.strings(`SELECT text || ' ' || (edited_at IS NOT NULL) FROM group_messages WHERE chat_id = -1 ORDER BY message_id`)
	require.Equal(t, []string{"one false", "two, edited true", "three, edited true"}, texts)

	chats, err := f.st.GroupChats().List(f.ctx)
	require.NoError(t, err)
	require.Len(t, chats, 3)
	require.Equal(t, analysis.Chat{ID: -3, Title: "", Messages: 1, LastAt: winFrom.Add(3 * time.Hour), CanRead: true}, chats[0])
	require.Equal(t, analysis.Chat{ID: -1, Title: "Alpha", Messages: 3, LastAt: winFrom.Add(2 * time.Hour), CanRead: true}, chats[1])
	require.Equal(t, analysis.Chat{ID: -2, Title: "Beta", Messages: 0, CanRead: false}, chats[2])

	// Tracking the new group names it and keeps its messages.
	require.NoError(t, f.st.GroupChats().Track(f.ctx, -3, "Gamma", false))
	chats, err = f.st.GroupChats().List(f.ctx)
	require.NoError(t, err)
	require.Equal(t, analysis.Chat{ID: -3, Title: "Gamma", Messages: 1, LastAt: winFrom.Add(3 * time.Hour), CanRead: false}, chats[0])
}
