package vacancy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
	"switchboard/llm"
	"switchboard/llm/llmtest"
)

// waitOver makes every match put back for later claimable now, as if its
// wait or its retry's delay were over.
func (b *bundle) waitOver(t *testing.T) {
	t.Helper()
	b.exec(t, `UPDATE vacancy_matches SET claimed_until = now() WHERE status = 'QUEUED' AND claimed_until > now()`)
}

// turns is a match's counters, straight from the table.
type turns struct {
	Attempts, Failures, Waits int
	FailureReason, WaitReason string
	Status                    vacancy.Status
	SkipReason                string
}

func (b *bundle) turns(t *testing.T, vacancyID int64) turns {
	t.Helper()
	var c turns
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `
SELECT attempts, failures, waits, failure_reason, wait_reason, status, skip_reason
FROM vacancy_matches WHERE user_id = $1 AND vacancy_id = $2`, seeker, vacancyID).
		Scan(&c.Attempts, &c.Failures, &c.Waits, &c.FailureReason, &c.WaitReason, &c.Status, &c.SkipReason))
	return c
}

// claimAndDie claims the next match as a worker that dies at once would:
// its claim lapses unclosed.
func (b *bundle) claimAndDie(t *testing.T) {
	t.Helper()
	_, ok, err := b.store.Matches().Claim(b.ctx, vacancy.ClaimOptions{ClaimLease: time.Minute, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	b.exec(t, `UPDATE vacancy_matches SET claimed_until = now() - interval '1 second'`)
}

// tripBreaker opens the LLM's breaker as another caller of the model
// would, three calls failing, none of them this workflow's.
func (b *bundle) tripBreaker(t *testing.T) {
	t.Helper()
	b.llm.On(llmtest.SystemContains("another caller")).Named("other").Fault(llmtest.ServerError())
	for range 3 {
		var v struct{}
		require.Error(t, b.llmc.JSON(b.ctx, llm.Request{System: "another caller", Prompt: "p", Label: "other"}, &v))
	}
	require.Equal(t, llm.BreakerOpen, b.llmc.BreakerState())
}

// hangingCall makes a call of another caller that the model never
// answers, so the client's timeout (5 s) fails it, and returns once the
// call is in flight: it holds a slot, or is the half-open breaker's probe.
// The channel gives the call's error.
func (b *bundle) hangingCall(t *testing.T) <-chan error {
	t.Helper()
	b.llm.On(llmtest.SystemContains("hanging caller")).Named("hanging").Fault(llmtest.Hang())
	done := make(chan error, 1)
	go func() {
		var v struct{}
		done <- b.llmc.JSON(b.ctx, llm.Request{System: "hanging caller", Prompt: "p", Label: "other"}, &v)
	}()
	require.Eventually(t, func() bool { return b.llm.InFlight() == 1 }, 10*time.Second, 5*time.Millisecond)
	return done
}

// The model down far longer than a match may fail: the match claimed and
// given back three times the failure bound over (and once taken over from
// a worker that died) stays QUEUED, each turn a wait, none a failure, and
// is judged and sent once the model is back, never SKIPPED.
func TestWaitsNeverSkipAMatch(t *testing.T) {
	t.Parallel()
	// The breaker holds for real time (gobreaker reads the clock itself):
	// long enough that nine turns on a loaded CI's race detector run
	// while it is open.
	const openFor = 5 * time.Second
	b := setup(t, withBreakerOpenFor(openFor))
	b.relevant()
	b.queue(t, vacancies(1, 500, 40)...)
	b.tripBreaker(t)

	const waits = 9 // three times the bound, vacancy.DefaultMaxFailures
	for turn := 1; turn <= waits; turn++ {
		require.Equal(t, 1, b.drain(t), "turn %d: claimed", turn)
		require.Equal(t, vacancy.Queued, b.status(t, seeker, 500), "turn %d: given back", turn)
		require.Equal(t, 0, b.drain(t), "turn %d: not claimable until the wait is over", turn)
		b.waitOver(t)
	}
	require.Zero(t, b.llm.Calls("relevance"), "the model was not asked while its breaker was open")
	st, err := b.svc.Stats(b.ctx, seeker)
	require.NoError(t, err)
	require.True(t, st.LLMDown)

	require.Eventually(t, func() bool { return b.llmc.BreakerState() != llm.BreakerOpen }, 6*openFor, 20*time.Millisecond)
	// A worker claims it and dies: its claim lapses unclosed.
	b.claimAndDie(t)

	require.Equal(t, 1, b.drain(t))
	require.Equal(t, 1, b.deliverOutbox(t))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
	require.Equal(t, turns{Attempts: waits + 2, Waits: waits + 1, WaitReason: vacancy.ReasonLeaseLost, Status: vacancy.SentToUser},
		b.turns(t, 500), "every turn but the last a wait; none a failure")
	require.Equal(t, float64(waits), b.counter(t, "vacancy_match_waits_total", vacancy.ReasonBreakerOpen))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonLeaseLost))
	require.Zero(t, b.counter(t, "vacancy_matches_skipped_total", vacancy.ReasonBreakerOpen))
}

