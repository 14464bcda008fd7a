package tgfake

import (
	"encoding/json"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"
)

// with is params with more, for one call's variations on a base.
func with(params map[string]any, more ...any) map[string]any {
	out := make(map[string]any, len(params)+len(more)/2)
	for k, v := range params {
		out[k] = v
	}
	for i := 0; i+1 < len(more); i += 2 {
		out[more[i].(string)] = more[i+1]
	}
	return out
}

// rawLocation is a result's or an update's "location" as the wire has it,
// to tell an absent field from a zero one.
func rawLocation(t *testing.T, message json.RawMessage) map[string]any {
	t.Helper()
	var m struct {
		Location map[string]any `json:"location"`
	}
	require.NoError(t, json.Unmarshal(message, &m), "%s", message)
	require.NotNil(t, m.Location, "no location in %s", message)
	return m.Location
}

func TestSendLocation(t *testing.T) {
	// A dozen sends to one private chat, over its flood limit, which is
	// tested apart (TestLocationCallsAreLimited).
	srv := New(t, WithoutLimits())
	ann := startedUser(t, srv, 1001)
	kyiv := map[string]any{"chat_id": ann.ID(), "latitude": 50.4501, "longitude": 30.5234}

	r := callJSON(t, srv, "sendLocation", with(kyiv, "heading", 90, "proximity_alert_radius", 200))
	still := decodeResult[Message](t, r)
	require.Equal(t, &Location{Latitude: 50.4501, Longitude: 30.5234}, still.Location, "a static location keeps no live fields")
	require.Equal(t, map[string]any{"latitude": 50.4501, "longitude": 30.5234}, rawLocation(t, r.Result))

	kb := keyboardJSON(t, []map[string]any{button("Arrived", "arrived")})
	r = callJSON(t, srv, "sendLocation", with(kyiv, "live_period", 900, "heading", 90, "proximity_alert_radius", 200,
		"horizontal_accuracy", 12.5, "reply_markup", kb, "disable_notification", true, "protect_content", true))
	live := decodeResult[Message](t, r)
	require.Equal(t, &Location{Latitude: 50.4501, Longitude: 30.5234, HorizontalAccuracy: 12.5, LivePeriod: 900, Heading: 90, ProximityAlertRadius: 200}, live.Location)
	require.Equal(t, []string{"Arrived"}, live.ReplyMarkup.Labels())
	require.Equal(t, float64(900), rawLocation(t, r.Result)["live_period"])

	forever := decodeResult[Message](t, callForm(t, srv, "sendLocation", url.Values{
		"chat_id": {"1001"}, "latitude": {"50.45"}, "longitude": {"30.52"}, "live_period": {"2147483647"}, "horizontal_accuracy": {"2000"},
	}))
	require.Equal(t, 0x7FFFFFFF, forever.Location.LivePeriod)
	require.Equal(t, 1500.0, forever.Location.HorizontalAccuracy, "TDLib takes the accuracy into 0-1500 rather than refusing it")
	telebotStyle := decodeResult[Message](t, callForm(t, srv, "sendLocation", url.Values{
		"chat_id": {"1001"}, "latitude": {"50.450100"}, "longitude": {"30.523399"}, "live_period": {"0"}, "horizontal_accuracy": {"-3"},
	}))
	require.Equal(t, &Location{Latitude: 50.4501, Longitude: 30.523399}, telebotStyle.Location, "live_period 0 is a static location")

	reply := decodeResult[Message](t, callJSON(t, srv, "sendLocation", with(kyiv, "reply_parameters", map[string]any{"message_id": live.MessageID})))
	require.Equal(t, live.MessageID, reply.ReplyToID())
	require.Equal(t, 900, reply.ReplyToMessage.Location.LivePeriod)

	sent := srv.Locations(ann.ID())
	require.Len(t, sent, 5)
	require.Equal(t, []LiveState{LiveNone, LiveActive, LiveActive, LiveNone, LiveNone},
		[]LiveState{sent[0].Live, sent[1].Live, sent[2].Live, sent[3].Live, sent[4].Live})
	requireOK(t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": ann.ID(), "text": "not a location"}))
	require.Len(t, srv.Locations(ann.ID()), 5)

	for _, c := range []struct {
		name   string
		params map[string]any
		desc   string
	}{
		{"no latitude", map[string]any{"chat_id": ann.ID(), "longitude": 30.5}, DescLatitudeEmpty},
		{"no longitude", map[string]any{"chat_id": ann.ID(), "latitude": 50.4}, DescLongitudeEmpty},
		{"latitude over 90", with(kyiv, "latitude", 90.5), DescWrongLocation},
		{"longitude under -180", with(kyiv, "longitude", -180.01), DescWrongLocation},
		{"live_period under a minute", with(kyiv, "live_period", 59), DescWrongLivePeriod},
		{"live_period over a day", with(kyiv, "live_period", 86401), DescWrongLivePeriod},
		{"negative live_period", with(kyiv, "live_period", -60), DescWrongLivePeriod},
		{"heading 361", with(kyiv, "live_period", 60, "heading", 361), DescWrongHeading},
		{"negative heading", with(kyiv, "live_period", 60, "heading", -1), DescWrongHeading},
		{"heading of a static location", with(kyiv, "heading", 400), DescWrongHeading},
		{"proximity radius over 100 km", with(kyiv, "live_period", 60, "proximity_alert_radius", 100001), DescWrongProximity},
		{"negative proximity radius", with(kyiv, "live_period", 60, "proximity_alert_radius", -5), DescWrongProximity},
		{"the location before the period", with(kyiv, "latitude", 91, "live_period", 5), DescWrongLocation},
		{"unknown chat", with(kyiv, "chat_id", 999, "latitude", 91), DescChatNotFound},
		{"missing reply before a bad location", with(kyiv, "latitude", 91, "reply_parameters", map[string]any{"message_id": 999}), DescReplyNotFound},
		{"thread in a chat without topics", with(kyiv, "message_thread_id", 5), DescThreadNotFound},
		{"text button", with(kyiv, "reply_markup", keyboardJSON(t, []map[string]any{{"text": "plain"}})),
			"Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireError(t, callJSON(t, srv, "sendLocation", c.params), 400, c.desc)
		})
	}
	requireError(t, callJSON(t, srv, "sendLocation", with(kyiv, "chat_id", srv.User(2002, "Bob", "en").ID())), 403, DescCantInitiate)
	require.Len(t, srv.Locations(ann.ID()), 5, "a refused location is not sent")
}

