package storage_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// An order's contact and visit are stored as given and read back the same;
// what was not given is NULL.
func TestOrderDetailsRoundTrip(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	want := dispatch.NewOrder{CreatedBy: 1, City: "Kyiv", District: "Podil", Skill: "tiling", Price: 900, Description: "Bathroom",
		Contact: dispatch.Contact{Address: "Khreshchatyk 1, apt 2", Name: "Olena", Phone: "+380 67 123-45-67"},
		Visit:   dispatch.Visit{Date: time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC), From: 9*time.Hour + 30*time.Minute, To: 23*time.Hour + 59*time.Minute}}
	o, err := f.st.CreateOrder(f.ctx, want, nil)
	require.NoError(t, err)
	require.Equal(t, want.Contact, o.Contact)
	require.Equal(t, want.Visit, o.Visit)
	read, err := f.st.Order(f.ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, o, read)
	var day, from, to string
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT visit_date::text, visit_from::text, visit_to::text FROM orders WHERE id = $1`, o.ID).
		Scan(&day, &from, &to))
	require.Equal(t, []string{"2026-11-27", "09:30:00", "23:59:00"}, []string{day, from, to}, "city-local, no zone")

	dayOnly := want
	dayOnly.Contact, dayOnly.Visit = dispatch.Contact{Phone: "12345"}, dispatch.Visit{Date: want.Visit.Date}
	o, err = f.st.CreateOrder(f.ctx, dayOnly, nil)
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
	_, ok, err := f.st.MarkOrderStep(f.ctx, o.ID, 11, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.False(t, ok, "another master")
	_, ok, err = f.st.MarkOrderStep(f.ctx, 999999, 10, dispatch.StepEnRoute, tell)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.False(t, ok)
	require.Zero(t, f.count(`SELECT count(*) FROM orders WHERE en_route_at IS NOT NULL`))
	require.Zero(t, f.count(`SELECT count(*) FROM outbox`), "a refused step writes nothing")

	got, ok, err := f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, got.EnRouteAt.IsZero())
	require.Equal(t, accepted[0], seen.Assigned.ID)
	require.Equal(t, int64(10), seen.Masters[10].UserID, "the master is read for the texts")
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox WHERE kind = 'assigned'`))

	again, ok, err := f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.False(t, ok, "a second press changes nothing")
	require.Equal(t, got.EnRouteAt, again.EnRouteAt)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM outbox`))

	got, ok, err = f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepArrived, tell)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, got.ArrivedAt.IsZero())
	require.Equal(t, again.EnRouteAt, got.EnRouteAt, "arriving keeps the time they set off")
	_, ok, err = f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepArrived, tell)
	require.NoError(t, err)
	require.False(t, ok)
	_, ok, err = f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, tell)
	require.NoError(t, err)
	require.False(t, ok, "on the way after arriving: nothing")

	// Arriving without having pressed On my way marks both.
	skip := f.assigned(12, 500)
	got, ok, err = f.st.MarkOrderStep(f.ctx, skip.ID, 12, dispatch.StepArrived, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, got.ArrivedAt, got.EnRouteAt)

	// No step on an order that is not ASSIGNED.
	done, ok, err := f.st.CompleteOrder(f.ctx, skip.ID, 12, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Done, done.State)
	_, ok, err = f.st.MarkOrderStep(f.ctx, skip.ID, 12, dispatch.StepEnRoute, nil)
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.Step("lunch"), nil)
	require.Error(t, err)
}

// The master's Done is /done's statement, limited to their own order.
func TestCompleteOrderByMaster(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.assigned(10, 1000)
	f.master(11, "elsewhere", "d", "x")
	got, ok, err := f.st.CompleteOrder(f.ctx, o.ID, 11, 10, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ok, "not their order")
	require.Equal(t, dispatch.Assigned, got.State)
	var seen dispatch.Changed
	got, ok, err = f.st.CompleteOrder(f.ctx, o.ID, 10, 10, time.Hour, recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(100), got.Commission)
	require.NotNil(t, seen.Assigned, "the message to edit")
	require.Equal(t, int64(10), seen.Assigned.MasterID)
	_, ok, err = f.st.CompleteOrder(f.ctx, o.ID, 10, 10, time.Hour, nil)
	require.NoError(t, err)
	require.False(t, ok)
}

// Giving an order back is one conditional statement that names the master
// and ASSIGNED; the order is SEARCHING, waiting, in round 1, without master
// or steps, the CHECK constraint holds, and distribution never offers it to
// that master again while it offers it to others.
func TestReturnOrder(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.master(10, "Lviv", "Center", "glazier")
	f.master(11, "Lviv", "Center", "glazier")
	o := f.order("Lviv", "Center", "glazier")
	first := f.offered(o.ID, 10, 1)
	_, _, ok, err := f.st.AcceptOffer(f.ctx, first.ID, 10, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepArrived, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET round = 2, unassignable_at = now() WHERE id = $1`, o.ID) // as if it had been through round 2

	got, ok, err := f.st.ReturnOrder(f.ctx, o.ID, 11, nil)
	require.NoError(t, err)
	require.False(t, ok, "another master cannot give it back")
	require.Equal(t, dispatch.Assigned, got.State)

	var seen dispatch.Changed
	got, ok, err = f.st.ReturnOrder(f.ctx, o.ID, 10, recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Searching, got.State)
	require.Zero(t, got.MasterID)
	require.True(t, got.AssignedAt.IsZero())
	require.True(t, got.EnRouteAt.IsZero())
	require.True(t, got.ArrivedAt.IsZero())
	require.True(t, got.Unassignable.IsZero())
	require.Equal(t, 1, got.Round)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM orders WHERE id = $1 AND waiting`, o.ID))
	require.Equal(t, first.ID, seen.Assigned.ID)
	require.Equal(t, int64(10), seen.Masters[10].UserID)
	require.Equal(t, dispatch.Accepted, f.offerState(first.ID), "the accepted offer stays")

	_, ok, err = f.st.ReturnOrder(f.ctx, o.ID, 10, nil)
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
	of, err := f.st.Offer(f.ctx, id)
	require.NoError(f.t, err)
	return of.State
}

// A photo counts on the master's order done latest within the window, up
// to the limit; before and after the window, and for other masters, none.
func TestRecordPhoto(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	o := f.assigned(10, 1000)
	_, ok, err := f.st.RecordOrderPhoto(f.ctx, 10, time.Hour, 2, nil)
	require.NoError(t, err)
	require.False(t, ok, "not done yet")
	_, ok, err = f.st.CompleteOrder(f.ctx, o.ID, 10, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	older := f.assigned(10, 500)
	_, ok, err = f.st.CompleteOrder(f.ctx, older.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET done_at = now() - interval '10 minutes' WHERE id = $1`, older.ID)

	var told []int64
	tell := func(c dispatch.Changed) []domain.Message {
		told = append(told, c.Order.ID)
		return []domain.Message{{ChatID: -1, Kind: domain.KindPhoto, Ref: c.Order.ID, Text: "photo", Photo: "file"}}
	}
	for want := 1; want <= 2; want++ {
		got, ok, err := f.st.RecordOrderPhoto(f.ctx, 10, time.Hour, 2, tell)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, o.ID, got.ID, "the order done latest")
		require.Equal(t, want, got.Photos)
	}
	got, ok, err := f.st.RecordOrderPhoto(f.ctx, 10, time.Hour, 2, tell)
	require.NoError(t, err)
	require.False(t, ok, "the limit")
	require.Equal(t, o.ID, got.ID)
	require.Equal(t, []int64{o.ID, o.ID}, told)
	require.Equal(t, 2, f.count(`SELECT count(*) FROM outbox WHERE kind = 'photo' AND body->>'photo' = 'file'`))

	f.master(11, "x", "y", "z")
	got, ok, err = f.st.RecordOrderPhoto(f.ctx, 11, time.Hour, 2, tell)
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, got.ID, "no order of theirs")

	// The window, both sides: 59 minutes ago in, 61 out.
	f.exec(`UPDATE orders SET done_at = now() - interval '59 minutes', photos = 0 WHERE id = $1`, o.ID)
	f.exec(`UPDATE orders SET done_at = now() - interval '2 hours' WHERE id = $1`, older.ID)
	_, ok, err = f.st.RecordOrderPhoto(f.ctx, 10, time.Hour, 2, nil)
	require.NoError(t, err)
	require.True(t, ok)
	f.exec(`UPDATE orders SET done_at = now() - interval '61 minutes' WHERE id = $1`, o.ID)
	got, ok, err = f.st.RecordOrderPhoto(f.ctx, 10, time.Hour, 2, nil)
	require.NoError(t, err)
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
	_, _, ok, err := f.st.CancelOrder(f.ctx, o.ID, recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
	require.NotNil(t, seen.Assigned)
	require.Equal(t, dispatch.Accepted, seen.Assigned.State)
	require.Equal(t, int64(10), seen.Masters[10].UserID)

	s := f.order("c", "d", "x")
	_, _, ok, err = f.st.CancelOrder(f.ctx, s.ID, recordChange(&seen))
	require.NoError(t, err)
	require.True(t, ok)
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
	o, err := f.st.CreateOrder(f.ctx, dispatch.NewOrder{CreatedBy: 1, City: "Lviv", District: "Center", Skill: "glazier", Price: 700,
		Description: "Window", Contact: dispatch.Contact{Address: "Rynok 1", Name: "Oksana", Phone: "+380 32 000 00 00"}}, nil)
	require.NoError(t, err)
	of := f.offered(o.ID, 10, 1)
	_, _, ok, err := f.st.AcceptOffer(f.ctx, of.ID, 10, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = f.st.MarkOrderStep(f.ctx, o.ID, 10, dispatch.StepEnRoute, func(c dispatch.Changed) []domain.Message {
		return []domain.Message{{ChatID: 10, Kind: domain.KindAssigned, Ref: c.Assigned.ID, Key: "offer:1", Edit: true, Text: "🏠 Rynok 1"}}
	})
	require.NoError(t, err)
	require.True(t, ok)

	u, err := f.st.User(f.ctx, 10)
	require.NoError(t, err)
	got, err := f.st.ForgetUser(f.ctx, 10, u.CreatedAt)
	require.NoError(t, err)
	require.True(t, got.MasterKept)
	require.Equal(t, 1, got.Orders)
	require.Zero(t, f.count(`SELECT count(*) FROM outbox WHERE chat_id = 10`), "the messages that showed the customer to them")
	read, err := f.st.Order(f.ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Contact{Address: "Rynok 1", Name: "Oksana", Phone: "+380 32 000 00 00"}, read.Contact)
	require.Equal(t, dispatch.Assigned, read.State)
	done, ok, err := f.st.CompleteOrder(f.ctx, o.ID, 0, 10, time.Hour, nil)
	require.NoError(t, err)
	require.True(t, ok, "an admin can still finish it")
	require.Equal(t, dispatch.Done, done.State)
}
