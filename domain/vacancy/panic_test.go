package vacancy_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/llm/llmtest"
)

// One match whose card the renderer panics on, among good ones, on the
// real worker loop: the others are judged and sent, the bad one fails
// with reason panic, turn after turn, until it is SKIPPED at the bound,
// and the loop goes on working (a vacancy found afterwards is sent too).
// Recovery returns it, and its next panic sets it aside again at once.
// Before the panic was contained, it killed the test binary as it killed
// the process, after every restart again.
func TestPanicOnOneMatchFailsItAndTheWorkersGoOn(t *testing.T) {
	t.Parallel()
	b := setupRelevant(t)
	b.sent.panicOn = 501
	b.queue(t, vacancies(3, 500, 45)...)

	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { b.svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	b.svc.Wake()

	failures := func(n int) func() bool {
		return func() bool { return b.turns(t, 501).Failures == n }
	}
	require.Eventually(t, failures(1), 30*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return b.counts(t)[vacancy.Analyzed] == 2 }, 30*time.Second, 10*time.Millisecond,
		"the other matches are judged")
	require.Equal(t, 2, b.deliverOutbox(t))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 500))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 502))
	for n := 2; n <= vacancy.DefaultMaxFailures; n++ {
		require.Equal(t, vacancy.Queued, b.status(t, seeker, 501), "failure %d is retried", n-1)
		b.waitOver(t)
		b.svc.Wake()
		require.Eventually(t, failures(n), 30*time.Second, 10*time.Millisecond)
	}
	require.Equal(t, turns{Attempts: 3, Failures: 3, FailureReason: vacancy.ReasonPanic, Status: vacancy.Skipped, SkipReason: vacancy.ReasonPanic},
		b.turns(t, 501), "SKIPPED at the bound, as any failing match")

	b.hh.Add(vacancies(1, 503, 46)...)
	require.NoError(t, b.svc.Fetch(b.ctx))
	b.svc.Wake()
	require.Eventually(t, func() bool { return b.status(t, seeker, 503) == vacancy.Analyzed }, 30*time.Second, 10*time.Millisecond,
		"the workers still work")

	res, err := b.svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, res.Recovered)
	b.svc.Wake()
	require.Eventually(t, failures(vacancy.DefaultMaxFailures+1), 30*time.Second, 10*time.Millisecond)
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 501), "its failures kept: set aside again at once")

	require.Equal(t, float64(vacancy.DefaultMaxFailures+1), b.counter(t, "panics_total", "vacancy_match"))
	require.Equal(t, float64(vacancy.DefaultMaxFailures+1), b.counter(t, "vacancy_match_failures_total", vacancy.ReasonPanic))
	require.Equal(t, 2.0, b.counter(t, "vacancy_matches_skipped_total", vacancy.ReasonPanic))
}

// A letter whose drafting panics (the renderer on the written letter)
// fails at once with reason panic, the user told and offered a retry; the
// other letter is written, and the workers go on.
func TestPanicOnOneLetterFailsIt(t *testing.T) {
	t.Parallel()
	w := setupLetters(t, vacancy.LetterConfig{PerDay: 5})
	w.llm.On(llmtest.SystemContains("cover letter")).Named("letter").Reply(goodLetter)
	w.user(t, 1, "Go developer")
	bad, good := w.match(t, 1, vacancy.Applied), w.match(t, 1, vacancy.Applied)
	w.notes.panicOn = bad

	failed := w.written(t, vacancy.LetterAsk{UserID: 1, MatchID: bad, Style: vacancy.StyleDraft})
	require.Equal(t, vacancy.LetterFailed, failed.State)
	require.Equal(t, vacancy.LetterFailedPanic, failed.Failure)
	require.Len(t, w.notes.failed, 1, "told, with a retry")
	written := w.written(t, vacancy.LetterAsk{UserID: 1, MatchID: good, Style: vacancy.StyleDraft})
	require.Equal(t, vacancy.LetterReady, written.State)
	require.Equal(t, 1.0, w.counter(t, "panics_total", "cover_letter"))
	require.Equal(t, 1.0, w.counter(t, "cover_letters_total", vacancy.LetterFailedPanic))
}
