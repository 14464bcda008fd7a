package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The scenario end to end with a tiny run: one bot polling, then two on
// webhooks, every update handled once and in its chat's order, the JSON
// summary last and the bench database gone.
func TestIntakeSmoke(t *testing.T) {
	out, last, rep := smoke[intakeReport](t, "intake", "-rate", "100", "-d", "1s", "-users", "10", "-replicas", "2",
		"-warmup", "0s")
	require.True(t, strings.HasPrefix(last, `{"scenario":"intake","rate":100,"updates":100,`), last)
	require.Equal(t, 100, rep.Updates)
	require.Equal(t, 2, rep.Replicas)
	require.Positive(t, rep.PollingStoredPerS)
	require.Positive(t, rep.PollingHandledPerS)
	require.Positive(t, rep.PollingOverheadP99MS)
	require.Positive(t, rep.WebhookHandledPerS)
	require.Positive(t, rep.WebhookOverheadP99MS)
	require.GreaterOrEqual(t, rep.PollingOverheadP99MS, rep.PollingOverheadP50MS)
	// The inbox part ends at the bot's user upsert, which the bench must
	// see: a part measured from nothing is minus the epoch.
	for _, part := range []float64{rep.PollingInboxP50MS, rep.PollingInboxP99MS, rep.WebhookInboxP50MS, rep.WebhookInboxP99MS} {
		require.Positive(t, part)
		require.LessOrEqual(t, part, rep.PollingOverheadP99MS+rep.WebhookOverheadP99MS)
	}
	require.Contains(t, out, "polling: 1 bot polling getUpdates")
	require.Contains(t, out, "webhook: 2 bots on webhooks")
	for _, run := range []string{"polling", "webhook"} {
		require.Contains(t, out, run+": verified: 100 updates done in the inbox, each handled exactly once, every chat's in the order sent")
	}
}
