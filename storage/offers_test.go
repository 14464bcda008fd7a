package storage_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/storage"
)

// The watchdog, as River's job rescuer is tested: one offer in every state
// due a minute ago and one due in a minute. Exactly the open ones due
// expire, nothing else changes, and a second sweep finds nothing.
func TestExpireOffersTouchesExactlyTheOpenDueOffers(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx

	type fixture struct {
		state dispatch.OfferState
		due   bool
		offer dispatch.Offer
	}
	var all []*fixture
	for i, state := range dispatch.OfferStates {
		for j, due := range []bool{true, false} {
			id := int64(100 + 2*i + j)
			city := fmt.Sprintf("c%d", id)
			f.master(id, city, "d", "x")
			o := f.order(city, "d", "x")
			all = append(all, &fixture{state: state, due: due, offer: f.offered(o.ID, id, 1)})
		}
	}
	var toExpire []int64
	for _, fx := range all {
		var ok bool
		var err error
		switch fx.state {
		case dispatch.Sent:
			ok = true
		case dispatch.Viewed:
			_, ok, err = f.st.Orders().ViewOffer(ctx, fx.offer.ID, fx.offer.MasterID, nil)
		case dispatch.Accepted:
			_, _, ok, err = f.st.Orders().AcceptOffer(ctx, fx.offer.ID, fx.offer.MasterID, nil)
		case dispatch.Declined:
			_, ok, err = f.st.Orders().DeclineOffer(ctx, fx.offer.ID, fx.offer.MasterID, nil)
		case dispatch.Withdrawn:
			_, _, ok, err = f.st.Orders().Cancel(ctx, fx.offer.OrderID, 0, nil)
		case dispatch.Expired:
			ok = true
			toExpire = append(toExpire, fx.offer.ID)
		}
		require.NoError(t, err)
		require.True(t, ok, fx.state)
	}
	f.exec(`UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = ANY ($1)`, toExpire)
	expired, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Equal(t, toExpire, offerIDs(expired))

	var wantIDs []int64
	for _, fx := range all {
		shift := "+"
		if fx.due {
			shift = "-"
		}
		require.EqualValues(t, 1, f.exec(`UPDATE offers SET expires_at = now() `+shift+` interval '1 minute' WHERE id = $1`, fx.offer.ID))
		cur, err := f.st.Orders().Offer(ctx, fx.offer.ID)
		require.NoError(t, err)
		require.Equal(t, fx.state, cur.State, "fixture in its state")
		fx.offer = cur
		if fx.due && fx.state.Open() {
			wantIDs = append(wantIDs, cur.ID)
		}
	}
	require.Len(t, wantIDs, 2)
	offersBefore, ordersBefore, mastersBefore := f.rows("offers", "id"), f.rows("orders", "id"), f.rows("masters", "user_id")
	start := f.dbNow()

	got, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Equal(t, wantIDs, offerIDs(got))

	offersAfter := f.rows("offers", "id")
	require.Len(t, offersAfter, len(offersBefore))
	for _, fx := range all {
		id := fx.offer.ID
		if !slices.Contains(wantIDs, id) {
			require.Equal(t, offersBefore[id], offersAfter[id], "offer %d (%s) unchanged", id, fx.state)
			continue
		}
		// The returned offer is the row as it was, now EXPIRED and answered.
		var ret dispatch.Offer
		for _, g := range got {
			if g.ID == id {
				ret = g
			}
		}
		require.Equal(t, dispatch.Expired, ret.State)
		require.False(t, ret.RespondedAt.Before(start), "responded_at is the sweep's now()")
		want := fx.offer
		want.State, want.RespondedAt = dispatch.Expired, ret.RespondedAt
		require.Equal(t, want, ret)
		cur, err := f.st.Orders().Offer(ctx, id)
		require.NoError(t, err)
		require.Equal(t, ret, cur, "the stored row is what was returned")
	}
	// The expired offers' orders are owed a distribution step by what
	// their offers are now (dispatch.StepFacts.Owed): no row of orders is
	// written.
	require.Equal(t, ordersBefore, f.rows("orders", "id"), "orders untouched")
	require.Equal(t, mastersBefore, f.rows("masters", "user_id"), "masters untouched")

	again, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Empty(t, again)
	require.Equal(t, offersAfter, f.rows("offers", "id"))
}

