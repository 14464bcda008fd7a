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
