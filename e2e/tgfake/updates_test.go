package tgfake

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// pollHeld reports whether a getUpdates call is currently waiting.
func (s *Server) pollHeld() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.poll != nil
}

type pollResult struct {
	resp apiResponse
	err  error
	at   time.Time
}

// pollAsync runs getUpdates in a goroutine; the result arrives on the channel.
func pollAsync(t *testing.T, srv *Server, params map[string]any) <-chan pollResult {
	c := client(t)
	done := make(chan pollResult, 1)
	go func() {
		r, err := callJSONRaw(c, srv, "getUpdates", params)
		done <- pollResult{resp: r, err: err, at: time.Now()}
	}()
	return done
}

func (p pollResult) response(t *testing.T) apiResponse {
	t.Helper()
	require.NoError(t, p.err)
	return p.resp
}

// startPoll runs getUpdates in the background and waits until the server
// holds it, so the test knows the poll is really waiting.
func startPoll(t *testing.T, srv *Server, params map[string]any) <-chan pollResult {
	t.Helper()
	done := pollAsync(t, srv, params)
	srv.WaitFor(t, 5*time.Second, srv.pollHeld)
	return done
}

func TestLongPollWakesPromptly(t *testing.T) {
	srv := New(t)
	alice := srv.User(1001, "Alice", "en")
	done := startPoll(t, srv, map[string]any{"timeout": 10})

	sentAt := time.Now()
	msg := alice.SendText(alice.ID(), "/start")
	res := <-done

	// Woken by the update, the poll answers within a millisecond or two.
	// Half a second still tells that from a poll that waits out its 10 s
	// or looks for updates every half second, and is far above what a
	// loaded CI host's scheduler adds.
	latency := res.at.Sub(sentAt)
	require.Less(t, latency, 500*time.Millisecond, "a held getUpdates must return as soon as an update arrives")
	ups := decodeResult[[]Update](t, res.response(t))
	require.Len(t, ups, 1)
	require.Equal(t, msg.MessageID, ups[0].Message.MessageID)
	require.Equal(t, "/start", ups[0].Message.Text)
	require.Equal(t, []MessageEntity{ent("bot_command", 0, 6)}, ups[0].Message.Entities)
	require.Equal(t, alice.User(), *ups[0].Message.From)
}

func TestLongPollTimesOut(t *testing.T) {
	srv := New(t)
	start := time.Now()
	ups := decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", map[string]any{"timeout": "2"}))
	elapsed := time.Since(start)
	require.Empty(t, ups)
	require.NotNil(t, ups, "an empty poll returns [] rather than null")
	require.GreaterOrEqual(t, elapsed, 2*time.Second)
	// Well short of a poll held for twice its timeout, and of the
	// default's 50 s, whatever a loaded host adds.
	require.Less(t, elapsed, 4*time.Second)
}

func TestGetUpdatesOffsets(t *testing.T) {
	srv := New(t)
	alice := srv.User(1001, "Alice", "en")
	for _, text := range []string{"one", "two", "three"} {
		alice.SendText(alice.ID(), text)
	}
	get := func(params map[string]any) []Update {
		return decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", params))
	}
	texts := func(ups []Update) []string {
		var out []string
		for _, u := range ups {
			out = append(out, u.Message.Text)
		}
		return out
	}

	all := get(nil)
	require.Equal(t, []string{"one", "two", "three"}, texts(all))
	require.Equal(t, all[0].UpdateID+1, all[1].UpdateID, "update ids increase monotonically")
	require.Equal(t, all[1].UpdateID+1, all[2].UpdateID)
	require.Equal(t, []string{"one", "two", "three"}, texts(get(nil)), "nothing is confirmed without an offset")
	require.Equal(t, []string{"one", "two"}, texts(get(map[string]any{"limit": 2})))

	require.Equal(t, []string{"two", "three"}, texts(get(map[string]any{"offset": all[1].UpdateID})))
	require.Len(t, srv.PendingUpdates(), 2, "offset confirms every earlier update")
	require.Equal(t, []string{"three"}, texts(get(map[string]any{"offset": -1})), "a negative offset keeps the last updates")
	require.Empty(t, get(map[string]any{"offset": all[2].UpdateID + 1}))
	require.Empty(t, srv.PendingUpdates())

	alice.SendText(alice.ID(), "four")
	next := get(map[string]any{"offset": all[2].UpdateID + 1})
	require.Equal(t, []string{"four"}, texts(next))
	require.Equal(t, all[2].UpdateID+1, next[0].UpdateID)
	require.Equal(t, 4, next[0].Message.MessageID, "message ids continue per chat")
}

func TestConcurrentGetUpdatesConflict(t *testing.T) {
	srv := New(t)
	alice := srv.User(1001, "Alice", "en")
	first := startPoll(t, srv, map[string]any{"timeout": 30})

	second := pollAsync(t, srv, map[string]any{"timeout": 30})

	res := <-first
	requireError(t, res.response(t), 409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")

	// The second poll is now the one waiting, and gets the update.
	srv.WaitFor(t, 5*time.Second, srv.pollHeld)
	alice.SendText(alice.ID(), "hi")
	ups := decodeResult[[]Update](t, (<-second).response(t))
	require.Len(t, ups, 1)
	require.Equal(t, "hi", ups[0].Message.Text)
}

func TestCloseReleasesHeldPoll(t *testing.T) {
	srv := New(t)
	done := startPoll(t, srv, map[string]any{"timeout": 50})
	start := time.Now()
	srv.Close()
	res := <-done
	require.Less(t, time.Since(start), 10*time.Second, "the poll held on to its 50 s")
	require.Empty(t, decodeResult[[]Update](t, res.response(t)))
}

func TestEditsAndBotMembershipAreUpdates(t *testing.T) {
	srv := New(t, WithReadAllGroupMessages())
	alice := srv.User(1001, "Alice", "en")
	team := srv.Supergroup(-1001234, "Team", "")
	srv.SetChatMember(team.ID, srv.Bot().ID, StatusLeft)

	alice.SetBotStatus(team.ID, StatusMember)
	alice.SetBotStatus(team.ID, StatusMember) // no change: no update
	sent := alice.SendText(team.ID, "first draft")
	edited := alice.Edit(sent, "final text")
	require.Equal(t, sent.MessageID, edited.MessageID)
	require.NotZero(t, edited.EditDate)

	ups := decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", nil))
	require.Len(t, ups, 3)
	mcm := ups[0].MyChatMember
	require.NotNil(t, mcm)
	require.Equal(t, team.ID, mcm.Chat.ID)
	require.Equal(t, alice.ID(), mcm.From.ID)
	require.Equal(t, StatusLeft, mcm.OldChatMember.Status)
	require.Equal(t, StatusMember, mcm.NewChatMember.Status)
	require.Equal(t, srv.Bot().ID, mcm.NewChatMember.User.ID)
	require.Equal(t, "first draft", ups[1].Message.Text)
	require.NotNil(t, ups[2].EditedMessage)
	require.Equal(t, "final text", ups[2].EditedMessage.Text)
	hist := srv.History(team.ID)
	require.Len(t, hist, 1)
	require.Equal(t, "final text", hist[0].Text, "the chat shows the edited text")
	me := decodeResult[User](t, callJSON(t, srv, "getMe", nil))
	require.True(t, *me.CanReadAllGroupMessages)

	alice.SetBotStatus(team.ID, StatusLeft)
	ups = decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", map[string]any{"offset": ups[2].UpdateID + 1}))
	require.Len(t, ups, 1)
	require.Equal(t, StatusLeft, ups[0].MyChatMember.NewChatMember.Status)
}
