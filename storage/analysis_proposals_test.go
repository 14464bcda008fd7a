package storage_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/domaintest"
)

// Twenty presses on one proposal's buttons at once: one decision, exact
// counters, one board written.
func TestAnalysisDecideConcurrent(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	ps := f.batch(r.ID, 1, 2)
	var b boards
	const n = 20
	type result struct {
		p   analysis.Proposal
		r   analysis.Run
		ok  bool
		err error
	}
	results := raceAll(n, func(i int) result {
		d := analysis.Approved
		if i%2 == 1 {
			d = analysis.Rejected
		}
		p, r, ok, err := f.st.Runs().DecideProposal(f.ctx, ps[0].ID, d, int64(1000+i), b.render)
		return result{p, r, ok, err}
	})
	var winner *result
	for i := range results {
		res := &results[i]
		require.NoError(t, res.err)
		require.Equal(t, ps[0].ID, res.p.ID)
		require.Equal(t, r.ID, res.r.ID)
		if res.ok {
			require.Nil(t, winner, "two presses decided")
			winner = res
		}
	}
	require.NotNil(t, winner)
	require.Equal(t, 1, winner.r.ProposalsApproved+winner.r.ProposalsRejected)
	for _, res := range results {
		require.Equal(t, winner.p.Decision, res.p.Decision)
		require.Equal(t, winner.p.DecidedBy, res.p.DecidedBy)
	}
	got, err := f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 2, got.ProposalsTotal)
	require.Equal(t, 1, got.ProposalsPending)
	require.Equal(t, 1, got.ProposalsApproved+got.ProposalsRejected)
	if winner.p.Decision == analysis.Approved {
		require.Equal(t, 1, got.ProposalsApproved)
	} else {
		require.Equal(t, 1, got.ProposalsRejected)
	}
	require.False(t, winner.p.DecidedAt.IsZero())
	require.Equal(t, 1, b.calls(), "only the decision writes the board")
	require.Len(t, f.outbox(), 1)
	require.Equal(t, winner.r, b.last(t).Run, "the board shows the run the decision left")

	// The other proposal is untouched; unknown proposals and bad
	// decisions are refused.
	p, _, ok, err := f.st.Runs().DecideProposal(f.ctx, ps[1].ID, analysis.Rejected, 9, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(9), p.DecidedBy)
	_, _, _, err = f.st.Runs().DecideProposal(f.ctx, 999, analysis.Approved, 9, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, _, err = f.st.Runs().DecideProposal(f.ctx, ps[1].ID, analysis.Undecided, 9, b.render)
	require.Error(t, err)
	require.Equal(t, 1, b.calls(), "refusals render no board")
	require.Len(t, f.outbox(), 1)
}

