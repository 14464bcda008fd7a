package storage_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/storage"
)

func TestCancelOrder(t *testing.T) {
	t.Parallel()
	f, o := dispatchOrder(t, 1)
	ctx := f.ctx
	of := f.offered(o.ID, 1, 1)
	_, err := f.st.Pool().Exec(ctx, `UPDATE offers SET chat_id = 1, message_id = 42 WHERE id = $1`, of.ID)
	require.NoError(t, err)
	got, withdrawn, ok, err := f.st.Orders().Cancel(ctx, o.ID, 0, nil)
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

	again, withdrawn, ok, err := f.st.Orders().Cancel(ctx, o.ID, 0, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Empty(t, withdrawn)
	require.Equal(t, got, again, "the order as it is")

	// ASSIGNED → CANCELLED keeps the master; DONE cannot be cancelled.
	a := f.assigned(2, 500)
	got, withdrawn, ok, err = f.st.Orders().Cancel(ctx, a.ID, 0, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Empty(t, withdrawn)
	require.Equal(t, int64(2), got.MasterID)
	d := f.assigned(3, 500)
	_, done, err := f.st.Orders().Complete(ctx, d.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, done)
	got, _, ok, err = f.st.Orders().Cancel(ctx, d.ID, 0, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, dispatch.Done, got.State)

	_, _, _, err = f.st.Orders().Cancel(ctx, 777777, 0, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// A cancel that waits for a distribution step holding the order withdraws
// the offer that step committed meanwhile.
func TestCancelOrderWithdrawsOfferMadeWhileWaiting(t *testing.T) {
	t.Parallel()
	f, o := dispatchOrder(t, 1)
	ctx := f.ctx

	// What NextOffer does, held open.
	tx := f.holding(`SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, o.ID)
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
		_, w, ok, err := f.st.Orders().Cancel(ctx, o.ID, 0, nil)
		done <- result{w, ok, err}
	}()
	require.Eventually(t, func() bool { return lockWaiters(ctx, f.st) == 1 }, 10*time.Second, 5*time.Millisecond,
		"the cancel waits for the order")
	require.NoError(t, tx.Commit(ctx))
	r := <-done
	require.NoError(t, r.err)
	require.True(t, r.ok)
	require.Equal(t, []int64{offerID}, offerIDs(r.withdrawn))
	cur, err := f.st.Orders().Offer(ctx, offerID)
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
	f.masters(1)
	accepted, withdrawn := 0, 0
	for range 30 {
		o := f.order("c", "d", "x")
		of := f.offered(o.ID, 1, 1)
		var wg sync.WaitGroup
		var acceptOK, cancelOK bool
		var acceptErr, cancelErr error
		var w []dispatch.Offer
		wg.Go(func() { _, _, acceptOK, acceptErr = f.st.Orders().AcceptOffer(ctx, of.ID, 1, nil) })
		wg.Go(func() { _, w, cancelOK, cancelErr = f.st.Orders().Cancel(ctx, o.ID, 0, nil) })
		wg.Wait()
		require.NoError(t, acceptErr)
		require.NoError(t, cancelErr)
		require.True(t, cancelOK, "SEARCHING or ASSIGNED: cancellable either way")
		cur, err := f.st.Orders().Offer(ctx, of.ID)
		require.NoError(t, err)
		ord, err := f.st.Orders().Get(ctx, o.ID)
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
		got, ok, err := f.st.Orders().Complete(ctx, o.ID, 0, c.rate, 3*time.Hour, nil)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, c.want, got.Commission, "price %d rate %v", c.price, c.rate)
		require.Equal(t, dispatch.Done, got.State)
		require.Equal(t, 3*time.Hour, got.CommissionDueAt.Sub(got.DoneAt))
		require.True(t, got.CommissionPaidAt.IsZero())

		again, ok, err := f.st.Orders().Complete(ctx, o.ID, 0, c.rate, 3*time.Hour, nil)
		require.NoError(t, err)
		require.False(t, ok, "not ASSIGNED any more")
		require.Equal(t, got, again)
	}
	s := f.order("c", "d", "x")
	got, ok, err := f.st.Orders().Complete(ctx, s.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, dispatch.Searching, got.State)
	_, _, err = f.st.Orders().Complete(ctx, 999999, 0, 10, time.Hour, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

func TestOpenOrders(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	m1 := f.master(1, "c", "d", "x")
	s1 := f.order("c", "d", "x")
	of := f.offered(s1.ID, 1, 1)
	of, ok, err := f.st.Orders().ViewOffer(ctx, of.ID, 1, nil)
	require.NoError(t, err)
	require.True(t, ok)
	s2 := f.order("elsewhere", "d", "x")
	a1 := f.assigned(2, 100)
	d1 := f.assigned(2, 100)
	d1, ok, err = f.st.Orders().Complete(ctx, d1.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	c1 := f.order("c", "d", "y")
	_, _, ok, err = f.st.Orders().Cancel(ctx, c1.ID, 0, nil)
	require.NoError(t, err)
	require.True(t, ok)
	x1 := f.assigned(3, 100)
	_, ok, err = f.st.Orders().Complete(ctx, x1.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET done_at = now() - interval '2 days' WHERE id = $1`, x1.ID)
	_, err = f.st.Orders().Autoclose(ctx, 24*time.Hour, nil)
	require.NoError(t, err)

	m1, err = f.st.Masters().Get(ctx, 1) // last_offer_at moved
	require.NoError(t, err)
	m2, err := f.st.Masters().Get(ctx, 2)
	require.NoError(t, err)
	s1, err = f.st.Orders().Get(ctx, s1.ID)
	require.NoError(t, err)
	list, err := f.st.Orders().Open(ctx, 10)
	require.NoError(t, err)
	require.Equal(t, dispatch.OrderList{Lines: []dispatch.OrderLine{
		{Order: s1, Offer: &of, Master: &m1},
		{Order: s2},
		{Order: a1, Master: &m2},
		{Order: d1, Master: &m2},
	}, Open: 3, Done: 1}, list)

	// The limit is each section's; the totals stay whole.
	list, err = f.st.Orders().Open(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{s1.ID, s2.ID, d1.ID}, lineIDs(list.Lines))
	require.Equal(t, 3, list.Open)
	require.Equal(t, 1, list.Done)
}

// Done orders older than every open one do not take the open ones' place:
// the open section comes first and each section is counted in full.
func TestOpenOrdersOpenBeforeDone(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.master(1, "c", "d", "x")
	f.exec(`INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id, assigned_at, done_at)
SELECT 1, 'c', 'd', 'x', 100, 'done', 'DONE', 1, now(), now() FROM generate_series(1, 7)`)
	f.exec(`INSERT INTO orders (created_by, city, district, skill, price, description)
SELECT 1, 'c', 'd', 'x', 100, 'open' FROM generate_series(1, 5)`)
	f.exec(`INSERT INTO orders (created_by, city, district, skill, price, description, state, cancelled_at)
VALUES (1, 'c', 'd', 'x', 100, 'gone', 'CANCELLED', now())`)

	list, err := f.st.Orders().Open(f.ctx, 3)
	require.NoError(t, err)
	require.Equal(t, 5, list.Open)
	require.Equal(t, 7, list.Done)
	require.Len(t, list.Lines, 6, "three of each")
	for i, l := range list.Lines {
		want := dispatch.Searching
		if i >= 3 {
			want = dispatch.Done
		}
		require.Equal(t, want, l.Order.State, "line %d", i)
		if i > 0 && i != 3 {
			require.Greater(t, l.Order.ID, list.Lines[i-1].Order.ID, "oldest first within a section")
		}
	}

	none, err := newDispatch(t).st.Orders().Open(f.ctx, 3)
	require.NoError(t, err)
	require.Equal(t, dispatch.OrderList{}, none)
}

func lineIDs(lines []dispatch.OrderLine) []int64 {
	ids := make([]int64, 0, len(lines))
	for _, l := range lines {
		ids = append(ids, l.Order.ID)
	}
	return ids
}

// An order's contact and visit are stored as given and read back the same;
// what was not given is NULL.
func TestOrderDetailsRoundTrip(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	want := dispatch.NewOrder{CreatedBy: 1, City: "Kyiv", District: "Podil", Skill: "tiling", Price: 900, Description: "Bathroom",
		Contact: dispatch.Contact{Address: "Khreshchatyk 1, apt 2", Name: "Olena", Phone: "+380 67 123-45-67"},
		Visit:   dispatch.Visit{Date: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), From: 9*time.Hour + 30*time.Minute, To: 23*time.Hour + 59*time.Minute}}
	o, err := f.st.Orders().Create(f.ctx, want, nil)
	require.NoError(t, err)
	require.Equal(t, want.Contact, o.Contact)
	require.Equal(t, want.Visit, o.Visit)
	read, err := f.st.Orders().Get(f.ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, o, read)
	var day, from, to string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT visit_date::text, visit_from::text, visit_to::text FROM orders WHERE id = $1`, o.ID).
		Scan(&day, &from, &to))
	require.Equal(t, []string{"2026-11-27", "09:30:00", "23:59:00"}, []string{day, from, to}, "city-local, no zone")

	dayOnly := want
	dayOnly.Contact, dayOnly.Visit = dispatch.Contact{Phone: "12345"}, dispatch.Visit{Date: want.Visit.Date}
	o, err = f.st.Orders().Create(f.ctx, dayOnly, nil)
	require.NoError(t, err)
	require.Equal(t, dayOnly.Contact, o.Contact)
	require.Equal(t, dayOnly.Visit, o.Visit)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM orders WHERE id = $1 AND address IS NULL AND customer_name IS NULL
		AND visit_from IS NULL AND visit_to IS NULL`, o.ID))
}

// Each step is one conditional statement: only the assigned master, only
// while ASSIGNED, only once. Changed carries the accepted offer whose
// message the step edits, and the messages commit with the step.
func TestMarkStep(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.assigned(10, 1000)
	f.master(11, "elsewhere", "d", "x")
	accepted := f.int64s(`SELECT id FROM offers WHERE order_id = $1 AND state = 'ACCEPTED'`, o.ID)
	require.Len(t, accepted, 1)

	var seen dispatch.Changed
	tell := func(c dispatch.Changed) []domain.Message {
		seen = c
		return []domain.Message{{ChatID: 10, Kind: domain.KindAssigned, Ref: c.Assigned.ID, Key: "offer:1", Edit: true, Text: "step"}}
	}
	_, ok, err := f.st.Orders().MarkStep(f.ctx, o.ID, 11, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.False(t, ok, "another master")
	_, ok, err = f.st.Orders().MarkStep(f.ctx, 999999, 10, dispatch.StepEnRoute, tell)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.False(t, ok)
	require.Zero(t, f.count(`SELECT count(*) FROM orders WHERE en_route_at IS NOT NULL`))
	require.Zero(t, f.count(`SELECT count(*) FROM outbox`), "a refused step writes nothing")

	got, ok, err := f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, got.EnRouteAt.IsZero())
	require.Equal(t, accepted[0], seen.Assigned.ID)
	require.Equal(t, int64(10), seen.Masters[10].UserID, "the master is read for the texts")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox WHERE kind = 'assigned'`))

	again, ok, err := f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.False(t, ok, "a second press changes nothing")
	require.Equal(t, got.EnRouteAt, again.EnRouteAt)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox`))

	got, ok, err = f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepArrived, tell)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, got.ArrivedAt.IsZero())
	require.Equal(t, again.EnRouteAt, got.EnRouteAt, "arriving keeps the time they set off")
	_, ok, err = f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepArrived, tell)
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.False(t, ok, "on the way after arriving: nothing")

	// Arriving without having pressed On my way marks both.
	skip := f.assigned(12, 500)
	got, ok, err = f.st.Orders().MarkStep(f.ctx, skip.ID, 12, dispatch.StepArrived, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, got.ArrivedAt, got.EnRouteAt)

	// No step on an order that is not ASSIGNED.
	done, ok, err := f.st.Orders().Complete(f.ctx, skip.ID, 12, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Done, done.State)
	_, ok, err = f.st.Orders().MarkStep(f.ctx, skip.ID, 12, dispatch.StepEnRoute, nil)
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.Step("lunch"), nil)
	require.Error(t, err)
}

