package tgfake

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Ephemeral messages as the Bot API sets them out: in groups only, to a
// member who is no bot, within 15 seconds of that member's press (by
// callback_query_id) or at any time from a bot that administers the chat;
// seen by that member alone. An older server ignores the parameter and
// posts the message for everyone.
func TestEphemeralMessages(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	srv := New(t, WithoutLimits(), WithClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now }))
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	ann := startedUser(t, srv, 1001)
	bob := srv.User(1002, "Bob", "en")
	group := srv.Supergroup(-1001234567890, "Team", "")
	send := func(chat int64, params map[string]any) apiResponse {
		return callJSON(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "only you", "ephemeral_message_parameters": params})
	}
	to := func(id int64) map[string]any { return map[string]any{"receiver_user_id": id} }

	requireError(t, send(ann.ID(), to(ann.ID())), 400, DescEphemeralChat)
	requireError(t, send(group.ID, to(ann.ID())), 400, DescEphemeralRights)
	requireError(t, send(group.ID, map[string]any{"callback_query_id": "1"}), 400, "Bad Request: receiver_user_id is required (tgfake)")

	board := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{
		"chat_id": group.ID, "text": "board", "reply_markup": keyboardJSON(t, []map[string]any{button("Approve", "ap:1")}),
	}))
	press, err := ann.Press(board, "ap:1")
	require.NoError(t, err)
	requireError(t, send(group.ID, map[string]any{"receiver_user_id": bob.ID(), "callback_query_id": press.ID}), 400, DescQueryInvalid)

	advance(14 * time.Second)
	m := decodeResult[Message](t, send(group.ID, map[string]any{"receiver_user_id": ann.ID(), "callback_query_id": press.ID}))
	require.Equal(t, 0, m.MessageID)
	require.Equal(t, 1, m.EphemeralMessageID)
	require.Equal(t, ann.ID(), m.ReceiverUser.ID)
	require.Len(t, srv.Messages(group.ID), 1, "the group sees only the board")
	eph := srv.EphemeralMessages(group.ID)
	require.Len(t, eph, 1)
	require.Equal(t, "only you", eph[0].Text)

	advance(2 * time.Second)
	requireError(t, send(group.ID, map[string]any{"receiver_user_id": ann.ID(), "callback_query_id": press.ID}), 400, DescEphemeralRights)

	// A bot that administers the chat may send one at any time, to a member.
	srv.SetChatMember(group.ID, srv.Bot().ID, StatusAdministrator)
	require.Equal(t, 2, decodeResult[Message](t, send(group.ID, to(bob.ID()))).EphemeralMessageID)
	srv.SetChatMember(group.ID, bob.ID(), StatusLeft)
	requireError(t, send(group.ID, to(bob.ID())), 400, DescEphemeralReceiver)
	requireError(t, send(group.ID, to(srv.Bot().ID)), 400, DescEphemeralReceiver)

	srv.SetUnsupported(true, FeatureEphemeral)
	old := decodeResult[Message](t, send(group.ID, to(ann.ID())))
	require.Nil(t, old.ReceiverUser, "an older server posts it for everyone")
	require.NotZero(t, old.MessageID)
	require.Len(t, srv.Messages(group.ID), 2)
	require.Len(t, srv.EphemeralMessages(group.ID), 2)
}
