package analysis

import (
	"errors"
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
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "analysis_runs_total", Help: "Analysis runs entering each state.",
		}, []string{"state"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "analysis_proposal_decisions_total", Help: "Proposals approved or rejected.",
		}, []string{"decision"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "analysis_batch_seconds", Help: "Time to turn one batch into saved proposals.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	if err := errors.Join(
		domain.RegisterMetric(reg, &m.runs),
		domain.RegisterMetric(reg, &m.decisions),
		domain.RegisterMetric(reg, &m.batch),
	); err != nil {
		return nil, fmt.Errorf("analysis metrics: %w", err)
	}
	return m, nil
}