// The master's Done is /done's statement, limited to their own order.
func TestCompleteOrderByMaster(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.assigned(10, 1000)
	f.master(11, "elsewhere", "d", "x")
	got, ok, err := f.st.Orders().Complete(f.ctx, o.ID, 11, 10, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ok, "not their order")
	require.Equal(t, dispatch.Assigned, got.State)
	var seen dispatch.Changed
	got, ok, err = f.st.Orders().Complete(f.ctx, o.ID, 10, 10, time.Hour, recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(100), got.Commission)
	require.NotNil(t, seen.Assigned, "the message to edit")
	require.Equal(t, int64(10), seen.Assigned.MasterID)
	_, ok, err = f.st.Orders().Complete(f.ctx, o.ID, 10, 10, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ok)
}

// Giving an order back is one conditional statement that names the master
// and ASSIGNED; the order is SEARCHING, owed a step, in round 1, without master
// or steps, the CHECK constraint holds, and distribution never offers it to
// that master again while it offers it to others.
func TestReturnOrder(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.master(10, "Lviv", "Center", "glazier")
	f.master(11, "Lviv", "Center", "glazier")
	o := f.order("Lviv", "Center", "glazier")
	first := f.offered(o.ID, 10, 1)
	_, _, ok, err := f.st.Orders().AcceptOffer(f.ctx, first.ID, 10, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepArrived, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET round = 2, unassignable_at = now() WHERE id = $1`, o.ID) // as if it had been through round 2

	got, ok, err := f.st.Orders().Return(f.ctx, o.ID, 11, nil)
	require.NoError(t, err)
	require.False(t, ok, "another master cannot give it back")
	require.Equal(t, dispatch.Assigned, got.State)

	var seen dispatch.Changed
	got, ok, err = f.st.Orders().Return(f.ctx, o.ID, 10, recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Searching, got.State)
	require.Zero(t, got.MasterID)
	require.True(t, got.AssignedAt.IsZero())
	require.True(t, got.EnRouteAt.IsZero())
	require.True(t, got.ArrivedAt.IsZero())
	require.True(t, got.Unassignable.IsZero())
	require.Equal(t, 1, got.Round)
	f.exec(`UPDATE offers SET responded_at = responded_at - interval '1 minute' WHERE order_id = $1`, o.ID) // out of the recheck's window
	owed, err := f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Contains(t, owed, o.ID, "the order given back is owed a step though it had been reported unassignable")
	require.Equal(t, first.ID, seen.Assigned.ID)
	require.Equal(t, int64(10), seen.Masters[10].UserID)
	require.Equal(t, dispatch.Accepted, f.offerState(first.ID), "the accepted offer stays")

	_, ok, err = f.st.Orders().Return(f.ctx, o.ID, 10, nil)
	require.NoError(t, err)
	require.False(t, ok, "twice: nothing")

	// Round 1 already offered it to 10, round 2 must not either: 11 gets
	// it, and once 11 declines (final) nobody is left.
	second := f.offered(o.ID, 11, 1)
	f.decline(second)
	_, got, out := f.next(o.ID)
	require.Equal(t, dispatch.Unassignable, out, "10, who gave it back, is no candidate in round 2")
	require.Equal(t, 2, got.Round)
	require.Equal(t, []int64{10, 11}, f.int64s(`SELECT master_id FROM offers WHERE order_id = $1 ORDER BY id`, o.ID))
}

func (f *dfx) offerState(id int64) dispatch.OfferState {
	f.t.Helper()
	of, err := f.st.Orders().Offer(f.ctx, id)
	require.NoError(f.t, err)
	return of.State
}

// A photo counts on the master's order done latest within the window, up
// to the limit; before and after the window, and for other masters, none.
func TestRecordPhoto(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	// photo records master's message msg as a photo: within an hour of
	// the order done, at most 2 an order.
	photo := func(master int64, msg int, tell domain.Render[dispatch.Changed]) (dispatch.Order, bool) {
		t.Helper()
		got, ok, err := f.st.Orders().RecordPhoto(f.ctx, master, msg, time.Hour, 2, tell)
		require.NoError(t, err)
		return got, ok
	}
	o := f.assigned(10, 1000)
	_, ok := photo(10, 0, nil)
	require.False(t, ok, "not done yet")
	_, ok, err := f.st.Orders().Complete(f.ctx, o.ID, 10, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	older := f.assigned(10, 500)
	_, ok, err = f.st.Orders().Complete(f.ctx, older.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET done_at = now() - interval '10 minutes' WHERE id = $1`, older.ID)

	var told []int64
	tell := func(c dispatch.Changed) []domain.Message {
		told = append(told, c.Order.ID)
		return []domain.Message{{ChatID: -1, Kind: domain.KindPhoto, Ref: c.Order.ID, Text: "photo", Photo: "file"}}
	}
	for want := 1; want <= 2; want++ {
		got, ok := photo(10, 70+want, tell)
		require.True(t, ok)
		require.Equal(t, o.ID, got.ID, "the order done latest")
		require.Equal(t, want, got.Photos)
		// The same message again (handled again after a crash): recorded
		// already, neither counted nor forwarded twice.
		again, ok := photo(10, 70+want, tell)
		require.True(t, ok)
		require.Equal(t, want, again.Photos)
	}
	got, ok := photo(10, 80, tell)
	require.False(t, ok, "the limit")
	require.Equal(t, o.ID, got.ID)
	require.Equal(t, []int64{o.ID, o.ID}, told)
	require.Equal(t, 2, f.count(`SELECT count(*) FROM outbox WHERE kind = 'photo' AND body->>'photo' = 'file'`))

	f.master(11, "x", "y", "z")
	got, ok = photo(11, 0, tell)
	require.False(t, ok)
	require.Zero(t, got.ID, "no order of theirs")

	// The window, both sides: 59 minutes ago in, 61 out.
	f.exec(`UPDATE orders SET done_at = now() - interval '59 minutes', photos = 0 WHERE id = $1`, o.ID)
	f.exec(`UPDATE orders SET done_at = now() - interval '2 hours' WHERE id = $1`, older.ID)
	_, ok = photo(10, 0, nil)
	require.True(t, ok)
	f.exec(`UPDATE orders SET done_at = now() - interval '61 minutes' WHERE id = $1`, o.ID)
	got, ok = photo(10, 0, nil)
	require.False(t, ok)
	require.Zero(t, got.ID)
}

