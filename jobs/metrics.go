package jobs

import (
	"log/slog"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

// Outcomes of a tick, the values of jobs_runs_total's outcome label.
const (
	OutcomeOK      = "ok"
	OutcomeError   = "error"
	OutcomePanic   = "panic"
	OutcomeSkipped = "skipped" // another replica had it, it was still running, or the lock failed
)

var outcomes = []string{OutcomeOK, OutcomeError, OutcomePanic, OutcomeSkipped}

type metrics struct {
	runs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// panics counts a job's panic in panics_total{where="job"} too, beside
	// the workflows' own, so one series per place answers "did anything
	// panic".
	panics domain.Panics
	log    *slog.Logger
	// rescheduled hears of each start gocron dropped; the scheduler uses it
	// to ask again for a RunNow that was dropped.
	rescheduled func(name string)
}

func newMetrics(reg prometheus.Registerer, log *slog.Logger) (*metrics, error) {
	return domain.NewMetrics(reg, "jobs", func(r *domain.Registrar) *metrics {
		return &metrics{
			runs: r.CounterVec("jobs_runs_total",
				"Ticks of periodic jobs on this replica by outcome (ok, error, panic, skipped).", "job", "outcome"),
			duration: r.HistogramVec("jobs_run_duration_seconds",
				"Duration of periodic job runs on this replica (skipped ticks excluded).",
				prometheus.ExponentialBuckets(0.005, 4, 9), "job"), // 5ms … ~5.5min
			panics: domain.NewPanics(r),
			log:    log,
		}
	})
}

// declare creates a job's series at zero, so a rate over them exists before
// the first failure rather than appearing with it.
func (m *metrics) declare(job string) {
	for _, o := range outcomes {
		m.runs.WithLabelValues(job, o)
	}
	m.duration.WithLabelValues(job)
}

func (m *metrics) observe(job, outcome string, d time.Duration) {
	m.runs.WithLabelValues(job, outcome).Inc()
	if outcome != OutcomeSkipped {
		m.duration.WithLabelValues(job).Observe(d.Seconds())
	}
}

// IncrementJob implements gocron.Monitor for the one skip gocron decides
// alone: a tick that found this replica still running the previous one
// (singleton mode). Everything else is counted by the scheduler itself.
func (m *metrics) IncrementJob(_ uuid.UUID, name string, _ []string, status gocron.JobStatus) {
	if status == gocron.SingletonRescheduled {
		m.observe(name, OutcomeSkipped, 0)
		m.log.Debug("job skipped: previous run still going on this replica", "job", name)
		if m.rescheduled != nil {
			m.rescheduled(name)
		}
	}
}

// RecordJobTiming implements gocron.Monitor; durations are measured around
// the job function instead, where panics are seen too.
func (m *metrics) RecordJobTiming(time.Time, time.Time, uuid.UUID, string, []string) {}
