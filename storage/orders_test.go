package storage_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

func TestCancelOrder(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.master(1, "c", "d", "x")

	o := f.order("c", "d", "x")
	of := f.offered(o.ID, 1, 1)
	_, err := f.st.Pool().Exec(ctx, `UPDATE offers SET chat_id = 1, message_id = 42 WHERE id = $1`, of.ID)
	require.NoError(t, err)
	got, withdrawn, ok, err := f.st.CancelOrder(ctx, o.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Cancelled, got.State)
	require.False(t, got.CancelledAt.IsZero())
	require.Len(t, withdrawn, 1)
	w := withdrawn[0]
	require.Equal(t, of.ID, w.ID)
	require.Equal(t, dispatch.Withdrawn, w.State)
	require.Equal(t, int64(1), w.ChatID)
	require.Equal(t, 42, w.MessageID)
	require.Equal(t, got.CancelledAt, w.RespondedAt, "one transaction")

	again, withdrawn, ok, err := f.st.CancelOrder(ctx, o.ID, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, withdrawn)
	require.Equal(t, got, again, "the order as it is")

	// ASSIGNED → CANCELLED keeps the master; DONE cannot be cancelled.
	a := f.assigned(2, 500)
	got, withdrawn, ok, err = f.st.CancelOrder(ctx, a.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, withdrawn)
	require.Equal(t, int64(2), got.MasterID)
	d := f.assigned(3, 500)
	_, done, err := f.st.CompleteOrder(ctx, d.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, done)
	got, _, ok, err = f.st.CancelOrder(ctx, d.ID, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, dispatch.Done, got.State)

	_, _, _, err = f.st.CancelOrder(ctx, 777777, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// A cancel that waits for a distribution step holding the order withdraws
// the offer that step committed meanwhile.
func TestCancelOrderWithdrawsOfferMadeWhileWaiting(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.master(1, "c", "d", "x")
	o := f.order("c", "d", "x")

	// What NextOffer does, held open.
	tx, err := f.st.Pool().Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck
	_, err = tx.Exec(ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, o.ID)
	require.NoError(t, err)
	var offerID int64
	require.NoError(t, tx.QueryRow(ctx, `INSERT INTO offers (order_id, master_id, round, expires_at)
VALUES ($1, 1, 1, now() + interval '1 minute') RETURNING id`, o.ID).Scan(&offerID))

	type result struct {
		withdrawn []dispatch.Offer
		ok        bool
		err       error
	}
	done := make(chan result, 1)
	go func() {
		_, w, ok, err := f.st.CancelOrder(ctx, o.ID, nil)
		done <- result{w, ok, err}
	}()
	require.Eventually(t, func() bool {
		var waiting int
		_ = f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return waiting == 1
	}, 10*time.Second, 5*time.Millisecond, "the cancel waits for the order")
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.True(t, r.ok)
	require.Equal(t, []int64{offerID}, offerIDs(r.withdrawn))
	cur, err := f.st.Offer(ctx, offerID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Withdrawn, cur.State)
}

// AcceptOffer and cancel pressed at once, many times: no deadlock or error, and
// never an open offer on a cancelled order nor an accepted offer whose
// order was not assigned.
func TestAcceptRacingCancel(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.master(1, "c", "d", "x")
	accepted, withdrawn := 0, 0
	for range 30 {
		o := f.order("c", "d", "x")
		of := f.offered(o.ID, 1, 1)
		var wg sync.WaitGroup
		var acceptOK, cancelOK bool
		var acceptErr, cancelErr error
		var w []dispatch.Offer
		wg.Go(func() { _, _, acceptOK, acceptErr = f.st.AcceptOffer(ctx, of.ID, 1, nil) })
		wg.Go(func() { _, w, cancelOK, cancelErr = f.st.CancelOrder(ctx, o.ID, nil) })
		wg.Wait()
		require.NoError(t, acceptErr)
		require.NoError(t, cancelErr)
		require.True(t, cancelOK, "SEARCHING or ASSIGNED: cancellable either way")
		cur, err := f.st.Offer(ctx, of.ID)
		require.NoError(t, err)
		ord, err := f.st.Order(ctx, o.ID)
		require.NoError(t, err)
		require.Equal(t, dispatch.Cancelled, ord.State)
		if acceptOK {
			accepted++
			require.Equal(t, dispatch.Accepted, cur.State)
			require.Empty(t, w)
			require.Equal(t, int64(1), ord.MasterID, "assigned, then cancelled")
			require.False(t, ord.AssignedAt.IsZero())
		} else {
			withdrawn++
			require.Equal(t, dispatch.Withdrawn, cur.State)
			require.Equal(t, []int64{of.ID}, offerIDs(w))
			require.Zero(t, ord.MasterID)
		}
	}
	t.Logf("accept first %d, cancel first %d", accepted, withdrawn)
}

func TestCompleteOrderCommission(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	for i, c := range []struct {
		price int64
		rate  float64
		want  int64
	}{
		{999, 10, 100}, // 99.9 rounds up
		{1000, 10, 100},
		{1000, 7.5, 75},
		{1, 10, 1},
		{333, 0.1, 1},
		{100_000_000, 10, 10_000_000},
	} {
		o := f.assigned(int64(10+i), c.price)
		got, ok, err := f.st.CompleteOrder(ctx, o.ID, 0, c.rate, 3*time.Hour, nil)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, c.want, got.Commission, "price %d rate %v", c.price, c.rate)
		require.Equal(t, dispatch.Done, got.State)
		require.Equal(t, 3*time.Hour, got.CommissionDueAt.Sub(got.DoneAt))
		require.True(t, got.CommissionPaidAt.IsZero())

		again, ok, err := f.st.CompleteOrder(ctx, o.ID, 0, c.rate, 3*time.Hour, nil)
		require.NoError(t, err)
		require.False(t, ok, "not ASSIGNED any more")
		require.Equal(t, got, again)
	}
	s := f.order("c", "d", "x")
	got, ok, err := f.st.CompleteOrder(ctx, s.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, dispatch.Searching, got.State)
	_, _, err = f.st.CompleteOrder(ctx, 999999, 0, 10, time.Hour, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

func TestOpenOrders(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	m1 := f.master(1, "c", "d", "x")
	s1 := f.order("c", "d", "x")
	of := f.offered(s1.ID, 1, 1)
	of, ok, err := f.st.ViewOffer(ctx, of.ID, 1, nil)
	require.NoError(t, err)
	require.True(t, ok)
	s2 := f.order("elsewhere", "d", "x")
	a1 := f.assigned(2, 100)
	d1 := f.assigned(2, 100)
	d1, ok, err = f.st.CompleteOrder(ctx, d1.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	c1 := f.order("c", "d", "y")
	_, _, ok, err = f.st.CancelOrder(ctx, c1.ID, nil)
	require.NoError(t, err)
	require.True(t, ok)
	x1 := f.assigned(3, 100)
	_, ok, err = f.st.CompleteOrder(ctx, x1.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET done_at = now() - interval '2 days' WHERE id = $1`, x1.ID)
	_, err = f.st.AutocloseOrders(ctx, 24*time.Hour, nil)
	require.NoError(t, err)

	m1, err = f.st.Master(ctx, 1) // last_offer_at moved
	require.NoError(t, err)
	m2, err := f.st.Master(ctx, 2)
	require.NoError(t, err)
	s1, err = f.st.Order(ctx, s1.ID)
	require.NoError(t, err)
	lines, err := f.st.OpenOrders(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, []dispatch.OrderLine{
		{Order: s1, Offer: &of, Master: &m1},
		{Order: s2},
		{Order: a1, Master: &m2},
		{Order: d1, Master: &m2},
	}, lines)

	lines, err = f.st.OpenOrders(ctx, 2)
	require.NoError(t, err)
	require.Len(t, lines, 2)
	require.Equal(t, s2.ID, lines[1].Order.ID)
}
