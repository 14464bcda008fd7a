package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// The assigned master's steps: only they may press, each step moves the
// order once and is told to the live log and on their message; Done is
// /done's statement and commission; a photo afterwards reaches the admins.
func TestAssignedMasterSteps(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10, CommissionDeadline: time.Hour})
	w.masters(t, s, "Poltava Center roofer", 10, 11)
	o := w.create(t, s, "Poltava Center roofer 1999 Roof leaks\naddress: Sobornosti 1\nphone: +380 50 111 22 33")
	require.Equal(t, dispatch.Contact{Address: "Sobornosti 1", Phone: "+380 50 111 22 33"}, o.Contact)
	f := w.tg.sentOffers()[0]
	require.Equal(t, int64(10), f.MasterID)

	// Not accepted yet: the steps refuse an offer that is only offered.
	_, err := s.Step(w.ctx, f.ID, 10, dispatch.StepEnRoute)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, _, err = s.Accept(w.ctx, f.ID, 10)
	require.NoError(t, err)

	// Another master's press, an unknown offer.
	_, err = s.Step(w.ctx, f.ID, 11, dispatch.StepEnRoute)
	require.ErrorIs(t, err, dispatch.ErrForbidden)
	_, err = s.Finish(w.ctx, f.ID, 11)
	require.ErrorIs(t, err, dispatch.ErrForbidden)
	_, err = s.GiveBack(w.ctx, f.ID, 11)
	require.ErrorIs(t, err, dispatch.ErrForbidden)
	_, err = s.Step(w.ctx, 1<<40, 10, dispatch.StepEnRoute)
	require.ErrorIs(t, err, domain.ErrNotFound)
	_, err = s.Assigned(w.ctx, f.ID, 11)
	require.ErrorIs(t, err, dispatch.ErrForbidden)
	_, err = s.Assigned(w.ctx, 1<<40, 10)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Empty(t, w.tg.assignments(), "refused presses tell nobody")
	mine, err := s.Assigned(w.ctx, f.ID, 10)
	require.NoError(t, err)
	require.Equal(t, o.ID, mine.ID)
	require.Equal(t, dispatch.Assigned, mine.State)
	require.Empty(t, w.tg.assignments(), "reading the order tells nobody")

	got, err := s.Step(w.ctx, f.ID, 10, dispatch.StepEnRoute)
	require.NoError(t, err)
	require.False(t, got.EnRouteAt.IsZero())
	again, err := s.Step(w.ctx, f.ID, 10, dispatch.StepEnRoute)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	require.Equal(t, got.EnRouteAt, again.EnRouteAt, "the second press changes nothing")
	got, err = s.Step(w.ctx, f.ID, 10, dispatch.StepArrived)
	require.NoError(t, err)
	require.False(t, got.ArrivedAt.IsZero())
	_, err = s.Step(w.ctx, f.ID, 10, dispatch.StepArrived)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	_, err = s.Step(w.ctx, f.ID, 10, dispatch.StepEnRoute)
	require.ErrorIs(t, err, dispatch.ErrOrderState, "on the way after arriving: nothing to mark")

	as := w.tg.assignments()
	require.Len(t, as, 2)
	for _, a := range as {
		require.Equal(t, int64(10), a.Master.UserID)
		require.Equal(t, f.ID, a.Offer.ID, "the accepted offer's message is edited")
		require.Equal(t, dispatch.Assigned, a.Order.State)
		require.True(t, a.Pressed)
		require.Equal(t, 10.0, a.CommissionRate)
	}
	require.False(t, as[0].Order.EnRouteAt.IsZero())
	require.False(t, as[1].Order.ArrivedAt.IsZero())

	done, err := s.Finish(w.ctx, f.ID, 10)
	require.NoError(t, err)
	require.Equal(t, dispatch.Done, done.State)
	require.Equal(t, int64(200), done.Commission, "the same commission as /done")
	_, err = s.Finish(w.ctx, f.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	_, _, err = s.Complete(w.ctx, o.ID)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	_, err = s.GiveBack(w.ctx, f.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	stale, err := s.Assigned(w.ctx, f.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	require.Equal(t, dispatch.Done, stale.State, "with the order as it is")
	as = w.tg.assignments()
	require.Len(t, as, 3)
	require.Equal(t, dispatch.Done, as[2].Order.State)
	require.Empty(t, w.tg.noteKinds(10), "the master pressed Done: their message says it, no note")

	require.Equal(t, []string{"order_created", "offer_sent:10", "offer_accepted:10", "order_assigned:10",
		"master_en_route:10", "master_arrived:10", "order_done:10"}, w.tg.log(o.ID))
	w.tg.mu.Lock()
	for _, e := range w.tg.events {
		if e.Kind == dispatch.EventOrderDone {
			require.True(t, e.ByMaster)
		}
	}
	w.tg.mu.Unlock()

	// Photos of the work go to the admins, at most MaxPhotos of them.
	_, err = s.Photo(w.ctx, 99, 1, "file-x", "")
	require.ErrorIs(t, err, dispatch.ErrNotMaster)
	_, err = s.Photo(w.ctx, 11, 2, "file-x", "")
	require.ErrorIs(t, err, dispatch.ErrNoDoneOrder, "master 11 finished nothing")
	for i := range dispatch.MaxPhotos {
		p, err := s.Photo(w.ctx, 10, 10+i, "file-"+string(rune('a'+i)), "roof")
		require.NoError(t, err)
		require.Equal(t, o.ID, p.ID)
		require.Equal(t, i+1, p.Photos)
	}
	full, err := s.Photo(w.ctx, 10, 30, "file-z", "")
	require.ErrorIs(t, err, dispatch.ErrPhotoLimit)
	require.Equal(t, o.ID, full.ID)
	require.Len(t, w.tg.photos, dispatch.MaxPhotos)
	require.Len(t, w.outbox(t, liveLogChat), 7+dispatch.MaxPhotos, "seven live-log lines and the photos")

	// Past the window the photo belongs to no order.
	w.exec(t, `UPDATE orders SET done_at = now() - interval '61 minutes' WHERE id = $1`, o.ID)
	_, err = s.Photo(w.ctx, 10, 31, "file-late", "")
	require.ErrorIs(t, err, dispatch.ErrNoDoneOrder)
}

// Can't do it: the order goes back to dispatch at once and to another
// master; the one who gave it back is never offered it again, and their
// old buttons are refused.
func TestGiveBackGoesToAnotherMasterOnly(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.masters(t, s, "Sumy Center painter", 10, 11)
	o := w.create(t, s, "Sumy Center painter 800 Walls\nname: Olena\nwhen: 2099-01-02 10-12")
	first := w.tg.sentOffers()[0]
	require.Equal(t, int64(10), first.MasterID)
	_, _, err := s.Accept(w.ctx, first.ID, 10)
	require.NoError(t, err)
	_, err = s.Step(w.ctx, first.ID, 10, dispatch.StepEnRoute)
	require.NoError(t, err)

	back, err := s.GiveBack(w.ctx, first.ID, 10)
	require.NoError(t, err)
	require.Equal(t, dispatch.Searching, back.State)
	require.Zero(t, back.MasterID)
	require.True(t, back.EnRouteAt.IsZero(), "the steps are cleared")
	require.Equal(t, 1, back.Round)
	require.Equal(t, dispatch.Accepted, w.offer(t, first.ID).State, "the accepted offer stays: it keeps the master away")
	as := w.tg.assignments()
	require.Equal(t, dispatch.Searching, as[len(as)-1].Order.State, "their message says they gave it back")
	require.Equal(t, int64(10), as[len(as)-1].Master.UserID)

	_, err = s.GiveBack(w.ctx, first.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	stale, err := s.Step(w.ctx, first.ID, 10, dispatch.StepArrived)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	require.Zero(t, stale.MasterID)

	// Distributed at once: master 11 has it; once 11 declines it is
	// unassignable, round 2 included: master 10 is never offered it again.
	require.Equal(t, []int64{10, 11}, w.tg.sentTo())
	second := w.tg.sentOffers()[1]
	_, _, err = s.Decline(w.ctx, second.ID, 11)
	require.NoError(t, err)
	require.NoError(t, s.Distribute(w.ctx))
	require.Equal(t, []int64{10, 11}, w.tg.sentTo(), "never to 10 again")
	require.False(t, w.order(t, o.ID).Unassignable.IsZero())
	require.Equal(t, []string{"order_created", "offer_sent:10", "offer_accepted:10", "order_assigned:10", "master_en_route:10",
		"order_returned:10", "offer_sent:11", "offer_declined:11", "order_unassignable"},
		w.tg.log(o.ID))

	// A new master takes it; 10's old buttons stay refused.
	w.master(t, s, 12, "Sumy Center painter")
	eventually(t, func() bool { return s.Distribute(w.ctx) == nil && len(w.tg.sentTo()) == 3 }, "the new master is offered it")
	third := w.tg.sentOffers()[2]
	require.Equal(t, int64(12), third.MasterID)
	_, _, err = s.Accept(w.ctx, third.ID, 12)
	require.NoError(t, err)
	other, err := s.Finish(w.ctx, first.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	require.Equal(t, int64(12), other.MasterID)
	other, err = s.Assigned(w.ctx, first.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOrderState, "their old offer no longer reads the order as theirs")
	require.Equal(t, int64(12), other.MasterID)
	require.Equal(t, dispatch.Assigned, w.order(t, o.ID).State)
}

// /paid tells the master their commission is settled, blocked or not.
func TestPaidTellsTheMaster(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10, CommissionDeadline: time.Hour})
	w.master(t, s, 10, "Uzhhorod Center welder")
	o := w.create(t, s, "Uzhhorod Center welder 1000 Gate")
	_, _, err := s.Accept(w.ctx, w.tg.sentOffers()[0].ID, 10)
	require.NoError(t, err)
	_, _, err = s.Complete(w.ctx, o.ID)
	require.NoError(t, err)
	first := domain.MessageRef{Chat: 1, ID: 1}
	_, d, wasBlocked, err := s.Paid(w.ctx, "10", first)
	require.NoError(t, err)
	require.False(t, wasBlocked)
	require.Equal(t, int64(100), d.Amount)
	require.Equal(t, []dispatch.NoteKind{dispatch.NoteOrderDone, dispatch.NotePaid}, w.tg.noteKinds(10))
	w.tg.mu.Lock()
	paid := w.tg.notes[len(w.tg.notes)-1]
	w.tg.mu.Unlock()
	require.Equal(t, int64(100), paid.Amount)
	require.Equal(t, 1, paid.Orders)

	_, _, _, err = s.Paid(w.ctx, "10", domain.MessageRef{Chat: 1, ID: 2})
	require.NoError(t, err)
	require.Len(t, w.tg.noteKinds(10), 2, "nothing settled: nothing told")

	// Another order done, then the first /paid handled again (its replica
	// died before the update's done-mark): it finds what it settled, and
	// the new commission stays owed until a /paid of its own.
	o2 := w.create(t, s, "Uzhhorod Center welder 2000 Fence")
	_, _, err = s.Accept(w.ctx, w.tg.sentOffers()[1].ID, 10)
	require.NoError(t, err)
	_, _, err = s.Complete(w.ctx, o2.ID)
	require.NoError(t, err)
	told := len(w.tg.noteKinds(10))
	_, again, _, err := s.Paid(w.ctx, "10", first)
	require.NoError(t, err)
	require.Equal(t, d, again, "what the message settled the first time")
	require.Len(t, w.tg.noteKinds(10), told, "nothing told twice")
	require.True(t, w.order(t, o2.ID).CommissionPaidAt.IsZero(), "still owed")
	_, d, _, err = s.Paid(w.ctx, "10", domain.MessageRef{Chat: 1, ID: 3})
	require.NoError(t, err)
	require.Equal(t, []int64{o2.ID}, d.Orders)
	require.Equal(t, int64(200), d.Amount)
}
