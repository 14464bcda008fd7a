package dispatch_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/dispatch"
	"switchboard/domain/domaintest"
)

// owes has master id accept and finish an order of their own (args is
// their /master line) and lets its commission fall overdue: the next
// Commission run blocks them.
func (w *world) owes(t *testing.T, s *dispatch.Service, id int64, args string) {
	t.Helper()
	o := w.create(t, s, args+" 1000 Earlier job")
	sent := w.tg.sentOffers()
	f := sent[len(sent)-1]
	require.Equal(t, id, f.MasterID, "the earlier job offered to %d", id)
	_, _, err := s.Accept(w.ctx, f.ID, id)
	require.NoError(t, err)
	_, _, err = s.Complete(w.ctx, o.ID)
	require.NoError(t, err)
	w.exec(t, `UPDATE orders SET commission_due_at = now() - interval '1 minute' WHERE id = $1`, o.ID)
}

// lastOffer is the newest offer the workflow sent.
func (w *world) lastOffer(t *testing.T) dispatch.Offer {
	t.Helper()
	sent := w.tg.sentOffers()
	require.NotEmpty(t, sent)
	return sent[len(sent)-1]
}

// A master blocked for commission takes no new work. The block withdraws
// the offer they hold, edits its message and the order goes on to the next
// master at once; the block job run on two replicas at once does all that
// once. Their Accept on the withdrawn offer, and on an offer a block left
// open (a master blocked without the job), is refused as ErrBlocked and
// changes nothing.
func TestBlockedMasterTakesNoNewWork(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10, CommissionDeadline: time.Hour})
	s1, s2 := w.service(t), w.service(t)
	const place = "Lutsk Center glazier"
	w.master(t, s1, 10, place)
	w.owes(t, s1, 10, place)
	o := w.create(t, s1, place+" 800 Window pane")
	early := w.lastOffer(t)
	require.Equal(t, int64(10), early.MasterID, "offered before the block")
	w.master(t, s1, 11, place) // came after: waits behind 10's offer

	var wg sync.WaitGroup
	blocked := make([]int, 2)
	errs := make([]error, 2)
	for i, s := range []*dispatch.Service{s1, s2} {
		wg.Go(func() { blocked[i], errs[i] = s.Commission(w.ctx) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, 1, blocked[0]+blocked[1], "blocked once")

	require.Equal(t, dispatch.Withdrawn, w.offer(t, early.ID).State, "withdrawn with the block")
	closed := w.tg.closedOffers()
	require.Len(t, closed, 1, "its message edited once")
	require.Equal(t, early.ID, closed[0].ID)
	require.Equal(t, dispatch.Withdrawn, closed[0].State)
	next := w.lastOffer(t)
	require.Equal(t, int64(11), next.MasterID, "the order went on to the next master")
	require.Equal(t, o.ID, next.OrderID)
	require.Equal(t, dispatch.Sent, w.offer(t, next.ID).State)
	require.Equal(t, []string{"order_created", "offer_sent:10", "offer_withdrawn:10", "offer_sent:11"}, w.tg.log(o.ID))
	for _, e := range domaintest.Recorded(&w.tg.mu, &w.tg.events) {
		if e.Kind == dispatch.EventOfferWithdrawn {
			require.True(t, e.Blocked, "the live log says the block withdrew it")
		}
	}
	require.Equal(t, []dispatch.NoteKind{dispatch.NoteOrderDone, dispatch.NoteBlocked}, w.tg.noteKinds(10))

	// Accept on the withdrawn offer is told of the block, Decline that it
	// is closed; neither changes anything.
	before := w.offer(t, early.ID)
	f, got, err := s1.Accept(w.ctx, early.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrBlocked)
	require.Equal(t, before, f)
	require.Equal(t, o.ID, got.ID)
	f, got, err = s1.Decline(w.ctx, early.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOfferClosed)
	require.Equal(t, before, f)
	require.True(t, dispatch.WithdrawnByBlock(got), "withdrawn by the block, not a cancel")
	require.Equal(t, before, w.offer(t, early.ID))
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)

	// Run again: nothing more.
	n, err := s2.Commission(w.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, w.tg.closedOffers(), 1)
	require.Len(t, w.tg.sentOffers(), 3)

	// 11 blocked by hand, without the job, still holds its offer: Accept
	// is refused all the same and the offer stays open, until the job
	// withdraws it and the order goes on (nobody is left: reported).
	w.exec(t, `UPDATE masters SET blocked_at = now() WHERE user_id = 11`)
	before = w.offer(t, next.ID)
	f, _, err = s1.Accept(w.ctx, next.ID, 11)
	require.ErrorIs(t, err, dispatch.ErrBlocked)
	require.Equal(t, before, f, "the offer as it was")
	require.Equal(t, before, w.offer(t, next.ID))
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)
	require.Zero(t, w.order(t, o.ID).MasterID)
	n, err = s1.Commission(w.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "11 was blocked already")
	require.Equal(t, dispatch.Withdrawn, w.offer(t, next.ID).State)
	require.Equal(t, []string{"order_created", "offer_sent:10", "offer_withdrawn:10", "offer_sent:11", "offer_withdrawn:11", "order_unassignable"}, w.tg.log(o.ID))
}