func TestAnalysisSaveBatch(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	in := []analysis.Proposal{
		{Title: "Fix login", Description: "users cannot log in", Priority: "high", Assignee: "@ann", Deadline: "2025-03-05",
			Sources: []analysis.Ref{{ChatID: 2, MessageID: 9}, {ChatID: 1, MessageID: 5}, {ChatID: 2, MessageID: 9}}},
		{Title: "Update docs", Priority: "low"},
	}
	run, out, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 30, in, nil)
	require.NoError(t, err)
	require.Equal(t, [4]int{2, 2, 1, 30}, [4]int{run.ProposalsTotal, run.ProposalsPending, run.BatchesDone, run.Processed})
	require.Len(t, out, 2)
	require.Less(t, out[0].ID, out[1].ID)
	for i, p := range out {
		require.NotZero(t, p.ID)
		require.Equal(t, r.ID, p.RunID)
		require.Equal(t, 1, p.Batch)
		require.Equal(t, i+1, p.Ordinal)
		require.Equal(t, analysis.Undecided, p.Decision)
		require.Equal(t, in[i].Title, p.Title)
		require.Equal(t, in[i].Description, p.Description)
		require.Equal(t, in[i].Priority, p.Priority)
		require.Equal(t, in[i].Assignee, p.Assignee)
		require.Equal(t, in[i].Deadline, p.Deadline)
		require.False(t, p.CreatedAt.IsZero())
	}
	require.Equal(t, []analysis.Ref{{ChatID: 1, MessageID: 5}, {ChatID: 2, MessageID: 9}}, out[0].Sources, "sorted, without duplicates")
	require.Empty(t, out[1].Sources)

	// A batch without proposals still counts.
	run, out2, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 2, 12, nil, nil)
	require.NoError(t, err)
	require.Empty(t, out2)
	require.Equal(t, [4]int{2, 2, 2, 42}, [4]int{run.ProposalsTotal, run.ProposalsPending, run.BatchesDone, run.Processed})

	// A proposal the schema refuses rolls the whole batch back.
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 3, 5, []analysis.Proposal{proposal("fine"), {Title: "bad", Priority: "urgent"}}, nil)
	require.Error(t, err)
	got, err := f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, run, got)
	require.Equal(t, 2, int(f.exec(`SELECT 1 FROM analysis_proposals`)))

	// The stored proposal, as a refused Decide returns it, with the message
	// its delivery recorded.
	require.NoError(t, f.st.Outbox().Enqueue(f.ctx, domain.Message{ChatID: adminChat, Kind: domain.KindProposal, Ref: out[0].ID, Text: "p"}))
	require.Equal(t, 1, f.deliver(321))
	f.decide(out[0].ID, analysis.Approved)
	p, _, ok, err := f.st.Runs().DecideProposal(f.ctx, out[0].ID, analysis.Rejected, 8, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, analysis.Approved, p.Decision)
	require.Equal(t, int64(7), p.DecidedBy)
	require.Equal(t, 321, p.MessageID)
	require.Equal(t, out[0].Sources, p.Sources)
	require.Equal(t, out[0].Title, p.Title)
}

func TestAnalysisSimilar(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	ids := func(ps []analysis.Proposal) []int64 {
		out := []int64{}
		for _, p := range ps {
			out = append(out, p.ID)
		}
		return out
	}
	a, ps := f.inReview(6)
	vectors := [][]float32{
		{1, 0, 0},     // 0: approved, the closest
		{0.7, 0.7, 0}, // 1: approved
		{0, 0, 1},     // 2: approved, orthogonal
		{1, 0, 0},     // 3: rejected
		{1, 0},        // 4: approved, another dimension
		nil,           // 5: approved, no embedding
	}
	for i, p := range ps {
		d := analysis.Approved
		if i == 3 {
			d = analysis.Rejected
		}
		f.decide(p.ID, d)
		if vectors[i] != nil {
			require.NoError(t, f.st.Runs().SaveProposalEmbedding(f.ctx, p.ID, vectors[i]))
		}
	}
	f.closeRun(a.ID)
	// Replacing an embedding.
	require.NoError(t, f.st.Runs().SaveProposalEmbedding(f.ctx, ps[2].ID, []float32{0, 0.1, 1}))
	require.ErrorIs(t, f.st.Runs().SaveProposalEmbedding(f.ctx, 999, []float32{1}), domain.ErrNotFound)

	b := f.running()
	own := f.batch(b.ID, 1, 1)
	f.decide(own[0].ID, analysis.Approved)
	require.NoError(t, f.st.Runs().SaveProposalEmbedding(f.ctx, own[0].ID, []float32{1, 0.1, 0}))

	// similar is what run asking with q is shown: at most k proposals.
	similar := func(run int64, q []float32, k int) []analysis.Proposal {
		t.Helper()
		got, err := f.st.Runs().SimilarProposals(f.ctx, run, q, k)
		require.NoError(t, err, "run %d, q %v, k %d", run, q, k)
		return got
	}
	q := []float32{1, 0.1, 0}
	got := similar(b.ID, q, 5)
	require.Equal(t, []int64{ps[0].ID, ps[1].ID, ps[2].ID}, ids(got), "approved, of other runs, same dimension, most similar first")
	require.Equal(t, ps[0].Title, got[0].Title)
	require.Equal(t, analysis.Approved, got[0].Decision)
	require.Equal(t, []int64{ps[0].ID, ps[1].ID}, ids(similar(b.ID, q, 2)))
	require.Equal(t, []int64{ps[2].ID}, ids(similar(b.ID, []float32{0, 0, 1}, 1)))
	require.Equal(t, []int64{own[0].ID}, ids(similar(a.ID, q, 5)), "seen from run A, only B's")
	require.Len(t, similar(b.ID, []float32{0, 0, 0}, 5), 3, "a zero vector has no direction, and no error")
	require.Empty(t, similar(b.ID, q, 0))
}

