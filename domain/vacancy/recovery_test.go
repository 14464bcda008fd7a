package vacancy_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// Recovery walks SKIPPED → NEW → QUEUED within the window, leaves matches
// already judged not relevant, deletes what the user excludes since (a ban
// word, a hidden employer), and ignores what is older than the window. Its counters carry the seed's names.
func TestRecoveryRequeuesDeletesAndLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	vs := vacancies(6, 500, 30)
	vs[5].Employer.Name = "Acme & Sons"
	b.queue(t, vs...)
	b.exec(t, `UPDATE vacancy_matches SET status = 'SKIPPED', skip_reason = 'llm_error'`)
	// 501: judged not relevant before it was skipped.
	b.exec(t, `UPDATE vacancy_matches SET is_relevant = false, analysis = '{"is_relevant": false, "score": 3}' WHERE vacancy_id = 501`)
	// 502: now hit by a ban word in its description.
	b.exec(t, `UPDATE vacancies SET description = '<p>Legacy <i>Delphi</i> code</p>' WHERE id = 502`)
	_, _, err := b.svc.Ban(b.ctx, seeker, "delphi")
	require.NoError(t, err)
	// 505: its employer hidden since.
	b.exec(t, `INSERT INTO hidden_employers (user_id, employer) VALUES ($1, 'Acme & Sons')`, seeker)
	// 503: skipped three days ago, outside the 48 h window.
	b.exec(t, `UPDATE vacancy_matches SET created_at = now() - interval '72 hours' WHERE vacancy_id = 503`)

	res, err := b.svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, vacancy.RecoveryResult{Attempts: 5, Recovered: 2, Deleted: 2, Skipped: 1}, res)
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 500))
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 501))
	require.Equal(t, "(none)", string(b.status(t, seeker, 502)))
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 503))
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 504))
	require.Equal(t, "(none)", string(b.status(t, seeker, 505)))

	require.Equal(t, 5.0, b.counter(t, "vacancies_recovery_attempts_total"))
	require.Equal(t, 2.0, b.counter(t, "vacancies_recovery_recovered_total"))
	require.Equal(t, 2.0, b.counter(t, "vacancies_recovery_deleted_total"))
	require.Equal(t, 1.0, b.counter(t, "vacancies_recovery_skipped_total"))
	require.Equal(t, 2.0, b.counter(t, "vacancy_transitions_total", "SKIPPED", "NEW"))
	require.Equal(t, 2.0, b.counter(t, "vacancy_transitions_total", "NEW", "QUEUED"))

	// A second pass (another replica, the next tick) finds nothing to redo.
	res, err = b.svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 0, res.Recovered)
}

// The breaker story in the domain: the LLM down, its first failures are
// the matches' own and the breaker opens; the other matches wait QUEUED,
// none SKIPPED, with no call while it is open, and the breaker is shown in
// the stats; the LLM back, every match is judged and delivered, with no
// recovery needed.
func TestOpenBreakerHoldsMatchesUntilTheLLMIsBack(t *testing.T) {
	t.Parallel()
	// The breaker holds for real time (gobreaker reads the clock itself):
	// long enough that the steps below, a loaded CI's race detector's
	// included (one took over 500 ms), run while it is open.
	const openFor = 5 * time.Second
	b := setup(t, withBreakerOpenFor(openFor))
	b.llm.On().Named("relevance").FaultNext(3, llmtest.ServerError()).
		ReplyJSON(map[string]any{"is_relevant": true, "score": 70, "reasons": []string{"ok"}, "matched_skills": []string{}})
	b.queue(t, vacancies(4, 500, 31)...)
	b.drain(t)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 4}, b.counts(t))
	require.Equal(t, llm.BreakerOpen, b.llmc.BreakerState())
	st, err := b.svc.Stats(b.ctx, seeker)
	require.NoError(t, err)
	require.True(t, st.LLMDown)

	b.waitOver(t)
	b.drain(t)
	require.Equal(t, map[vacancy.Status]int{vacancy.Queued: 4}, b.counts(t))
	require.Equal(t, turns{Attempts: 2, Waits: 2, WaitReason: vacancy.ReasonBreakerOpen, Status: vacancy.Queued}, b.turns(t, 500))
	require.Equal(t, 3, b.llm.Calls("relevance"), "no call while open")
	res, err := b.svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Zero(t, res.Attempts, "nothing for recovery")

	require.Eventually(t, func() bool { return b.llmc.BreakerState() != llm.BreakerOpen }, 6*openFor, 20*time.Millisecond)
	b.waitOver(t)
	b.drain(t)
	require.Equal(t, map[vacancy.Status]int{vacancy.Analyzed: 4}, b.counts(t), "cards queued")
	require.Equal(t, 4, b.deliverOutbox(t))
	require.Equal(t, map[vacancy.Status]int{vacancy.SentToUser: 4}, b.counts(t))
	require.Len(t, b.sent.deliveries(), 4)
}
