package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The scenario end to end with a tiny seed: small batches make each kind
// take several (for 3000 messages at 100 a batch: 30 full ones, one that
// finds nothing left, and the second round's one), the checks (old rows
// gone, young ones kept, no batch over its timeout, sizes fallen) pass,
// and the database is gone.
func TestPruneSmoke(t *testing.T) {
	out, _, rep := smoke[pruneReport](t, "prune", "-messages", "3000", "-runs", "600", "-batch", "100",
		"-baseline", "500ms", "-rate", "100", "-users", "5", "-workers", "4")
	require.Equal(t, "prune", rep.Scenario)
	require.EqualValues(t, 3000, rep.Messages)
	require.EqualValues(t, 600, rep.RunsCleared)
	require.Zero(t, rep.Timeouts)
	require.Positive(t, rep.MaxBatchMS)
	require.Less(t, rep.MaxBatchMS, rep.TimeoutMS)
	require.GreaterOrEqual(t, rep.PruneBatches, 30+6)
	require.Positive(t, rep.OverheadRuns, "runs went through the pipeline during the prune")
	require.GreaterOrEqual(t, rep.OverheadP99MS, rep.OverheadP50MS)
	require.Positive(t, rep.BaselineP50MS)
	require.Less(t, rep.GMAfterFull, rep.GMBefore)
	// The run itself failed unless the seeded runs' rows shrank (its
	// verify); the files' sizes depend on every database's transactions
	// on the server, and are reported only.
	require.Contains(t, out, "the seeded runs' rows: ")
	require.Contains(t, out, "group_messages   rows     3000  batches    32")
	require.Contains(t, out, "run_context      rows      600  batches     8")
	require.Contains(t, out, "llm_calls analyzer=")
}