// A batch's proposals and the board that lists them are written in one
// transaction: after SaveProposalBatch the outbox holds the board's edit listing
// the batch's proposals in order, by ordinal, whose buttons name them; a
// batch that is not saved writes nothing, and a board the outbox refuses
// saves no proposal.
func TestAnalysisSaveBatchWritesItsMessages(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	require.Empty(t, f.outbox())
	_, err := f.st.Runs().SetProgress(f.ctx, r.ID, 30, 20, 2, boardMessage(true))
	require.NoError(t, err)
	board := outboxRow{Kind: domain.KindProgress, Ref: r.ID, Text: "0/2 p1/1 [] 0/0/0"}
	require.Equal(t, []outboxRow{board}, f.outbox())
	// The board is posted: its edits are rows of their own.
	require.Equal(t, 1, f.deliver(555))

	run, ps, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 1, 9, []analysis.Proposal{proposal("a"), proposal("b"), proposal("c")}, boardMessage(false))
	require.NoError(t, err)
	require.Len(t, ps, 3)
	require.Equal(t, 3, run.ProposalsTotal)
	require.Equal(t, []int{1, 2, 3}, ordinals(ps))
	want := []outboxRow{board, {Kind: domain.KindProgress, Ref: r.ID, Text: "1/2 p1/1 [#1 a, #2 b, #3 c] 3/0/0", Edit: true,
		Data: fmt.Sprintf("pa:%d pa:%d pa:%d", ps[0].ID, ps[1].ID, ps[2].ID)}}
	require.Equal(t, want, f.outbox())

	// Refused by the schema: neither the proposals nor the board.
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 2, 5, []analysis.Proposal{proposal("fine"), {Title: "bad", Priority: "urgent"}}, boardMessage(false))
	require.Error(t, err)
	// A board the outbox refuses (no chat): no proposal either.
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 2, 5, []analysis.Proposal{proposal("d")},
		func(rv analysis.Review) []domain.Message {
			return append(boardMessage(false)(rv), domain.Message{Kind: domain.KindRunEvent, Text: "no chat"})
		})
	require.Error(t, err)
	got, err := f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, run, got, "the counters are as batch 1 left them")
	require.Equal(t, 3, int(f.exec(`SELECT 1 FROM analysis_proposals`)))
	require.Equal(t, want, f.outbox())

	// The run no longer running: nothing is saved or written.
	f.complete(r.ID)
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 2, 1, []analysis.Proposal{proposal("late")}, boardMessage(false))
	require.ErrorIs(t, err, analysis.ErrState)
	require.Equal(t, want, f.outbox())
	require.Equal(t, 3, int(f.exec(`SELECT 1 FROM analysis_proposals`)))
}

