package dispatch

import (
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

type metrics struct {
	offers  *prometheus.CounterVec // offers entering each state
	orders  *prometheus.CounterVec // orders entering each state
	lag     prometheus.Histogram   // expiry handled − expires_at
	sweep   prometheus.Histogram   // the watchdog statement
	blocked prometheus.Counter
	ratings *prometheus.CounterVec // customers' ratings by stars
	panics  domain.Panics
}

// newMetrics builds the workflow's metrics on r (domain.Prepare).
func newMetrics(r *domain.Registrar) *metrics {
	return &metrics{
		offers: r.CounterVec("dispatch_offers_total", "Offers entering each state.", "state"),
		orders: r.CounterVec("dispatch_orders_total", "Orders entering each state.", "state"),
		lag: r.Histogram("dispatch_offer_expiry_lag_seconds",
			"How long after expires_at an offer was expired.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}),
		sweep: r.Histogram("dispatch_watchdog_sweep_seconds",
			"Duration of the expired-offers statement.",
			prometheus.DefBuckets),
		blocked: r.Counter("dispatch_masters_blocked_total", "Masters blocked for overdue commission."),
		ratings: r.CounterVec("dispatch_ratings_total", "Customers' ratings of finished orders, by stars.", "stars"),
		panics:  domain.NewPanics(r),
	}
}