func TestAcceptConcurrentPressesAssignOnce(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.master(7, "Kyiv", "Podil", "plumbing")
	o := f.order("Kyiv", "Podil", "plumbing")
	of := f.offered(o.ID, 7, 1)

	const presses = 50
	type result struct {
		offer dispatch.Offer
		order dispatch.Order
		ok    bool
		err   error
	}
	results := raceAll(presses, func(int) result {
		offer, order, ok, err := f.st.Orders().AcceptOffer(f.ctx, of.ID, 7, nil)
		return result{offer, order, ok, err}
	})
	wins := 0
	for _, r := range results {
		require.NoError(t, r.err)
		require.Equal(t, dispatch.Accepted, r.offer.State, "winner and losers see the ACCEPTED offer")
		require.Equal(t, dispatch.Assigned, r.order.State)
		require.Equal(t, int64(7), r.order.MasterID)
		if r.ok {
			wins++
			require.False(t, r.offer.RespondedAt.IsZero())
			require.False(t, r.order.AssignedAt.IsZero())
		}
	}
	require.Equal(t, 1, wins)

	var accepted int
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT count(*) FROM offers WHERE state = 'ACCEPTED'`).Scan(&accepted))
	require.Equal(t, 1, accepted)
	var state string
	var master int64
	require.NoError(t, f.st.Pool().QueryRow(f.ctx, `SELECT state, master_id FROM orders WHERE id = $1`, o.ID).Scan(&state, &master))
	require.Equal(t, "ASSIGNED", state)
	require.Equal(t, int64(7), master)
}

func TestAcceptRefusals(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.master(1, "a", "d", "x")
	f.master(2, "b", "d", "x") // never a candidate for city a

	refused := func(offerID, masterID int64, why string) {
		t.Helper()
		before := f.rows("offers", "id")
		ordersBefore := f.rows("orders", "id")
		_, _, ok, err := f.st.Orders().AcceptOffer(ctx, offerID, masterID, nil)
		require.NoError(t, err)
		require.False(t, ok, why)
		require.Equal(t, before, f.rows("offers", "id"), "%s: offers unchanged", why)
		require.Equal(t, ordersBefore, f.rows("orders", "id"), "%s: orders unchanged", why)
	}

	// 1 ms past expires_at, before the watchdog ran.
	o1 := f.order("a", "d", "x")
	late := f.offered(o1.ID, 1, 1)
	f.exec(`UPDATE offers SET expires_at = now() - interval '1 millisecond' WHERE id = $1`, late.ID)
	refused(late.ID, 1, "late")
	cur, err := f.st.Orders().Offer(ctx, late.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Sent, cur.State)
	expired, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Equal(t, []int64{late.ID}, offerIDs(expired))
	refused(late.ID, 1, "expired")

	// Another master's press, then the master's, then a repeated one.
	o2 := f.order("a", "d", "x")
	of := f.offered(o2.ID, 1, 1)
	refused(of.ID, 2, "foreign")
	got, o, ok, err := f.st.Orders().AcceptOffer(ctx, of.ID, 1, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, dispatch.Accepted, got.State)
	require.Equal(t, dispatch.Assigned, o.State)
	require.Equal(t, int64(1), o.MasterID)
	refused(of.ID, 1, "repeated")

	// A withdrawn offer.
	o3 := f.order("a", "d", "x")
	w := f.offered(o3.ID, 1, 1)
	_, withdrawn, ok, err := f.st.Orders().Cancel(ctx, o3.ID, 0, nil)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []int64{w.ID}, offerIDs(withdrawn))
	refused(w.ID, 1, "withdrawn")

	// A blocked master's press on an offer still open: the block holds
	// whether or not its withdrawal ran.
	o4 := f.order("a", "d", "x")
	b := f.offered(o4.ID, 1, 1)
	f.exec(`UPDATE masters SET blocked_at = now() WHERE user_id = 1`)
	refused(b.ID, 1, "blocked")
	cur, err = f.st.Orders().Offer(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Sent, cur.State)
	f.exec(`UPDATE masters SET blocked_at = NULL WHERE user_id = 1`)
	_, o, ok, err = f.st.Orders().AcceptOffer(ctx, b.ID, 1, nil)
	require.NoError(t, err)
	require.True(t, ok, "unblocked, the same press takes it")
	require.Equal(t, int64(1), o.MasterID)

	// No such offer.
	got, o, ok, err = f.st.Orders().AcceptOffer(ctx, 999999, 1, nil)
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, got)
	require.Zero(t, o)
}

func TestViewAndDecline(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.master(1, "a", "d", "x")
	f.master(2, "b", "d", "x")
	o := f.order("a", "d", "x")
	of := f.offered(o.ID, 1, 1)
	// view and decline are master's presses on offer offerID.
	view := func(offerID, master int64) (dispatch.Offer, bool) {
		t.Helper()
		got, ok, err := f.st.Orders().ViewOffer(ctx, offerID, master, nil)
		require.NoError(t, err)
		return got, ok
	}
	decline := func(offerID, master int64) (dispatch.Offer, bool) {
		t.Helper()
		got, ok, err := f.st.Orders().DeclineOffer(ctx, offerID, master, nil)
		require.NoError(t, err)
		return got, ok
	}

	_, ok := view(of.ID, 2)
	require.False(t, ok, "another master's offer")
	v, ok := view(of.ID, 1)
	require.True(t, ok)
	require.Equal(t, dispatch.Viewed, v.State)
	require.False(t, v.ViewedAt.IsZero())
	again, ok := view(of.ID, 1)
	require.False(t, ok, "already VIEWED")
	require.Equal(t, v, again, "returned as it is")

	_, ok = decline(of.ID, 2)
	require.False(t, ok, "another master's offer")
	d, ok := decline(of.ID, 1)
	require.True(t, ok)
	require.Equal(t, dispatch.Declined, d.State)
	require.Equal(t, v.ViewedAt, d.ViewedAt)
	require.False(t, d.RespondedAt.IsZero())
	d2, ok := decline(of.ID, 1)
	require.False(t, ok)
	require.Equal(t, d, d2)
	_, ok = view(of.ID, 1)
	require.False(t, ok, "a closed offer is not viewed")

	_, ok = decline(12345, 1)
	require.False(t, ok)
	_, err := f.st.Orders().Offer(ctx, 12345)
	require.ErrorIs(t, err, domain.ErrNotFound)

}

// Candidate rules: place (case-insensitive) and skill match, paused,
// blocked and busy masters skipped, and a busy master is a candidate again
// once their offer expired or was declined.
func TestNextOfferCandidates(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx

	// 307 is offered another order first, while alone.
	f.master(307, "Kyiv", "Podil", "plumbing")
	o0 := f.order("Kyiv", "Podil", "plumbing")
	busy := f.offered(o0.ID, 307, 1)

	f.master(301, "KYIV", "podil", "tiles", "plumbing")
	f.master(302, "Lviv", "Podil", "plumbing")
	f.master(303, "Kyiv", "Obolon", "plumbing")
	f.master(304, "Kyiv", "Podil", "electric")
	f.master(305, "kyiv", "PODIL", "plumbing")
	f.master(306, "Kyiv", "Podil", "plumbing")
	changed, err := f.st.Masters().SetActive(ctx, 305, false)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = f.st.Masters().SetActive(ctx, 305, false)
	require.NoError(t, err)
	require.False(t, changed, "already paused")
	f.exec(`UPDATE masters SET blocked_at = now() WHERE user_id = 306`)

	o1 := f.order("Kyiv", "Podil", "plumbing")
	first := f.offered(o1.ID, 301, 1)

	// Nobody free for o2: 301 and 307 hold open offers. The order waits
	// for them rather than be reported unassignable.
	o2 := f.order("kyiv", "podil", "plumbing")
	_, got, out := f.next(o2.ID)
	require.Equal(t, dispatch.Busy, out)
	require.True(t, got.Unassignable.IsZero())
	require.Equal(t, 1, got.Round, "no offer in round 1: the round stays")

	// 307's offer expires: 307 is a candidate again.
	f.exec(`UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, busy.ID)
	expired, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Equal(t, []int64{busy.ID}, offerIDs(expired))
	f.offered(o2.ID, 307, 1)
	var mark *time.Time
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT unassignable_at FROM orders WHERE id = $1`, o2.ID).Scan(&mark))
	require.Nil(t, mark)

	// 301 declines: a candidate again, for another order.
	f.decline(first)
	o3 := f.order("Kyiv", "Podil", "plumbing")
	f.offered(o3.ID, 301, 1)

	// Resumed, 305 is a candidate (never offered: first in line).
	changed, err = f.st.Masters().SetActive(ctx, 305, true)
	require.NoError(t, err)
	require.True(t, changed)
	o4 := f.order("Kyiv", "Podil", "plumbing")
	f.offered(o4.ID, 305, 1)

	require.Equal(t, []int64{301, 305, 307}, f.int64s(`SELECT DISTINCT master_id FROM offers ORDER BY 1`),
		"wrong place, wrong skill and blocked masters were never offered anything")

	_, err = f.st.Masters().SetActive(ctx, 999, true)
	require.ErrorIs(t, err, domain.ErrNotFound)
	f.user(998)
	_, err = f.st.Masters().SetActive(ctx, 998, true)
	require.ErrorIs(t, err, domain.ErrNotFound, "a user who is not a master")
}

func TestNextOfferIdleLongestFirst(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.masters(401, 402, 403, 404)
	f.exec(`UPDATE masters SET last_offer_at = now() - interval '1 hour' WHERE user_id = 401`)
	f.exec(`UPDATE masters SET last_offer_at = now() - interval '2 hours' WHERE user_id = 403`)
	before := f.dbNow()
	for _, want := range []int64{402, 404, 403, 401} {
		o := f.order("c", "d", "x")
		f.offered(o.ID, want, 1)
		m, err := f.st.Masters().Get(f.ctx, want)
		require.NoError(t, err)
		require.False(t, m.LastOfferAt.Before(before), "last_offer_at moves to the offer's time")
	}
}

// Round 1 offers each matching master once; round 2 once more to those
// who let it expire; then the order is unassignable until a new master
// registers.
func TestNextOfferRounds(t *testing.T) {
	t.Parallel()
	f, o := dispatchOrder(t, 501, 502)
	ctx := f.ctx

	f.expire(f.offered(o.ID, 501, 1))
	f.expire(f.offered(o.ID, 502, 1))
	f.expire(f.offered(o.ID, 501, 2)) // 501 idle longer than 502
	f.expire(f.offered(o.ID, 502, 2))

	_, got, out := f.next(o.ID)
	require.Equal(t, dispatch.Unassignable, out)
	require.Equal(t, 2, got.Round)
	require.False(t, got.Unassignable.IsZero())
	of, got2, out := f.next(o.ID)
	require.Equal(t, dispatch.StillUnassignable, out)
	require.Zero(t, of)
	require.Equal(t, got.Unassignable, got2.Unassignable)

	f.master(503, "C", "D", "x")
	f.offered(o.ID, 503, 2)
	cur, err := f.st.Orders().Get(ctx, o.ID)
	require.NoError(t, err)
	require.True(t, cur.Unassignable.IsZero())

	rows, err := f.st.Pool().Query(ctx, `SELECT master_id, round FROM offers WHERE order_id = $1 ORDER BY id`, o.ID)
	require.NoError(t, err)
	pairs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
		var p [2]int64
		err := r.Scan(&p[0], &p[1])
		return p, err
	})
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{501, 1}, {502, 1}, {501, 2}, {502, 2}, {503, 2}}, pairs)
}

func TestNextOfferOutcomes(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	f.masters(1, 2)

	_, _, _, err := f.st.Orders().NextOffer(ctx, 424242, sla, dispatch.Gate{}, nil)
	require.ErrorIs(t, err, domain.ErrNotFound)

	o := f.order("c", "d", "x")
	of := f.offered(o.ID, 1, 1)
	_, got, out := f.next(o.ID)
	require.Equal(t, dispatch.Busy, out, "an open offer")
	require.Equal(t, o.ID, got.ID)
	ids, err := f.st.Orders().Searching(ctx, 10, dispatch.PassAll, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Empty(t, ids, "the order has an open offer")

	// Another replica holds the order's row.
	o2 := f.order("c", "d", "x")
	ids, err = f.st.Orders().Searching(ctx, 10, dispatch.PassAll, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{o2.ID}, ids)
	tx := f.holding(`SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, o2.ID)
	of2, got, out := f.next(o2.ID)
	require.Equal(t, dispatch.Busy, out, "locked")
	require.Zero(t, of2)
	require.Equal(t, o2.ID, got.ID)
	require.NoError(t, tx.Rollback(ctx))

	_, _, ok, err := f.st.Orders().AcceptOffer(ctx, of.ID, 1, nil)
	require.NoError(t, err)
	require.True(t, ok)
	_, got, out = f.next(o.ID)
	require.Equal(t, dispatch.NotSearching, out)
	require.Equal(t, dispatch.Assigned, got.State)
}

