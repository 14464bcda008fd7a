package memory

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// metrics are the process document's list; LLM calls and tokens come from
// the llm package's own series (labels memory_*).
type metrics struct {
	submitted prometheus.Counter
	stage     *prometheus.HistogramVec
	failed    *prometheus.CounterVec
	retries   *prometheus.CounterVec
	finished  *prometheus.CounterVec
	reaped    prometheus.Counter
	givenBack prometheus.Counter
	backlog   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	r := domain.NewRegistrar(reg)
	m := &metrics{
		submitted: domain.Register(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memory_runs_submitted_total", Help: "Pipeline runs created from private messages.",
		})),
		stage: domain.Register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memory_stage_duration_seconds", Help: "Time in each pipeline stage, LLM included.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12),
		}, []string{"stage"})),
		failed: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memory_runs_failed_total", Help: "Runs moved to FAILED, by the stage that failed.",
		}, []string{"stage"})),
		retries: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memory_llm_retries_total", Help: "LLM calls retried, by call and reason.",
		}, []string{"call", "reason"})),
		finished: domain.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memory_runs_finished_total", Help: "Runs delivered (and archived), by final status.",
		}, []string{"status"})),
		reaped: domain.Register(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memory_runs_reaped_total", Help: "Stalled runs the reaper returned to the stage before.",
		})),
		givenBack: domain.Register(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memory_runs_given_back_total", Help: "Stages given back because their result could not be saved.",
		})),
		backlog: domain.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memory_runs_backlog", Help: "Runs in NEW at the last sweep.",
		})),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("memory metrics: %w", err)
	}
	return m, nil
}
