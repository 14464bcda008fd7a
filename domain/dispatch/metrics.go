package dispatch

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

type metrics struct {
	offers  *prometheus.CounterVec // offers entering each state
	orders  *prometheus.CounterVec // orders entering each state
	lag     prometheus.Histogram   // expiry handled − expires_at
	sweep   prometheus.Histogram   // the watchdog statement
	blocked prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := domain.NewRegistrar(reg)
	m := &metrics{
		offers: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dispatch_offers_total", Help: "Offers entering each state.",
		}, []string{"state"})),
		orders: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dispatch_orders_total", Help: "Orders entering each state.",
		}, []string{"state"})),
		lag: domain.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dispatch_offer_expiry_lag_seconds",
			Help:    "How long after expires_at an offer was expired.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		})),
		sweep: domain.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "dispatch_watchdog_sweep_seconds",
			Help:    "Duration of the expired-offers statement.",
			Buckets: prometheus.DefBuckets,
		})),
		blocked: domain.Register(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "dispatch_masters_blocked_total", Help: "Masters blocked for overdue commission.",
		})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("dispatch metrics: %w", err)
	}
	return m, nil
}