func TestEditMessageLiveLocation(t *testing.T) {
	// Dozens of edits of one live location, far over the private chat's
	// flood limit (see TestLocationCallsAreLimited).
	srv, clock := setupClocked(t, WithoutLimits())
	ann := startedUser(t, srv, 1001)
	chat := ann.ID()
	send := func(params map[string]any) Message {
		return decodeResult[Message](t, callJSON(t, srv, "sendLocation", with(params, "chat_id", chat, "latitude", 50.45, "longitude", 30.52)))
	}
	edit := func(m Message, more ...any) apiResponse {
		return callJSON(t, srv, "editMessageLiveLocation", with(map[string]any{
			"chat_id": chat, "message_id": m.MessageID, "latitude": 50.46, "longitude": 30.53}, more...))
	}
	kb := keyboardJSON(t, []map[string]any{button("Arrived", "arrived")})
	live := send(map[string]any{"live_period": 60, "heading": 90, "reply_markup": kb})

	clock.Advance(10 * time.Second)
	r := edit(live, "reply_markup", kb, "horizontal_accuracy", 20)
	moved := decodeResult[Message](t, r)
	require.Equal(t, &Location{Latitude: 50.46, Longitude: 30.53, HorizontalAccuracy: 20, LivePeriod: 60}, moved.Location,
		"an edit states the location whole: the heading it left out is gone, the period stays")
	require.Equal(t, clock.Now().Unix(), moved.EditDate)
	require.Equal(t, []string{"Arrived"}, moved.ReplyMarkup.Labels())
	requireError(t, edit(live, "reply_markup", kb, "horizontal_accuracy", 20), 400, DescNotModified)
	decodeResult[Message](t, edit(live, "horizontal_accuracy", 20)) // the keyboard goes: a change
	requireError(t, edit(live, "horizontal_accuracy", 20), 400, DescNotModified)
	extended := decodeResult[Message](t, edit(live, "horizontal_accuracy", 20, "live_period", 120))
	require.Equal(t, 120, extended.Location.LivePeriod, "a longer period at the same place is a change")

	t.Run("refusals", func(t *testing.T) {
		text := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "on my way"}))
		still := send(nil)
		mine := ann.SendText(chat, "where are you?")
		for _, c := range []struct {
			name string
			r    apiResponse
			desc string
		}{
			{"a text message", edit(text), DescNoLiveLocation},
			{"a static location", edit(still), DescCantEdit},
			{"the user's message", edit(mine), DescCantEdit},
			{"no such message", edit(Message{MessageID: 999}), DescEditNotFound},
			{"no latitude", callJSON(t, srv, "editMessageLiveLocation", map[string]any{"chat_id": chat, "message_id": live.MessageID, "longitude": 1}), DescLatitudeEmpty},
			{"off the map", edit(live, "latitude", -90.5), DescInvalidLocation},
			{"heading 0 is none, 361 is wrong", edit(live, "heading", 361), DescEditHeading},
			{"proximity radius", edit(live, "proximity_alert_radius", 100001), DescEditProximity},
			{"a shorter period", edit(live, "live_period", 60), DescLivePeriodShorter},
			{"more than a day longer", edit(live, "live_period", 120+86401), DescLivePeriodLonger},
			{"a reply keyboard", edit(live, "reply_markup", `{"keyboard":[[{"text":"x"}]]}`), "Bad Request: inline keyboard expected"},
			{"an inline message", callJSON(t, srv, "editMessageLiveLocation", map[string]any{"inline_message_id": "AAA", "latitude": 1, "longitude": 1}), "Bad Request: MESSAGE_ID_INVALID"},
			{"no message at all", callJSON(t, srv, "editMessageLiveLocation", map[string]any{"latitude": 1, "longitude": 1}), "Bad Request: message identifier is not specified"},
			{"unknown chat", callJSON(t, srv, "editMessageLiveLocation", map[string]any{"chat_id": 999, "message_id": live.MessageID, "latitude": 1, "longitude": 1}), DescChatNotFound},
		} {
			t.Run(c.name, func(t *testing.T) { requireError(t, c.r, 400, c.desc) })
		}
		// A static location's content never changes, a live one's has no text.
		requireError(t, callJSON(t, srv, "editMessageText", map[string]any{"chat_id": chat, "message_id": still.MessageID, "text": "x"}), 400,
			DescCantEdit)
		requireError(t, callJSON(t, srv, "editMessageText", map[string]any{"chat_id": chat, "message_id": live.MessageID, "text": "x"}), 400,
			DescNoTextToEdit)
	})

	t.Run("indefinitely, and 90 days at most", func(t *testing.T) {
		long := send(map[string]any{"live_period": 86400})
		for period := 2 * 86400; period <= 90*86400; period += 86400 {
			requireOK(t, edit(long, "latitude", 50+float64(period)/1e7, "live_period", period))
		}
		requireError(t, edit(long, "live_period", 91*86400), 400, DescLivePeriodLonger)
		unending := decodeResult[Message](t, edit(long, "live_period", 0x7FFFFFFF))
		require.Equal(t, 0x7FFFFFFF, unending.Location.LivePeriod)
		requireError(t, edit(long, "live_period", 90*86400), 400, DescLivePeriodShorter)
		clock.Advance(365 * 24 * time.Hour)
		requireOK(t, edit(long, "latitude", 1.5))
		got, _ := srv.MessageByID(chat, long.MessageID)
		require.Equal(t, LiveActive, got.Live, "an indefinite location never expires")
	})
}

