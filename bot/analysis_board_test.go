package bot_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/e2e/tgfake"
	"switchboard/internal/testkit"
	"switchboard/llm/llmtest"
)

// completedRun makes run #1 with n proposals, "Task 1" … "Task n" (the
// priorities taskPriority's), one message of the team's group
// each, and waits until it is completed and its board delivered. It
// returns the proposals' ids by ordinal.
func (env anEnv) completedRun(t *testing.T, n int) []int64 {
	t.Helper()
	team, ann := env.teamAndAnn("Team")
	var ps []string
	for i := range n {
		m := ann.SendText(team.ID, fmt.Sprintf("task %d: please do thing %d", i+1, i+1))
		ps = append(ps, fmt.Sprintf(`{"title":"Task %d","description":"Do thing %d.","priority":%q,"assignee":"","deadline":"","source_message_ids":[%d]}`,
			i+1, i+1, taskPriority(i), m.MessageID))
	}
	eventually(t, func() bool { return count(t, env.st, `SELECT count(*) FROM group_messages`) == n }, "messages stored")
	env.llm.On(llmtest.Chat()).Named("proposals").Reply(`{"proposals":[` + strings.Join(ps, ",") + `]}`)
	require.Regexp(t, `^🆕 Run #1 created`, env.ask(t, env.admin, "/run_new 24h").Text)
	require.Regexp(t, `^▶️ Run #1 started`, env.ask(t, env.admin, "/run_start 1").Text)
	env.waitAdminLine(t, "✅ Run #1 completed") // with n proposals, or with none
	env.settle(t)
	ids := column(t, env.st, `SELECT id FROM analysis_proposals WHERE run_id = 1 ORDER BY ordinal`)
	require.Len(t, ids, n)
	return ids
}

// Typed in the admin chat, /run_new answers with the next step only and
// /run_start not at all: the chat reads both as events, and then the board.
func TestAnalysisCommandsInTheAdminChatSayNothingTwice(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	team, ann := env.teamAndAnn("Team")
	m := ann.SendText(team.ID, "task: please fix the login page")
	eventually(t, func() bool { return count(t, env.st, `SELECT count(*) FROM group_messages`) == 1 }, "message stored")
	env.llm.On(llmtest.Chat()).Named("proposals").Reply(fmt.Sprintf(
		`{"proposals":[{"title":"Fix login","description":"Fix it.","priority":"high","assignee":"","deadline":"","source_message_ids":[%d]}]}`, m.MessageID))
	env.srv.Supergroup(adminChat, "Admins", "")
	env.admin.SendText(adminChat, "/run_new 24h")
	env.srv.WaitMessage(t, adminChat, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "Start run #1 with /run_start 1") })
	env.admin.SendText(adminChat, "/run_start 1")
	env.waitAdminLine(t, "✅ Run #1 completed")
	env.settle(t)
	var started []string
	for _, m := range env.srv.Messages(adminChat) {
		if strings.Contains(m.Text, "Run #1 started") {
			started = append(started, m.Text)
		}
	}
	require.Equal(t, []string{"▶️ Run #1 started"}, started, "the event, and no reply repeating it")
}

// taskPriority is the priority of completedRun's proposal i (from 0):
// low, medium, high in turn.
func taskPriority(i int) string { return []string{"low", "medium", "high"}[i%3] }

// pressBoard presses a button the board shows now (as a client with the
// board up to date would) and returns the answer, once the board's edit
// the press wrote (if any) is delivered.
func (env anEnv) pressBoard(t *testing.T, who *tgfake.Person, data string) tgfake.CallbackAnswer {
	t.Helper()
	a := press(t, env.srv, who, env.board(t, 1), data)
	env.settle(t)
	return a
}

// pressBoardRaw is pressBoard with any data: a stale or forged press.
func (env anEnv) pressBoardRaw(t *testing.T, who *tgfake.Person, data string) tgfake.CallbackAnswer {
	t.Helper()
	a := pressRaw(t, env.srv, who, env.board(t, 1), data)
	env.settle(t)
	return a
}

// refusedInGroup reads the refusal of a press in a group: a message only
// the presser sees, replying to the pressed message, with no alert (the
// spinner merely stopped); or, once the group's pace (20 messages a
// minute) has no room for it now, the alert as before. Its text.
func refusedInGroup(t *testing.T, srv *tgfake.Server, chat int64, who *tgfake.Person, a tgfake.CallbackAnswer) string {
	t.Helper()
	if a.Text != "" {
		require.True(t, a.ShowAlert, "paced: the refusal is an alert")
		return a.Text
	}
	eph := srv.EphemeralMessages(chat)
	require.NotEmpty(t, eph, "no message only the presser sees")
	last := eph[len(eph)-1]
	require.Equal(t, who.ID(), last.ReceiverUser.ID)
	require.NotZero(t, last.ReplyToID(), "it answers the pressed message")
	return last.Text
}