// Ordinals number a run's proposals 1, 2, … in the order made, across
// batches, each once; a batch rolled back leaves no gap; every run counts
// from 1.
func TestAnalysisProposalOrdinals(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	r := f.running()
	require.Equal(t, []int{1, 2, 3}, ordinals(f.batch(r.ID, 1, 3)))
	require.Empty(t, f.batch(r.ID, 2, 0), "an empty batch numbers nothing")
	// A batch the schema refuses (its second proposal) is rolled back,
	// numbers and all.
	_, _, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 3, 5, []analysis.Proposal{proposal("fine"), {Title: "bad", Priority: "urgent"}}, nil)
	require.Error(t, err)
	// So is one whose board the outbox refuses.
	_, _, err = f.st.Runs().SaveProposalBatch(f.ctx, r.ID, 3, 5, []analysis.Proposal{proposal("fine")},
		func(analysis.Review) []domain.Message {
			return []domain.Message{{Kind: domain.KindRunEvent, Text: "no chat"}}
		})
	require.Error(t, err)
	require.Equal(t, []int{4, 5}, ordinals(f.batch(r.ID, 3, 2)), "numbered on after the rolled-back batches")
	require.Equal(t, []int{6, 7, 8, 9}, ordinals(f.batch(r.ID, 4, 4)))

	stored := f.proposalsOf(r.ID)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, ordinals(stored), "in the order made (by id), each once")
	require.Equal(t, "task 3.1", stored[3].Title)
	got, err := f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.Equal(t, 9, got.ProposalsTotal)

	// Decide returns the proposal with its ordinal.
	f.complete(r.ID)
	p, _, ok, err := f.st.Runs().DecideProposal(f.ctx, stored[4].ID, analysis.Rejected, 7, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 5, p.Ordinal)
	for _, p := range stored {
		if p.ID != stored[4].ID {
			f.decide(p.ID, analysis.Approved)
		}
	}
	f.closeRun(r.ID)

	// The next run counts from 1 again.
	b := f.running()
	require.Equal(t, []int{1, 2}, ordinals(f.batch(b.ID, 1, 2)))
	// The schema keeps an ordinal unique within its run.
	_, err = f.st.Pool().Exec(f.ctx, `INSERT INTO analysis_proposals (run_id, ordinal, batch, title, priority)
VALUES ($1, 2, 9, 'twin', 'low')`, b.ID)
	require.Error(t, err)
	_, err = f.st.Pool().Exec(f.ctx, `INSERT INTO analysis_proposals (run_id, ordinal, batch, title, priority)
VALUES ($1, 0, 9, 'zero', 'low')`, b.ID)
	require.Error(t, err)
}

