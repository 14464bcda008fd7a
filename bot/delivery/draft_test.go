package delivery_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/e2e/tgfake"
)

func TestDraftShowsWithinTheChatsPaceAndNeverWaits(t *testing.T) {
	b := setup(t)
	b.user(801, "Ann")
	s := b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})

	require.NoError(t, s.Draft(b.ctx, 801, "", 5, "Lviv is <b>lovely</b> …"))
	d, shown := b.srv.ShownDraft(801)
	require.True(t, shown)
	assert.Equal(t, "Lviv is lovely …", d.Text)
	assert.Equal(t, int64(5), d.DraftID)

	// A private chat's budget is one a second with a burst of two: the
	// third draft at once finds no room and is skipped, not waited for.
	require.NoError(t, s.Draft(b.ctx, 801, "", 5, "Lviv is lovely in spring …"))
	require.ErrorIs(t, s.Draft(b.ctx, 801, "", 5, "Lviv is lovely in spring. Walk …"), delivery.ErrPaced)
	assert.Len(t, b.srv.Drafts(801), 2)
	assert.Zero(t, b.srv.RateLimited())
}

func TestDraftRefusedByAnOlderServerIsRememberedAndAGroupRefusedAlone(t *testing.T) {
	b := setup(t)
	b.user(802, "Ann")
	group := b.srv.Group(-802, "Team")
	s := b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})

	require.ErrorIs(t, s.Draft(b.ctx, group.ID, "", 1, "x"), delivery.ErrDraftsRefused, "drafts are for private chats")
	require.NoError(t, s.Draft(b.ctx, 802, "", 1, "x"), "a refusal for one chat is that chat's")

	b.srv.SetUnsupported(true, tgfake.FeatureDrafts)
	require.ErrorIs(t, s.Draft(b.ctx, 802, "", 2, "x"), delivery.ErrDraftsRefused)
	b.srv.SetUnsupported(false, tgfake.FeatureDrafts)
	calls := len(b.srv.Calls())
	require.ErrorIs(t, s.Draft(b.ctx, 802, "", 3, "x"), delivery.ErrDraftsRefused, "a server without the method is believed for a while")
	assert.Len(t, b.srv.Calls(), calls, "without asking it again")
}
