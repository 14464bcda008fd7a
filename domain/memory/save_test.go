package memory_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/memory"
	"switchboard/llm/llmtest"
	"switchboard/storage"
)

// blinkingRuns is the runs' store with a database that refuses the save of
// the analyzer's result: fails times, then answers. With landed, each refused
// save is committed first and only its answer lost (the connection dropped
// after the commit).
type blinkingRuns struct {
	*storage.PipelineRuns
	fails  int32
	landed bool
	calls  atomic.Int32
}

var errShuttingDown = errors.New("FATAL: the database system is shutting down (SQLSTATE 57P01)")

func (r *blinkingRuns) Step(ctx context.Context, id int64, st memory.Step) (bool, error) {
	if st.To == memory.Analyzed && r.calls.Add(1) <= r.fails {
		if r.landed {
			if _, err := r.PipelineRuns.Step(ctx, id, st); err != nil {
				return false, err
			}
		}
		return false, errShuttingDown
	}
	return r.PipelineRuns.Step(ctx, id, st)
}

// blinkingRun has user 1 ask "How do I learn Go?" of a service over runs,
// the database refusing the analyzer's saves as runs says, with a stage
// lease of an hour that no test waits out and maxReaps give-backs (0: the
// default). It returns the world and the run once it is archived (or
// failed and told), within wait.
func blinkingRun(t *testing.T, runs *blinkingRuns, maxReaps int, wait time.Duration) (*bundle, memory.PipelineRun) {
	t.Helper()
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: time.Hour, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, MaxReaps: maxReaps}))
	b.script()
	b.user(t, 1)
	runs.PipelineRuns = b.store.PipelineRuns()
	svc := b.serviceOver(t, runs)
	b.start(t, svc)
	r := b.submit(t, svc, 1, "How do I learn Go?")
	b.waitArchived(t, 1, wait)
	return b, b.run(t, r.ID)
}

// With a lease of an hour, a run whose save is refused completes only if
// the save is retried or the stage given back: waiting out the lease would
// take the hour.
func TestAStageSaveTheDatabaseRefusesIsRetriedOrGivenBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		fails     int32
		landed    bool
		analyzers int
	}{
		{"refused once: retried", 1, false, 1},
		{"refused through every retry: given back and captured again", 4, false, 2},
		{"landed but the answer was lost: carried on", 1, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Bounded by the retries (7 s) and a second pass, far below the lease.
			b, got := blinkingRun(t, &blinkingRuns{fails: tc.fails, landed: tc.landed}, 0, 45*time.Second)
			require.Equal(t, memory.Completed, got.Status)
			require.Equal(t, "Answer to: How do I learn Go?", got.FinalAnswer)
			require.Equal(t, tc.analyzers, b.llm.Calls("analyzer"))
			require.Len(t, b.queued(t), 2, "the answer queued once")
		})
	}
}

// A model server's error that says what PostgreSQL cannot hold (a NUL)
// fails the run, recorded and told once, instead of the FAILED step being
// refused and the stage worked again for ever.
func TestAProviderErrorPostgreSQLCannotHoldFailsTheRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On(llmtest.SystemContains("You prepare the context")).Named("assembler").
		Fault(llmtest.HTTPErrorSaying(400, "invalid input near \x00 here"))
	b.serve(t)
	_, got := b.answered(t, 1, "Will this work?", 45*time.Second)
	require.Equal(t, memory.Failed, got.Status)
	require.Contains(t, got.ErrorMessage, "invalid input near \uFFFD here")
	require.Equal(t, 1, b.llm.Calls("assembler"))
	require.Len(t, b.queued(t), 1, "the user is told once")
}

// A stage whose result the database refuses however often it is saved is
// given back MaxReaps times, counted, and then FAILED: the model is not
// asked again for ever.
func TestAResultNeverSavedFailsTheRunAfterMaxReaps(t *testing.T) {
	t.Parallel()
	// Two passes of the save's retries (7 s each), far below the lease.
	b, got := blinkingRun(t, &blinkingRuns{fails: 1 << 30}, 1, 60*time.Second)
	require.Equal(t, memory.Failed, got.Status)
	require.Equal(t, 2, got.Attempts, "each give-back counted")
	require.Contains(t, got.ErrorMessage, "the result could not be saved")
	require.Equal(t, 2, b.llm.Calls("analyzer"), "asked once a pass, two passes")
	require.Len(t, b.queued(t), 1, "the user is told once")
}
