package dispatch_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain/dispatch"
	"switchboard/domain/domaintest"
)

// contained builds a replica whose registry the test reads and runs it.
func (w *world) contained(t *testing.T) (*dispatch.Service, *prometheus.Registry) {
	t.Helper()
	w.reg = prometheus.NewRegistry()
	s := w.service(t)
	w.run(t, s)
	return s, w.reg
}

// A distribution step that panics (the renderer on one order's offer) is
// that step's failure: rolled back, the order left owed a step, while the
// other orders are offered; the recheck of owed orders takes it again,
// and once the renderer no longer panics it is offered. Before the panic
// was contained it killed the test binary, as it killed the process.
func TestPanicInOneDistributionStepLeavesTheOrderOwed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	s, reg := w.contained(t)
	bad := w.create(t, s, "Lviv Center plumber 100 the bad one")
	w.tg.panicOffer.Store(bad.ID)
	w.master(t, s, 20, "Lviv Center plumber")
	w.master(t, s, 21, "Odesa Center plumber")
	good := w.create(t, s, "Odesa Center plumber 100 the good one")

	eventually(t, func() bool { return domaintest.Counter(t, reg, "panics_total", "dispatch_step") >= 2 },
		"the bad order's step panicked, and again at a recheck")
	sent := w.tg.sentOffers()
	require.Len(t, sent, 1)
	require.Equal(t, good.ID, sent[0].OrderID, "the other order is offered")
	require.Equal(t, dispatch.Searching, w.order(t, bad.ID).State)
	require.Empty(t, w.outbox(t, 20), "nothing of the rolled-back step was written")

	w.tg.panicOffer.Store(0)
	eventually(t, func() bool { return len(w.tg.sentOffers()) == 2 }, "the owed order is offered once the step goes through")
	require.Equal(t, bad.ID, w.tg.sentOffers()[1].OrderID)
}

// An expiry whose closing edit panics (the renderer on one order's offer)
// still expires that offer and every other one due: only that edit is left
// out, and the order goes on to its next round. Before the panic was
// contained it killed the test binary, as it killed the process.
func TestPanicRenderingOneExpiryExpiresEveryOffer(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dispatch.Config{OfferSLA: 300 * time.Millisecond, CommissionRate: 10})
	s, reg := w.contained(t)
	w.master(t, s, 30, "Kharkiv Center plumber")
	w.master(t, s, 31, "Poltava Center plumber")
	bad := w.create(t, s, "Kharkiv Center plumber 100 the bad one")
	w.tg.panicClosed.Store(bad.ID)
	good := w.create(t, s, "Poltava Center plumber 100 the good one")

	eventually(t, func() bool {
		var badOffers, goodClosed int
		for _, f := range w.tg.sentOffers() {
			if f.OrderID == bad.ID {
				badOffers++
			}
		}
		for _, f := range w.tg.closedOffers() {
			if f.OrderID == good.ID {
				goodClosed++
			}
		}
		return badOffers >= 2 && goodClosed >= 1
	}, "both offers expired; the bad order offered again in round 2, the good one's edit written")
	first := w.tg.sentOffers()[0]
	require.Equal(t, bad.ID, first.OrderID)
	require.Equal(t, dispatch.Expired, w.offer(t, first.ID).State)
	for _, f := range w.tg.closedOffers() {
		require.NotEqual(t, bad.ID, f.OrderID, "the edit that panicked is left out")
	}
	require.GreaterOrEqual(t, domaintest.Counter(t, reg, "panics_total", "dispatch_expiry"), 1.0)
}
