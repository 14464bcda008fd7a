package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/storage"
)

// Work counts as held past its lease only while claimed with the lease run
// out: a live claim, a hand-back and a delivered row do not count.
func TestHeldPastLease(t *testing.T) {
	t.Parallel()
	f := newMemory(t)
	ctx, st := f.ctx, f.st
	held := func() storage.HeldWork {
		t.Helper()
		h, err := st.HeldPastLease(ctx, time.Minute)
		require.NoError(t, err)
		return h
	}
	require.Equal(t, storage.HeldWork{}, held())
	// lapse checks a live claim does not count, runs the claim's lease out
	// (the test's database holds the one claimed row of table) and wants it
	// counted then.
	lapse := func(table string, want storage.HeldWork, why string) {
		t.Helper()
		require.Equal(t, storage.HeldWork{}, held(), "a live claim")
		f.exec(`UPDATE ` + table + ` SET claimed_until = now() - interval '1 second'`)
		require.Equal(t, want, held(), why)
	}

	r := f.submit(1, "hello")
	_, _, ok, err := st.PipelineRuns().Capture(ctx, r.ID, memory.New, memory.Analyzing, time.Minute, "", memory.RecallSize{})
	require.NoError(t, err)
	require.True(t, ok)
	lapse("pipeline_runs", storage.HeldWork{PipelineRuns: 1}, "the stage's lease ran out")
	ok, err = st.PipelineRuns().Step(ctx, r.ID, memory.Step{From: memory.Analyzing, To: memory.New})
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, storage.HeldWork{}, held(), "given back")

	require.NoError(t, st.Outbox().Enqueue(ctx, domain.Message{ChatID: 1, Kind: domain.KindNote, Text: "hi"}))
	rows, err := st.Outbox().Claim(ctx, "", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	lapse("outbox", storage.HeldWork{OutboxRows: 1}, "the row's lease ran out")
	_, err = st.Outbox().Delivered(ctx, rows[0], 7)
	require.NoError(t, err)
	require.Equal(t, storage.HeldWork{}, held(), "delivered")

	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{{ID: 5, Chat: 1, HasChat: true, Body: []byte(`{"update_id":5}`)}}))
	ups, err := st.Inbox().Claim(ctx, "r1", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, ups, 1)
	lapse("inbox", storage.HeldWork{InboxUpdates: 1}, "the update's lease ran out: its chat waits")
	_, err = st.Inbox().Done(ctx, ups[0].ID, ups[0].Token)
	require.NoError(t, err)
	require.Equal(t, storage.HeldWork{}, held(), "handled")
}
