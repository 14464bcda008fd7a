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
// lease ran out; one put back (ReleaseMatchClaim) does not, though it keeps its
// token too.
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
	require.NoError(t, b.store.Matches().ReleaseClaim(b.ctx, c.Match.ID, c.Match.ClaimToken, time.Now()))
	require.Zero(t, held(), "given back")
}