func TestLiveLocationExpiresByTheServersClock(t *testing.T) {
	srv, clock := setupClocked(t, WithoutLimits())
	ann := startedUser(t, srv, 1001)
	chat := ann.ID()
	live := decodeResult[Message](t, callJSON(t, srv, "sendLocation", map[string]any{
		"chat_id": chat, "latitude": 50.45, "longitude": 30.52, "live_period": 60, "heading": 15, "proximity_alert_radius": 300}))
	edit := func(lat float64) apiResponse {
		return callJSON(t, srv, "editMessageLiveLocation", map[string]any{"chat_id": chat, "message_id": live.MessageID, "latitude": lat, "longitude": 30.52})
	}

	clock.Advance(59 * time.Second)
	requireOK(t, edit(50.46))
	clock.Advance(time.Second)
	requireError(t, edit(50.47), 400, DescCantEdit)
	requireError(t, callJSON(t, srv, "stopMessageLiveLocation", map[string]any{"chat_id": chat, "message_id": live.MessageID}), 400, DescCantEdit)

	got, _ := srv.MessageByID(chat, live.MessageID)
	require.Equal(t, LiveExpired, got.Live)
	require.Equal(t, &Location{Latitude: 50.46, Longitude: 30.52}, got.Location, "an ended live location shows no live fields")
	require.Len(t, got.Edits, 1)
	require.Equal(t, 60, got.Edits[0].Location.LivePeriod, "what it was")

	reply := callJSON(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "ended", "reply_parameters": map[string]any{"message_id": live.MessageID}})
	var quoting struct {
		ReplyTo json.RawMessage `json:"reply_to_message"`
	}
	require.NoError(t, json.Unmarshal(reply.Result, &quoting))
	require.Equal(t, map[string]any{"latitude": 50.46, "longitude": 30.52}, rawLocation(t, quoting.ReplyTo))

	// The markup is not the content: a bot may still change an ended
	// location's keyboard.
	kb := keyboardJSON(t, []map[string]any{button("Done", "done")})
	marked := decodeResult[Message](t, callJSON(t, srv, "editMessageReplyMarkup", map[string]any{"chat_id": chat, "message_id": live.MessageID, "reply_markup": kb}))
	require.Equal(t, []string{"Done"}, marked.ReplyMarkup.Labels())
}