// Cancelling an assigned order names the assigned master's accepted offer,
// whose message loses the address.
func TestCancelAssignedNamesTheAcceptedOffer(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.assigned(10, 1000)
	var seen dispatch.Changed
	// cancel cancels the order as an admin, the change it tells in seen.
	cancel := func(orderID int64) {
		t.Helper()
		_, _, ok, err := f.st.Orders().Cancel(f.ctx, orderID, 0, recordChange(&seen))
		require.NoError(t, err)
		require.True(t, ok)
	}
	cancel(o.ID)
	require.NotNil(t, seen.Assigned)
	require.Equal(t, dispatch.Accepted, seen.Assigned.State)
	require.Equal(t, int64(10), seen.Masters[10].UserID)

	s := f.order("c", "d", "x")
	cancel(s.ID)
	require.Nil(t, seen.Assigned)
}

// /forget of a master assigned an order with a customer's data: the
// customer's address, name and phone are not the master's and stay with
// the order until retention; the bot's messages to the master that showed
// them go with their chat; the order can still be finished or cancelled.
func TestForgetMasterWithAnAssignedOrder(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.master(10, "Lviv", "Center", "glazier")
	o, err := f.st.Orders().Create(f.ctx, dispatch.NewOrder{CreatedBy: 1, City: "Lviv", District: "Center", Skill: "glazier", Price: 700,
		Description: "Window", Contact: dispatch.Contact{Address: "Rynok 1", Name: "Oksana", Phone: "+380 32 000 00 00"}}, nil)
	require.NoError(t, err)
	of := f.offered(o.ID, 10, 1)
	_, _, ok, err := f.st.Orders().AcceptOffer(f.ctx, of.ID, 10, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.Orders().MarkStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, func(c dispatch.Changed) []domain.Message {
		return []domain.Message{{ChatID: 10, Kind: domain.KindAssigned, Ref: c.Assigned.ID, Key: "offer:1", Edit: true, Text: "🏠 Rynok 1"}}
	})
	require.NoError(t, err)
	require.True(t, ok)

	u, err := f.st.Users().Get(f.ctx, 10)
	require.NoError(t, err)
	got, err := f.st.Users().Forget(f.ctx, 10, u.CreatedAt)
	require.NoError(t, err)
	require.True(t, got.MasterKept)
	require.Equal(t, 1, got.Orders)
	require.Zero(t, f.count(`SELECT count(*) FROM outbox WHERE chat_id = 10`), "the messages that showed the customer to them")
	read, err := f.st.Orders().Get(f.ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Contact{Address: "Rynok 1", Name: "Oksana", Phone: "+380 32 000 00 00"}, read.Contact)
	require.Equal(t, dispatch.Assigned, read.State)
	done, ok, err := f.st.Orders().Complete(f.ctx, o.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok, "an admin can still finish it")
	require.Equal(t, dispatch.Done, done.State)
}