// A candidate whose row another transaction holds (another replica's
// step, a profile update) makes the step Busy: the round does not move on
// and the order is not reported unassignable.
func TestNextOfferLockedCandidateIsBusy(t *testing.T) {
	t.Parallel()
	f, o := dispatchOrder(t, 1, 2)
	ctx := f.ctx
	f.decline(f.offered(o.ID, 1, 1))

	tx := f.holding(`SELECT 1 FROM masters WHERE user_id = 2 FOR NO KEY UPDATE`)
	of, got, out := f.next(o.ID)
	require.Equal(t, dispatch.Busy, out, "2 still has its round-1 turn")
	require.Zero(t, of)
	require.Equal(t, 1, got.Round)
	require.True(t, got.Unassignable.IsZero())
	cur, err := f.st.Orders().Get(ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, 1, cur.Round)
	require.True(t, cur.Unassignable.IsZero())
	require.NoError(t, tx.Rollback(ctx))

	f.offered(o.ID, 2, 1)
}

// A replica inserting an offer for the same master at the same moment
// (its transaction still open when this one inserts): the partial unique
// index makes the loser Busy, not an error; if the other rolls back, the
// offer is made.
func TestNextOfferRacingInsertIsBusy(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%t", commit), func(t *testing.T) {
			t.Parallel()
			f := newDispatch(t)
			ctx := f.ctx
			f.masters(1)
			other := f.order("c", "d", "x")
			o := f.order("c", "d", "x")

			tx := f.holding(`INSERT INTO offers (order_id, master_id, round, expires_at) VALUES ($1, 1, 1, now() + interval '1 minute')`, other.ID)

			type result struct {
				of  dispatch.Offer
				out dispatch.Outcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				of, _, out, err := f.st.Orders().NextOffer(ctx, o.ID, sla, dispatch.Gate{}, nil)
				done <- result{of, out, err}
			}()
			require.Eventually(t, func() bool { return lockWaiters(ctx, f.st) == 1 }, 10*time.Second, 5*time.Millisecond,
				"NextOffer waits on the other insert")
			if commit {
				require.NoError(t, tx.Commit(ctx))
			} else {
				require.NoError(t, tx.Rollback(ctx))
			}
			r := <-done
			require.NoError(t, r.err)
			if commit {
				require.Equal(t, dispatch.Busy, r.out)
				require.Zero(t, r.of)
				require.Equal(t, []int64{other.ID}, f.int64s(`SELECT order_id FROM offers`))
				var last *time.Time
				require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT last_offer_at FROM masters WHERE user_id = 1`).Scan(&last))
				require.Nil(t, last, "rolled back")
			} else {
				require.Equal(t, dispatch.Offered, r.out)
				require.Equal(t, []int64{o.ID}, f.int64s(`SELECT order_id FROM offers`))
			}
		})
	}
}

// Many replicas distributing the same orders at once, with masters
// declining meanwhile: never two open offers for an order or a master,
// never one master offered an order twice in a round, and no errors.
func TestNextOfferConcurrent(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	const masters, orders, workers, steps = 8, 6, 24, 40
	for i := range masters {
		f.master(int64(1+i), "c", "d", "x")
	}
	var orderIDs []int64
	for range orders {
		orderIDs = append(orderIDs, f.order("c", "d", "x").ID)
	}

	var mu sync.Mutex
	var made []dispatch.Offer
	var errs []error
	atOnce(workers, func(w int) {
		r := rand.New(rand.NewPCG(uint64(w), 1))
		for range steps {
			of, _, out, err := f.st.Orders().NextOffer(ctx, orderIDs[r.IntN(len(orderIDs))], sla, dispatch.Gate{}, nil)
			if err == nil && out == dispatch.Offered && r.IntN(2) == 0 {
				_, _, err = f.st.Orders().DeclineOffer(ctx, of.ID, of.MasterID, nil)
			}
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			if out == dispatch.Offered {
				made = append(made, of)
			}
			mu.Unlock()
		}
	})
	require.Empty(t, errs)
	require.NotEmpty(t, made)

	var dupOrder, dupMaster, dupRound, total int
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT
 (SELECT count(*) FROM (SELECT order_id FROM offers WHERE state IN ('SENT', 'VIEWED') GROUP BY 1 HAVING count(*) > 1) a),
 (SELECT count(*) FROM (SELECT master_id FROM offers WHERE state IN ('SENT', 'VIEWED') GROUP BY 1 HAVING count(*) > 1) b),
 (SELECT count(*) FROM (SELECT 1 FROM offers GROUP BY order_id, master_id, round HAVING count(*) > 1) c),
 (SELECT count(*) FROM offers)`).Scan(&dupOrder, &dupMaster, &dupRound, &total))
	require.Zero(t, dupOrder)
	require.Zero(t, dupMaster)
	require.Zero(t, dupRound)
	require.Equal(t, len(made), total, "every offer made was returned once")
	for _, of := range made {
		cur, err := f.st.Orders().Offer(ctx, of.ID)
		require.NoError(t, err)
		require.Equal(t, of.OrderID, cur.OrderID)
		require.Equal(t, of.MasterID, cur.MasterID)
		require.Equal(t, of.Round, cur.Round)
	}
}

