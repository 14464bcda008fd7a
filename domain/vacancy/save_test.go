package vacancy_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/storage"
)

// blinkingRepo refuses the first fails moves to ANALYZED as a database
// shutting down would.
type blinkingRepo struct {
	*storage.Matches
	fails int32
	calls atomic.Int32
}

func (r *blinkingRepo) Transition(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	if to == vacancy.Analyzed && r.calls.Add(1) <= r.fails {
		return vacancy.Match{}, false, errors.New("FATAL: the database system is shutting down (SQLSTATE 57P01)")
	}
	return r.Matches.Transition(ctx, id, from, to, ch)
}

// A judged match whose save the database refuses is saved on a retry;
// refused through every retry, its claim is given back at once, so the next
// claim takes it rather than waiting out the (hour-long) lease.
func TestAMatchSaveTheDatabaseRefusesIsRetriedOrGivenBack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		fails     int32
		processes int // ProcessNext calls until ANALYZED
		judged    int
	}{
		{"refused once: retried", 1, 1, 1},
		{"refused through every retry: given back and claimed again", 4, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withConfig(vacancy.Config{ClaimLease: time.Hour}))
			b.relevant()
			b.queue(t, vacancies(1, 500, 24)...)
			svc := b.serviceWith(t, &blinkingRepo{Matches: b.store.Matches(), fails: tc.fails})
			for i := range tc.processes {
				ok, err := svc.ProcessNext(b.ctx)
				require.NoError(t, err)
				require.True(t, ok, "process %d found a claimable match", i+1)
			}
			require.Equal(t, vacancy.Analyzed, b.status(t, seeker, 500))
			require.Equal(t, tc.judged, b.llm.Calls("relevance"))
			var match int64
			require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM vacancy_matches WHERE vacancy_id = 500`).Scan(&match))
			require.Equal(t, map[string]int{"pending": 1}, b.cards(t, match), "one card queued")
		})
	}
}

// A match claimed and abandoned counts as held past its lease once the
// lease ran out; one put back (Matches.PutBack) does not.
func TestHeldPastLeaseCountsLapsedMatchClaims(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.queue(t, vacancies(1, 500, 25)...)
	const lease = time.Minute
	c, ok, err := b.store.Matches().Claim(b.ctx, vacancy.ClaimOptions{ClaimLease: lease, Taste: 5, DetailFresh: time.Hour})
	require.NoError(t, err)
	require.True(t, ok)
	held := func() int64 {
		h, err := b.store.HeldPastLease(b.ctx, lease)
		require.NoError(t, err)
		return h.VacancyMatches
	}
	require.Zero(t, held(), "a live claim")
	_, err = b.store.Pool().Exec(b.ctx, `UPDATE vacancy_matches SET claimed_until = claimed_until - interval '2 hours',
updated_at = updated_at - interval '2 hours' WHERE id = $1`, c.Match.ID)
	require.NoError(t, err)
	require.Equal(t, int64(1), held(), "its worker died an hour and a minute ago")
	require.NoError(t, b.store.Matches().PutBack(b.ctx, c.Match.ID, c.Match.ClaimToken, 0, vacancy.ReasonUnsaved))
	require.Zero(t, held(), "given back")
}

// unholdableRepo writes into every move to ANALYZED a reason with a NUL in
// it, which jsonb cannot hold: a value some later field of the verdict or
// the card might carry past the cleaning, refused by PostgreSQL itself
// however often it is written.
type unholdableRepo struct {
	*storage.Matches
	tries atomic.Int32
}

func (r *unholdableRepo) Transition(ctx context.Context, id int64, from, to vacancy.Status, ch vacancy.Change) (vacancy.Match, bool, error) {
	if to == vacancy.Analyzed && ch.Verdict != nil {
		r.tries.Add(1)
		v := *ch.Verdict
		v.Reasons = append(append([]string(nil), v.Reasons...), "Go\x00")
		ch.Verdict = &v
	}
	return r.Matches.Transition(ctx, id, from, to, ch)
}

// A judged match whose result the database refuses for what it holds is
// set aside once, SKIPPED as refused, and neither retried, nor given back
// to be fetched and judged again, nor recovered: the same write would be
// refused for ever, the model asked each time. The queue goes on with the
// matches behind it.
func TestAMatchWhoseResultTheDatabaseCannotHoldIsSetAside(t *testing.T) {
	t.Parallel()
	b := setup(t, withConfig(vacancy.Config{ClaimLease: time.Hour, RecoveryWindow: 48 * time.Hour}))
	b.relevant()
	b.queue(t, vacancies(1, 500, 26)...)
	repo := &unholdableRepo{Matches: b.store.Matches()}
	svc := b.serviceWith(t, repo)

	ok, err := svc.ProcessNext(b.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int32(1), repo.tries.Load(), "refused for its data: not written again")
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 500))
	var reason string
	var match int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id, skip_reason FROM vacancy_matches WHERE vacancy_id = 500`).Scan(&match, &reason))
	require.Equal(t, vacancy.ReasonRefused, reason)
	require.Empty(t, b.cards(t, match), "no card")

	ok, err = svc.ProcessNext(b.ctx)
	require.NoError(t, err)
	require.False(t, ok, "not given back to be claimed again")
	res, err := svc.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, vacancy.RecoveryResult{Attempts: 1, Skipped: 1}, res, "recovery leaves it")
	require.Equal(t, vacancy.Skipped, b.status(t, seeker, 500))
	require.Equal(t, 1, b.llm.Calls("relevance"), "judged once")

	// Without the fault the same kind of match goes through.
	b.queue(t, vacancies(1, 600, 27)...)
	ok, err = b.svc.ProcessNext(b.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, vacancy.Analyzed, b.status(t, seeker, 600))
}
