package analysis

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

type metrics struct {
	runs      *prometheus.CounterVec // runs entering each state
	decisions *prometheus.CounterVec
	batch     prometheus.Histogram // one batch: LLM, save, post
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := domain.NewRegistrar(reg)
	m := &metrics{
		runs: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "analysis_runs_total", Help: "Analysis runs entering each state.",
		}, []string{"state"})),
		decisions: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "analysis_proposal_decisions_total", Help: "Proposals approved or rejected.",
		}, []string{"decision"})),
		batch: domain.Register(r, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "analysis_batch_seconds", Help: "Time to turn one batch into saved proposals.",
			Buckets: prometheus.DefBuckets,
		})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("analysis metrics: %w", err)
	}
	return m, nil
}
