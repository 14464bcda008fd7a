package bot_test

import (
	"context"
	"strings"
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

// /status counts the vacancy queue: what waits for a worker, what of it is
// held back and for what (in the reader's words), what is tried again
// after a failure, and what recovery still owes.
func TestStatusShowsTheVacancyQueue(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	ctx := context.Background()
	// The queue's line ends the status while nothing is held.
	require.True(t, strings.HasSuffix(env.ask(t, env.admin, "/status").Text,
		"\nVacancy matches waiting to be judged: 0; skipped, for recovery to try again: 0"))

	_, err := env.st.Users().Upsert(ctx, domain.User{ID: 77, FirstName: "U"})
	require.NoError(t, err)
	exec(t, env.st, `INSERT INTO vacancies (id, title, published_at) SELECT g, 'go', now() FROM generate_series(1, 4) g`)
	exec(t, env.st, `INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, waits, wait_reason, failures, skip_reason)
VALUES (77, 1, 'QUEUED', now(), 2, 'hh_blocked', 0, ''), (77, 2, 'QUEUED', now(), 0, '', 1, ''),
       (77, 3, 'QUEUED', now(), 0, '', 0, ''), (77, 4, 'SKIPPED', now(), 0, '', 3, 'llm_error')`)
	require.True(t, strings.HasSuffix(env.ask(t, env.admin, "/status").Text,
		"\nVacancy matches waiting to be judged: 3, of them held back: 1 (mostly: hh.ru refuses our requests), "+
			"tried again after a failure: 1; skipped, for recovery to try again: 1"))
}
