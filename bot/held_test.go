package bot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/e2e/tgfake"
)

// /status names the work held past its lease, and says nothing of it when
// there is none.
func TestStatusShowsWorkHeldPastItsLease(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	ctx := context.Background()
	require.NotContains(t, env.ask(t, env.admin, "/status").Text, "Held past their lease")

	_, err := env.st.Users().Upsert(ctx, domain.User{ID: 77, FirstName: "U"})
	require.NoError(t, err)
	r, _, err := env.st.PipelineRuns().Submit(ctx, 77, 77, 1, "hello")
	require.NoError(t, err)
	_, _, ok, err := env.st.PipelineRuns().Capture(ctx, r.ID, memory.New, memory.Analyzing, time.Minute, "", memory.RecallSize{})
	require.NoError(t, err)
	require.True(t, ok)
	exec(t, env.st, `UPDATE pipeline_runs SET claimed_until = now() - interval '1 second' WHERE id = $1`, r.ID)
	require.Contains(t, env.ask(t, env.admin, "/status").Text,
		"Held past their lease (taken over when the reaper or the next claim gets to them): 1 memory run, 0 vacancy matches, 0 outgoing messages")
}
