package tgfake

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"
)

// newManualClock is a server clock the test moves by hand, so rate limits
// are tested exactly and without sleeping.
func newManualClock() *clockwork.FakeClock {
	return clockwork.NewFakeClockAt(time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC))
}

// setupClocked starts a server on a clock the test moves by hand, with any
// further options.
func setupClocked(t *testing.T, opts ...Option) (*Server, *clockwork.FakeClock) {
	t.Helper()
	clock := newManualClock()
	return New(t, append([]Option{WithClock(clock.Now)}, opts...)...), clock
}

func sendText(t testing.TB, srv *Server, chatID int64, text string) apiResponse {
	t.Helper()
	return callJSON(t, srv, "sendMessage", map[string]any{"chat_id": chatID, "text": text})
}

// require429 checks a flood-control answer down to the Retry-After header
// the Bot API server adds.
func require429(t testing.TB, r apiResponse, retryAfter int) {
	t.Helper()
	requireError(t, r, 429, fmt.Sprintf("Too Many Requests: retry after %d", retryAfter))
	require.Equal(t, retryAfter, r.Parameters.RetryAfter)
	require.Equal(t, strconv.Itoa(retryAfter), r.RetryHeader)
}

func TestLimitedMethodsExist(t *testing.T) {
	for key, name := range limitedMethods {
		spec, ok := methods[key]
		require.True(t, ok, key)
		require.Equal(t, name, spec.name)
	}
}