// An /order message run twice (its replica died before the update's
// done-mark) creates one order, told once; another message creates
// another, and an order without a source message is never keyed.
func TestCreateOrderOncePerSourceMessage(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	told := 0
	tell := func(c dispatch.Changed) []domain.Message {
		told++
		return []domain.Message{{ChatID: 1, Kind: domain.KindLiveLog, Text: "created"}}
	}
	src := domain.MessageRef{Chat: 1, ID: 55}
	n := dispatch.NewOrder{CreatedBy: 1, City: "Lviv", District: "Center", Skill: "glazier", Price: 700, Description: "Window", Source: src}
	first, err := f.st.Orders().Create(f.ctx, n, tell)
	require.NoError(t, err)
	again, err := f.st.Orders().Create(f.ctx, n, tell)
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, 1, told, "the second run renders nothing")

	n.Source.ID = 56
	other, err := f.st.Orders().Create(f.ctx, n, tell)
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)
	n.Source = domain.MessageRef{}
	for range 2 {
		_, err = f.st.Orders().Create(f.ctx, n, nil)
		require.NoError(t, err)
	}
	var orders, logged int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT (SELECT count(*) FROM orders),
       (SELECT count(*) FROM outbox WHERE body->>'text' = 'created')`).Scan(&orders, &logged))
	require.Equal(t, 4, orders)
	require.Equal(t, 2, logged)
}

// A reply can come before its message's delivery is recorded (the hook
// runs after Telegram answered the send): while a send that records an
// order's message is out to the chat under a live claim, RelayTarget says
// to try again, a passing error; once recorded, it finds the order; with
// nothing out, a message of nobody's order is nothing.
func TestRelayTargetWaitsForADeliveryInFlight(t *testing.T) {
	t.Parallel()
	f, o := dispatchOrder(t, 1)
	ctx, out, orders := f.ctx, f.st.Outbox(), f.st.Orders()
	const chat, replied = 900, 77
	nothing := func(chat, message int64, why string) {
		t.Helper()
		id, ok, err := orders.RelayTarget(ctx, chat, message)
		require.NoError(t, err, why)
		require.False(t, ok, why)
		require.Zero(t, id, why)
	}
	unrecorded := func(chat, message int64, why string) {
		t.Helper()
		_, ok, err := orders.RelayTarget(ctx, chat, message)
		require.ErrorIs(t, err, domain.ErrNotYetRecorded, why)
		require.True(t, storage.Passing(err), "the inbox runs the update again")
		require.False(t, ok, why)
	}
	found := func(chat, message int64, why string) {
		t.Helper()
		id, ok, err := orders.RelayTarget(ctx, chat, message)
		require.NoError(t, err, why)
		require.True(t, ok, why)
		require.Equal(t, o.ID, id, why)
	}
	// claim queues m and claims it (and whatever else is due).
	claim := func(m domain.Message) domain.Queued {
		t.Helper()
		require.NoError(t, out.Enqueue(ctx, m))
		rows, err := out.Claim(ctx, "", 10, time.Minute)
		require.NoError(t, err)
		for _, r := range rows {
			if r.ChatID == m.ChatID {
				return r
			}
		}
		t.Fatalf("%q not claimed", m.Text)
		return domain.Queued{}
	}

	nothing(chat, replied, "nothing recorded, nothing out")
	require.NoError(t, out.Enqueue(ctx, domain.Message{ChatID: chat - 1, Kind: domain.KindRelay, Ref: o.ID, Text: "✉️ queued"}))
	nothing(chat-1, replied, "a row not claimed is not sent: nobody can have replied to it")
	relay := claim(domain.Message{ChatID: chat, Kind: domain.KindRelay, Ref: o.ID, Text: "✉️ a question"})
	unrecorded(chat, replied, "sent, perhaps, and not recorded")
	nothing(chat+1, replied, "another chat's delivery is not this one's")
	ok, err := out.Delivered(ctx, relay, replied)
	require.NoError(t, err)
	require.True(t, ok)
	found(chat, replied, "recorded by the relay's delivery hook")
	nothing(chat, replied+1, "nothing out: another message is about no order")

	// The customer's next note on its way: what is recorded is found
	// without waiting, and any other message waits for it.
	note := claim(domain.Message{ChatID: chat, Kind: domain.KindCustomer, Ref: o.ID, Text: "📋 a note"})
	found(chat, replied, "recorded already")
	unrecorded(chat, replied+1, "it may be the note")
	// Its sender died and the claim lapsed: no record is coming from it.
	f.exec(`UPDATE outbox SET claimed_until = now() - interval '1 second' WHERE id = $1`, note.ID)
	nothing(chat, replied+1, "a lapsed claim")

	// Out but recording nothing: an edit (its message was recorded when
	// sent) and a message of another kind.
	claim(domain.Message{ChatID: chat + 10, Kind: domain.KindCustomer, Ref: o.ID, Key: "customer:1", Edit: true, Text: "📋 edited"})
	nothing(chat+10, replied, "an edit is no new message")
	claim(domain.Message{ChatID: chat + 20, Kind: domain.KindReply, Text: "a reply"})
	nothing(chat+20, replied, "a reply to a command is about no order")
}