func TestStopMessageLiveLocation(t *testing.T) {
	srv, clock := setupClocked(t, WithoutLimits())
	ann := startedUser(t, srv, 1001)
	chat := ann.ID()
	kb := keyboardJSON(t, []map[string]any{button("Arrived", "arrived")})
	live := decodeResult[Message](t, callJSON(t, srv, "sendLocation", map[string]any{
		"chat_id": chat, "latitude": 50.45, "longitude": 30.52, "live_period": 3600, "heading": 15, "reply_markup": kb}))
	stop := func(m Message, more ...any) apiResponse {
		return callJSON(t, srv, "stopMessageLiveLocation", with(map[string]any{"chat_id": chat, "message_id": m.MessageID}, more...))
	}

	clock.Advance(time.Minute)
	done := keyboardJSON(t, []map[string]any{button("Rate the master", "rate")})
	r := stop(live, "reply_markup", done)
	stopped := decodeResult[Message](t, r)
	require.Equal(t, map[string]any{"latitude": 50.45, "longitude": 30.52}, rawLocation(t, r.Result), "stopped where it was, no live_period")
	require.Equal(t, clock.Now().Unix(), stopped.EditDate)
	require.Equal(t, []string{"Rate the master"}, stopped.ReplyMarkup.Labels())

	requireError(t, stop(live), 400, DescCantEdit)
	requireError(t, callJSON(t, srv, "editMessageLiveLocation", map[string]any{"chat_id": chat, "message_id": live.MessageID, "latitude": 1, "longitude": 1}), 400, DescCantEdit)
	got := srv.Locations(chat)
	require.Len(t, got, 1)
	require.Equal(t, LiveStopped, got[0].Live)
	require.Len(t, got[0].Edits, 1)

	other := decodeResult[Message](t, callJSON(t, srv, "sendLocation", map[string]any{"chat_id": chat, "latitude": 1, "longitude": 2, "live_period": 60, "reply_markup": kb}))
	bare := decodeResult[Message](t, stop(other))
	require.Nil(t, bare.ReplyMarkup, "a stop without reply_markup removes the keyboard, as every edit does")
	text := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "hi"}))
	requireError(t, stop(text), 400, DescNoLiveLocation)
	still := decodeResult[Message](t, callJSON(t, srv, "sendLocation", map[string]any{"chat_id": chat, "latitude": 1, "longitude": 2}))
	requireError(t, stop(still), 400, DescCantEdit)
}

func TestLocationCallsAreLimited(t *testing.T) {
	srv, _ := setupClocked(t)
	ann := startedUser(t, srv, 1001)
	chat := ann.ID()
	live := decodeResult[Message](t, callJSON(t, srv, "sendLocation", map[string]any{"chat_id": chat, "latitude": 1, "longitude": 2, "live_period": 60}))
	requireOK(t, callJSON(t, srv, "editMessageLiveLocation", map[string]any{"chat_id": chat, "message_id": live.MessageID, "latitude": 1.1, "longitude": 2}))
	requireOK(t, callJSON(t, srv, "stopMessageLiveLocation", map[string]any{"chat_id": chat, "message_id": live.MessageID}))
	require429(t, callJSON(t, srv, "sendLocation", map[string]any{"chat_id": chat, "latitude": 1, "longitude": 2}), 1)
	require.Len(t, srv.Throttles(), 1)
}

// fatalTB ends the goroutine it fails in, as a test's Fatalf does, and
// keeps the message, to check that a person's impossible action fails the
// test.
type fatalTB struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// failure runs action and returns how it failed the test ("" if it did
// not).
func (f *fatalTB) failure(action func()) string {
	f.mu.Lock()
	f.fatal = ""
	f.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		action()
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatal
}