func TestTooManyRequestsWireFormat(t *testing.T) {
	srv, _ := setupClocked(t)
	alice := startedUser(t, srv, 1001)
	for i := range 3 {
		requireOK(t, sendText(t, srv, alice.ID(), fmt.Sprint("burst ", i)))
	}
	req, err := http.NewRequest(http.MethodGet, methodURL(srv, "sendMessage")+"?chat_id=1001&text=one+too+many", nil)
	require.NoError(t, err)
	resp, err := client(t).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Equal(t, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 1","parameters":{"retry_after":1}}`, string(body))
}

func TestPrivateChatLimit(t *testing.T) {
	srv, clock := setupClocked(t)
	alice := startedUser(t, srv, 1001)

	// Short bursts pass: three at once.
	for i := range 3 {
		requireOK(t, sendText(t, srv, alice.ID(), fmt.Sprint("burst ", i)))
	}
	require429(t, sendText(t, srv, alice.ID(), "fourth"), 1)
	require.Len(t, srv.Messages(alice.ID()), 3, "a refused message is not created")
	require.Equal(t, 1, srv.RateLimited())
	require.Zero(t, srv.EarlySends())

	// Retrying before retry_after passed is an early send, refused with the
	// remaining time (rounded up).
	clock.Advance(999 * time.Millisecond)
	require429(t, sendText(t, srv, alice.ID(), "too soon"), 1)
	require.Equal(t, 1, srv.EarlySends())
	require.Equal(t, 1, srv.EarlySendsIn(alice.ID()))
	require.Equal(t, 2, srv.RateLimited())

	// One token back after a second: one message, then refused again.
	clock.Advance(time.Millisecond)
	m := decodeResult[Message](t, sendText(t, srv, alice.ID(), "after the wait"))
	require.Equal(t, 5, m.MessageID, "/start was 1, the burst 2-4: refused calls used up no message id")
	require429(t, sendText(t, srv, alice.ID(), "again"), 1)
	require.Equal(t, 1, srv.EarlySends(), "a fresh refusal is not early")

	// After a quiet period the full burst is back, and no more.
	clock.Advance(10 * time.Second)
	for i := range 3 {
		requireOK(t, sendText(t, srv, alice.ID(), fmt.Sprint("second burst ", i)))
	}
	require429(t, sendText(t, srv, alice.ID(), "over"), 1)

	ths := srv.Throttles()
	require.Len(t, ths, 4)
	require.Equal(t, Throttle{Time: ths[0].Time, Method: "sendMessage", ChatID: alice.ID(), RetryAfter: 1, Chat: true}, ths[0])
	require.True(t, ths[1].Early)
	require.Equal(t, 4, srv.RateLimitedIn(alice.ID()))
	require.Zero(t, srv.RateLimitedIn(4242))
}

func TestGroupLimitAndRetryAfterRounding(t *testing.T) {
	srv, clock := setupClocked(t)
	group := srv.Supergroup(-1001234567890, "Team", "")
	start := clock.Now()
	for i := range 20 {
		requireOK(t, sendText(t, srv, group.ID, fmt.Sprint("burst ", i)))
	}
	require429(t, sendText(t, srv, group.ID, "21st"), 3)

	// The bucket has a token again after 3 s, the bot was told 3 s: fine.
	clock.Advance(3 * time.Second)
	requireOK(t, sendText(t, srv, group.ID, "refilled"))

	// A refusal 1.5 s into the next 3 s wait answers 2 (rounded up) ...
	clock.Advance(1500 * time.Millisecond)
	require429(t, sendText(t, srv, group.ID, "half way"), 2)
	// ... and the fake holds the bot to it: at +3 s the bucket would admit
	// the message, but the bot was told to wait until +3.5 s.
	clock.Advance(1500 * time.Millisecond)
	require429(t, sendText(t, srv, group.ID, "bucket full, retry_after not over"), 1)
	require.Equal(t, 1, srv.EarlySends())
	clock.Advance(500 * time.Millisecond)
	requireOK(t, sendText(t, srv, group.ID, "waited as told"))
	require.Len(t, srv.Messages(group.ID), 22)

	// Groups are limited each on their own.
	other := srv.Group(-42, "Other")
	requireOK(t, sendText(t, srv, other.ID, "independent bucket"))

	times := srv.AcceptedTimes(group.ID)
	require.Len(t, times, 22)
	require.Equal(t, start, times[0])
	require.Len(t, srv.AcceptedTimes(AllChats), 23)
}

func TestGlobalLimit(t *testing.T) {
	srv, clock := setupClocked(t)
	var users []*Person
	for i := range 32 {
		users = append(users, startedUser(t, srv, int64(2000+i)))
	}
	for _, u := range users[:30] {
		requireOK(t, sendText(t, srv, u.ID(), "broadcast"))
	}
	// The 31st chat is fresh, but the bot as a whole is out of tokens; the
	// wait is 1/30 s, answered as 1.
	require429(t, sendText(t, srv, users[30].ID(), "broadcast"), 1)
	th := srv.Throttles()[0]
	require.True(t, th.Global)
	require.False(t, th.Chat)

	// The global retry_after covers every chat.
	clock.Advance(500 * time.Millisecond)
	require429(t, sendText(t, srv, users[31].ID(), "broadcast"), 1)
	require.Equal(t, 1, srv.EarlySends())
	require.Equal(t, 1, srv.EarlySendsIn(users[31].ID()))

	clock.Advance(500 * time.Millisecond)
	for _, u := range users[30:] {
		requireOK(t, sendText(t, srv, u.ID(), "broadcast"))
	}
	require.Equal(t, 30, srv.MaxInWindow(AllChats, time.Second))
	require.Equal(t, 32, srv.MaxInWindow(AllChats, time.Second+time.Nanosecond))
	require.Equal(t, 1, srv.MaxInWindow(users[0].ID(), time.Hour))
}

func TestRefusalConsumesNoTokens(t *testing.T) {
	t.Run("a chat refusal leaves the global bucket alone", func(t *testing.T) {
		srv, _ := setupClocked(t, WithLimits(Limits{
			Global:  Bucket{Burst: 3, Every: time.Hour},
			Private: Bucket{Burst: 1, Every: time.Hour},
		}))
		alice, bob, carol, dave := startedUser(t, srv, 1), startedUser(t, srv, 2), startedUser(t, srv, 3), startedUser(t, srv, 4)
		requireOK(t, sendText(t, srv, alice.ID(), "1"))
		for range 5 {
			r := sendText(t, srv, alice.ID(), "refused by alice's bucket")
			require.Equal(t, 429, r.ErrorCode)
		}
		requireOK(t, sendText(t, srv, bob.ID(), "2"))
		requireOK(t, sendText(t, srv, carol.ID(), "3"))
		require429(t, sendText(t, srv, dave.ID(), "global bucket empty"), 3600)
	})
	t.Run("a global refusal leaves the chat bucket alone", func(t *testing.T) {
		srv, clock := setupClocked(t, WithLimits(Limits{
			Global:  Bucket{Burst: 3, Every: time.Second},
			Private: Bucket{Burst: 2, Every: time.Hour},
		}))
		alice, bob := startedUser(t, srv, 1), startedUser(t, srv, 2)
		requireOK(t, sendText(t, srv, alice.ID(), "alice 1"))
		requireOK(t, sendText(t, srv, bob.ID(), "bob 1"))
		requireOK(t, sendText(t, srv, bob.ID(), "bob 2"))
		require429(t, sendText(t, srv, alice.ID(), "global bucket empty"), 1)
		clock.Advance(time.Second)
		requireOK(t, sendText(t, srv, alice.ID(), "alice 2: her second token was kept"))
		clock.Advance(time.Second)
		r := sendText(t, srv, alice.ID(), "alice 3")
		require429(t, r, 3600-2) // alice's bucket: one token an hour, 2 s gone
		require.True(t, srv.Throttles()[1].Chat)
		require.False(t, srv.Throttles()[1].Global)
	})
	t.Run("invalid calls consume nothing", func(t *testing.T) {
		srv, _ := setupClocked(t)
		alice := startedUser(t, srv, 1001)
		for range 5 {
			requireError(t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": alice.ID(), "text": "<b>x", "parse_mode": "HTML"}), 400,
				`Bad Request: can't parse entities: Can't find end tag corresponding to start tag "b"`)
		}
		for range 3 {
			requireOK(t, sendText(t, srv, alice.ID(), "fine"))
		}
	})
}

func TestEditsAreLimited(t *testing.T) {
	srv, _ := setupClocked(t)
	alice := startedUser(t, srv, 1001)
	sent := decodeResult[Message](t, sendText(t, srv, alice.ID(), "v0"))
	edit := func(text string) apiResponse {
		return callJSON(t, srv, "editMessageText", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID, "text": text})
	}
	requireOK(t, edit("v1"))
	requireOK(t, edit("v2"))
	require429(t, edit("v3"), 1)
	require429(t, callJSON(t, srv, "editMessageReplyMarkup", map[string]any{
		"chat_id": alice.ID(), "message_id": sent.MessageID, "reply_markup": keyboardJSON(t, []map[string]any{button("A", "a")}),
	}), 1)
	cur, _ := srv.MessageByID(alice.ID(), sent.MessageID)
	require.Equal(t, "v2", cur.Text, "a refused edit changes nothing")
	require.Len(t, cur.Edits, 2)

	// Calls that produce no message are not limited.
	requireOK(t, callJSON(t, srv, "sendChatAction", map[string]any{"chat_id": alice.ID(), "action": "typing"}))
	requireOK(t, callJSON(t, srv, "getChat", map[string]any{"chat_id": alice.ID()}))
	requireOK(t, callJSON(t, srv, "deleteMessage", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID}))
	require.Equal(t, 2, srv.RateLimited())
}

