package tgfake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSendMessageDraftRules(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	srv := New(t, WithClock(func() time.Time { return now }))
	alice := srv.User(1001, "Alice", "en")
	alice.SendText(alice.ID(), "/start")
	group := srv.Group(-100, "Team")

	draft := func(chat, id int64, text string) map[string]any {
		return map[string]any{"chat_id": chat, "draft_id": id, "text": text, "parse_mode": "HTML"}
	}
	requireOK(t, callJSON(t, srv, "sendMessageDraft", draft(alice.ID(), 7, "Lviv is <b>lovely</b>")))
	d, shown := srv.ShownDraft(alice.ID())
	require.True(t, shown)
	assert.Equal(t, "Lviv is lovely", d.Text, "entities parsed out")
	assert.Equal(t, int64(7), d.DraftID)

	requireError(t, callJSON(t, srv, "sendMessageDraft", draft(group.ID, 7, "hi")), 400, "Bad Request: TEXTDRAFT_PEER_INVALID")
	requireError(t, callJSON(t, srv, "sendMessageDraft", draft(alice.ID(), 0, "hi")), 400, "Bad Request: DRAFT_ID_INVALID")
	requireError(t, callJSON(t, srv, "sendMessageDraft", draft(alice.ID(), 7, "")), 400, "Bad Request: message text is empty")
	requireError(t, callJSON(t, srv, "sendMessageDraft", draft(alice.ID(), 7, "<b>open")), 400, "Bad Request: can't parse entities: Can't find end tag corresponding to start tag \"b\"")

	now = now.Add(DraftLife)
	_, shown = srv.ShownDraft(alice.ID())
	assert.False(t, shown, "a draft is a 30-second preview")

	now = now.Add(time.Second)
	requireOK(t, callJSON(t, srv, "sendMessageDraft", draft(alice.ID(), 7, "Lviv is lovely in spring")))
	requireOK(t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": alice.ID(), "text": "Lviv is lovely in spring."}))
	_, shown = srv.ShownDraft(alice.ID())
	assert.False(t, shown, "the bot's message takes the draft's place")
	assert.Len(t, srv.Drafts(alice.ID()), 2)

	srv.SetUnsupported(true, FeatureDrafts)
	requireError(t, callJSON(t, srv, "sendMessageDraft", draft(alice.ID(), 8, "hi")), 404, "Not Found")
}

func TestDraftsCountAgainstTheChatsFloodLimit(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	srv := New(t, WithClock(func() time.Time { return now }))
	alice := srv.User(1001, "Alice", "en")
	alice.SendText(alice.ID(), "/start")
	var last apiResponse
	for i := 0; i < 4; i++ {
		last = callJSON(t, srv, "sendMessageDraft", map[string]any{"chat_id": alice.ID(), "draft_id": 1, "text": "x"})
	}
	requireError(t, last, 429, "Too Many Requests: retry after 1")
}

// A draft sent with can_stop shows a stop button: pressing it gives the
// bot stopped_message_generation with the draft's id, shows no later
// update of that draft, and keeps the draft shown only with keep_on_stop.
// Without can_stop, or on a server older than Bot API 10.3, there is no
// button. A bot that asks for a list of updates without the kind never
// hears of it.
func TestStoppingADraft(t *testing.T) {
	srv := New(t, WithoutLimits())
	alice := srv.User(1001, "Alice", "en")
	alice.SendText(alice.ID(), "/start")
	draft := func(id int64, text string, stop bool) {
		t.Helper()
		requireOK(t, callJSON(t, srv, "sendMessageDraft", map[string]any{
			"chat_id": alice.ID(), "draft_id": id, "text": text, "can_stop": stop, "keep_on_stop": true}))
	}
	pending := func() []Update {
		t.Helper()
		return decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", map[string]any{"timeout": 0}))
	}
	confirm := func(us []Update) {
		t.Helper()
		if len(us) > 0 {
			callJSON(t, srv, "getUpdates", map[string]any{"offset": us[len(us)-1].UpdateID + 1, "timeout": 0})
		}
	}
	confirm(pending())

	draft(5, "Lviv is", false)
	_, err := alice.StopDraft(alice.ID())
	require.ErrorIs(t, err, ErrNoStopButton)

	draft(6, "Lviv is lovely", true)
	d, err := alice.StopDraft(alice.ID())
	require.NoError(t, err)
	require.Equal(t, int64(6), d.DraftID)
	us := pending()
	require.Len(t, us, 1)
	require.Equal(t, int64(6), us[0].StoppedMessageGeneration.DraftID)
	require.Equal(t, alice.ID(), us[0].StoppedMessageGeneration.Chat.ID)
	confirm(us)
	draft(6, "Lviv is lovely in spring", true)
	shown, ok := srv.ShownDraft(alice.ID())
	require.True(t, ok, "kept on stop")
	require.Equal(t, "Lviv is lovely", shown.Text, "no more of a stopped draft is shown")
	_, err = alice.StopDraft(alice.ID())
	require.ErrorIs(t, err, ErrNoStopButton, "stopped once")

	// A poll that names the kinds it wants without this one drops it.
	callJSON(t, srv, "getUpdates", map[string]any{"timeout": 0, "allowed_updates": `["message"]`})
	draft(7, "Odesa", true)
	_, err = alice.StopDraft(alice.ID())
	require.NoError(t, err)
	require.Empty(t, pending(), "not asked for")

	srv.SetUnsupported(true, FeatureDraftStop)
	draft(8, "Kyiv", true)
	_, err = alice.StopDraft(alice.ID())
	require.ErrorIs(t, err, ErrNoStopButton, "an older server shows no stop button")
}