func TestExpireManyAndNextExpiry(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	ctx := f.ctx
	_, ok, err := f.st.Orders().NextOfferExpiry(ctx)
	require.NoError(t, err)
	require.False(t, ok)

	const n = 2000
	seedDueOffers(t, f.st, 1_000_000, n)
	// One open offer not yet due.
	f.masters(1)
	later := f.offered(f.order("c", "d", "x").ID, 1, 1)

	var oldest time.Time
	require.NoError(t, f.st.Pool().QueryRow(ctx, `SELECT min(expires_at) FROM offers`).Scan(&oldest))
	next, ok, err := f.st.Orders().NextOfferExpiry(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, oldest.Equal(next))

	expired, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Len(t, expired, n)
	ids := offerIDs(expired)
	require.Len(t, slices.Compact(ids), n, "distinct")
	for _, of := range expired {
		require.Equal(t, dispatch.Expired, of.State)
		require.NotEqual(t, later.ID, of.ID)
	}
	again, err := f.st.Orders().ExpireOffers(ctx, "", nil)
	require.NoError(t, err)
	require.Empty(t, again)

	next, ok, err = f.st.Orders().NextOfferExpiry(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, later.ExpiresAt.Equal(next))
}

// A round is over only when every matching master has had the order: one
// busy with another order's offer is waited for, not skipped, and the
// order neither moves to round 2 nor is reported unassignable meanwhile.
func TestNextOfferWaitsForBusyMaster(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.masters(10, 11)
	y := f.order("c", "d", "x")
	busy := f.offered(y.ID, 10, 1) // master 10 is busy with order y
	x := f.order("c", "d", "x")
	f.decline(f.offered(x.ID, 11, 1))

	_, got, out := f.next(x.ID)
	require.Equal(t, dispatch.Busy, out, "master 10 has not had order x in round 1")
	require.Equal(t, 1, got.Round)
	require.True(t, got.Unassignable.IsZero())
	ids, err := f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Empty(t, ids, "x's offer ended within the second: the replica that ended it steps x")
	parked, err := f.st.Orders().Searching(f.ctx, 10, dispatch.PassParked, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{x.ID}, parked, "x is parked: the end of another order's offer (master 10's) may unblock it")
	f.exec(`UPDATE offers SET responded_at = now() - interval '2 seconds' WHERE order_id = $1`, x.ID)
	ids, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{x.ID}, ids, "x waits for a busy master")

	f.expire(busy)
	ids, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{x.ID}, ids, "y's step is its expirer's for a second; x still waits")
	f.exec(`UPDATE offers SET responded_at = now() - interval '2 seconds' WHERE id = $1`, busy.ID)
	ids, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{y.ID, x.ID}, ids, "then y's expiry leaves it owed a step; x still waits")
	parked, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassParked, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{x.ID}, parked, "y is owed, not parked: its expiry wrote nothing on it")
	f.offered(x.ID, 10, 1)
	parked, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassParked, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Empty(t, parked, "the offer settled x")

	// An order reported unassignable is left to the full passes.
	z := f.order("nowhere", "d", "x")
	ids, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{y.ID, z.ID}, ids, "a new order is owed its first step")
	_, _, out = f.next(z.ID)
	require.Equal(t, dispatch.Unassignable, out)
	f.offered(y.ID, 11, 1)
	ids, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Empty(t, ids, "x and y were offered; z is reported unassignable")
	ids, err = f.st.Orders().Searching(f.ctx, 10, dispatch.PassAll, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{z.ID}, ids)
}