func TestConcurrentBurstIntoGroup(t *testing.T) {
	srv, _ := setupClocked(t)
	group := srv.Group(-100, "Team")
	const n = 50
	results := make(chan apiResponse, n)
	errs := make(chan error, n)
	c := client(t)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := callJSONRaw(c, srv, "sendMessage", map[string]any{"chat_id": group.ID, "text": fmt.Sprint("m", i)})
			if err != nil {
				errs <- err
				return
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	ok, refused := 0, 0
	for r := range results {
		if r.OK {
			ok++
		} else {
			require429(t, r, 3)
			refused++
		}
	}
	require.Equal(t, 20, ok)
	require.Equal(t, 30, refused)
	require.Len(t, srv.Messages(group.ID), 20)
	require.Equal(t, 30, srv.RateLimited())
	require.Equal(t, 29, srv.EarlySends(), "all but the first refusal came after retry_after 3 was answered")
	require.Equal(t, 20, srv.MaxInWindow(group.ID, time.Minute))
}

func TestMaxInWindowUnderBucket(t *testing.T) {
	srv, clock := setupClocked(t)
	group := srv.Group(-100, "Team")
	for range 20 {
		requireOK(t, sendText(t, srv, group.ID, "burst"))
	}
	for range 20 {
		clock.Advance(3 * time.Second)
		requireOK(t, sendText(t, srv, group.ID, "paced"))
	}
	require.Zero(t, srv.RateLimited())
	// The token bucket is not a sliding window: a full bucket plus its
	// refill admits 39 messages within one minute. A test asserting
	// Telegram's "20 per minute" must check it with MaxInWindow.
	require.Equal(t, 39, srv.MaxInWindow(group.ID, time.Minute))
	require.Equal(t, 20, srv.MaxInWindow(group.ID, time.Nanosecond))
	require.Zero(t, srv.MaxInWindow(-999, time.Minute))
}

func TestWithoutLimitsAndSetLimits(t *testing.T) {
	srv, _ := setupClocked(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	group := srv.Group(-100, "Team")
	for range 40 {
		requireOK(t, sendText(t, srv, alice.ID(), "unlimited"))
		requireOK(t, sendText(t, srv, group.ID, "unlimited"))
	}
	require.Zero(t, srv.RateLimited())

	srv.SetLimits(DefaultLimits())
	for range 3 {
		requireOK(t, sendText(t, srv, alice.ID(), "limited now"))
	}
	require429(t, sendText(t, srv, alice.ID(), "over"), 1)

	// Lifting the limits also forgets the pending retry_after.
	srv.SetLimits(Limits{})
	requireOK(t, sendText(t, srv, alice.ID(), "lifted"))
	require.Zero(t, srv.EarlySends())
	require.Equal(t, 1, srv.RateLimited(), "counters survive SetLimits")

	// One limit alone: a private chat limit with fractional rate.
	srv.SetLimits(Limits{Private: PerSecond(0.5, 1)})
	requireOK(t, sendText(t, srv, alice.ID(), "one"))
	require429(t, sendText(t, srv, alice.ID(), "two"), 2)
	requireOK(t, sendText(t, srv, group.ID, "groups unlimited"))
	require.Equal(t, Bucket{Burst: 20, Every: 3 * time.Second}, PerSecond(1.0/3, 20))
	require.Equal(t, Bucket{}, PerSecond(0, 5))
}

func TestFailFor(t *testing.T) {
	srv, clock := setupClocked(t)
	alice := startedUser(t, srv, 1001)
	sent := decodeResult[Message](t, sendText(t, srv, alice.ID(), "before"))

	srv.FailFor(10*time.Second, http.StatusBadGateway)
	for range 5 { // more than the chat's burst: the limiter is not reached
		req, err := http.NewRequest(http.MethodPost, methodURL(srv, "sendMessage")+"?chat_id=1001&text=hi", nil)
		require.NoError(t, err)
		resp, err := client(t).Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
		require.Equal(t, "text/html", resp.Header.Get("Content-Type"))
		require.Equal(t, "nginx/1.18.0", resp.Header.Get("Server"))
		require.Equal(t, "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"+
			"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n", string(body))
	}
	// Even a malformed call gets the proxy's answer.
	req, err := http.NewRequest(http.MethodPost, methodURL(srv, "editMessageText"), strings.NewReader("{"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client(t).Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)

	// Calls that produce no message still work.
	requireOK(t, callJSON(t, srv, "getMe", nil))
	requireOK(t, callJSON(t, srv, "sendChatAction", map[string]any{"chat_id": alice.ID(), "action": "typing"}))
	require.Len(t, srv.Messages(alice.ID()), 1)
	require.Zero(t, srv.RateLimited())
	calls := srv.CallsTo("sendMessage")
	require.Equal(t, 502, calls[len(calls)-1].Err.Code)
	require.Contains(t, srv.CallLog(), "502 Bad Gateway")

	clock.Advance(10 * time.Second)
	for range 2 { // the burst is intact
		requireOK(t, sendText(t, srv, alice.ID(), "after"))
	}

	srv.FailFor(time.Minute, http.StatusServiceUnavailable)
	req, err = http.NewRequest(http.MethodPost, methodURL(srv, "editMessageText")+"?chat_id=1001&text=x&message_id="+strconv.Itoa(sent.MessageID), nil)
	require.NoError(t, err)
	resp, err = client(t).Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, string(body), "<title>503 Service Temporarily Unavailable</title>")
	srv.FailFor(0, 0)
	requireOK(t, sendText(t, srv, alice.ID(), "ended early"))
}

func TestDeactivatedUserAndLostGroups(t *testing.T) {
	srv := New(t, WithoutLimits()) // several calls to one chat; access rules are the subject
	alice := startedUser(t, srv, 1001)
	sent := decodeResult[Message](t, sendText(t, srv, alice.ID(), "hello"))

	alice.Deactivate()
	requireError(t, sendText(t, srv, alice.ID(), "still there?"), 403, "Forbidden: user is deactivated")
	requireError(t, callJSON(t, srv, "editMessageText", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID, "text": "x"}), 403,
		"Forbidden: user is deactivated")
	requireError(t, callJSON(t, srv, "deleteMessage", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID}), 403,
		"Forbidden: user is deactivated")
	requireError(t, callJSON(t, srv, "sendChatAction", map[string]any{"chat_id": alice.ID(), "action": "typing"}), 403,
		"Forbidden: user is deactivated")

	bob := srv.User(2002, "Bob", "en")
	bob.Block()
	requireError(t, sendText(t, srv, bob.ID(), "x"), 403, "Forbidden: bot was blocked by the user")

	group := srv.Group(-100, "Team")
	super := srv.Supergroup(-1001, "Big", "")
	inGroup := decodeResult[Message](t, sendText(t, srv, group.ID, "hi"))
	inSuper := decodeResult[Message](t, sendText(t, srv, super.ID, "hi"))
	ann := srv.User(42, "Ann", "en")
	ann.SetBotStatus(group.ID, StatusKicked)
	ann.SetBotStatus(super.ID, StatusLeft)
	requireError(t, sendText(t, srv, group.ID, "x"), 403, "Forbidden: bot was kicked from the group chat")
	requireError(t, callJSON(t, srv, "editMessageText", map[string]any{"chat_id": group.ID, "message_id": inGroup.MessageID, "text": "x"}), 403,
		"Forbidden: bot was kicked from the group chat")
	requireError(t, callJSON(t, srv, "deleteMessage", map[string]any{"chat_id": super.ID, "message_id": inSuper.MessageID}), 403,
		"Forbidden: bot is not a member of the supergroup chat")
	ann.SetBotStatus(super.ID, StatusKicked)
	requireError(t, sendText(t, srv, super.ID, "x"), 403, "Forbidden: bot was kicked from the supergroup chat")
}

