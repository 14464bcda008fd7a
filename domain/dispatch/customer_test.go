package dispatch_test

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
)

// lastJoin numbers the customers' /start messages: each join a new
// message, unless a test repeats one.
var lastJoin atomic.Int64

func joinMessage() int { return int(lastJoin.Add(1)) }

// lateEvents counts the live log's lateness lines of order id.
func (r *recorder) lateEvents(id int64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if e.Kind == dispatch.EventMasterLate && e.OrderID == id {
			n++
		}
	}
	return n
}

// The late-arrival notice, on a fake clock: an assigned master who has
// not pressed Arrived by the end of the visit window (10:00–12:00 in
// Moscow) is told to the admins once, and the customer hears their master
// is running late, however often the job runs (on two replicas too); an
// order whose master arrived in time is never told, nor one before its
// window ends.
func TestLateArrivalIsToldOncePerOrder(t *testing.T) {
	t.Parallel()
	cal, err := dispatch.ParseCalendar("Europe/Moscow", "00:00-24:00", "")
	require.NoError(t, err)
	moscow := cal.Zone("Moscow")
	clock := clockwork.NewFakeClockAt(time.Date(2099, 5, 6, 9, 0, 0, 0, moscow))
	w := newWorld(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10, Calendar: cal})
	replica := func() *dispatch.Service {
		s, err := dispatch.NewService(w.cfg, dispatch.Deps{Orders: w.store.Orders(), Masters: w.store.Masters(), Notifier: w.tg,
			Clock: clock, Registerer: prometheus.NewRegistry(), Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
		require.NoError(t, err)
		return s
	}
	s, other := replica(), replica()
	w.masters(t, s, "Moscow Arbat plumbing", 10, 11)
	_, err = w.store.Users().Upsert(w.ctx, domain.User{ID: 500, FirstName: "Cora"})
	require.NoError(t, err)

	late := w.create(t, s, "Moscow Arbat plumbing 900 Tap\nwhen: 2099-05-06 10:00-12:00")
	fine := w.create(t, s, "Moscow Arbat plumbing 900 Sink\nwhen: 2099-05-06 10:00-12:00")
	_, err = s.JoinOrder(w.ctx, 500, w.order(t, late.ID).CustomerToken, joinMessage())
	require.NoError(t, err)
	for _, f := range w.tg.sentOffers() {
		_, _, err := s.Accept(w.ctx, f.ID, f.MasterID)
		require.NoError(t, err)
	}
	require.Equal(t, dispatch.Assigned, w.order(t, late.ID).State)
	require.Equal(t, dispatch.Assigned, w.order(t, fine.ID).State)
	// The second order's master arrives at 11:30.
	var fineOffer int64
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT id FROM offers WHERE order_id = $1 AND state = 'ACCEPTED'`, fine.ID).Scan(&fineOffer))
	fm := w.order(t, fine.ID).MasterID
	clock.Advance(2*time.Hour + 30*time.Minute) // 11:30
	_, err = s.Step(w.ctx, fineOffer, fm, dispatch.StepArrived)
	require.NoError(t, err)

	n, err := s.Late(w.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "11:30: the window is open")
	clock.Advance(29*time.Minute + 59*time.Second) // 11:59:59
	n, err = s.Late(w.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a second before the window ends")

	clock.Advance(time.Second) // 12:00
	for _, r := range []*dispatch.Service{s, other, s} {
		_, err := r.Late(w.ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 1, w.tg.lateEvents(late.ID), "told once, across replicas and runs")
	require.Zero(t, w.tg.lateEvents(fine.ID), "arrived in time")
	require.False(t, w.order(t, late.ID).LateTold.IsZero())
	var lateNotes int
	for _, u := range w.tg.customerNotes() {
		if u.Note == dispatch.CustomerLate {
			require.Equal(t, int64(500), u.Customer.UserID)
			require.Equal(t, "Cora", u.Customer.FirstName)
			require.NotEmpty(t, u.MasterName, "the master by first name")
			lateNotes++
		}
	}
	require.Equal(t, 1, lateNotes, "the customer hears it once")
}

// The link: 128 random bits, opened by one person only; Reissue makes the
// old one open nothing and unlinks its customer; the customer may cancel
// until the master is on the way, and nobody else may.
func TestTheCustomersLink(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10})
	w.masters(t, s, "Moscow Arbat plumbing", 10)
	for _, id := range []int64{500, 501} {
		_, err := w.store.Users().Upsert(w.ctx, domain.User{ID: id, FirstName: "C"})
		require.NoError(t, err)
	}
	o := w.create(t, s, "Moscow Arbat plumbing 900 Tap")
	token := w.order(t, o.ID).CustomerToken
	require.Len(t, token, 22)
	got, ok := dispatch.OrderToken(dispatch.LinkPayload(token))
	require.True(t, ok)
	require.Equal(t, token, got)
	for _, bad := range []string{"o_short", "profile", "o_" + token + "x", "o_" + token[:21] + "!"} {
		_, ok := dispatch.OrderToken(bad)
		require.False(t, ok, bad)
	}
	other := w.create(t, s, "Moscow Arbat plumbing 900 Sink")
	require.NotEqual(t, token, w.order(t, other.ID).CustomerToken)

	_, err := s.JoinOrder(w.ctx, 500, token, joinMessage())
	require.NoError(t, err)
	_, err = s.JoinOrder(w.ctx, 500, token, joinMessage())
	require.NoError(t, err, "its customer may open it again")
	_, err = s.JoinOrder(w.ctx, 501, token, joinMessage())
	require.ErrorIs(t, err, dispatch.ErrLinkTaken)
	_, err = s.JoinOrder(w.ctx, 501, "AAAAAAAAAAAAAAAAAAAAAA", joinMessage())
	require.ErrorIs(t, err, dispatch.ErrLinkInvalid)

	_, err = s.CustomerCancel(w.ctx, o.ID, 501)
	require.ErrorIs(t, err, dispatch.ErrOrderState, "not theirs: nothing moves")
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)

	re, err := s.ReissueLink(w.ctx, o.ID, "press-1")
	require.NoError(t, err)
	require.NotEqual(t, token, re.CustomerToken)
	require.Zero(t, re.CustomerID)
	// The same press handled again (a replica died before its done-mark)
	// keeps the link the admin was shown; a new press gives a new one.
	again, err := s.ReissueLink(w.ctx, o.ID, "press-1")
	require.NoError(t, err)
	require.Equal(t, re.CustomerToken, again.CustomerToken, "the same press keeps the link it gave")
	next, err := s.ReissueLink(w.ctx, o.ID, "press-2")
	require.NoError(t, err)
	require.NotEqual(t, re.CustomerToken, next.CustomerToken, "a new press, a new link")
	re = next
	_, err = s.JoinOrder(w.ctx, 500, token, joinMessage())
	require.ErrorIs(t, err, dispatch.ErrLinkInvalid, "the old link opens nothing")
	_, err = s.JoinOrder(w.ctx, 501, re.CustomerToken, joinMessage())
	require.NoError(t, err)
	revoked := 0
	for _, u := range w.tg.customerNotes() {
		if u.Note == dispatch.CustomerRevoked {
			require.Equal(t, int64(500), u.Customer.UserID, "the unlinked customer is told")
			revoked++
		}
	}
	require.Equal(t, 1, revoked)

	// Accepted and on the way: too late for the customer to cancel.
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, f.MasterID)
	require.NoError(t, err)
	_, err = s.StepWithETA(w.ctx, f.ID, f.MasterID, dispatch.StepEnRoute, 7*time.Minute)
	require.Error(t, err, "only the offered ETAs")
	_, err = s.StepWithETA(w.ctx, f.ID, f.MasterID, dispatch.StepEnRoute, 15*time.Minute)
	require.NoError(t, err)
	got2 := w.order(t, o.ID)
	require.Equal(t, 15*time.Minute, got2.ETA.Sub(got2.EnRouteAt).Round(time.Second))
	_, err = s.CustomerCancel(w.ctx, o.ID, 501)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	require.Equal(t, dispatch.Assigned, w.order(t, o.ID).State)

	// The second order: its customer cancels before anyone sets off.
	_, err = s.JoinOrder(w.ctx, 500, w.order(t, other.ID).CustomerToken, joinMessage())
	require.NoError(t, err)
	_, err = s.CustomerCancel(w.ctx, other.ID, 500)
	require.NoError(t, err)
	require.Equal(t, dispatch.Cancelled, w.order(t, other.ID).State)
}

// Texts between the customer and the assigned master: a reply to a
// message of the bot's about the order goes to the other side, with the
// sender's first name only, once however often its update runs; nobody
// else's goes; after Done nothing is relayed (the customer's reply is a
// comment on the rating: ratings_test.go). The admins read the thread.
func TestRelayBetweenTheCustomerAndTheMaster(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10})
	w.masters(t, s, "Moscow Arbat plumbing", 10)
	for id, name := range map[int64]string{500: "Cora", 501: "Eve"} {
		_, err := w.store.Users().Upsert(w.ctx, domain.User{ID: id, FirstName: name, Username: "secret_" + name})
		require.NoError(t, err)
	}
	o := w.create(t, s, "Moscow Arbat plumbing 900 Tap")
	_, err := s.JoinOrder(w.ctx, 500, w.order(t, o.ID).CustomerToken, joinMessage())
	require.NoError(t, err)
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, f.MasterID)
	require.NoError(t, err)
	// The bot's status message in Cora's chat (id 70), as delivered, and
	// the master's order message (the offer's).
	w.exec(t, `INSERT INTO order_messages (chat_id, message_id, order_id) VALUES (500, 70, $1)`, o.ID)
	w.exec(t, `UPDATE offers SET chat_id = 10, message_id = 80 WHERE id = $1`, f.ID)

	_, outcome, err := s.Relay(w.ctx, 500, 500, 69, 100, "hello?")
	require.NoError(t, err)
	require.Equal(t, dispatch.RelayIgnored, outcome, "a reply to nothing about an order is not ours")
	for range 2 { // the update run twice
		_, outcome, err = s.Relay(w.ctx, 500, 500, 70, 101, "Is 10:30 fine?")
		require.NoError(t, err)
		require.Equal(t, dispatch.RelayPassed, outcome)
	}
	_, _, err = s.Relay(w.ctx, 10, 10, 80, 5, "Yes, see you")
	require.NoError(t, err)
	_, _, err = s.Relay(w.ctx, 501, 500, 70, 102, "I am not her")
	require.ErrorIs(t, err, dispatch.ErrNotCustomer)
	_, _, err = s.Relay(w.ctx, 500, 500, 70, 103, strings.Repeat("x", dispatch.MaxRelay+1))
	require.ErrorIs(t, err, dispatch.ErrRelayTooLong)

	got := w.tg.relayed()
	require.Len(t, got, 2, "each text once")
	require.Equal(t, dispatch.RelayNote{Order: got[0].Order, ToMaster: true, To: 10, Lang: "en", From: "Cora", Text: "Is 10:30 fine?"}, got[0])
	require.Equal(t, int64(500), got[1].To)
	require.Equal(t, "M10", got[1].From, "the master's first name")

	_, err = s.Finish(w.ctx, f.ID, f.MasterID)
	require.NoError(t, err)
	_, _, err = s.Relay(w.ctx, 10, 10, 80, 6, "thanks!")
	require.ErrorIs(t, err, dispatch.ErrRelayClosed, "nothing after Done")
	_, outcome, err = s.Relay(w.ctx, 500, 500, 70, 104, "thanks!")
	require.ErrorIs(t, err, dispatch.ErrNotRated, "the customer's reply is a comment now, which needs the stars first")
	require.Equal(t, dispatch.RelayCommented, outcome)
	require.Len(t, w.tg.relayed(), 2, "and is not relayed")
	_, thread, err := s.Thread(w.ctx, o.ID)
	require.NoError(t, err)
	require.Len(t, thread, 2)
	require.False(t, thread[0].FromMaster)
	require.True(t, thread[1].FromMaster)
}

// The master's whereabouts reach the customer only between On my way and
// Arrived, of the order the master is on the way to; Arrived ends them. A
// share begun too early starts for the customer with its first move on the
// way.
func TestTheMastersLocationOnTheWay(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Hour})
	w.masters(t, s, "Moscow Arbat plumbing", 10)
	_, err := w.store.Users().Upsert(w.ctx, domain.User{ID: 500, FirstName: "Cora"})
	require.NoError(t, err)
	o := w.create(t, s, "Moscow Arbat plumbing 900 Tap")
	_, err = s.JoinOrder(w.ctx, 500, w.order(t, o.ID).CustomerToken, joinMessage())
	require.NoError(t, err)
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, f.MasterID)
	require.NoError(t, err)
	at := dispatch.Where{Location: domain.Location{Lat: 55.75, Lon: 37.61, Live: time.Hour}, Share: 7, Started: true}

	_, err = s.ShareLocation(w.ctx, f.MasterID, at)
	require.ErrorIs(t, err, dispatch.ErrNotOnTheWay, "not on the way yet")
	_, err = s.ShareLocation(w.ctx, 11, at)
	require.ErrorIs(t, err, dispatch.ErrNotOnTheWay, "another master's location goes to nobody")

	_, err = s.StepWithETA(w.ctx, f.ID, f.MasterID, dispatch.StepEnRoute, 15*time.Minute)
	require.NoError(t, err)
	// The share begun before On my way reaches the customer with its first
	// move since, which starts it; the next move only moves it.
	moved := at
	moved.Edit, moved.Started = 1699999990, false
	got, err := s.ShareLocation(w.ctx, f.MasterID, moved)
	require.NoError(t, err)
	require.Equal(t, o.ID, got.ID)
	moved.Location.Lat, moved.Edit = 55.76, 1700000000
	_, err = s.ShareLocation(w.ctx, f.MasterID, moved)
	require.NoError(t, err)

	_, err = s.Step(w.ctx, f.ID, f.MasterID, dispatch.StepArrived)
	require.NoError(t, err)
	moved.Location.Lat, moved.Edit = 55.77, 1700000005
	_, err = s.ShareLocation(w.ctx, f.MasterID, moved)
	require.ErrorIs(t, err, dispatch.ErrNotOnTheWay, "nothing after Arrived")

	var wheres []dispatch.Where
	var arrived bool
	for _, u := range w.tg.customerNotes() {
		switch u.Note {
		case dispatch.CustomerWhere:
			require.False(t, arrived, "no position after Arrived")
			require.Equal(t, int64(500), u.Customer.UserID)
			require.Equal(t, "M10", u.MasterName, "the master's first name only")
			wheres = append(wheres, *u.Where)
		case dispatch.CustomerArrived:
			arrived = true
			require.True(t, u.EndsWhereabouts())
		}
	}
	require.True(t, arrived)
	require.Equal(t, []float64{55.75, 55.76}, []float64{wheres[0].Location.Lat, wheres[1].Location.Lat})
	require.True(t, wheres[0].Started, "the customer had not seen the share")
	require.False(t, wheres[1].Started)
	onTheWay := dispatch.Order{EnRouteAt: time.Now()}
	require.False(t, dispatch.CustomerUpdate{Note: dispatch.CustomerEnRoute, Order: onTheWay}.EndsWhereabouts())
	require.True(t, dispatch.CustomerUpdate{Note: dispatch.CustomerCancelled, Order: onTheWay}.EndsWhereabouts())
	arrivedThere := dispatch.Order{EnRouteAt: time.Now(), ArrivedAt: time.Now()}
	require.False(t, dispatch.CustomerUpdate{Note: dispatch.CustomerDone, Order: arrivedThere}.EndsWhereabouts(),
		"Arrived stopped it already")
}

// A /start handled twice (its replica died after the join's commit,
// before the update's done-mark) tells nobody twice: one status for the
// customer, one live-log line, one edit of the master's message. A new
// /start by the customer shows the status anew.
func TestJoinOfOneMessageTwiceTellsOnce(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10})
	w.masters(t, s, "Moscow Arbat plumbing", 10)
	_, err := w.store.Users().Upsert(w.ctx, domain.User{ID: 500, FirstName: "Cora"})
	require.NoError(t, err)
	o := w.create(t, s, "Moscow Arbat plumbing 900 Tap")
	f := w.tg.sentOffers()[0]
	_, _, err = s.Accept(w.ctx, f.ID, f.MasterID)
	require.NoError(t, err)
	token := w.order(t, o.ID).CustomerToken
	joins := func() (notes, logged int) {
		for _, u := range w.tg.customerNotes() {
			if u.Note == dispatch.CustomerJoined {
				notes++
			}
		}
		for _, l := range w.tg.log(o.ID) {
			if strings.HasPrefix(l, string(dispatch.EventCustomerJoined)) {
				logged++
			}
		}
		return notes, logged
	}
	assigned := len(w.tg.assignments())

	first := joinMessage()
	for range 2 {
		got, err := s.JoinOrder(w.ctx, 500, token, first)
		require.NoError(t, err)
		require.Equal(t, o.ID, got.ID)
		require.Equal(t, int64(500), got.CustomerID)
	}
	notes, logged := joins()
	require.Equal(t, 1, notes, "one status")
	require.Equal(t, 1, logged, "one live-log line")
	require.Len(t, w.tg.assignments(), assigned+1, "one edit of the master's message")

	_, err = s.JoinOrder(w.ctx, 500, token, joinMessage())
	require.NoError(t, err)
	notes, logged = joins()
	require.Equal(t, 2, notes, "a new /start, the status anew")
	require.Equal(t, 2, logged)

	_, err = s.JoinOrder(w.ctx, 501, token, first)
	require.ErrorIs(t, err, dispatch.ErrLinkTaken, "another user's message is no rerun")
}