// boardState is what a press may change: the decisions, the run's review
// and its counters, and the board.
func (env anEnv) boardState(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, env.st.Pool().QueryRow(context.Background(), `
SELECT (SELECT string_agg(ordinal || ':' || decision, ',' ORDER BY ordinal) FROM analysis_proposals WHERE run_id = 1)
    || ' page ' || review_page || ' confirm ' || review_confirm
    || ' ✅' || proposals_approved || ' ❌' || proposals_rejected || ' ⏳' || proposals_pending
FROM analysis_runs WHERE id = 1`).Scan(&s))
	b := env.board(t, 1)
	return s + "\n" + b.Text + "\n" + strings.Join(b.ReplyMarkup.Data(), " ")
}

func cbData(t *testing.T, action string, ids ...int64) string {
	t.Helper()
	d, err := bot.Encode(bot.Action{Name: action, IDs: len(ids)}, ids...)
	require.NoError(t, err)
	return d
}

// rows are the texts of a rendered message's buttons, row by row.
func rows(m domain.Message) [][]string {
	return testkit.MapRows(m.Buttons, func(b domain.Button) string { return b.Text })
}

// The board's page: the progress, a header with the counts, the page's
// proposals numbered by ordinal and marked with their decisions (the
// LLM's text escaped), a ✅ / ❌ pair for each one pending, ◀ ▶ only
// towards pages that exist, and "approve all remaining" only on a
// completed run with proposals pending — or, once pressed, its
// confirmation.
func TestAnalysisBoardRendering(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ctx := context.Background()
	run := analysis.Run{ID: 7, State: analysis.Completed, Batches: 3, BatchesDone: 3, Messages: 90, Filtered: 40, Processed: 40,
		ProposalsTotal: 20, ProposalsApproved: 3, ProposalsRejected: 2, ProposalsPending: 15, ReviewPage: 1}
	page := func(r analysis.Run, pg int, decisions map[int]analysis.Decision) analysis.Review {
		rv := analysis.Review{Run: r, Page: pg}
		for o := pg*analysis.ReviewPageSize + 1; o <= min((pg+1)*analysis.ReviewPageSize, r.ProposalsTotal); o++ {
			d, ok := decisions[o]
			if !ok {
				d = analysis.Undecided
			}
			rv.Proposals = append(rv.Proposals, analysis.Proposal{ID: int64(100 + o), RunID: r.ID, Ordinal: o,
				Title: fmt.Sprintf("Task %d", o), Description: fmt.Sprintf("Do thing %d.", o), Priority: "low", Decision: d})
		}
		return rv
	}
	rv := page(run, 1, map[int]analysis.Decision{9: analysis.Approved, 10: analysis.Rejected})
	rv.Proposals[2].Title = "<b>Fix</b> & <script>x</script>"
	rv.Proposals[2].Description = "a < b && c > d\n\nsecond   line"
	rv.Proposals[2].Assignee, rv.Proposals[2].Deadline, rv.Proposals[2].Priority = "<i>Ann</i>", "2099-01-05", "high"
	rv.Proposals[3].Title, rv.Proposals[3].Description, rv.Proposals[3].Priority = " \n ", "", "whatever"
	// A model writes Markdown: it reads as text on the board.
	rv.Proposals[4].Title = "**Fix** the `login()` *page*"
	rv.Proposals[4].Description = "## Why\n\n- users [cannot](https://x.y) log in\n- ~~old~~"

	m := env.bot.Board(rv, false)
	require.Len(t, m, 1)
	require.Equal(t, "✅ <b>Run #7</b> completed\n▓▓▓▓▓▓▓▓▓▓ 100%\nBatches: 3 of 3\nMessages processed: 40 of 40 (90 in the window)\nProposals: 20\n\n"+
		"<b>Proposals 9–16 of 20</b> · ✅ 3 · ❌ 2 · ⏳ 15\n\n"+
		"9. ✅ <b>Task 9</b> · low\n\n"+
		"10. ❌ <b>Task 10</b> · low\n\n"+
		"11. ⏳ <b>&lt;b&gt;Fix&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt;</b> · high · &lt;i&gt;Ann&lt;/i&gt; · due 2099-01-05\n"+
		"<i>a &lt; b &amp;&amp; c &gt; d second line</i>\n\n"+
		"12. ⏳ <b>—</b>\n\n"+
		"13. ⏳ <b>Fix the login() page</b> · low\n<i>Why • users cannot log in • old</i>\n\n"+
		"14. ⏳ <b>Task 14</b> · low\n<i>Do thing 14.</i>\n\n"+
		"15. ⏳ <b>Task 15</b> · low\n<i>Do thing 15.</i>\n\n"+
		"16. ⏳ <b>Task 16</b> · low\n<i>Do thing 16.</i>", m[0].Text,
		"decided proposals are marked and folded; the LLM's text is escaped")
	require.Equal(t, [][]string{
		{"11 ✅", "11 ❌", "12 ✅", "12 ❌"},
		{"13 ✅", "13 ❌", "14 ✅", "14 ❌"},
		{"15 ✅", "15 ❌", "16 ✅", "16 ❌"},
		{"◀ 1", "3 ▶"},
		{"✅ Approve the rest (15)"},
	}, rows(m[0]), "a pair per pending proposal, none for the decided")
	ok, no := domain.StyleSuccess, domain.StyleDanger
	require.Equal(t, []domain.Button{{Text: "11 ✅", Data: data(t, "pa", 111), Style: ok}, {Text: "11 ❌", Data: data(t, "pj", 111), Style: no},
		{Text: "12 ✅", Data: data(t, "pa", 112), Style: ok}, {Text: "12 ❌", Data: data(t, "pj", 112), Style: no}}, m[0].Buttons[0],
		"approve is coloured as agreeing, reject as refusing")
	require.Equal(t, []domain.Button{{Text: "◀ 1", Data: cbData(t, "bp", 7, 0)}, {Text: "3 ▶", Data: cbData(t, "bp", 7, 2)}}, m[0].Buttons[3])
	require.Equal(t, []domain.Button{{Text: "✅ Approve the rest (15)", Data: data(t, "ba", 7)}}, m[0].Buttons[4])

	// Delivered, Telegram shows the LLM's text literally.
	first := env.bot.Board(rv, true)
	require.NoError(t, env.st.Outbox().Enqueue(ctx, first...))
	shown := env.waitAdminLine(t, "✅ Run #7 completed")
	require.Contains(t, shown.Text, "\n\nProposals 9–16 of 20 · ✅ 3 · ❌ 2 · ⏳ 15\n\n9. ✅ Task 9 · low\n\n")
	require.Contains(t, shown.Text, "\n\n11. ⏳ <b>Fix</b> & <script>x</script> · high · <i>Ann</i> · due 2099-01-05\na < b && c > d second line\n\n")
	for _, e := range shown.Entities {
		require.Contains(t, []string{"bold", "italic"}, e.Type)
	}
	require.Equal(t, shown.ReplyMarkup.Data()[:4], []string{data(t, "pa", 111), data(t, "pj", 111), data(t, "pa", 112), data(t, "pj", 112)})

	// Asked to approve all: the question under the header, the
	// confirmation instead of the button.
	run.ReviewConfirm = true
	rv.Run = run
	m = env.bot.Board(rv, false)
	require.Contains(t, m[0].Text, "<b>Proposals 9–16 of 20</b> · ✅ 3 · ❌ 2 · ⏳ 15\n\n⚠️ Approve every proposal still pending (15)? Confirm below.\n\n9. ✅")
	require.Equal(t, []domain.Button{{Text: "✅ Yes, approve 15", Data: data(t, "by", 7), Style: domain.StyleSuccess}, {Text: "↩️ Cancel", Data: data(t, "bn", 7)}},
		m[0].Buttons[len(m[0].Buttons)-1], "the confirmation is coloured, the way back plain")
	require.NotContains(t, strings.Join(flat(rows(m[0])), "|"), "Approve the rest")

	// The first page leads on only (▶, and ⏭ to the last page when that
	// is more than a step away); the last one back only.
	run.ReviewConfirm = false
	m = env.bot.Board(page(run, 0, nil), false)
	require.Contains(t, m[0].Text, "<b>Proposals 1–8 of 20</b>")
	require.Equal(t, [][]string{{"2 ▶", "3 ⏭"}, {"✅ Approve the rest (15)"}}, rows(m[0])[4:])
	require.Equal(t, []domain.Button{{Text: "2 ▶", Data: cbData(t, "bp", 7, 1)}, {Text: "3 ⏭", Data: cbData(t, "bp", 7, 2)}}, m[0].Buttons[4])
	m = env.bot.Board(page(run, 2, nil), false)
	require.Contains(t, m[0].Text, "<b>Proposals 17–20 of 20</b>")
	require.Equal(t, [][]string{{"17 ✅", "17 ❌", "18 ✅", "18 ❌"}, {"19 ✅", "19 ❌", "20 ✅", "20 ❌"}, {"⏮ 1", "◀ 2"}, {"✅ Approve the rest (15)"}},
		rows(m[0]))
	require.Equal(t, []domain.Button{{Text: "⏮ 1", Data: cbData(t, "bp", 7, 0)}, {Text: "◀ 2", Data: cbData(t, "bp", 7, 1)}}, m[0].Buttons[2])
	// In the middle of five pages, all four; next to an end, no jump to it.
	five := run
	five.ProposalsTotal, five.ProposalsPending, five.ProposalsApproved, five.ProposalsRejected = 40, 40, 0, 0
	for pg, want := range map[int][]string{0: {"2 ▶", "5 ⏭"}, 1: {"◀ 1", "3 ▶", "5 ⏭"}, 2: {"⏮ 1", "◀ 2", "4 ▶", "5 ⏭"},
		3: {"⏮ 1", "◀ 3", "5 ▶"}, 4: {"⏮ 1", "◀ 4"}} {
		m = env.bot.Board(page(five, pg, nil), false)
		got := rows(m[0])
		require.Equal(t, want, got[len(got)-2], "page %d", pg+1)
	}

	// One page: no paging.
	one := analysis.Run{ID: 7, State: analysis.Completed, Batches: 1, BatchesDone: 1, ProposalsTotal: 8, ProposalsPending: 8}
	m = env.bot.Board(page(one, 0, nil), false)
	require.Len(t, m[0].Buttons, 5, "four rows of pairs and approve-all")
	require.Equal(t, []string{"✅ Approve the rest (8)"}, rows(m[0])[4])

	// Approve-all only on a completed run with proposals pending.
	for _, r := range []analysis.Run{
		{ID: 7, State: analysis.Running, Batches: 2, BatchesDone: 1, ProposalsTotal: 8, ProposalsPending: 8},
		{ID: 7, State: analysis.Running, Batches: 2, BatchesDone: 1, ProposalsTotal: 8, ProposalsPending: 8, ReviewConfirm: true},
		{ID: 7, State: analysis.Failed, Batches: 2, BatchesDone: 1, ProposalsTotal: 8, ProposalsPending: 8},
	} {
		m = env.bot.Board(page(r, 0, nil), false)
		require.Len(t, m[0].Buttons, 4, "%s: the pairs alone", r.State)
		require.NotContains(t, strings.Join(flat(rows(m[0])), "|"), "Approve the rest", r.State)
	}
	decided := map[int]analysis.Decision{}
	for o := 1; o <= 8; o++ {
		decided[o] = analysis.Rejected
	}
	for _, st := range []analysis.State{analysis.Completed, analysis.Closed} {
		r := analysis.Run{ID: 7, State: st, Batches: 1, BatchesDone: 1, ProposalsTotal: 8, ProposalsRejected: 8}
		m = env.bot.Board(page(r, 0, decided), false)
		require.Empty(t, m[0].Buttons, "%s, nothing pending: no buttons", st)
		require.Contains(t, m[0].Text, "<b>Proposals 1–8 of 8</b> · ✅ 0 · ❌ 8 · ⏳ 0\n\n1. ❌ <b>Task 1</b> · low\n\n2. ❌")
		// With its buttons gone, a completed board says what is left to do.
		hint := "\n\nNothing left to decide: close the run with /run_close 7."
		if st == analysis.Completed {
			require.True(t, strings.HasSuffix(m[0].Text, hint), m[0].Text)
		} else {
			require.NotContains(t, m[0].Text, "Nothing left to decide", "closed: nothing left to do")
		}
	}
	m = env.bot.Board(analysis.Review{Run: analysis.Run{ID: 7, State: analysis.Closed, Batches: 1, BatchesDone: 1}}, false)
	require.Equal(t, "🏁 <b>Run #7</b> closed\n▓▓▓▓▓▓▓▓▓▓ 100%\nMessages processed: 0 of 0 (0 in the window)\n"+
		"No proposals.", m[0].Text, "no proposals: the progress alone, without rates of nothing")
	require.Empty(t, m[0].Buttons)
}