func TestPeopleShareLocations(t *testing.T) {
	rec := &fatalTB{TB: t}
	clock := newManualClock()
	srv := New(rec, WithClock(clock.Now))
	ann := srv.User(1001, "Ann", "uk")
	// updates names allowed_updates every time (none: every kind), since
	// the fake, like Telegram, keeps the last ones named.
	updates := func(allowed ...string) []Update {
		return decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", map[string]any{"allowed_updates": append([]string{}, allowed...)}))
	}
	raw := func() []json.RawMessage {
		var ups []map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(callJSON(t, srv, "getUpdates", nil).Result, &ups))
		out := make([]json.RawMessage, 0, len(ups))
		for _, u := range ups {
			m := u["message"]
			if m == nil {
				m = u["edited_message"]
			}
			out = append(out, m)
		}
		return out
	}

	here := ann.SendLocation(ann.ID(), 50.4501, 30.5234)
	shared := ann.ShareLiveLocation(ann.ID(), 50.45, 30.52, 15*time.Minute)
	require.Equal(t, &Location{Latitude: 50.45, Longitude: 30.52, LivePeriod: 900}, shared.Location)
	clock.Advance(30 * time.Second)
	moved := ann.MoveLiveLocation(shared, 50.46, 30.53)
	require.Equal(t, shared.MessageID, moved.MessageID)
	require.Equal(t, clock.Now().Unix(), moved.EditDate)
	clock.Advance(30 * time.Second)
	stopped := ann.StopLiveLocation(shared)
	require.Equal(t, &Location{Latitude: 50.46, Longitude: 30.53}, stopped.Location)

	wire := raw()
	require.Len(t, wire, 4)
	require.Equal(t, map[string]any{"latitude": 50.4501, "longitude": 30.5234}, rawLocation(t, wire[0]))
	require.Equal(t, map[string]any{"latitude": 50.45, "longitude": 30.52, "live_period": float64(900)}, rawLocation(t, wire[1]))
	require.Equal(t, map[string]any{"latitude": 50.46, "longitude": 30.53, "live_period": float64(900)}, rawLocation(t, wire[2]))
	require.Equal(t, map[string]any{"latitude": 50.46, "longitude": 30.53}, rawLocation(t, wire[3]),
		"the stop's edited_message: where it was last, no live_period")

	ups := updates()
	require.Equal(t, here.MessageID, ups[0].Message.MessageID)
	require.Equal(t, shared.MessageID, ups[1].Message.MessageID)
	require.Zero(t, ups[1].Message.EditDate)
	for _, u := range ups[2:] {
		require.Nil(t, u.Message)
		require.Equal(t, shared.MessageID, u.EditedMessage.MessageID)
		require.NotZero(t, u.EditedMessage.EditDate)
	}
	got, _ := srv.MessageByID(ann.ID(), shared.MessageID)
	require.Equal(t, LiveStopped, got.Live)
	require.Len(t, got.Edits, 2)
	still, _ := srv.MessageByID(ann.ID(), here.MessageID)
	require.Equal(t, LiveNone, still.Live)

	t.Run("allowed_updates", func(t *testing.T) {
		callJSON(t, srv, "getUpdates", map[string]any{"offset": ups[len(ups)-1].UpdateID + 1})
		again := ann.ShareLiveLocation(ann.ID(), 1, 2, time.Hour)
		ann.MoveLiveLocation(again, 1.5, 2)
		ann.StopLiveLocation(again)
		kept := updates("edited_message")
		require.Len(t, kept, 2, "the share is a message, which the bot did not ask for")
		require.Equal(t, 1.5, kept[0].EditedMessage.Location.Latitude)
		require.Zero(t, kept[1].EditedMessage.Location.LivePeriod)
		ann.MoveLiveLocation(ann.ShareLiveLocation(ann.ID(), 3, 4, time.Hour), 3.5, 4)
		only := updates("message")
		require.Len(t, only, 1)
		require.Equal(t, 3600, only[0].Message.Location.LivePeriod)
	})

	t.Run("impossible moves fail the test", func(t *testing.T) {
		ended := ann.ShareLiveLocation(ann.ID(), 10, 20, time.Minute)
		bot := decodeResult[Message](t, callJSON(t, srv, "sendLocation", map[string]any{"chat_id": ann.ID(), "latitude": 1, "longitude": 2, "live_period": 60}))
		for _, c := range []struct {
			name, fatal string
			action      func()
		}{
			{"a static location", "is not a live location", func() { ann.MoveLiveLocation(here, 1, 2) }},
			{"a stopped one", "is stopped", func() { ann.MoveLiveLocation(shared, 1, 2) }},
			{"stopping a stopped one", "is stopped", func() { ann.StopLiveLocation(shared) }},
			{"the bot's", "is not Ann's", func() { ann.MoveLiveLocation(bot, 1, 3) }},
			{"to where it is", "is at 10, 20 already", func() { ann.MoveLiveLocation(ended, 10, 20) }},
			{"off the map", "is not on the map", func() { ann.MoveLiveLocation(ended, 91, 20) }},
			{"editing a location's text", "has no text to edit", func() { ann.Edit(shared, "here") }},
			{"a missing one", "no message 999", func() { ann.MoveLiveLocation(Message{Chat: Chat{ID: ann.ID()}, MessageID: 999}, 1, 2) }},
			{"an odd period", "not 1m30.5s", func() { ann.ShareLiveLocation(ann.ID(), 1, 2, 90500*time.Millisecond) }},
			{"a period over a day", "not 24h0m1s", func() { ann.ShareLiveLocation(ann.ID(), 1, 2, 24*time.Hour+time.Second) }},
			{"after its period", "is expired", func() {
				clock.Advance(time.Minute)
				ann.MoveLiveLocation(ended, 11, 20)
			}},
		} {
			require.Contains(t, rec.failure(c.action), c.fatal, c.name)
		}
		got, _ := srv.MessageByID(ann.ID(), ended.MessageID)
		require.Equal(t, LiveExpired, got.Live)
		require.Empty(t, got.Edits)
		for _, u := range updates() {
			require.Nil(t, u.EditedMessage, "no update for an impossible move, nor for the period's end")
		}
	})
}