func TestTelebotSeesLimitsAndBadDays(t *testing.T) {
	srv, clock := setupClocked(t)
	bot, _ := startBot(t, srv, func(*tele.Bot) {})
	alice := startedUser(t, srv, 1001)
	to := &tele.User{ID: alice.ID()}
	for range 3 {
		_, err := bot.Send(to, "burst")
		require.NoError(t, err)
	}
	_, err := bot.Send(to, "one too many")
	// telebot v3 returns FloodError as a value, so errors.As needs a
	// tele.FloodError target; a *tele.FloodError target does not match.
	var flood tele.FloodError
	require.ErrorAs(t, err, &flood)
	require.Equal(t, 1, flood.RetryAfter)
	var floodPtr *tele.FloodError
	require.False(t, errors.As(err, &floodPtr))

	group := srv.Group(-100, "Team")
	chat := &tele.Chat{ID: group.ID}
	for range 20 {
		_, err := bot.Send(chat, "burst")
		require.NoError(t, err)
	}
	_, err = bot.Send(chat, "21st")
	require.ErrorAs(t, err, &flood)
	require.Equal(t, 3, flood.RetryAfter)

	clock.Advance(time.Hour)
	srv.FailFor(time.Minute, http.StatusBadGateway)
	_, err = bot.Send(to, "bad day")
	require.Error(t, err, "telebot cannot parse nginx's HTML page, so the send fails")
	require.False(t, errors.As(err, &flood))
	srv.FailNextWith("sendMessage", 1, ProxyError(http.StatusGatewayTimeout))
	srv.FailFor(0, 0)
	_, err = bot.Send(to, "gateway timeout")
	require.Error(t, err)
	require.Len(t, srv.Messages(alice.ID()), 3)
	_, err = bot.Send(to, "good day")
	require.NoError(t, err)

	alice.Deactivate()
	_, err = bot.Send(to, "gone")
	require.ErrorIs(t, err, tele.ErrUserIsDeactivated)
	bob := startedUser(t, srv, 2002)
	bob.Block()
	_, err = bot.Send(&tele.User{ID: bob.ID()}, "blocked")
	require.ErrorIs(t, err, tele.ErrBlockedByUser)
	srv.SetChatMember(group.ID, srv.Bot().ID, StatusKicked)
	_, err = bot.Send(chat, "kicked")
	require.ErrorIs(t, err, tele.ErrKickedFromGroup)
}