func flat(rows [][]string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// ◀ and ▶ turn the board's page; the page is the run's, so every replica
// (and every admin) sees the same one; a decision keeps the page; a page
// past the end (forged, or stale) shows the last one.
func TestAnalysisBoardPaging(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ids := env.completedRun(t, 20)
	board := env.board(t, 1)
	lines := strings.Split(board.Text, "\n")
	require.Equal(t, "Proposals 1–8 of 20 · ✅ 0 · ❌ 0 · ⏳ 20", lines[6])
	require.Equal(t, "1. ⏳ Task 1 · low", lines[8])
	require.Equal(t, "Do thing 1.", lines[9])
	require.Equal(t, [][]string{{"2 ▶", "3 ⏭"}, {"✅ Approve the rest (20)"}}, rowTexts(board)[4:])
	page1 := board.Text

	a := env.pressBoard(t, env.admin, cbData(t, "bp", 1, 1))
	requireToast(t, a, "Page 2 of 3.")
	board = env.board(t, 1)
	require.Contains(t, board.Text, "\n\nProposals 9–16 of 20 · ✅ 0 · ❌ 0 · ⏳ 20\n\n9. ⏳ Task 9 · high\nDo thing 9.\n\n10. ⏳ Task 10 · low\n")
	require.True(t, strings.HasSuffix(board.Text, "\n\n16. ⏳ Task 16 · low\nDo thing 16."), board.Text)
	require.Equal(t, []string{"9 ✅", "9 ❌", "10 ✅", "10 ❌"}, rowTexts(board)[0])
	require.Equal(t, data(t, "pa", ids[8]), board.ReplyMarkup.Data()[0])
	require.Equal(t, [][]string{{"◀ 1", "3 ▶"}, {"✅ Approve the rest (20)"}}, rowTexts(board)[4:])
	require.Equal(t, []int64{1}, column(t, env.st, `SELECT review_page FROM analysis_runs`))

	a = env.pressBoard(t, env.admin, cbData(t, "bp", 1, 2))
	require.Equal(t, "Page 3 of 3.", a.Text)
	board = env.board(t, 1)
	require.Contains(t, board.Text, "\n\nProposals 17–20 of 20 · ✅ 0 · ❌ 0 · ⏳ 20\n\n17. ⏳ Task 17 · medium\n")
	require.Equal(t, [][]string{{"17 ✅", "17 ❌", "18 ✅", "18 ❌"}, {"19 ✅", "19 ❌", "20 ✅", "20 ❌"}, {"⏮ 1", "◀ 2"}, {"✅ Approve the rest (20)"}},
		rowTexts(board))

	// A decision on the last page: the board stays there.
	require.Equal(t, "✅ #18 approved.", env.pressBoard(t, env.admin, data(t, "pa", ids[17])).Text)
	board = env.board(t, 1)
	require.Contains(t, board.Text, "\n\nProposals 17–20 of 20 · ✅ 1 · ❌ 0 · ⏳ 19\n\n17. ⏳ Task 17 · medium\nDo thing 17.\n\n18. ✅ Task 18 · high\n\n19. ⏳")
	require.Equal(t, [][]string{{"17 ✅", "17 ❌", "19 ✅", "19 ❌"}, {"20 ✅", "20 ❌"}, {"⏮ 1", "◀ 2"}, {"✅ Approve the rest (19)"}},
		rowTexts(board))
	last := board.Text

	a = env.pressBoardRaw(t, env.admin, cbData(t, "bp", 1, 40))
	requireToast(t, a, "Page 3 of 3.", "past the end: the last page")
	require.Equal(t, last, env.board(t, 1).Text)
	require.Equal(t, []int64{2}, column(t, env.st, `SELECT review_page FROM analysis_runs`))

	// ⏮ and ⏭ jump to the ends.
	require.Equal(t, "Page 1 of 3.", env.pressBoard(t, env.admin, cbData(t, "bp", 1, 0)).Text)
	board = env.board(t, 1)
	require.Equal(t, strings.Replace(page1, "✅ 0 · ❌ 0 · ⏳ 20", "✅ 1 · ❌ 0 · ⏳ 19", 1), board.Text, "back to the first page")
	require.Equal(t, [][]string{{"2 ▶", "3 ⏭"}, {"✅ Approve the rest (19)"}}, rowTexts(board)[4:])
	require.Equal(t, "Page 3 of 3.", env.pressBoard(t, env.admin, cbData(t, "bp", 1, 2)).Text)
	require.Equal(t, last, env.board(t, 1).Text)
	require.Equal(t, "Page 2 of 3.", env.pressBoard(t, env.admin, cbData(t, "bp", 1, 1)).Text)
	require.Contains(t, env.board(t, 1).Text, "\n\nProposals 9–16 of 20 · ✅ 1 · ❌ 0 · ⏳ 19\n\n")
	require.Equal(t, []int64{1}, column(t, env.st, `SELECT review_page FROM analysis_runs`))
	require.Len(t, env.srv.Messages(adminChat), 4, "one board, edited: three lines and the board")
}

// "Approve the rest" asks first; cancel withdraws the question; yes
// approves every proposal still pending (on every page) and leaves the
// decided ones as they were; a confirmation answered already is stale.
func TestAnalysisBoardApproveAll(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	ids := env.completedRun(t, 10)
	require.Equal(t, "❌ #3 rejected.", env.pressBoard(t, env.admin, data(t, "pj", ids[2])).Text)
	require.Equal(t, "✅ #4 approved.", env.pressBoard(t, env.admin, data(t, "pa", ids[3])).Text)
	board := env.board(t, 1)
	require.Equal(t, []string{"✅ Approve the rest (8)"}, rowTexts(board)[len(rowTexts(board))-1])

	a := env.pressBoard(t, env.admin, data(t, "ba", 1))
	requireToast(t, a, "Confirm on the board.")
	board = env.board(t, 1)
	require.Contains(t, board.Text, "\n\nProposals 1–8 of 10 · ✅ 1 · ❌ 1 · ⏳ 8\n\n⚠️ Approve every proposal still pending (8)? Confirm below.\n\n1. ⏳ Task 1")
	require.Equal(t, [][]string{{"2 ▶"}, {"✅ Yes, approve 8", "↩️ Cancel"}}, rowTexts(board)[len(rowTexts(board))-2:])
	require.Equal(t, []string{data(t, "by", 1), data(t, "bn", 1)}, board.ReplyMarkup.Data()[len(board.ReplyMarkup.Data())-2:])
	require.Equal(t, []int64{1}, column(t, env.st, `SELECT review_confirm::int FROM analysis_runs`))
	a = env.pressBoardRaw(t, env.admin, data(t, "ba", 1))
	requireAlert(t, a, "Nothing to approve: the run is not completed, nothing is pending, or the board already asks.")

	a = env.pressBoard(t, env.admin, data(t, "bn", 1))
	require.Equal(t, "Cancelled.", a.Text)
	board = env.board(t, 1)
	require.NotContains(t, board.Text, "⚠️")
	require.Equal(t, [][]string{{"2 ▶"}, {"✅ Approve the rest (8)"}}, rowTexts(board)[len(rowTexts(board))-2:])
	require.Equal(t, 8, count(t, env.st, `SELECT count(*) FROM analysis_proposals WHERE decision = 'pending'`), "cancelled: nothing approved")
	const stale = "This confirmation is no longer current: it was answered or withdrawn."
	for _, d := range []string{data(t, "bn", 1), data(t, "by", 1)} {
		a = env.pressBoardRaw(t, env.admin, d)
		requireAlert(t, a, stale, d)
	}
	require.Equal(t, 8, count(t, env.st, `SELECT count(*) FROM analysis_proposals WHERE decision = 'pending'`), "a stale yes approves nothing")

	require.Equal(t, "Confirm on the board.", env.pressBoard(t, env.admin, data(t, "ba", 1)).Text)
	a = env.pressBoard(t, env.admin, data(t, "by", 1))
	requireToast(t, a, "Approved 8.")
	decisions := column(t, env.st, `SELECT CASE decision WHEN 'approved' THEN 1 WHEN 'rejected' THEN -1 ELSE 0 END
FROM analysis_proposals ORDER BY ordinal`)
	require.Equal(t, []int64{1, 1, -1, 1, 1, 1, 1, 1, 1, 1}, decisions, "every pending one approved; the rejected one stays rejected")
	require.Equal(t, 10, count(t, env.st, `SELECT count(*) FROM analysis_proposals WHERE decided_by = 1 AND decided_at IS NOT NULL`))
	require.Equal(t, []int64{9, 1, 0, 0}, column(t, env.st, `SELECT unnest(ARRAY[proposals_approved, proposals_rejected, proposals_pending, review_confirm::int])
FROM analysis_runs`))
	board = env.board(t, 1)
	require.Contains(t, board.Text, "\n\nProposals 1–8 of 10 · ✅ 9 · ❌ 1 · ⏳ 0\n\n1. ✅ Task 1 · low\n\n2. ✅ Task 2 · medium\n\n3. ❌ Task 3 · high\n\n4. ✅")
	require.Equal(t, [][]string{{"2 ▶"}}, rowTexts(board), "nothing pending: paging alone")

	// The second yes (a double tap, or another admin's client) is stale.
	a = pressRaw(t, env.srv, env.admin, board, data(t, "by", 1))
	requireAlert(t, a, stale)
	a = pressRaw(t, env.srv, env.admin, board, data(t, "ba", 1))
	require.Equal(t, "Nothing to approve: the run is not completed, nothing is pending, or the board already asks.", a.Text)
	// Pressing a decided proposal says what it became.
	a = pressRaw(t, env.srv, env.admin, board, data(t, "pa", ids[2]))
	requireAlert(t, a, "This proposal has already been rejected.")
	a = pressRaw(t, env.srv, env.admin, board, data(t, "pj", ids[9]))
	requireAlert(t, a, "This proposal has already been approved.")
	require.Equal(t, decisions, column(t, env.st, `SELECT CASE decision WHEN 'approved' THEN 1 WHEN 'rejected' THEN -1 ELSE 0 END
FROM analysis_proposals ORDER BY ordinal`))

	require.Equal(t, "Page 2 of 2.", env.pressBoard(t, env.admin, cbData(t, "bp", 1, 1)).Text)
	board = env.board(t, 1)
	require.Contains(t, board.Text, "\n\nProposals 9–10 of 10 · ✅ 9 · ❌ 1 · ⏳ 0\n\n9. ✅ Task 9 · high\n\n10. ✅ Task 10 · low")
	require.Equal(t, [][]string{{"◀ 1"}}, rowTexts(board))
	require.Equal(t, "🏁 Run #1 closed.\nProposals: 10\nApproved: 90%\nRejected: 10%", env.ask(t, env.admin, "/run_close 1").Text)
}

// Only admins may press the board's buttons: anyone else is refused
// whatever they press, and nothing changes (no decision, no page, no
// question, no edit). Forged data naming no run (or no proposal) is
// answered as a button no longer valid.
func TestAnalysisBoardRefusals(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ids := env.completedRun(t, 10)
	ann := env.srv.User(42, "Ann", "en")
	const forbidden = "This button is not for you."

	outbox := func() int { return count(t, env.st, `SELECT count(*) FROM outbox`) }
	before, rowsBefore := env.boardState(t), outbox()
	for _, d := range []string{data(t, "pa", ids[0]), data(t, "pj", ids[1]), cbData(t, "bp", 1, 1), data(t, "ba", 1)} {
		a := env.pressBoard(t, ann, d) // buttons the board shows
		require.Equal(t, forbidden, refusedInGroup(t, env.srv, adminChat, ann, a), d)
	}
	for _, d := range []string{data(t, "by", 1), data(t, "bn", 1)} {
		a := env.pressBoardRaw(t, ann, d)
		require.Equal(t, forbidden, refusedInGroup(t, env.srv, adminChat, ann, a), d)
	}
	require.Equal(t, before, env.boardState(t), "refused: nothing changed")
	require.Equal(t, rowsBefore, outbox(), "refused: no edit written")

	// While the board asks, the question's buttons are refused as well.
	require.Equal(t, "Confirm on the board.", env.pressBoard(t, env.admin, data(t, "ba", 1)).Text)
	asking, rowsAsking := env.boardState(t), outbox()
	for _, d := range []string{data(t, "by", 1), data(t, "bn", 1)} {
		a := env.pressBoard(t, ann, d)
		require.Equal(t, forbidden, refusedInGroup(t, env.srv, adminChat, ann, a), d)
	}
	require.Equal(t, asking, env.boardState(t), "refused: still asking, nothing approved")
	require.Equal(t, rowsAsking, outbox())
	require.Equal(t, 10, count(t, env.st, `SELECT count(*) FROM analysis_proposals WHERE decision = 'pending'`))

	// Forged: well-formed data naming a run (or proposal) that does not
	// exist.
	const invalid = "This button is no longer valid."
	for _, d := range []string{cbData(t, "bp", 99, 0), data(t, "ba", 99), data(t, "by", 99), data(t, "bn", 99),
		data(t, "pa", 999_999), data(t, "pj", 999_999)} {
		a := env.pressBoardRaw(t, env.admin, d)
		require.Equal(t, invalid, refusedInGroup(t, env.srv, adminChat, env.admin, a), d)
	}
	// And malformed: the wrong number of ids.
	for _, d := range []string{"bp:1", "ba:1:2", "by"} {
		a := env.pressBoardRaw(t, env.admin, d)
		require.Equal(t, invalid, refusedInGroup(t, env.srv, adminChat, env.admin, a), d)
	}
	require.Equal(t, asking, env.boardState(t), "nothing changed")
	require.Equal(t, rowsAsking, outbox())
	require.NotEmpty(t, env.srv.EphemeralMessages(adminChat), "the refusals the group's pace had room for went only to the presser")
	require.Equal(t, "Cancelled.", env.pressBoard(t, env.admin, data(t, "bn", 1)).Text)
	require.Equal(t, before, env.boardState(t), "cancelled: as before")
}

// A board pressed before its delivery is recorded (the admin's press
// racing the sender's mark, on a loaded database) is still the board: the
// press decides, and the board keeps its page and its buttons instead of
// being overwritten as if it were a proposal's own message.
func TestBoardPressedBeforeItsDeliveryIsRecordedStaysTheBoard(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ids := env.completedRun(t, 2)
	board := env.board(t, 1)
	_, err := env.st.Pool().Exec(context.Background(), `UPDATE analysis_runs SET progress_message_id = NULL WHERE id = 1`)
	require.NoError(t, err)

	a := press(t, env.srv, env.admin, board, data(t, "pa", ids[0]))
	require.Equal(t, "✅ #1 approved.", a.Text)
	env.settle(t)
	now := mustMessage(t, env.srv, board.MessageID)
	require.Contains(t, now.Text, "\n\n1. ✅ Task 1 · low\n\n2. ⏳ Task 2 · medium\nDo thing 2.")
	require.Equal(t, [][]string{{"2 ✅", "2 ❌"}, {"✅ Approve the rest (1)"}}, rowTexts(now))
	for i, v := range now.Edits {
		// Never, in between, a proposal's own text without the board's
		// buttons, which a second press meanwhile would not find.
		require.NotContains(t, v.Text, "Approved by", "version %d", i)
	}
}

// A proposal's own message from before the board (a run reviewed across
// the upgrade) still works: pressed, it is edited in place to show the
// decision, and the board shows it too.
func TestAnalysisLegacyProposalMessage(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	ids := env.completedRun(t, 2)
	kb := [][]domain.Button{{{Text: "✅ Approve", Data: data(t, "pa", ids[0])}, {Text: "❌ Reject", Data: data(t, "pj", ids[0])}}}
	require.NoError(t, env.st.Outbox().Enqueue(context.Background(),
		domain.Message{ChatID: adminChat, Kind: domain.KindProposal, Ref: ids[0], Text: "💡 Proposal #1 · run #1\nTask 1", Buttons: kb}))
	legacy := env.waitAdminLine(t, "💡 Proposal #1")
	env.settle(t)

	a := press(t, env.srv, env.admin, legacy, data(t, "pa", ids[0]))
	require.Equal(t, "✅ #1 approved.", a.Text)
	edited := mustMessage(t, env.srv, legacy.MessageID)
	require.True(t, strings.HasPrefix(edited.Text, fmt.Sprintf("💡 Proposal #%d · run #1\nTask 1\nDo thing 1.\n\nPriority: low\nMessages (chat:message): %d:",
		ids[0], teamChat)), edited.Text)
	require.True(t, strings.HasSuffix(edited.Text, "\n\n✅ Approved by Boss"), edited.Text)
	require.Empty(t, edited.ReplyMarkup.Buttons())
	env.settle(t)
	board := env.board(t, 1)
	require.Contains(t, board.Text, "\n\n1. ✅ Task 1 · low\n\n2. ⏳ Task 2 · medium\nDo thing 2.")
	require.Equal(t, [][]string{{"2 ✅", "2 ❌"}, {"✅ Approve the rest (1)"}}, rowTexts(board))
}

// A run that found nothing to propose closes saying so wherever its figures
// show (the reply to /run_close, the board, /run), not "approved 0%,
// rejected 0%".
func TestAnalysisRunClosedWithoutProposals(t *testing.T) {
	t.Parallel()
	env := setupAnalysis(t)
	env.completedRun(t, 0)
	env.waitAdminLine(t, "✅ Run #1 completed with no proposals")

	require.Equal(t, "🏁 Run #1 closed.\nNo proposals.", env.ask(t, env.admin, "/run_close 1").Text)
	env.settle(t)
	board := env.board(t, 1).Text
	require.Contains(t, board, "\nNo proposals.")
	require.NotContains(t, board, "approved")
	run := env.ask(t, env.admin, "/run 1").Text
	require.Contains(t, run, "Metrics: no proposals")
	require.NotContains(t, run, "approved 0%")
}
