package outage_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/outage"
	"switchboard/storage/storagetest"
)

// /status shows a section only when its source has the method (a type
// assertion that fails silently): the app's Status must have every one, and
// answer from the database.
func TestStatusFeedsEveryStatusSection(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	var s bot.StatusSource = outage.Status{Store: st}
	ctx := context.Background()

	inbox, ok := s.(bot.InboxSource)
	require.True(t, ok, "the inbox section")
	_, err := inbox.InboxStats(ctx)
	require.NoError(t, err)
	outbox, ok := s.(bot.OutboxSource)
	require.True(t, ok, "the delivery section")
	_, err = outbox.OutboxStats(ctx)
	require.NoError(t, err)
	held, ok := s.(bot.HeldSource)
	require.True(t, ok, "the held-work section")
	_, err = held.Held(ctx)
	require.NoError(t, err)
	data, ok := s.(bot.StorageSource)
	require.True(t, ok, "the data section")
	_, err = data.Storage(ctx)
	require.NoError(t, err)
}
