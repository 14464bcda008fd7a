package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/storage/storagetest"
)

func TestJobRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storagetest.New(t)

	runs, err := st.Jobs().Runs(ctx)
	require.NoError(t, err)
	require.Empty(t, runs)

	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	record := func(r domain.JobRun) {
		t.Helper()
		require.NoError(t, st.Jobs().RecordRun(ctx, r))
	}
	record(domain.JobRun{Name: "fetch", Replica: "a", StartedAt: t0, Duration: 1500 * time.Millisecond})
	record(domain.JobRun{Name: "fetch", Replica: "b", StartedAt: t0.Add(time.Minute), Duration: 20 * time.Millisecond, Err: "hh: 503"})
	// A slow report of an older run: counted, but the latest run stays.
	record(domain.JobRun{Name: "fetch", Replica: "a", StartedAt: t0.Add(-time.Minute), Duration: time.Second})
	record(domain.JobRun{Name: "autoclose", Replica: "a", StartedAt: t0, Duration: 0})

	runs, err = st.Jobs().Runs(ctx)
	require.NoError(t, err)
	require.Equal(t, []domain.JobRunSummary{
		{JobRun: domain.JobRun{Name: "autoclose", Replica: "a", StartedAt: t0}, Runs: 1},
		{JobRun: domain.JobRun{Name: "fetch", Replica: "b", StartedAt: t0.Add(time.Minute), Duration: 20 * time.Millisecond, Err: "hh: 503"}, Runs: 3, Failures: 1},
	}, runs)

	// A success after a failure clears the shown error but not the count.
	record(domain.JobRun{Name: "fetch", Replica: "a", StartedAt: t0.Add(2 * time.Minute), Duration: 5 * time.Millisecond})
	runs, err = st.Jobs().Runs(ctx)
	require.NoError(t, err)
	require.Equal(t, domain.JobRunSummary{
		JobRun: domain.JobRun{Name: "fetch", Replica: "a", StartedAt: t0.Add(2 * time.Minute), Duration: 5 * time.Millisecond},
		Runs:   4, Failures: 1,
	}, runs[1])
}

func TestJobRunsCanceledContext(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := st.Jobs().RecordRun(ctx, domain.JobRun{Name: "x", Replica: "a", StartedAt: time.Now()})
	require.ErrorIs(t, err, context.Canceled)
}
