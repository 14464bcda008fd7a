package vacancy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// Undo takes back Not interested, for the match's owner only: the match
// awaits a decision again (and can be decided anew), and a second undo or
// an undo of another status changes nothing.
func TestUndoTakesBackNotInterested(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.relevant()
	vs := vacancies(2, 600, 31)
	b.queue(t, vs...)
	b.drain(t)
	b.deliverOutbox(t)
	card := b.matchID(t, seeker, 600)

	_, _, err := b.svc.Undo(b.ctx, seeker, card)
	require.ErrorIs(t, err, vacancy.ErrNotUndoable, "nothing decided yet")
	_, _, err = b.svc.Decide(b.ctx, seeker, card, vacancy.NotInterested)
	require.NoError(t, err)

	_, _, err = b.svc.Undo(b.ctx, seeker+1, card)
	require.ErrorIs(t, err, vacancy.ErrForbidden)
	_, _, err = b.svc.Undo(b.ctx, seeker, 999999)
	require.ErrorIs(t, err, domain.ErrNotFound)
	require.Equal(t, vacancy.NotInterested, b.status(t, seeker, 600))

	m, v, err := b.svc.Undo(b.ctx, seeker, card)
	require.NoError(t, err)
	require.Equal(t, vacancy.SentToUser, m.Status)
	require.EqualValues(t, 600, v.ID)
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 600))
	_, _, err = b.svc.Undo(b.ctx, seeker, card)
	require.ErrorIs(t, err, vacancy.ErrNotUndoable, "a second press")

	// Decided anew: Applied this time, which Undo does not take back.
	m, _, err = b.svc.Decide(b.ctx, seeker, card, vacancy.Applied)
	require.NoError(t, err)
	require.Equal(t, vacancy.Applied, m.Status)
	_, _, err = b.svc.Undo(b.ctx, seeker, card)
	require.ErrorIs(t, err, vacancy.ErrNotUndoable)
	require.Equal(t, vacancy.Applied, b.status(t, seeker, 600))
	require.Equal(t, vacancy.SentToUser, b.status(t, seeker, 601), "the other card is untouched")
}