// A pick can name a master whose open offer of another order committed
// while the pick ran (the NOT EXISTS on offers reads the pick's snapshot);
// the insert then conflicts on offers_open_master and inserts nothing. Rolled
// back as Busy, the step would leave the order with no offer and no mark,
// found again only by the DISTRIBUTION_INTERVAL pass. Forced here: a
// trigger gives the chosen master another order's open offer right
// before the step's insert, as the racing commit would.
func TestNextOfferPicksAgainWhenItsMasterWasTaken(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	f.masters(10, 11, 20, 21, 22, 23)
	f.exec(`UPDATE masters SET city = 'c2' WHERE user_id >= 20`)
	o := f.order("c", "d", "x")
	o2 := f.order("c2", "d", "x")
	// race gives the master an order's insert chose an open offer of a
	// fresh order first: once for o, at every attempt for o2.
	f.exec(`CREATE TABLE race_once (fired boolean)`)
	f.exec(`INSERT INTO race_once VALUES (false)`)
	f.exec(`CREATE FUNCTION race() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE other bigint;
BEGIN
    IF (NEW.order_id = ` + fmt.Sprint(o.ID) + ` AND (SELECT NOT fired FROM race_once)) OR NEW.order_id = ` + fmt.Sprint(o2.ID) + ` THEN
        UPDATE race_once SET fired = true;
        INSERT INTO orders (created_by, city, district, skill, price, description) VALUES (1, 'elsewhere', 'd', 'x', 1, 'race')
            RETURNING id INTO other;
        INSERT INTO offers (order_id, master_id, round, expires_at) VALUES (other, NEW.master_id, 1, now() + interval '1 minute');
    END IF;
    RETURN NEW;
END $$`)
	f.exec(`CREATE TRIGGER race BEFORE INSERT ON offers FOR EACH ROW WHEN (pg_trigger_depth() = 0) EXECUTE FUNCTION race()`)

	f.offered(o.ID, 11, 1) // 10 was picked first, and taken
	require.Equal(t, int64(1), f.exec(`SELECT 1 FROM offers f JOIN orders o ON o.id = f.order_id
WHERE f.master_id = 10 AND f.state = 'SENT' AND o.description = 'race'`), "the race happened")

	// A step whose every pick is taken leaves the order marked owed a
	// step, for the recheck, instead of rolling back to nothing.
	_, _, out := f.next(o2.ID)
	require.Equal(t, dispatch.Busy, out)
	ids, err := f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Contains(t, ids, o2.ID)
	require.Equal(t, int64(0), f.exec(`SELECT 1 FROM offers WHERE order_id = $1`, o2.ID))
}

