package tgfake

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Locations: sendLocation sends a point on the map, or with a live_period a
// live location, which the bot moves with editMessageLiveLocation until the
// period ends (on the server's clock) or stopMessageLiveLocation stops it.
// People share theirs with Person.SendLocation and ShareLiveLocation, move
// them with MoveLiveLocation and stop them with StopLiveLocation.
//
// The checks and their words are the Bot API server's and TDLib's
// (telegram-bot-api's Client.cpp, TDLib's Location.cpp and
// MessagesManager::edit_message_live_location), in their order. What the
// Telegram server itself refuses in an edit (a live_period that shrinks,
// a heading out of range) it refuses in words nobody documents; those
// below say they are the fake's.
const (
	DescWrongLocation     = "Bad Request: wrong location specified"
	DescInvalidLocation   = "Bad Request: invalid location specified"
	DescWrongLivePeriod   = "Bad Request: wrong live location period specified"
	DescWrongHeading      = "Bad Request: wrong live location heading specified"
	DescWrongProximity    = "Bad Request: wrong live location proximity alert radius specified"
	DescNoLiveLocation    = "Bad Request: there is no live location in the message to edit"
	DescLatitudeEmpty     = "Bad Request: latitude is empty"
	DescLongitudeEmpty    = "Bad Request: longitude is empty"
	DescLivePeriodShorter = "Bad Request: live_period can't be shortened (tgfake)"
	DescLivePeriodLonger  = "Bad Request: live_period may grow by at most a day and end within 90 days (tgfake)"
	DescEditHeading       = DescWrongHeading + " (tgfake)"
	DescEditProximity     = DescWrongProximity + " (tgfake)"
)

// liveForever is the live_period of a location that is live until it is
// stopped.
const liveForever = 0x7FFFFFFF

// LiveIndefinitely is the period of a live location shared "until I turn
// it off" (live_period 0x7FFFFFFF), for Person.ShareLiveLocation.
const LiveIndefinitely = liveForever * time.Second

const (
	minLivePeriod = 60
	maxLivePeriod = 86400
	maxAccuracy   = 1500
	maxProximity  = 100000
	maxLiveExtend = 86400
	maxLiveAhead  = 90 * 86400
	maxHeading    = 360
)

// LiveState is where a live location stands.
type LiveState string

const (
	// LiveNone: not a live location (a static one, or no location).
	LiveNone LiveState = ""
	// LiveActive: its period has not ended and nobody stopped it.
	LiveActive LiveState = "live"
	// LiveStopped: stopMessageLiveLocation, or the person sharing it,
	// stopped it before its period ended.
	LiveStopped LiveState = "stopped"
	// LiveExpired: its period ended.
	LiveExpired LiveState = "expired"
)

// liveAt reports whether m is a live location that may still move at unix
// time now: TDLib's "now - date < period", a stop having ended the period.
func (m *msgState) liveAt(now int64) bool {
	return m.liveState(now) == LiveActive
}

func (m *msgState) liveState(now int64) LiveState {
	switch loc := m.msg.Location; {
	case !m.live:
		return LiveNone
	case loc.LivePeriod == 0:
		return LiveStopped
	case loc.LivePeriod == liveForever || now-m.msg.Date < int64(loc.LivePeriod):
		return LiveActive
	}
	return LiveExpired
}

// at is the message as the Bot API shows it at unix time now: a live
// location whose period has ended loses its live fields, as the server
// writes them only while the location has time left.
func (m *msgState) at(now int64) Message {
	msg := m.msg
	if m.liveState(now) == LiveExpired {
		msg.Location = stillLocation(*msg.Location)
	}
	return msg
}

// stillLocation is loc without a live location's fields.
func stillLocation(loc Location) *Location {
	loc.LivePeriod, loc.Heading, loc.ProximityAlertRadius = 0, 0, 0
	return &loc
}

