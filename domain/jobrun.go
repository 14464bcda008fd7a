package domain

import "time"

// JobRun is one run of a periodic job as the scheduler (jobs) reports it
// and storage records it for /status.
type JobRun struct {
	Name      string
	Replica   string
	StartedAt time.Time
	Duration  time.Duration
	Err       string // empty when the run succeeded
}

// JobRunSummary is a job's latest run on any replica and its counters
// over all replicas.
type JobRunSummary struct {
	JobRun
	Runs     int64
	Failures int64
}