// An expired offer's follow-up is its expirer's: the owed-orders recheck
// of another replica leaves the order alone while the expirer's liveness
// lock is held (up to dispatch.FollowUpHeld), the expirer's own recheck
// still sees it (to retry its own failed step), and once the expirer's
// lock is gone, so is its claim. A decline claims nothing.
func TestOwedRecheckLeavesAFollowUpToItsLiveExpirer(t *testing.T) {
	t.Parallel()
	f := newDispatch(t)
	a, b := f.st.Liveness("replica-a"), f.st.Liveness("replica-b")
	for _, l := range []*storage.Liveness{a, b} {
		held, err := l.Hold(f.ctx)
		require.NoError(t, err)
		require.True(t, held, l.Claimer())
		t.Cleanup(l.Die)
	}
	f.masters(10, 11)
	x, y := f.order("c", "d", "x"), f.order("c", "d", "x")
	ox, oy := f.offered(x.ID, 10, 1), f.offered(y.ID, 11, 1)
	f.exec(`UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, ox.ID)
	got, err := f.st.Orders().ExpireOffers(f.ctx, a.Claimer(), nil)
	require.NoError(t, err)
	require.Equal(t, []int64{ox.ID}, offerIDs(got))
	f.decline(oy)
	// Out of the one-second window every recheck has.
	f.exec(`UPDATE offers SET responded_at = now() - interval '2 seconds'`)

	owed := func(by string) []int64 {
		t.Helper()
		ids, err := f.st.Orders().Searching(f.ctx, 10, dispatch.PassOwed, by, dispatch.Gate{})
		require.NoError(t, err)
		return ids
	}
	require.Equal(t, []int64{y.ID}, owed(b.Claimer()), "x's follow-up is a's while a lives; y's decline claimed nothing")
	require.Equal(t, []int64{x.ID, y.ID}, owed(a.Claimer()), "a's own recheck sees x")
	require.Equal(t, []int64{y.ID}, owed(""), "a replica without a claimer name leaves it to a too")

	f.exec(`UPDATE offers SET responded_at = now() - $1 * interval '1 microsecond' - interval '1 second' WHERE id = $2`,
		dispatch.FollowUpHeld.Microseconds(), ox.ID)
	require.Equal(t, []int64{x.ID, y.ID}, owed(b.Claimer()), "past FollowUpHeld the claim is over")
	f.exec(`UPDATE offers SET responded_at = now() - interval '2 seconds' WHERE id = $1`, ox.ID)
	require.Equal(t, []int64{y.ID}, owed(b.Claimer()))
	a.Die()
	require.Equal(t, []int64{x.ID, y.ID}, owed(b.Claimer()), "a's lock is gone: b takes x's step at once")
}
