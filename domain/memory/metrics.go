package memory

import (
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
	streamed  *prometheus.CounterVec
	stopped   prometheus.Counter
	panics    domain.Panics
}

// newMetrics builds the workflow's metrics on r (domain.Prepare).
func newMetrics(r *domain.Registrar) *metrics {
	return &metrics{
		submitted: r.Counter("memory_runs_submitted_total", "Pipeline runs created from private messages."),
		stage: r.HistogramVec("memory_stage_duration_seconds",
			"Time in each pipeline stage, LLM included.",
			prometheus.ExponentialBuckets(0.005, 2.5, 12), "stage"),
		failed:  r.CounterVec("memory_runs_failed_total", "Runs moved to FAILED, by the stage that failed.", "stage"),
		retries: r.CounterVec("memory_llm_retries_total", "LLM calls retried, by call and reason.", "call", "reason"),
		finished: r.CounterVec("memory_runs_finished_total",
			"Runs delivered (and archived), by final status.", "status"),
		reaped: r.Counter("memory_runs_reaped_total", "Stalled runs the reaper returned to the stage before."),
		givenBack: r.Counter("memory_runs_given_back_total",
			"Stages given back because their result could not be saved."),
		backlog: r.Gauge("memory_runs_backlog", "Runs in NEW at the last sweep."),
		streamed: r.CounterVec("memory_answer_showings_total",
			"Answers-so-far shown while the model wrote, by how (draft, placeholder).", "via"),
		stopped: r.Counter("memory_answers_stopped_total", "Answers the user stopped while the model wrote them."),
		panics:  domain.NewPanics(r),
	}
}