// A turn whose call waits for the model's one slot while the call holding
// it fails and opens the breaker is turned away unrun: the match waits
// QUEUED for the breaker, as a turn begun a moment later would (so /status
// says the model stopped answering, not that it is busy).
func TestACallQueuedAsTheBreakerOpensWaitsForTheBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t, withLLM(llm.Config{MaxConcurrency: 1}, 1))
	b.relevant()
	b.queue(t, vacancies(1, 500, 43)...)
	// Another caller holds the slot until the client's timeout fails it.
	other := b.hangingCall(t)

	require.Equal(t, 1, b.drain(t))
	require.Error(t, <-other)
	require.Equal(t, llm.BreakerOpen, b.llmc.BreakerState())
	require.Zero(t, b.llm.Calls("relevance"), "the queued call never reached the model")
	require.Equal(t, turns{Attempts: 1, Waits: 1, WaitReason: vacancy.ReasonBreakerOpen, Status: vacancy.Queued}, b.turns(t, 500))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonBreakerOpen))
	require.Zero(t, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonLLMBusy))
}

// A turn whose call the half-open breaker turns away, its one probe out,
// waits for the breaker too: the model has been down and is being tried,
// which /status must not call busy. The breaker's state after the call is
// not what says so (half-open is not open), the call's error is.
func TestACallTurnedAwayByTheProbingBreakerWaitsForTheBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t, withLLM(llm.Config{MaxConcurrency: 2}, 1), withBreakerOpenFor(50*time.Millisecond))
	b.relevant()
	b.queue(t, vacancies(1, 500, 44)...)
	b.llm.On(llmtest.SystemContains("failing caller")).Named("failing").Fault(llmtest.ServerError())
	var v struct{}
	require.Error(t, b.llmc.JSON(b.ctx, llm.Request{System: "failing caller", Prompt: "p", Label: "other"}, &v))
	require.Eventually(t, func() bool { return b.llmc.BreakerState() == llm.BreakerHalfOpen }, 10*time.Second, 5*time.Millisecond)
	// The probe hangs until the client's timeout (5 s) fails it.
	probe := b.hangingCall(t)

	require.Equal(t, 1, b.drain(t))
	select {
	case err := <-probe:
		t.Fatalf("the probe ended (%v) before the turn: one turn cannot take the client's timeout", err)
	default:
	}
	require.Equal(t, llm.BreakerHalfOpen, b.llmc.BreakerState())
	st, err := b.svc.Stats(b.ctx, seeker)
	require.NoError(t, err)
	require.True(t, st.LLMDown, "/vacancies: a probe out is not an answer yet")
	require.Zero(t, b.llm.Calls("relevance"), "the turned-away call never reached the model")
	require.Equal(t, turns{Attempts: 1, Waits: 1, WaitReason: vacancy.ReasonBreakerOpen, Status: vacancy.Queued}, b.turns(t, 500))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonBreakerOpen))
	require.Zero(t, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonLLMBusy))
	require.Error(t, <-probe)
}

