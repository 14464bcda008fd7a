package bot

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// A body the database refuses for what it holds (here one that skipped
// cleaning, as a character cleaning does not know would) neither stalls
// intake nor takes its batch with it: the rest is stored as sent, the
// refused one as a skeleton of its ids marked refused, and nothing is
// returned for the caller to retry.
func TestStoreUpdatesSetsARefusedBodyAside(t *testing.T) {
	st := storagetest.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ok := func(id, chat int64) domain.InboxUpdate {
		u, err := InboxUpdateOf(json.RawMessage(`{"update_id":` + idStr(id) + `,"message":{"message_id":3,"date":1,"chat":{"id":` +
			idStr(chat) + `,"type":"private"},"from":{"id":` + idStr(chat) + `,"is_bot":false,"first_name":"A","language_code":"uk"},"text":"secret"}}`))
		require.NoError(t, err)
		return u
	}
	poison := ok(2, 20)
	poison.Body = json.RawMessage(`{"update_id":2,"message":{"message_id":3,"date":1,"chat":{"id":20,"type":"private"},"from":{"id":20,"is_bot":false,"first_name":"A","language_code":"uk"},"text":"secret\u0000"}}`)
	require.Error(t, st.Inbox().Take(ctx, "", []domain.InboxUpdate{poison}), "the database refuses it as it is")

	require.NoError(t, storeUpdates(ctx, st.Inbox(), "", storage.AboutData, log, []domain.InboxUpdate{ok(1, 10), poison, ok(3, 30)}))
	claimed, err := st.Inbox().Claim(ctx, "t", 10, 1e9)
	require.NoError(t, err)
	require.Len(t, claimed, 3)
	for _, u := range claimed {
		if u.ID != 2 {
			require.Empty(t, u.Refused)
			require.Contains(t, string(u.Body), "secret")
			continue
		}
		require.Contains(t, u.Refused, "22P05", "why it was refused")
		require.NotContains(t, string(u.Body), "secret", "a skeleton keeps nothing the sender wrote")
		require.True(t, u.HasChat)
		require.EqualValues(t, 20, u.Chat)
		var back struct {
			Message struct {
				ID   int `json:"message_id"`
				Chat struct{ ID int64 }
				From struct {
					ID   int64
					Lang string `json:"language_code"`
				}
			}
		}
		require.NoError(t, json.Unmarshal(u.Body, &back))
		require.Equal(t, 3, back.Message.ID)
		require.EqualValues(t, 20, back.Message.Chat.ID)
		require.Equal(t, "uk", back.Message.From.Lang, "the sender is told in their language")
	}

	// A passing error is returned, for the caller to retry.
	passing := errors.New("connection lost")
	require.ErrorIs(t, storeUpdates(ctx, failingIntake{passing}, "", storage.AboutData, log, []domain.InboxUpdate{ok(4, 40)}), passing)
}

type failingIntake struct{ err error }

func (f failingIntake) Take(context.Context, string, []domain.InboxUpdate) error { return f.err }

func idStr(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// A NOTIFY of updates this replica stored does not wake its workers again
// (storing woke them); another replica's, or one naming nobody (claims
// given back), does.
func TestInboxNotifiedLetsItsOwnPass(t *testing.T) {
	b := &Bot{deps: Deps{Replica: "host-1", Claimer: "host-1#7"}}
	b.inbox = newInboxPoller(b, nil)
	woken := func() bool {
		select {
		case <-b.inbox.wake:
			return true
		default:
			return false
		}
	}
	b.InboxNotified("host-1#7")
	require.False(t, woken(), "its own")
	b.InboxNotified("host-2#3")
	require.True(t, woken(), "another replica's")
	b.InboxNotified("")
	require.True(t, woken(), "no replica named")
	b.InboxNotified("host-1")
	require.True(t, woken(), "the replica's name is not its claimer")
}
