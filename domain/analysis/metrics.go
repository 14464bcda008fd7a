package analysis

import (
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

type metrics struct {
	runs      *prometheus.CounterVec // runs entering each state
	decisions *prometheus.CounterVec
	batch     prometheus.Histogram // one batch: LLM, save, post
	panics    domain.Panics
}

// newMetrics builds the workflow's metrics on r (domain.Prepare).
func newMetrics(r *domain.Registrar) *metrics {
	return &metrics{
		runs:      r.CounterVec("analysis_runs_total", "Analysis runs entering each state.", "state"),
		decisions: r.CounterVec("analysis_proposal_decisions_total", "Proposals approved or rejected.", "decision"),
		batch: r.Histogram("analysis_batch_seconds",
			"Time to turn one batch into saved proposals.",
			prometheus.DefBuckets),
		panics: domain.NewPanics(r),
	}
}
