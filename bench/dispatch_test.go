package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The scenario end to end with a tiny run: the last line is the JSON
// summary, every offer was expired and closed once, both sweeps expired
// every due offer, and the database is gone.
func TestDispatchSmoke(t *testing.T) {
	out, last, rep := smoke[dispatchReport](t, "dispatch", "-n", "200", "-spread", "500ms", "-sla-min", "200ms", "-sla-max", "700ms",
		"-batch", "7", "-sweeps", "2", "-sweep-n", "1000", "-sweep-messages", "300", "-timeout", "30s", "-stages")
	require.True(t, strings.HasPrefix(last, `{"scenario":"dispatch","lag_p50_ms":`), "the headline keys come first: %s", last)
	require.Equal(t, "dispatch", rep.Scenario)
	require.Equal(t, 200, rep.N)
	require.Equal(t, 2, rep.Replicas)
	require.Equal(t, 1000, rep.SweepN)
	require.Positive(t, rep.LagP50MS)
	require.GreaterOrEqual(t, rep.LagP90MS, rep.LagP50MS)
	require.GreaterOrEqual(t, rep.LagP99MS, rep.LagP90MS)
	require.GreaterOrEqual(t, rep.LagMaxMS, rep.LagP99MS)
	require.Less(t, rep.LagMaxMS, 30_000.0, "the timers, not a 60 s tick, expired the offers")
	require.Positive(t, rep.Sweep100kMS)
	require.Positive(t, rep.PeakRSSMB)
	// verifyLag and sweepRun have checked the database and the notifier;
	// the report says so.
	require.Contains(t, out, "close_offer=200 (distinct offers 200) events offer_expired=200 order_unassignable=200 send_offer=0 tell=0")
	require.Contains(t, out, "2 replica(s) × 8 follow-up workers")
	require.Contains(t, out, "WATCHDOG_INTERVAL job is not run")
	require.Regexp(t, `replica 0: notifications=\d+ sweeps=\d+`, out)
	require.Regexp(t, `replica 1: notifications=\d+ sweeps=\d+`, out)
	require.Contains(t, out, "db ExpireOffers")
	require.Contains(t, out, "db NextOffer (unassignable)")
	require.Equal(t, 2, strings.Count(out, "returned 1000; second call"))
	require.Regexp(t, `sweep 3: 300 due offers .*, ExpireOffers with 600 messages [0-9.]+ms returned 300; second call [0-9.]+ms returned 0\n`, out)
	require.Equal(t, 300, rep.SweepMessagesN)
	require.Positive(t, rep.SweepMessagesMS)
	require.Regexp(t, `returned 1000; second call [0-9.]+ms returned 0\n`, out)
}