// A block racing an Accept, each run concurrently many times over: either
// the Accept came first and the master holds the order they took before
// the block (the block found no open offer to withdraw), or the block came
// first and the Accept is refused, the offer withdrawn. An Accept that
// began after the block committed never takes the order, and the blocked
// master never keeps an open offer.
func TestBlockRacingAcceptNeverGivesABlockedMasterTheOrder(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10, CommissionDeadline: time.Hour})
	const rounds = 40
	var afterBlock, accepted, refused int
	for i := range rounds {
		id := int64(100 + i)
		place := fmt.Sprintf("City%d Center glazier", i)
		w.master(t, s, id, place)
		w.owes(t, s, id, place)
		o := w.create(t, s, place+" 500 Racing job")
		f := w.lastOffer(t)
		require.Equal(t, id, f.MasterID)
		require.Equal(t, o.ID, f.OrderID)

		// Each side starts after its own random pause, so the block
		// lands before, during and after the Accept's transaction.
		var (
			wg                      sync.WaitGroup
			blockDone, acceptBegan  time.Time
			blockErr, acceptErr     error
			blockedNow              int
			acceptedOffer           dispatch.Offer
			pauseBlock, pauseAccept = jitter(), jitter()
		)
		wg.Go(func() {
			time.Sleep(pauseBlock)
			blockedNow, blockErr = s.Commission(context.Background())
			blockDone = time.Now()
		})
		wg.Go(func() {
			time.Sleep(pauseAccept)
			acceptBegan = time.Now()
			acceptedOffer, _, acceptErr = s.Accept(context.Background(), f.ID, id)
		})
		wg.Wait()
		require.NoError(t, blockErr)
		require.Equal(t, 1, blockedNow, "round %d: the master blocked", i)

		now := w.offer(t, f.ID)
		order := w.order(t, o.ID)
		began := blockDone.Before(acceptBegan)
		if began {
			afterBlock++
		}
		switch {
		case acceptErr == nil:
			accepted++
			require.False(t, began, "round %d: an Accept begun after the block committed took the order", i)
			require.Equal(t, dispatch.Accepted, acceptedOffer.State)
			require.Equal(t, dispatch.Accepted, now.State, "round %d", i)
			require.Equal(t, dispatch.Assigned, order.State, "round %d", i)
			require.Equal(t, id, order.MasterID, "round %d", i)
		default:
			refused++
			require.ErrorIs(t, acceptErr, dispatch.ErrBlocked, "round %d", i)
			require.Equal(t, dispatch.Withdrawn, now.State, "round %d: withdrawn by the block", i)
			require.NotEqual(t, dispatch.Assigned, order.State, "round %d", i)
			require.Zero(t, order.MasterID, "round %d", i)
		}
		m, _, err := s.Master(w.ctx, id)
		require.NoError(t, err)
		require.False(t, m.BlockedAt.IsZero(), "round %d", i)
		var open int
		require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM offers WHERE master_id = $1 AND state IN ('SENT', 'VIEWED')`, id).Scan(&open))
		require.Zero(t, open, "round %d: a blocked master keeps no open offer", i)
	}
	t.Logf("%d rounds: %d accepted before the block, %d refused (%d Accepts began after the block committed)", rounds, accepted, refused, afterBlock)
}

// An Accept pressed while a block's transaction holds the master, before
// it committed, waits for it and is refused: it does not read the master
// as the block found it and take the order under it.
func TestAcceptDuringABlockInFlightIsRefused(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10, CommissionDeadline: time.Hour})
	const place = "Rivne Center mason"
	w.master(t, s, 10, place)
	o := w.create(t, s, place+" 700 Wall")
	f := w.lastOffer(t)

	// The block's first write, as BlockOverdue makes it, left uncommitted.
	tx, err := w.store.Pool().Begin(w.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(w.ctx) }()
	_, err = tx.Exec(w.ctx, `UPDATE masters SET blocked_at = now(), updated_at = now() WHERE user_id = 10`)
	require.NoError(t, err)

	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, _, err := s.Accept(context.Background(), f.ID, 10)
		done <- result{err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	committed := time.Now()
	require.NoError(t, tx.Commit(w.ctx))
	r := <-done
	require.ErrorIs(t, r.err, dispatch.ErrBlocked)
	require.True(t, r.at.After(committed), "the Accept waited for the block")
	require.Equal(t, dispatch.Sent, w.offer(t, f.ID).State, "the offer as it was, for the job to withdraw")
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)
}

// jitter is a pause of up to 15 ms, none a third of the time.
func jitter() time.Duration {
	if rand.IntN(3) == 0 {
		return 0
	}
	return time.Duration(rand.IntN(15_000)) * time.Microsecond
}