func TestTelebotLiveLocations(t *testing.T) {
	srv := New(t)
	seen := make(chan *tele.Location, 8)
	bot, errs := startBot(t, srv, func(b *tele.Bot) {
		forward := func(c tele.Context) error {
			seen <- c.Message().Location
			return nil
		}
		b.Handle(tele.OnLocation, forward)
		b.Handle(tele.OnEdited, forward)
	})
	ann := startedUser(t, srv, 1001)
	next := func() *tele.Location {
		t.Helper()
		select {
		case loc := <-seen:
			require.NotNil(t, loc)
			return loc
		case <-time.After(5 * time.Second):
			t.Fatal("the bot saw no location")
			return nil
		}
	}

	shared := ann.ShareLiveLocation(ann.ID(), 50.45, 30.52, time.Hour)
	loc := next()
	require.Equal(t, 3600, loc.LivePeriod, "the bot can tell a live location")
	require.Equal(t, float32(50.45), loc.Lat)
	ann.MoveLiveLocation(shared, 50.46, 30.53)
	loc = next()
	require.Equal(t, 3600, loc.LivePeriod)
	require.Equal(t, float32(50.46), loc.Lat)
	ann.StopLiveLocation(shared)
	loc = next()
	require.Zero(t, loc.LivePeriod, "the last edit says the sharing ended")
	require.Equal(t, float32(30.53), loc.Lng)

	to := &tele.User{ID: ann.ID()}
	sent, err := bot.Send(to, &tele.Location{Lat: 50.45, Lng: 30.52, LivePeriod: 600})
	require.NoError(t, err)
	require.Equal(t, 600, sent.Location.LivePeriod)
	edited, err := bot.Edit(sent, tele.Location{Lat: 50.44, Lng: 30.51})
	require.NoError(t, err)
	require.InDelta(t, 50.44, edited.Location.Lat, 1e-5)
	require.Equal(t, 600, edited.Location.LivePeriod)
	stopped, err := bot.StopLiveLocation(sent)
	require.NoError(t, err)
	require.Zero(t, stopped.Location.LivePeriod)
	_, err = bot.StopLiveLocation(sent)
	require.ErrorContains(t, err, "message can't be edited")

	got := srv.Locations(ann.ID())
	require.Len(t, got, 1)
	require.Equal(t, LiveStopped, got[0].Live)
	require.InDelta(t, 50.44, got[0].Location.Latitude, 1e-6, "telebot writes a float32 with %f")
	srv.WaitUpdatesConsumed(t)
	require.Empty(t, errs.list())
}
