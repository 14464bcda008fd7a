package storage_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/internal/testkit"
)

func TestCommissionBlockSettleAutoclose(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	done := func(master, price int64) dispatch.Order {
		t.Helper()
		o := f.assigned(master, price)
		o, ok, err := f.st.Orders().Complete(ctx, o.ID, 0, 10, 3*time.Hour, nil)
		require.NoError(t, err)
		require.True(t, ok)
		return o
	}
	overdue := func(id int64) {
		f.exec(`UPDATE orders SET commission_due_at = now() - interval '1 minute' WHERE id = $1`, id)
	}
	// A owes a1 (overdue, then CLOSED) and a2 (not yet due).
	a1, a2 := done(601, 999), done(601, 2000)
	overdue(a1.ID)
	f.exec(`UPDATE orders SET done_at = now() - interval '25 hours' WHERE id = $1`, a1.ID)
	// B's overdue order is paid; C is blocked already.
	b1 := done(602, 500)
	overdue(b1.ID)
	f.exec(`UPDATE orders SET commission_paid_at = now() WHERE id = $1`, b1.ID)
	c1 := done(603, 500)
	overdue(c1.ID)
	f.exec(`UPDATE masters SET blocked_at = now() - interval '1 day' WHERE user_id = 603`)
	cBefore := f.rows("masters", "user_id")[603]

	// Autoclose: only a1 is old enough; CLOSED still owes.
	closed, err := f.st.Orders().Autoclose(ctx, 24*time.Hour, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{a1.ID}, closed)
	cur, err := f.st.Orders().Get(ctx, a1.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Closed, cur.State)
	require.False(t, cur.ClosedAt.IsZero())
	closed, err = f.st.Orders().Autoclose(ctx, 24*time.Hour, nil)
	require.NoError(t, err)
	require.Empty(t, closed)

	// Two replicas at once: A is blocked once.
	var wg sync.WaitGroup
	debts := make([][]dispatch.Debt, 2)
	errs := make([]error, 2)
	for i := range debts {
		wg.Go(func() { debts[i], _, errs[i] = f.st.Masters().BlockOverdue(ctx, nil) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	all := append(debts[0], debts[1]...)
	require.Equal(t, []dispatch.Debt{{MasterID: 601, Amount: 100 + 200, Overdue: 100, Orders: []int64{a1.ID, a2.ID}}}, all)
	again, withdrawn, err := f.st.Masters().BlockOverdue(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, again)
	require.Empty(t, withdrawn)
	blocked := f.int64s(`SELECT user_id FROM masters WHERE blocked_at IS NOT NULL ORDER BY 1`)
	require.Equal(t, []int64{601, 603}, blocked)
	require.Equal(t, cBefore, f.rows("masters", "user_id")[603], "C untouched")

	// A blocked master gets no offers.
	o := f.order("city601", "d", "x")
	_, _, out := f.next(o.ID)
	require.Equal(t, dispatch.Unassignable, out)

	stats, err := f.st.Masters().Stats(ctx, 601)
	require.NoError(t, err)
	require.Equal(t, int64(300), stats.Owed)
	require.Equal(t, int64(100), stats.Overdue)
	a1now, err := f.st.Orders().Get(ctx, a1.ID)
	require.NoError(t, err)
	require.Equal(t, a1now.CommissionDueAt, stats.NextDue)
	require.Equal(t, map[dispatch.OfferState]int{dispatch.Sent: 0, dispatch.Viewed: 0, dispatch.Accepted: 2,
		dispatch.Declined: 0, dispatch.Expired: 0, dispatch.Withdrawn: 0}, stats.Offers)
	require.Equal(t, map[dispatch.OrderState]int{dispatch.Searching: 0, dispatch.Assigned: 0, dispatch.Done: 1,
		dispatch.Closed: 1, dispatch.Cancelled: 0}, stats.Orders)

	d, wasBlocked, err := f.st.Masters().SettleCommission(ctx, 601, domain.MessageRef{}, nil)
	require.NoError(t, err)
	require.True(t, wasBlocked)
	require.Equal(t, dispatch.Debt{MasterID: 601, Amount: 300, Overdue: 100, Orders: []int64{a1.ID, a2.ID}}, d)
	m, err := f.st.Masters().Get(ctx, 601)
	require.NoError(t, err)
	require.True(t, m.BlockedAt.IsZero())
	var unpaid int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT count(*) FROM orders WHERE master_id = 601 AND commission_paid_at IS NULL`).Scan(&unpaid))
	require.Zero(t, unpaid)
	stats, err = f.st.Masters().Stats(ctx, 601)
	require.NoError(t, err)
	require.Zero(t, stats.Owed)
	require.Zero(t, stats.Overdue)
	require.True(t, stats.NextDue.IsZero())

	d, wasBlocked, err = f.st.Masters().SettleCommission(ctx, 601, domain.MessageRef{}, nil)
	require.NoError(t, err)
	require.False(t, wasBlocked)
	require.Equal(t, dispatch.Debt{MasterID: 601}, d, "nothing left")
	d, wasBlocked, err = f.st.Masters().SettleCommission(ctx, 602, domain.MessageRef{}, nil)
	require.NoError(t, err)
	require.False(t, wasBlocked)
	require.Equal(t, dispatch.Debt{MasterID: 602}, d, "B's order was paid")

	f.user(604)
	_, _, err = f.st.Masters().SettleCommission(ctx, 604, domain.MessageRef{}, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = f.st.Masters().SettleCommission(ctx, 605, domain.MessageRef{}, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)

	// C's /paid, then an order C finishes, then that /paid handled again:
	// it finds what it settled; the new order's commission stays owed, and
	// the message names no other master's settlement.
	paid := domain.MessageRef{Chat: -100, ID: 7}
	d, wasBlocked, err = f.st.Masters().SettleCommission(ctx, 603, paid, nil)
	require.NoError(t, err)
	require.True(t, wasBlocked)
	first := d
	require.Equal(t, []int64{c1.ID}, first.Orders)
	c2 := done(603, 700)
	d, wasBlocked, err = f.st.Masters().SettleCommission(ctx, 603, paid, nil)
	require.NoError(t, err)
	require.False(t, wasBlocked)
	require.Equal(t, first, d)
	d, _, err = f.st.Masters().SettleCommission(ctx, 601, paid, nil)
	require.NoError(t, err)
	require.Equal(t, dispatch.Debt{MasterID: 601}, d)
	require.Equal(t, 1, f.count(`SELECT count(*) FROM orders WHERE id = $1 AND commission_paid_at IS NULL`, c2.ID), "c2 still owed")

	// A unblocked is offered again.
	f.offered(o.ID, 601, 1)
}

// The block withdraws every open offer of a blocked master, the masters it
// blocks now and those blocked before alike, in its transaction and told
// there; nothing else changes, and a second run finds nothing to do.
func TestBlockOverdueWithdrawsTheBlockedMastersOffers(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	done := func(master int64) {
		t.Helper()
		o := f.assigned(master, 1000)
		_, ok, err := f.st.Orders().Complete(ctx, o.ID, 0, 10, 3*time.Hour, nil)
		require.NoError(t, err)
		require.True(t, ok)
	}
	open := func(master int64) dispatch.Offer {
		t.Helper()
		o := f.order(fmt.Sprintf("city%d", master), "d", "x")
		return f.offered(o.ID, master, 1)
	}
	// 701 falls overdue now; 703 was blocked before and still holds an
	// offer; 704 owes, not yet due; 702 owes nothing.
	for _, m := range []int64{701, 702, 703, 704} {
		f.master(m, fmt.Sprintf("city%d", m), "d", "x")
	}
	for _, m := range []int64{701, 703, 704} {
		done(m)
	}
	f.exec(`UPDATE orders SET commission_due_at = now() - interval '1 minute' WHERE master_id IN (701, 703)`)
	of701, of702, of703, of704 := open(701), open(702), open(703), open(704)
	f.exec(`UPDATE masters SET blocked_at = now() - interval '1 day' WHERE user_id = 703`)
	before := f.rows("offers", "id")

	var seen dispatch.Changed
	debts, withdrawn, err := f.st.Masters().BlockOverdue(ctx, recordChange(&seen))
	require.NoError(t, err)
	require.Equal(t, []int64{701}, testkit.Map(debts, func(d dispatch.Debt) int64 { return d.MasterID }))
	require.Equal(t, []int64{of701.ID, of703.ID}, offerIDs(withdrawn))
	for _, w := range withdrawn {
		require.Equal(t, dispatch.Withdrawn, w.State)
		require.False(t, w.RespondedAt.IsZero())
	}
	require.Equal(t, debts, seen.Debts, "told in its transaction")
	require.Equal(t, []int64{of701.ID, of703.ID}, offerIDs(seen.Offers))
	require.Contains(t, seen.Masters, int64(703))
	require.False(t, seen.Masters[701].BlockedAt.IsZero(), "the masters as the block left them")
	require.Contains(t, seen.Orders, of703.OrderID)

	after := f.rows("offers", "id")
	for _, id := range []int64{of702.ID, of704.ID} {
		require.Equal(t, before[id], after[id], "offer %d untouched", id)
	}
	delete(before, of701.ID)
	delete(before, of703.ID)
	for id := range before {
		require.Equal(t, before[id], after[id], "offer %d untouched", id)
	}

	seen = dispatch.Changed{}
	debts, withdrawn, err = f.st.Masters().BlockOverdue(ctx, recordChange(&seen))
	require.NoError(t, err)
	require.Empty(t, debts)
	require.Empty(t, withdrawn)
	require.Zero(t, seen.Offers, "nothing told")
	require.Equal(t, after, f.rows("offers", "id"))
}

func TestMasters(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx

	_, _, err := f.st.Masters().Save(ctx, 1, "c", "d", []string{"x"})
	require.ErrorIs(t, err, domain.ErrNotFound, "no such user")
	_, err = f.st.Masters().Get(ctx, 1)
	require.ErrorIs(t, err, domain.ErrNotFound)

	_, err = f.st.Users().Upsert(ctx, domain.User{ID: 1, Username: "Olena_K", FirstName: "Olena", TelegramLanguage: "uk"})
	require.NoError(t, err)
	m, created, err := f.st.Masters().Save(ctx, 1, "Kyiv", "Podil", []string{"plumbing", "tiles"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, int64(1), m.UserID)
	require.Equal(t, "Olena_K", m.Username)
	require.Equal(t, "Olena", m.Name)
	require.Equal(t, "uk", m.Lang, "Telegram's language")
	require.Equal(t, []string{"plumbing", "tiles"}, m.Skills)
	require.True(t, m.Active)
	require.True(t, m.BlockedAt.IsZero())
	require.True(t, m.LastOfferAt.IsZero())
	require.False(t, m.CreatedAt.IsZero())

	_, err = f.st.Masters().SetActive(ctx, 1, false)
	require.NoError(t, err)
	require.NoError(t, f.st.Users().SetLanguage(ctx, 1, "ru"))
	m2, created, err := f.st.Masters().Save(ctx, 1, "Lviv", "Center", []string{"electric"})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, "Lviv", m2.City)
	require.Equal(t, "Center", m2.District)
	require.Equal(t, []string{"electric"}, m2.Skills)
	require.False(t, m2.Active, "a profile update keeps the pause")
	require.Equal(t, "ru", m2.Lang, "the /lang choice wins")
	require.Equal(t, m.CreatedAt, m2.CreatedAt)

	got, err := f.st.Masters().Get(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, m2, got)
	for _, name := range []string{"olena_k", "OLENA_K", "@Olena_K"} {
		got, err = f.st.Masters().ByUsername(ctx, name)
		require.NoError(t, err, name)
		require.Equal(t, m2, got)
	}
	_, err = f.st.Masters().ByUsername(ctx, "nobody")
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = f.st.Users().Upsert(ctx, domain.User{ID: 2})
	require.NoError(t, err)
	_, _, err = f.st.Masters().Save(ctx, 2, "c", "d", []string{"x"})
	require.NoError(t, err)
	_, err = f.st.Masters().ByUsername(ctx, "")
	require.ErrorIs(t, err, domain.ErrNotFound, "an empty username matches no one")
	m3, err := f.st.Masters().Get(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, "en", m3.Lang, "no language: English")

	f.user(3)
	_, err = f.st.Masters().ByUsername(ctx, "User3")
	require.ErrorIs(t, err, domain.ErrNotFound, "a user who is not a master")

	_, _, err = f.st.Masters().Save(ctx, 2, "", "d", []string{"x"})
	require.Error(t, err, "the schema refuses an empty city")
}