// A match whose turns really fail (HH answers 503 for its vacancy) is
// retried, each retry later than the last, and at the bound's failure
// (vacancy.DefaultMaxFailures) it is SKIPPED with the failure's reason,
// as before; recovery returns it and, HH answering, it is judged and sent.
func TestFailuresUpToTheBoundSkipAndRecoveryReturnsIt(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.queue(t, vacancies(1, 500, 41)...)
	b.hh.FailNext(3, 503, hhtest.DetailEndpoint)

	var delays []int
	for failure := 1; failure <= 2; failure++ {
		require.Equal(t, 1, b.drain(t), "turn %d", failure)
		require.Equal(t, vacancy.Queued, b.status(t, seeker, 500), "failure %d is retried", failure)
		require.Equal(t, 0, b.drain(t), "failure %d: not retried at once", failure)
		var delay int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx,
			`SELECT extract(epoch FROM claimed_until - updated_at)::int FROM vacancy_matches WHERE vacancy_id = 500`).Scan(&delay))
		delays = append(delays, delay)
		b.waitOver(t)
	}
	require.Equal(t, []int{15, 30}, delays, "seconds to the retry: RetryAfter times the failures")
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 500), "the third failure")
	require.Equal(t, vacancy.ReasonHHUnavailable, b.skipReason(t, 500))
	require.Equal(t, 0, b.drain(t), "a SKIPPED match waits for recovery")
	require.Equal(t, 1.0, b.counter(t, "vacancy_matches_skipped_total", vacancy.ReasonHHUnavailable))

	res, err := b.svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Recovered)
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, 1, b.deliverOutbox(t))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
	require.Equal(t, turns{Attempts: 4, Failures: 3, FailureReason: vacancy.ReasonHHUnavailable, Status: vacancy.SentToUser},
		b.turns(t, 500))
	require.Equal(t, 3.0, b.counter(t, "vacancy_match_failures_total", vacancy.ReasonHHUnavailable))
	require.Equal(t, 2.0, b.counter(t, "vacancy_matches_processed_total", "retrying"))
}

// Failures and waits in turn, each counted where it belongs: HH's 503 and
// two invalid answers are failures, the model's 429, a shutdown mid-turn
// and a claim whose worker died are waits. Two failures stay below the
// bound, so the match is judged at its sixth turn.
func TestFailuresAndWaitsAreCountedApart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rule := b.relevant()
	b.queue(t, vacancies(1, 500, 42)...)

	// 1: HH fails for the vacancy.
	b.hh.FailNext(1, 503, hhtest.DetailEndpoint)
	require.Equal(t, 1, b.drain(t))
	b.waitOver(t)
	// 2: the model is rate-limited.
	rule.FaultNext(1, llmtest.RateLimit(0))
	require.Equal(t, 1, b.drain(t))
	b.waitOver(t)
	// 3: two invalid answers, one turn.
	rule.FaultNext(2, llmtest.InvalidJSON())
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, vacancy.Queued, b.status(t, seeker, 500), "two failures: below the bound")
	b.waitOver(t)
	// 4: the replica stops mid-turn.
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	_, _ = b.serviceWith(t, shutdownMidClaim{Matches: b.store.Matches(), stop: cancel}).ProcessNext(ctx)
	// 5: a worker claims it and dies.
	b.claimAndDie(t)
	// 6: judged.
	require.Equal(t, 1, b.drain(t))
	require.Equal(t, 1, b.deliverOutbox(t))

	require.Equal(t, turns{
		Attempts: 6,
		Failures: 2, FailureReason: vacancy.ReasonInvalidJSON,
		Waits: 3, WaitReason: vacancy.ReasonLeaseLost,
		Status: vacancy.SentToUser,
	}, b.turns(t, 500))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_failures_total", vacancy.ReasonHHUnavailable))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_failures_total", vacancy.ReasonInvalidJSON))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonLLMBusy))
	require.Equal(t, 1.0, b.counter(t, "vacancy_match_waits_total", vacancy.ReasonLeaseLost))
	require.Equal(t, 4, b.llm.Calls("relevance"), "the 429, two invalid answers, the verdict")
}
