package memory_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/memory"
)

// Four orchestrators on 1000 runs of 50 users: every run completes and is
// archived, and each stage's LLM call happens exactly once per run.
func TestFourOrchestratorsCaptureEachStageOnce(t *testing.T) {
	t.Parallel()
	const runs, users = 1000, 50
	b := setup(t, withConfig(memory.Config{Workers: 8, StageLease: time.Minute, Backoff: 10 * time.Millisecond, SweepInterval: time.Hour}))
	b.script()
	for u := range users {
		b.user(t, int64(u+1))
	}
	svcs := []*memory.Service{b.svc, b.service(t), b.service(t), b.service(t)}
	for _, s := range svcs {
		b.start(t, s)
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each replica takes intake for some users, as the poller would move.
			b.submit(t, svcs[i%len(svcs)], int64(i%users+1), fmt.Sprintf("question %d", i))
		}()
	}
	wg.Wait()
	b.waitArchived(t, runs, 3*time.Minute)

	require.Equal(t, map[memory.Status]int{memory.Completed: runs}, b.statuses(t))
	for _, rule := range []string{"analyzer", "assembler", "responder", "archivist"} {
		require.Equal(t, runs, b.llm.Calls(rule), rule)
	}
	seen := map[int64]bool{}
	for _, a := range b.answers(t) {
		require.False(t, seen[a.Ref], "run %d answered twice", a.Ref)
		seen[a.Ref] = true
	}
	require.Len(t, seen, runs, "every run's answer is queued, once")
	var sums int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM lsm_storage`).Scan(&sums))
	require.Equal(t, runs, sums)
}

// The listener's connection is killed under load: it reconnects, sweeps,
// and every run still completes.
func TestListenerKilledDuringLoad(t *testing.T) {
	t.Parallel()
	const runs = 200
	b := scripted(t)
	b.llm.SetLatency(2 * time.Millisecond)
	for u := range 20 {
		b.user(t, int64(u+1))
	}
	b.start(t, b.svc)
	// Intake on a replica that does not orchestrate: only NOTIFY (and the
	// sweep after a reconnect) can tell the orchestrator.
	intake := b.service(t)
	for i := range runs {
		b.submit(t, intake, int64(i%20+1), fmt.Sprintf("question %d", i))
		if i == runs/4 || i == runs/2 {
			b.exec(t, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
		}
	}
	b.waitArchived(t, runs, time.Minute)
	require.Equal(t, map[memory.Status]int{memory.Completed: runs}, b.statuses(t))
	require.Equal(t, runs, b.llm.Calls("responder"))
}
