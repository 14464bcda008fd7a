package storage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/storage"
)

func upd(id, chat int64) domain.InboxUpdate {
	return domain.InboxUpdate{ID: id, Chat: chat, HasChat: chat != 0,
		Body: json.RawMessage(fmt.Sprintf(`{"update_id":%d}`, id))}
}

func ids(us []domain.InboxUpdate) []int64 {
	var out []int64
	for _, u := range us {
		out = append(out, u.ID)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Two claimers see one head per chat between them: a chat's next update is
// claimable only once every earlier one is done or failed, whoever held it.
// Updates without a chat are kept in order with nothing.
func TestInboxClaimsEachChatsOldestAcrossClaimers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{upd(10, 1), upd(11, 2), upd(12, 1), upd(13, 0), upd(14, 0), upd(15, 2)}))

	a, err := st.Inbox().Claim(ctx, "a", 1, time.Minute)
	require.NoError(t, err)
	b, err := st.Inbox().Claim(ctx, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{10}, ids(a))
	require.Equal(t, []int64{11, 13, 14}, ids(b), "chat 1's head is a's; chat 2's head and the chatless ones are b's")
	require.Equal(t, string(`{"update_id": 10}`), string(a[0].Body))
	require.True(t, a[0].HasChat)
	require.EqualValues(t, 1, a[0].Chat)
	require.False(t, b[1].HasChat)

	none, err := st.Inbox().Claim(ctx, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, none, "claimed heads hold their chats back")

	ok, err := st.Inbox().Done(ctx, 10, a[0].Token)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = st.Inbox().Done(ctx, 10, a[0].Token)
	require.NoError(t, err)
	require.False(t, ok, "a second done-mark changes nothing")
	// The error may quote what PostgreSQL cannot hold: it is kept cleaned.
	ok, err = st.Inbox().Failed(ctx, 11, b[0].Token, "boom: \x00\xff")
	require.NoError(t, err)
	require.True(t, ok)
	var why string
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT last_error FROM inbox WHERE update_id = 11`).Scan(&why))
	require.Equal(t, "boom: \uFFFD\uFFFD", why)

	next, err := st.Inbox().Claim(ctx, "b", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{12, 15}, ids(next), "a failed update frees its chat as a done one does")
}

// An update stored twice (fetched again, or sent to two webhook replicas) is
// one row, left as it was.
func TestInboxDedupesByUpdateID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{upd(1, 5)}))
	c, err := st.Inbox().Claim(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, c, 1)
	ok, err := st.Inbox().Done(ctx, 1, c[0].Token)
	require.NoError(t, err)
	require.True(t, ok)

	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{upd(1, 5), upd(2, 5), upd(2, 5)}))
	c, err = st.Inbox().Claim(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{2}, ids(c), "the handled update is not handled again")
	stats, err := st.Inbox().Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, [3]int64{1, 1, 0}, [3]int64{stats.Pending, stats.Done, stats.Failed})
	require.Positive(t, stats.OldestAge, "the pending one has waited")
	require.Zero(t, stats.FailedDay)
}

// A retried update waits out its backoff at the head of its chat, and each
// claim counts an attempt.
func TestInboxRetryBacksOffAndKeepsTheChatsOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{upd(1, 7), upd(2, 7)}))
	c, err := st.Inbox().Claim(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{1}, ids(c))
	require.Equal(t, 1, c[0].Attempts)

	ok, err := st.Inbox().Retry(ctx, 1, c[0].Token, time.Hour, "database away \x00")
	require.NoError(t, err)
	require.True(t, ok)
	c2, err := st.Inbox().Claim(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, c2, "neither the backed-off update nor the one behind it")
	ok, err = st.Inbox().Done(ctx, 1, c[0].Token)
	require.NoError(t, err)
	require.False(t, ok, "a given-back claim cannot be settled")

	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{upd(3, 8)}))
	c3, err := st.Inbox().Claim(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{3}, ids(c3))
	ok, err = st.Inbox().Retry(ctx, 3, c3[0].Token, 0, "deadlock")
	require.NoError(t, err)
	require.True(t, ok)
	c3, err = st.Inbox().Claim(ctx, "a", 10, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []int64{3}, ids(c3))
	require.Equal(t, 2, c3[0].Attempts)
}

// A claim held past its lease (its replica died) is taken over, and the old
// holder's token settles nothing; a renewed claim is not taken.
func TestInboxLeaseTakeover(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st, ctx := f.st, f.ctx
	require.NoError(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{upd(1, 9), upd(2, 10)}))
	dead, err := st.Inbox().Claim(ctx, "dead", 10, 300*time.Millisecond)
	require.NoError(t, err)
	require.Len(t, dead, 2)
	ok, err := st.Inbox().Renew(ctx, 2, dead[1].Token, time.Minute)
	require.NoError(t, err)
	require.True(t, ok)

	var taken []domain.InboxUpdate
	require.Eventually(t, func() bool {
		taken, err = st.Inbox().Claim(ctx, "alive", 10, time.Minute)
		require.NoError(t, err)
		return len(taken) > 0
	}, 10*time.Second, 50*time.Millisecond)
	require.Equal(t, []int64{1}, ids(taken), "only the unrenewed claim lapsed")
	require.Equal(t, 2, taken[0].Attempts)

	ok, err = st.Inbox().Done(ctx, 1, dead[0].Token)
	require.NoError(t, err)
	require.False(t, ok, "the dead holder's done-mark loses to the takeover")
	ok, err = st.Inbox().Renew(ctx, 1, dead[0].Token, time.Minute)
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = st.Inbox().Done(ctx, 1, taken[0].Token)
	require.NoError(t, err)
	require.True(t, ok)
}

func TestPassingErrors(t *testing.T) {
	require.True(t, storage.Passing(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	require.False(t, storage.Passing(fmt.Errorf("x: %w", context.Canceled)))
	require.False(t, storage.Passing(fmt.Errorf("plain")))
	require.False(t, storage.Passing(nil))
	require.True(t, storage.Passing(fmt.Errorf("relay: %w", fmt.Errorf("x: %w", domain.ErrNotYetRecorded))),
		"a delivery recorded in a moment")
}

// Take's NOTIFY names the storing replica, so its own listener can let it
// pass; a Take that stores nothing new notifies nobody.
func TestInboxTakeNotifiesNamingItsReplica(t *testing.T) {
	t.Parallel()
	f := setup(t)
	got := listening(t, f.st, storage.InboxChannel)
	require.NoError(t, f.st.Inbox().Take(f.ctx, "replica-a#1", []domain.InboxUpdate{upd(1, 5)}))
	require.NoError(t, f.st.Inbox().Take(f.ctx, "replica-c#3", []domain.InboxUpdate{upd(1, 5)}), "the same update again")
	require.NoError(t, f.st.Inbox().Take(f.ctx, "replica-b#2", []domain.InboxUpdate{upd(2, 5)}))
	require.Equal(t, "inbox replica-a#1", notified(t, got))
	require.Equal(t, "inbox replica-b#2", notified(t, got), "the duplicate (replica-c's) notified nobody")
}
