package memory_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain/memory"
	"switchboard/llm"
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
			b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: time.Hour, Backoff: 10 * time.Millisecond, SweepInterval: time.Hour}))
			b.script()
			b.user(t, 1)
			runs := &blinkingRuns{PipelineRuns: b.store.PipelineRuns(), fails: tc.fails, landed: tc.landed}
			svc, err := memory.NewService(b.cfg, memory.Deps{
				Runs: runs, Memories: b.store.Memories(), Prompts: b.store.Prompts(), Outbox: b.store.Outbox(), Users: b.store.Users(), LLM: llm.MemoryPort{Client: b.llmc}, Notifier: b.chat, Typist: b.chat,
				Log: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
			})
			require.NoError(t, err)
			b.start(t, svc)
			r := b.submit(t, svc, 1, "How do I learn Go?")
			// Bounded by the retries (7 s) and a second pass, far below the lease.
			b.waitArchived(t, 1, 45*time.Second)
			got := b.run(t, r.ID)
			require.Equal(t, memory.Completed, got.Status)
			require.Equal(t, "Answer to: How do I learn Go?", got.FinalAnswer)
			require.Equal(t, tc.analyzers, b.llm.Calls("analyzer"))
			require.Len(t, b.queued(t), 2, "the answer queued once")
		})
	}
}
