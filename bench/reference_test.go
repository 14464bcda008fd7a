package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireReference checks a scenario's output for the same-run reference:
// its line before the scenario's, a verdict per goal, and the reference
// fields and the overall verdict in the JSON line.
func requireReference(t *testing.T, out, last string) {
	t.Helper()
	require.Regexp(t, `(?m)^reference: \d+ SHA-256 of 1 KiB/s .*; \d+ PostgreSQL commits/s`, out)
	verdicts := regexp.MustCompile(`(?m)^goal: .+ [≥≤] [0-9.]+: -?[0-9.]+(e[+-]?\d+)?, (met|MISSED)$`).FindAllString(out, -1)
	require.NotEmpty(t, verdicts, "a verdict per goal:\n%s", out)
	var fields map[string]any
	require.NoError(t, json.Unmarshal([]byte(last), &fields))
	for _, k := range []string{"ref_cpu_ops_per_s", "ref_pg_commits_per_s"} {
		v, ok := fields[k].(float64)
		require.True(t, ok && v > 0, "%s in %s", k, last)
	}
	met, ok := fields["goals_met"].(bool)
	require.True(t, ok, "goals_met in %s", last)
	require.Equal(t, !regexp.MustCompile(`(?m)^goal: .*MISSED$`).MatchString(out), met, "goals_met agrees with the verdicts")
}

func TestGoalVerdicts(t *testing.T) {
	var out bytes.Buffer
	ref := reference{PGCommitsPerS: 2000}
	all := judge(&out, []goal{
		{what: "runs/s per 1000 reference commits/s", value: ref.perKCommits(300), limit: 50},
		{what: "overhead p99 ms", value: 51.25, limit: 50, atMost: true},
	})
	require.False(t, all)
	require.Equal(t, "goal: runs/s per 1000 reference commits/s ≥ 50: 150, met\n"+
		"goal: overhead p99 ms ≤ 50: 51.25, MISSED\n", out.String())
	require.True(t, judge(&out, []goal{{what: "x", value: 1, limit: 1, atMost: true}}))
	require.Zero(t, reference{}.perKCommits(300), "no reference, no ratio")
}

func TestReferenceLoops(t *testing.T) {
	server := postgresServer(t)
	var out bytes.Buffer
	ref, err := measureReference(t.Context(), server, &out)
	require.NoError(t, err)
	require.Positive(t, ref.CPUOpsPerS)
	require.Positive(t, ref.PGCommitsPerS)
	require.Regexp(t, `^reference: \d+ SHA-256 of 1 KiB/s \(200000 on one goroutine\); \d+ PostgreSQL commits/s \(500 single-row INSERTs, each committed\)\n$`, out.String())
}
