package analysis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/internal/testkit"
)

func TestTransitionTable(t *testing.T) {
	allowed := map[[2]State]bool{
		{Pending, Running}: true, {Running, Completed}: true, {Running, Failed}: true, {Completed, Closed}: true,
	}
	for _, from := range States {
		for _, to := range States {
			want := allowed[[2]State{from, to}]
			require.Equal(t, want, CanTransition(from, to), "%s → %s", from, to)
			require.Equal(t, !want, errors.Is(checkTransition(from, to), ErrIllegalTransition))
		}
	}
	for _, s := range []State{Reviewed, Cancelled} {
		for _, from := range States {
			require.False(t, CanTransition(from, s), "nothing enters %s yet", s)
		}
	}
}

var t0 = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

func msg(chat, id int64, minute float64, text string) GroupMessage {
	return GroupMessage{ChatID: chat, MessageID: id, Author: "A", Text: text, Date: t0.Add(time.Duration(minute * float64(time.Minute)))}
}

func ids(batches [][]GroupMessage) [][]int64 {
	return testkit.MapRows(batches, func(m GroupMessage) int64 { return m.MessageID })
}

func TestBatch(t *testing.T) {
	gap := 10 * time.Minute
	many := func(n int, chat int64) []GroupMessage {
		var out []GroupMessage
		for i := range n {
			out = append(out, msg(chat, int64(i+1), float64(i)/10, "x"))
		}
		return out
	}
	seq := func(from, to int64) []int64 {
		var out []int64
		for i := from; i <= to; i++ {
			out = append(out, i)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []GroupMessage
		want [][]int64
	}{
		{"empty", nil, [][]int64{}},
		{"one", []GroupMessage{msg(-1, 1, 0, "a")}, [][]int64{{1}}},
		{"gap of exactly 10 min stays", []GroupMessage{msg(-1, 1, 0, "a"), msg(-1, 2, 10, "b")}, [][]int64{{1, 2}}},
		{"gap over 10 min splits", []GroupMessage{msg(-1, 1, 0, "a"), msg(-1, 2, 10.02, "b"), msg(-1, 3, 12, "c")}, [][]int64{{1}, {2, 3}}},
		{"gap measured from the previous message", []GroupMessage{msg(-1, 1, 0, "a"), msg(-1, 2, 9, "b"), msg(-1, 3, 18, "c"), msg(-1, 4, 29, "d")}, [][]int64{{1, 2, 3}, {4}}},
		{"unsorted input", []GroupMessage{msg(-1, 3, 2, "c"), msg(-1, 1, 0, "a"), msg(-1, 2, 1, "b")}, [][]int64{{1, 2, 3}}},
		{"50-message cap", many(120, -1), [][]int64{seq(1, 50), seq(51, 100), seq(101, 120)}},
		{"exactly 50", many(50, -1), [][]int64{seq(1, 50)}},
		{"two chats interleaved", []GroupMessage{
			msg(-1, 1, 0, "a"), msg(-2, 1001, 1, "x"), msg(-1, 2, 2, "b"), msg(-2, 1002, 3, "y"),
			msg(-1, 3, 30, "c"), msg(-2, 1003, 4, "z"),
		}, [][]int64{{1, 2}, {1001, 1002, 1003}, {3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Batch(tc.in, gap, 50)
			require.Equal(t, tc.want, ids(got))
			for _, b := range got {
				for _, m := range b {
					require.Equal(t, b[0].ChatID, m.ChatID, "a batch is one chat")
				}
			}
		})
	}
}

func TestPrefilter(t *testing.T) {
	in := []GroupMessage{
		msg(-1, 1, 0, "Deploy the BILLING service tomorrow"),
		msg(-1, 2, 1, "ok"),
		msg(-1, 3, 2, "@alice_dev please review billing"),
		msg(-1, 4, 3, "mail me at bob@example.com about billing"),
		msg(-1, 5, 4, "   lunch?   "),
	}
	pick := func(f Filters) []int64 {
		var out []int64
		for _, m := range Prefilter(in, f) {
			out = append(out, m.MessageID)
		}
		return out
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5}, pick(Filters{}))
	require.Equal(t, []int64{1, 3, 4}, pick(Filters{Keywords: []string{"billing"}}), "case-insensitive")
	require.Equal(t, []int64{1, 3, 4}, pick(Filters{MinLen: 10}), "trimmed length in characters")
	require.Equal(t, []int64{3}, pick(Filters{Mentions: true}), "an e-mail address is no mention")
	require.Equal(t, []int64{3}, pick(Filters{Mentions: true, Keywords: []string{"billing"}, MinLen: 5}))
}

func TestParseRunArgs(t *testing.T) {
	f, err := ParseRunArgs("")
	require.NoError(t, err)
	require.Equal(t, Filters{Window: 24 * time.Hour}, f)
	f, err = ParseRunArgs("7d chat=-1001 keywords=Billing,,deploy min_len=12 mentions")
	require.NoError(t, err)
	require.Equal(t, Filters{Window: 7 * 24 * time.Hour, ChatID: -1001, Keywords: []string{"billing", "deploy"}, MinLen: 12, Mentions: true}, f)
	for in, key := range map[string]string{
		"12h":                                 "run_new.error_window",
		"24h 7d":                              "run_new.error_window",
		"chat=5":                              "run_new.error_chat",
		"chat=abc":                            "run_new.error_chat",
		"keywords=,":                          "run_new.error_keywords",
		"min_len=-1":                          "run_new.error_min_len",
		"min_len=99999":                       "run_new.error_min_len",
		"foo":                                 "run_new.error_unknown",
		"size=3":                              "run_new.error_unknown",
		"keywords=" + strings.Repeat("k", 51): "run_new.error_keywords",
	} {
		_, err := ParseRunArgs(in)
		var ie *domain.InputError
		require.True(t, errors.As(err, &ie), "%q: %v", in, err)
		require.Equal(t, key, ie.Key, in)
	}
}

func TestAnswerValidation(t *testing.T) {
	require.Error(t, (&Answer{}).Validate(), "missing array")
	require.NoError(t, (&Answer{Proposals: []AnswerProposal{}}).Validate())
	ok := AnswerProposal{Title: "Fix", Priority: "High", Sources: []int64{1}}
	require.NoError(t, (&Answer{Proposals: []AnswerProposal{ok}}).Validate())
	for _, bad := range []AnswerProposal{
		{Title: " ", Priority: "high", Sources: []int64{1}},
		{Title: "x", Priority: "urgent", Sources: []int64{1}},
		{Title: "x", Priority: "low"},
	} {
		require.Error(t, (&Answer{Proposals: []AnswerProposal{bad}}).Validate(), "%+v", bad)
	}
}

// Only what the messages back is kept: sources from the batch, an
// assignee they name, a deadline not before them.
func TestProposalsFromKeepsOnlyStatedFacts(t *testing.T) {
	batch := []GroupMessage{
		{ChatID: -1, MessageID: 10, Author: "Ann", Text: "Bob, please fix the login bug by Friday", Date: t0},
		{ChatID: -1, MessageID: 11, Author: "Bob", Text: "ok", Date: t0.Add(time.Minute)},
	}
	got := proposalsFrom(Answer{Proposals: []AnswerProposal{
		{Title: " Fix  login\nbug ", Description: "d", Priority: "HIGH", Assignee: "@Bob", Deadline: "2026-11-20", Sources: []int64{10, 10, 99}},
		{Title: "Invented", Priority: "low", Assignee: "Carol", Deadline: "2026-11-19", Sources: []int64{11}},
		{Title: "Bad date", Priority: "low", Deadline: "Friday", Sources: []int64{10}},
		{Title: "No source", Priority: "low", Sources: []int64{42}},
	}}, batch, time.UTC)
	require.Len(t, got, 3, "a proposal citing no message of the batch is dropped")
	require.Equal(t, Proposal{Title: "Fix login bug", Description: "d", Priority: "high", Assignee: "@Bob", Deadline: "2026-11-20",
		Sources: []Ref{{ChatID: -1, MessageID: 10}}}, got[0])
	require.Empty(t, got[1].Assignee, "nobody named Carol")
	require.Empty(t, got[1].Deadline, "a deadline before the conversation is invented")
	require.Empty(t, got[2].Deadline, "not a date")
}

func TestRenderBatch(t *testing.T) {
	out, cut := renderBatch([]GroupMessage{{MessageID: 7, Author: "Ann", Text: "line1\nline2", Date: t0}},
		[]Proposal{{Title: "Old task", Description: "done before"}}, time.UTC)
	require.Zero(t, cut)
	require.Contains(t, out, "Already approved")
	require.Contains(t, out, "- Old task — done before")
	require.Contains(t, out, "[id=7 2026-11-20 09:00 Fri +00:00] Ann: line1\n    line2")
}

// The model reads the messages' times in the admin chat's zone, named, not
// in UTC: at 21:00 in New York on Thursday (02:00 UTC on Friday), "finish
// it today" is Thursday's, and a deadline of that Thursday is kept, not
// taken for a day before the conversation.
func TestBatchTimesAreInTheAdminChatsZone(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	evening := time.Date(2026, 11, 20, 2, 0, 0, 0, time.UTC)
	batch := []GroupMessage{{ChatID: -1, MessageID: 7, Author: "Ann", Text: "Bob, finish the report today", Date: evening}}
	out, _ := renderBatch(batch, nil, ny)
	require.Contains(t, out, "local to America/New_York")
	require.Contains(t, out, "[id=7 2026-11-19 21:00 Thu -05:00] Ann: Bob, finish the report today\n")
	require.NotContains(t, out, "2026-11-20")

	today := Answer{Proposals: []AnswerProposal{{Title: "Finish the report", Priority: "high", Deadline: "2026-11-19", Sources: []int64{7}}}}
	require.Equal(t, "2026-11-19", proposalsFrom(today, batch, ny)[0].Deadline, "the message's own day where it was read")
	require.Empty(t, proposalsFrom(today, batch, time.UTC)[0].Deadline, "a day before the message's, in UTC")
}

// A batch of 50 long messages (Telegram's 4096 each, Cyrillic) is cut to
// fit the window on purpose: each message to its share of the budget,
// marked, none dropped; a short one is left whole.
func TestRenderBatchFitsTheWindow(t *testing.T) {
	long := strings.Repeat("сообщение ", 409)
	batch := make([]GroupMessage, 50)
	for i := range batch {
		batch[i] = GroupMessage{MessageID: int64(i + 1), Author: "Ann", Text: long, Date: t0}
	}
	batch[0].Text = "short"
	out, cut := renderBatch(batch, nil, time.FixedZone("UTC+03:00", 3*60*60))
	require.Equal(t, 49, cut)
	require.LessOrEqual(t, utf8.RuneCountInString(out), batchBudget+50*60, "the texts' budget plus each line's id, date and author")
	require.Contains(t, out, "Ann: short\n")
	for i := 2; i <= 50; i++ {
		require.Contains(t, out, fmt.Sprintf("[id=%d ", i), "every message is still there")
	}
	require.Contains(t, out, "…")
}
