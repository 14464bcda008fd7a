package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"switchboard/domain"
)

// Jobs is the periodic jobs' records: each job's runs (job_runs), the
// prune job's work and its runs (prune.go), and the tables it keeps small.
type Jobs struct{ *db }

// Jobs is the store of the jobs' records.
func (s *Store) Jobs() *Jobs { return &Jobs{s.db} }

// RecordRun (jobs.Recorder) counts a run and makes it the job's latest unless a later one
// is already stored: replicas report concurrently, and a slow report of an
// old run must not hide a newer one.
func (s *Jobs) RecordRun(ctx context.Context, r domain.JobRun) error {
	const q = `
INSERT INTO job_runs AS j (name, replica, started_at, duration_ms, error, runs, failures)
VALUES ($1, $2, $3, $4, $5::text, 1, CASE WHEN $5::text = '' THEN 0 ELSE 1 END)
ON CONFLICT (name) DO UPDATE SET
    replica     = CASE WHEN EXCLUDED.started_at >= j.started_at THEN EXCLUDED.replica     ELSE j.replica     END,
    duration_ms = CASE WHEN EXCLUDED.started_at >= j.started_at THEN EXCLUDED.duration_ms ELSE j.duration_ms END,
    error       = CASE WHEN EXCLUDED.started_at >= j.started_at THEN EXCLUDED.error       ELSE j.error       END,
    started_at  = GREATEST(j.started_at, EXCLUDED.started_at),
    runs        = j.runs + 1,
    failures    = j.failures + EXCLUDED.failures`
	_, err := s.pool.Exec(ctx, q, r.Name, r.Replica, r.StartedAt.UTC(), r.Duration.Milliseconds(), r.Err)
	if err != nil {
		return fmt.Errorf("record run of job %s: %w", r.Name, err)
	}
	return nil
}

// Runs lists every job that has run, by name, for /status.
func (s *Jobs) Runs(ctx context.Context) ([]domain.JobRunSummary, error) {
	rows, err := s.pool.Query(ctx, `
SELECT name, replica, started_at, duration_ms, error, runs, failures
FROM job_runs ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("job runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (domain.JobRunSummary, error) {
		var r domain.JobRunSummary
		var ms int64
		err := row.Scan(&r.Name, &r.Replica, &r.StartedAt, &ms, &r.Err, &r.Runs, &r.Failures)
		r.Duration = time.Duration(ms) * time.Millisecond
		r.StartedAt = r.StartedAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("job runs: %w", err)
	}
	return out, nil
}
