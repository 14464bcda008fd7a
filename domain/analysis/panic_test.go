package analysis_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/analysis"
	"switchboard/domain/domaintest"
)

// A run whose batch panics (a bug on an odd answer) fails at that step and
// batch, with the panic as its error, as a run whose model failed; the
// service goes on, and the next run completes. Before the panic was
// contained it killed the test binary, as it killed the process.
func TestPanicInARunFailsItAndTheNextRunGoes(t *testing.T) {
	t.Parallel()
	w, s := setupTasks(t)
	w.port.panicOn = "boom"
	w.talk(t, s, -100, "task: boom")
	w.talk(t, s, -200, "task: fine")

	bad, err := s.NewRun(w.ctx, 1, "24h chat=-100")
	require.NoError(t, err)
	failed := w.startUntil(t, s, bad.ID, analysis.Failed)
	require.NotNil(t, failed.ErrorLog)
	require.Equal(t, analysis.StepProposals, failed.ErrorLog.Step)
	require.Equal(t, 1, failed.ErrorLog.Batch)
	require.True(t, strings.HasPrefix(failed.ErrorLog.Error, "panic: a bug on the answer about boom"), failed.ErrorLog.Error)
	require.Contains(t, w.events(t), "run_failed", "the admins are told")

	good, err := s.NewRun(w.ctx, 1, "24h chat=-200")
	require.NoError(t, err)
	done := w.startUntil(t, s, good.ID, analysis.Completed)
	require.Equal(t, 1, done.ProposalsTotal)
	require.Equal(t, 1.0, domaintest.Counter(t, w.reg, "panics_total", "analysis_run"))
}
