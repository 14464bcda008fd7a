package dispatch_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// A rating is the customer's once, of a finished order's master; admins see
// it in the live log and /orders.
func TestRateFinishedOrderOnce(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.master(t, s, 10, "Odesa Port electrician")
	o := w.create(t, s, "Odesa Port electrician 2000 No light in the hall")
	_, err := s.Rate(w.ctx, o.ID, 5, "")
	require.ErrorIs(t, err, dispatch.ErrOrderState, "not done yet")
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, 10)
	require.NoError(t, err)
	_, _, err = s.Complete(w.ctx, o.ID)
	require.NoError(t, err)

	var ie *domain.InputError
	require.ErrorAs(t, func() error { _, err := s.Rate(w.ctx, o.ID, 6, ""); return err }(), &ie)
	require.Equal(t, "rating.error_stars", ie.Key)

	r, err := s.Rate(w.ctx, o.ID, 4, "  Quick and clean.  ")
	require.NoError(t, err)
	require.Equal(t, dispatch.Rating{OrderID: o.ID, MasterID: 10, Stars: 4, Comment: "Quick and clean.", RatedAt: r.RatedAt}, r)
	again, err := s.Rate(w.ctx, o.ID, 1, "")
	require.ErrorIs(t, err, dispatch.ErrRated)
	require.Equal(t, r, again, "the standing rating, unchanged")
	_, err = s.Rate(w.ctx, 1<<40, 5, "")
	require.ErrorIs(t, err, domain.ErrNotFound)

	require.Equal(t, "order_rated:10", w.tg.log(o.ID)[len(w.tg.log(o.ID))-1], "one line in the live log")
	require.Equal(t, 1, count(w.tg.log(o.ID), "order_rated:10"))
	lines, err := s.Orders(w.ctx)
	require.NoError(t, err)
	require.Len(t, lines, 1)
	require.Equal(t, &r, lines[0].Rating, "/orders shows it")

	roster, total, err := s.Roster(w.ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, total)
	require.Equal(t, dispatch.Record{Average: 4, Count: 1}, roster[0].Record)
}