// floatArg reads a number as the Bot API server's td::to_double does:
// whatever does not read as a finite number is 0, not an error.
func floatArg(r *request, name string) float64 {
	v, err := strconv.ParseFloat(strings.TrimSpace(r.str(name)), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// locationArgs reads latitude, longitude and horizontal_accuracy. An
// accuracy out of 0-1500 is not refused: TDLib takes it into the range
// (Location::fix_accuracy).
func locationArgs(r *request) (Location, *APIError) {
	if strings.TrimSpace(r.str("latitude")) == "" {
		return Location{}, errDesc(400, DescLatitudeEmpty)
	}
	if strings.TrimSpace(r.str("longitude")) == "" {
		return Location{}, errDesc(400, DescLongitudeEmpty)
	}
	return Location{
		Latitude:           floatArg(r, "latitude"),
		Longitude:          floatArg(r, "longitude"),
		HorizontalAccuracy: min(max(floatArg(r, "horizontal_accuracy"), 0), maxAccuracy),
	}, nil
}

func onMap(loc Location) bool {
	return math.Abs(loc.Latitude) <= 90 && math.Abs(loc.Longitude) <= 180
}

// liveArgs reads live_period, heading and proximity_alert_radius, 0 when
// absent (none).
func liveArgs(r *request) (period, heading, radius int64) {
	return r.int64Arg("live_period"), r.int64Arg("heading"), r.int64Arg("proximity_alert_radius")
}

func badHeading(h int64) bool { return h != 0 && (h < 1 || h > maxHeading) }

func badProximity(p int64) bool { return p < 0 || p > maxProximity }

func sendLocation(s *Server, r *request) (any, *APIError) {
	loc, apiErr := locationArgs(r)
	if apiErr != nil {
		return nil, apiErr
	}
	period, heading, radius := liveArgs(r)
	out := outgoing{location: &loc, live: period != 0}
	// TDLib checks all three for a static location too, then drops the
	// heading and the radius.
	switch {
	case !onMap(loc):
		out.invalid = errDesc(400, DescWrongLocation)
	case period != 0 && period != liveForever && (period < minLivePeriod || period > maxLivePeriod):
		out.invalid = errDesc(400, DescWrongLivePeriod)
	case badHeading(heading):
		out.invalid = errDesc(400, DescWrongHeading)
	case badProximity(radius):
		out.invalid = errDesc(400, DescWrongProximity)
	}
	if out.live {
		loc.LivePeriod, loc.Heading, loc.ProximityAlertRadius = int(period), int(heading), int(radius)
	}
	return s.deliver(r, out)
}

// editMessageLiveLocation moves the bot's live location. An edit states
// the location whole: a heading, proximity_alert_radius or
// horizontal_accuracy it leaves out is gone (TDLib always sends the radius,
// 0 turning alerts off); only live_period, left out, stays as it was.
func editMessageLiveLocation(s *Server, r *request) (any, *APIError) {
	loc, apiErr := locationArgs(r)
	if apiErr != nil {
		return nil, apiErr
	}
	markup, apiErr := s.editMarkup(r)
	if apiErr != nil {
		return nil, apiErr
	}
	period, heading, radius := liveArgs(r)
	e := anEdit{markup: markup, lacks: func(m Message) *APIError {
		if apiErr := lacksLiveLocation(m); apiErr != nil {
			return apiErr
		}
		if !onMap(loc) { // TDLib's check, before the keyboard's
			return errDesc(400, DescInvalidLocation)
		}
		return nil
	}}
	// The Telegram server's checks, after TDLib's.
	switch {
	case badHeading(heading):
		e.invalid = errDesc(400, DescEditHeading)
	case badProximity(radius):
		e.invalid = errDesc(400, DescEditProximity)
	}
	loc.Heading, loc.ProximityAlertRadius = int(heading), int(radius)
	moved := func(cur Message) Location {
		next := loc
		next.LivePeriod = cur.Location.LivePeriod
		if period != 0 {
			next.LivePeriod = int(period)
		}
		return next
	}
	now := s.now().Unix()
	e.refuse = func(cur Message) *APIError { return extendLivePeriod(cur, period, now) }
	e.same = func(cur Message) bool { return *cur.Location == moved(cur) }
	e.apply = func(m *Message) {
		next := moved(*m)
		m.Location = &next
	}
	return s.edit(r, e)
}

// extendLivePeriod applies the documented rule for a new live_period: it
// may be 0x7FFFFFFF, or grow by at most a day and end within 90 days.
func extendLivePeriod(cur Message, period, now int64) *APIError {
	old := int64(cur.Location.LivePeriod)
	switch {
	case period == 0 || period == old || period == liveForever:
		return nil
	case period < old || old == liveForever:
		return errDesc(400, DescLivePeriodShorter)
	case period > old+maxLiveExtend || cur.Date+period > now+maxLiveAhead:
		return errDesc(400, DescLivePeriodLonger)
	}
	return nil
}

// lacksLiveLocation refuses what is not a live location. A location that
// reaches it is a live one: edit refuses static and ended ones first.
func lacksLiveLocation(m Message) *APIError {
	if m.Location == nil {
		return errDesc(400, DescNoLiveLocation)
	}
	return nil
}

// stopMessageLiveLocation ends the bot's live location where it is. The
// message then shows no live_period, and a second stop, or a stop after
// the period ended, finds a message that "can't be edited".
func stopMessageLiveLocation(s *Server, r *request) (any, *APIError) {
	markup, apiErr := s.editMarkup(r)
	if apiErr != nil {
		return nil, apiErr
	}
	return s.edit(r, anEdit{
		markup: markup,
		lacks:  lacksLiveLocation,
		same:   func(Message) bool { return false }, // stopping always changes it
		apply:  func(m *Message) { m.Location = stillLocation(*m.Location) },
	})
}

// Locations returns the bot's location messages in a chat, static and
// live, oldest first, in their current state, deleted ones included: each
// one's Location is where it is now, Edits where it was before, and Live
// whether it is still live, stopped or expired.
func (s *Server) Locations(chatID int64) []BotMessage {
	return kept(s.Messages(chatID), func(m BotMessage) (BotMessage, bool) { return m, m.Location != nil })
}

// SendLocation sends a point on the map as this user, as a Telegram client
// does with "Send my current location". It returns the message as the bot
// will receive it.
func (p *Person) SendLocation(chatID int64, lat, lon float64) Message {
	p.srv.t.Helper()
	return p.shareLocation(chatID, Location{Latitude: lat, Longitude: lon})
}

// ShareLiveLocation shares this user's live location for period (whole
// seconds from 60 s to 24 h, as the client's choices are, or
// LiveIndefinitely). The bot receives a message whose location carries
// live_period; MoveLiveLocation and StopLiveLocation then edit it, and at
// the period's end, on the server's clock, it just stops being live:
// Telegram sends the bot nothing then.
func (p *Person) ShareLiveLocation(chatID int64, lat, lon float64, period time.Duration) Message {
	s := p.srv
	s.t.Helper()
	secs := int64(period / time.Second)
	if period%time.Second != 0 || (period != LiveIndefinitely && (secs < minLivePeriod || secs > maxLivePeriod)) {
		s.t.Fatalf("tgfake: a live location is shared for 1 min to 24 h or indefinitely, not %s", period)
	}
	return p.shareLocation(chatID, Location{Latitude: lat, Longitude: lon, LivePeriod: int(secs)})
}

func (p *Person) shareLocation(chatID int64, loc Location) Message {
	s := p.srv
	s.t.Helper()
	if !onMap(loc) {
		s.t.Fatalf("tgfake: %v, %v is not on the map", loc.Latitude, loc.Longitude)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	from := p.user
	sent := s.postLocked(ch, Message{From: &from, Date: s.now().Unix(), Location: &loc})
	ch.byID[sent.MessageID].live = loc.LivePeriod != 0
	return sent
}

// MoveLiveLocation moves a live location this user shares, as their client
// does while they move: the bot receives an edited_message with the new
// location (its live_period as before) and an edit_date. Moving a location
// that is not live, or whose period ended or that was stopped, or to where
// it already is (Telegram sends no update then), fails the test.
func (p *Person) MoveLiveLocation(msg MessageRef, lat, lon float64) Message {
	s := p.srv
	s.t.Helper()
	if !onMap(Location{Latitude: lat, Longitude: lon}) {
		s.t.Fatalf("tgfake: %v, %v is not on the map", lat, lon)
	}
	return p.editLiveLocation("MoveLiveLocation", msg, func(loc Location) *Location {
		if loc.Latitude == lat && loc.Longitude == lon {
			s.t.Fatalf("tgfake: MoveLiveLocation: the location is at %v, %v already", lat, lon)
		}
		loc.Latitude, loc.Longitude = lat, lon
		return &loc
	})
}

// StopLiveLocation stops a live location this user shares before its
// period ends. The bot receives the last edited_message: the location
// where it was last, with no live_period (nor heading or proximity alert
// radius), and an edit_date. Stopping one that is not live fails the test.
//
// That shape is read from the sources, not seen on the wire: a client
// stops by a last messages.editMessage with an empty point and the
// stopped flag (core.telegram.org/api/live-location), which keeps the
// point; the server ends the period then (TDLib's can_edit_message
// refuses a live location once now - date >= period, and a stopped one
// is refused); the Bot API server sends edited_message for the edit,
// written as getMessage returns it, and writes live_period, heading and
// proximity_alert_radius only while expires_in > 0 (JsonLocation), which
// TDLib makes 0 once the period is over.
func (p *Person) StopLiveLocation(msg MessageRef) Message {
	p.srv.t.Helper()
	return p.editLiveLocation("StopLiveLocation", msg, stillLocation)
}

func (p *Person) editLiveLocation(caller string, msg MessageRef, change func(Location) *Location) Message {
	s := p.srv
	s.t.Helper()
	return p.editOwn(caller, msg, func(target *msgState, chatID int64, id int) func(*Message) {
		if !target.live {
			s.t.Fatalf("tgfake: %s: message %d in chat %d is not a live location", caller, id, chatID)
		}
		if st := target.liveState(s.now().Unix()); st != LiveActive {
			s.t.Fatalf("tgfake: %s: the live location %d in chat %d is %s", caller, id, chatID, st)
		}
		loc := change(*target.msg.Location) // may fail the test: before the edit
		return func(m *Message) { m.Location = loc }
	})
}