// The board render is given is the page its run is on, with that page's
// proposals by ordinal; TurnPage moves it, clamped to the pages.
func TestAnalysisBoardPages(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	r := f.running()
	_, err := f.st.Runs().SetProgress(f.ctx, r.ID, 40, 30, 3, b.render)
	require.NoError(t, err)
	rv := b.last(t)
	require.Equal(t, 0, rv.Page)
	require.Empty(t, rv.Proposals)
	require.Equal(t, 1, rv.Pages())

	// 20 proposals in batches of 6, 9 and 5; the first cites messages.
	total := 0
	for n, size := range []int{6, 9, 5} {
		ps := make([]analysis.Proposal, size)
		for i := range ps {
			ps[i] = proposal(fmt.Sprintf("task %d", total+i+1))
		}
		if n == 0 {
			ps[0].Sources = []analysis.Ref{ref(-5, 2), ref(-5, 1)}
		}
		run, _, err := f.st.Runs().SaveProposalBatch(f.ctx, r.ID, n+1, 10, ps, b.render)
		require.NoError(t, err)
		total += size
		rv := b.last(t)
		require.Equal(t, run, rv.Run, "the board of the run the batch left")
		require.Equal(t, 0, rv.Page, "the board stays on its page")
		want := []int{}
		for i := 1; i <= min(total, analysis.ReviewPageSize); i++ {
			want = append(want, i)
		}
		require.Equal(t, want, ordinals(rv.Proposals))
	}
	require.Equal(t, 3, b.last(t).Pages())
	first := b.last(t).Proposals[0]
	require.Equal(t, "task 1", first.Title)
	require.Equal(t, []analysis.Ref{ref(-5, 1), ref(-5, 2)}, first.Sources, "the board's proposals have their sources")
	require.Equal(t, analysis.Undecided, first.Decision)

	turn := func(page, want int, ords ...int) analysis.Run {
		t.Helper()
		calls := b.calls()
		run, err := f.st.Runs().TurnPage(f.ctx, r.ID, page, b.render)
		require.NoError(t, err)
		require.Equal(t, want, run.ReviewPage, "page %d", page)
		require.Equal(t, calls+1, b.calls(), "TurnPage writes the board")
		rv := b.last(t)
		require.Equal(t, want, rv.Page)
		require.Equal(t, run, rv.Run)
		require.Equal(t, ords, ordinals(rv.Proposals), "page %d", page)
		for _, p := range rv.Proposals {
			require.Equal(t, fmt.Sprintf("task %d", p.Ordinal), p.Title)
			require.Equal(t, r.ID, p.RunID)
		}
		stored, err := f.st.Runs().Get(f.ctx, r.ID)
		require.NoError(t, err)
		require.Equal(t, want, stored.ReviewPage, "the page is the run's")
		return run
	}
	turn(2, 2, 17, 18, 19, 20)
	turn(1, 1, 9, 10, 11, 12, 13, 14, 15, 16)
	turn(99, 2, 17, 18, 19, 20)
	turn(-1, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	turn(3, 2, 17, 18, 19, 20)

	// Other changes write the board on the page it is on.
	f.complete(r.ID)
	all := f.proposalsOf(r.ID)
	_, _, ok, err := f.st.Runs().DecideProposal(f.ctx, all[0].ID, analysis.Approved, 7, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, b.last(t).Page)
	require.Equal(t, []int{17, 18, 19, 20}, ordinals(b.last(t).Proposals))
	_, _, ok, err = f.st.Runs().DecideProposal(f.ctx, all[18].ID, analysis.Rejected, 7, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "3/3 p3/3 [#17 task 17, #18 task 18, #19- task 19, #20 task 20] 18/1/1", domaintest.BoardText(b.last(t)))

	// Every write above is in the outbox, in order.
	rows := f.outbox()
	require.Len(t, rows, b.calls())
	for i, rv := range b.reviews {
		require.Equal(t, domaintest.BoardText(rv), rows[i].Text)
	}

	// An unknown run: ErrNotFound, nothing written.
	calls := b.calls()
	_, err = f.st.Runs().TurnPage(f.ctx, 999, 1, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Equal(t, calls, b.calls())
	require.Len(t, f.outbox(), calls)

	// A run without proposals has one page.
	for _, p := range all[1:] {
		if p.ID != all[18].ID {
			f.decide(p.ID, analysis.Approved)
		}
	}
	f.closeRun(r.ID)
	e := f.running()
	run, err := f.st.Runs().TurnPage(f.ctx, e.ID, 3, b.render)
	require.NoError(t, err)
	require.Zero(t, run.ReviewPage)
	require.Zero(t, b.last(t).Page)
	require.Empty(t, b.last(t).Proposals)
}

// Decide writes the board in its transaction: the board shows the
// decision, a board the outbox refuses undoes it, and a second decision of
// the proposal (refused) writes nothing.
func TestAnalysisDecideWritesTheBoard(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	r, ps := f.inReview(3)
	require.Empty(t, f.outbox())

	p, run, ok, err := f.st.Runs().DecideProposal(f.ctx, ps[1].ID, analysis.Approved, 7, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, p.Ordinal)
	require.Equal(t, run, b.last(t).Run)
	want := []outboxRow{{Kind: domain.KindProgress, Ref: r.ID, Text: "1/0 p1/1 [#1 task 1.1, #2+ task 1.2, #3 task 1.3] 2/1/0",
		Data: fmt.Sprintf("pa:%d pa:%d pa:%d", ps[0].ID, ps[1].ID, ps[2].ID)}}
	require.Equal(t, want, f.outbox())

	// The same proposal again, either way: refused, nothing rendered or
	// written.
	for _, d := range []analysis.Decision{analysis.Rejected, analysis.Approved} {
		p, run2, ok, err := f.st.Runs().DecideProposal(f.ctx, ps[1].ID, d, 8, b.render)
		require.NoError(t, err)
		require.False(t, ok)
		require.Equal(t, analysis.Approved, p.Decision)
		require.Equal(t, int64(7), p.DecidedBy)
		require.Equal(t, run.ProposalsApproved, run2.ProposalsApproved)
		require.Equal(t, 1, b.calls())
		require.Equal(t, want, f.outbox())
	}

	// The board cannot be written: the decision is undone with it.
	_, _, _, err = f.st.Runs().DecideProposal(f.ctx, ps[0].ID, analysis.Rejected, 7, func(rv analysis.Review) []domain.Message {
		return append(b.render(rv), domain.Message{Kind: domain.KindRunEvent, Text: "no chat"})
	})
	require.Error(t, err)
	require.Equal(t, want, f.outbox())
	got := f.requireCounters(r.ID)
	require.Equal(t, 2, got.ProposalsPending)
	require.Equal(t, analysis.Undecided, f.proposalsOf(r.ID)[0].Decision)
	// And it can be decided after.
	f.decide(ps[0].ID, analysis.Rejected)
	f.requireCounters(r.ID)
}

// AskApproveAll asks only on a completed run with proposals pending, once;
// CancelApproveAll withdraws the question. Each writes the board; a
// refusal writes nothing.
func TestAnalysisAskApproveAll(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	refused := func(r analysis.Run, ok bool, err error, state analysis.State) {
		t.Helper()
		calls := b.calls()
		requireRefused(t, r, ok, err, state)
		require.Equal(t, calls, b.calls(), "a refusal renders nothing")
		require.Len(t, f.outbox(), calls, "a refusal writes nothing")
	}

	// Not completed yet.
	r := f.running()
	ps := f.batch(r.ID, 1, 3)
	x, ok, err := f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Running)
	require.False(t, x.ReviewConfirm)
	x, ok, err = f.st.Runs().CancelApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Running)

	f.complete(r.ID)
	x, ok, err = f.st.Runs().CancelApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	asked, ok, err := f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, asked.ReviewConfirm)
	require.Equal(t, 3, asked.ProposalsPending)
	require.Equal(t, asked, b.last(t).Run)
	require.Equal(t, "1/0 p1/1 [#1 task 1.1, #2 task 1.2, #3 task 1.3] 3/0/0 ?", f.outbox()[0].Text)
	got, err := f.st.Runs().Get(f.ctx, r.ID)
	require.NoError(t, err)
	require.True(t, got.ReviewConfirm)

	// Asking already.
	x, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	require.True(t, x.ReviewConfirm)

	// Withdrawn; then it can be asked again.
	cancelled, ok, err := f.st.Runs().CancelApproveAllProposals(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, cancelled.ReviewConfirm)
	require.Equal(t, 2, b.calls())
	require.Equal(t, "1/0 p1/1 [#1 task 1.1, #2 task 1.2, #3 task 1.3] 3/0/0", f.outbox()[1].Text)
	x, ok, err = f.st.Runs().CancelApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	_, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.Runs().CancelApproveAllProposals(f.ctx, r.ID, b.render)
	require.NoError(t, err)
	require.True(t, ok)

	// Nothing pending.
	for _, p := range ps {
		f.decide(p.ID, analysis.Rejected)
	}
	x, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Completed)
	require.Zero(t, x.ProposalsPending)
	require.False(t, x.ReviewConfirm)
	f.closeRun(r.ID)
	x, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, b.render)
	refused(x, ok, err, analysis.Closed)

	// No proposals at all.
	e, _ := f.inReview(0)
	x, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, e.ID, b.render)
	refused(x, ok, err, analysis.Completed)

	// A failed run.
	f.closeRun(e.ID)
	fr := f.running()
	f.batch(fr.ID, 1, 2)
	_, ok, err = f.st.Runs().Fail(f.ctx, fr.ID, analysis.ErrorLog{Step: "x", Error: "y"}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	x, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, fr.ID, b.render)
	refused(x, ok, err, analysis.Failed)

	// Unknown runs.
	_, _, err = f.st.Runs().AskApproveAllProposals(f.ctx, 999, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Runs().CancelApproveAllProposals(f.ctx, 999, b.render)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// ApproveAll approves exactly the proposals pending, only once the board
// asks, with the counters and the board in one transaction; a second
// confirm finds nothing to do.
func TestAnalysisApproveAll(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	var b boards
	r := f.running()
	ps := f.batch(r.ID, 1, 6)
	f.decide(ps[4].ID, analysis.Approved) // decided while the run is running

	// Not completed: refused even if the question were set.
	f.exec(`UPDATE analysis_runs SET review_confirm = true WHERE id = $1`, r.ID)
	approved, x, ok, err := f.st.Runs().ApproveAllProposals(f.ctx, r.ID, 99, b.render)
	requireRefused(t, x, ok, err, analysis.Running)
	require.Empty(t, approved)
	f.exec(`UPDATE analysis_runs SET review_confirm = false WHERE id = $1`, r.ID)

	f.complete(r.ID)
	f.decide(ps[1].ID, analysis.Rejected)
	before := f.requireCounters(r.ID)
	require.Equal(t, [3]int{4, 1, 1}, [3]int{before.ProposalsPending, before.ProposalsApproved, before.ProposalsRejected})

	// Without the question: refused, nothing changed or written.
	approved, x, ok, err = f.st.Runs().ApproveAllProposals(f.ctx, r.ID, 99, b.render)
	requireRefused(t, x, ok, err, analysis.Completed)
	require.Empty(t, approved)
	require.Equal(t, before, x)
	require.Zero(t, b.calls())
	require.Empty(t, f.outbox())
	require.Equal(t, before, f.requireCounters(r.ID))

	_, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	approved, run, ok, err := f.st.Runs().ApproveAllProposals(f.ctx, r.ID, 99, b.render)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int{1, 3, 4, 6}, ordinals(approved), "the pending ones, by ordinal")
	for _, p := range approved {
		require.Equal(t, analysis.Approved, p.Decision)
		require.Equal(t, int64(99), p.DecidedBy)
		require.False(t, p.DecidedAt.IsZero())
		require.Equal(t, r.ID, p.RunID)
		require.Equal(t, fmt.Sprintf("task 1.%d", p.Ordinal), p.Title)
	}
	require.Equal(t, [4]int{6, 0, 5, 1}, [4]int{run.ProposalsTotal, run.ProposalsPending, run.ProposalsApproved, run.ProposalsRejected})
	require.False(t, run.ReviewConfirm, "the question is answered")
	require.Equal(t, run, f.requireCounters(r.ID))
	stored := f.proposalsOf(r.ID)
	require.Equal(t, analysis.Rejected, stored[1].Decision, "rejected before: stays rejected")
	require.Equal(t, int64(7), stored[1].DecidedBy)
	require.Equal(t, int64(7), stored[4].DecidedBy, "approved before: by its own admin")
	for _, i := range []int{0, 2, 3, 5} {
		require.Equal(t, int64(99), stored[i].DecidedBy)
	}
	// The board, written once with it.
	require.Equal(t, 1, b.calls())
	require.Equal(t, run, b.last(t).Run)
	require.Equal(t, []outboxRow{{Kind: domain.KindProgress, Ref: r.ID,
		Text: "1/0 p1/1 [#1+ task 1.1, #2- task 1.2, #3+ task 1.3, #4+ task 1.4, #5+ task 1.5, #6+ task 1.6] 0/5/1",
		Data: fmt.Sprintf("pa:%d pa:%d pa:%d pa:%d pa:%d pa:%d", ps[0].ID, ps[1].ID, ps[2].ID, ps[3].ID, ps[4].ID, ps[5].ID)}}, f.outbox())

	// A second confirm: the board no longer asks; nothing changes.
	approved, x, ok, err = f.st.Runs().ApproveAllProposals(f.ctx, r.ID, 98, b.render)
	requireRefused(t, x, ok, err, analysis.Completed)
	require.Empty(t, approved)
	require.Equal(t, run, x)
	require.Equal(t, stored, f.proposalsOf(r.ID))
	require.Equal(t, 1, b.calls())
	require.Len(t, f.outbox(), 1)
	// Nor can the question come back: nothing is pending.
	_, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, nil)
	require.NoError(t, err)
	require.False(t, ok)

	f.closeRun(r.ID)
	approved, x, ok, err = f.st.Runs().ApproveAllProposals(f.ctx, r.ID, 98, nil)
	requireRefused(t, x, ok, err, analysis.Closed)
	require.Empty(t, approved)
	_, _, _, err = f.st.Runs().ApproveAllProposals(f.ctx, 999, 98, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// A board the outbox refuses undoes the approvals.
	c, cps := f.inReview(3)
	_, ok, err = f.st.Runs().AskApproveAllProposals(f.ctx, c.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, _, _, err = f.st.Runs().ApproveAllProposals(f.ctx, c.ID, 99, func(analysis.Review) []domain.Message {
		return []domain.Message{{Kind: domain.KindRunEvent, Text: "no chat"}}
	})
	require.Error(t, err)
	got := f.requireCounters(c.ID)
	require.Equal(t, 3, got.ProposalsPending)
	require.True(t, got.ReviewConfirm, "still asking")
	approved, _, ok, err = f.st.Runs().ApproveAllProposals(f.ctx, c.ID, 99, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Len(t, approved, len(cps))
}

// Presses on a run's proposals racing its "approve all" confirmation:
// neither deadlocks nor counts twice, whoever wins. The counters always
// equal the proposals' decisions, each proposal is decided by exactly one
// of them, and every change that happened wrote one board.
func TestAnalysisDecideApproveAllConcurrent(t *testing.T) {
	t.Parallel()
	f := newAnalysis(t)
	const rounds = 25
	const size = 6
	decidedFirst, approvedFirst := 0, 0
	for round := range rounds {
		var b boards
		r, ps := f.inReview(size)
		_, ok, err := f.st.Runs().AskApproveAllProposals(f.ctx, r.ID, nil)
		require.NoError(t, err)
		require.True(t, ok)

		type press struct {
			p   analysis.Proposal
			ok  bool
			err error
		}
		// Presses on three proposals (one twice), against one confirm.
		targets := []int{round % size, (round + 2) % size, (round + 4) % size, round % size}
		presses := make([]press, len(targets))
		var approved []analysis.Proposal
		var approveOK bool
		var approveErr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, k := range targets {
			wg.Go(func() {
				<-start
				d := analysis.Rejected
				if i%2 == 1 {
					d = analysis.Approved
				}
				p, _, ok, err := f.st.Runs().DecideProposal(f.ctx, ps[k].ID, d, int64(10+i), b.render)
				presses[i] = press{p, ok, err}
			})
		}
		wg.Go(func() {
			<-start
			approved, _, approveOK, approveErr = f.st.Runs().ApproveAllProposals(f.ctx, r.ID, 99, b.render)
		})
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Decide and ApproveAll are stuck", round)
		}

		require.NoError(t, approveErr, "round %d", round)
		require.True(t, approveOK, "round %d: the confirm found the question", round)
		byApprove := map[int64]bool{}
		for _, p := range approved {
			byApprove[p.ID] = true
		}
		changes := 1
		byPress := map[int64]int{}
		for i, pr := range presses {
			require.NoError(t, pr.err, "round %d press %d", round, i)
			if pr.ok {
				changes++
				byPress[pr.p.ID]++
				require.False(t, byApprove[pr.p.ID], "round %d: proposal %d decided by a press and approved by the confirm", round, pr.p.ID)
			}
		}
		stored := f.proposalsOf(r.ID)
		for _, p := range stored {
			require.NotEqual(t, analysis.Undecided, p.Decision, "round %d: the confirm leaves nothing pending", round)
			if byApprove[p.ID] {
				require.Equal(t, int64(99), p.DecidedBy)
				require.Equal(t, analysis.Approved, p.Decision)
				require.Zero(t, byPress[p.ID])
			} else {
				require.Equal(t, 1, byPress[p.ID], "round %d: proposal %d decided once, by a press", round, p.ID)
				require.NotEqual(t, int64(99), p.DecidedBy)
			}
		}
		got := f.requireCounters(r.ID)
		require.False(t, got.ReviewConfirm)
		require.Equal(t, changes, b.calls(), "round %d: one board per change", round)
		if len(approved) == size {
			approvedFirst++
		} else {
			decidedFirst++
		}
		f.closeRun(r.ID)
	}
	t.Logf("confirm first in %d rounds, a press first in %d", approvedFirst, decidedFirst)
}
