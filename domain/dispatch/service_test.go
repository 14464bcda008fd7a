package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/domain/domaintest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// world is one test's database and a recorder in Telegram's place.
type world struct {
	ctx   context.Context
	store *storage.Store
	tg    *recorder
	cfg   dispatch.Config
	// reg, when set, takes the metrics of the services built after.
	reg *prometheus.Registry
}

func newWorld(t *testing.T, cfg dispatch.Config) *world {
	t.Helper()
	return &world{ctx: context.Background(), store: storagetest.New(t), tg: &recorder{}, cfg: cfg}
}

// setup is one test's world and one replica's service over it.
func setup(t *testing.T, cfg dispatch.Config) (*world, *dispatch.Service) {
	t.Helper()
	w := newWorld(t, cfg)
	return w, w.service(t)
}

// service builds one replica's service over the world.
func (w *world) service(t *testing.T) *dispatch.Service {
	t.Helper()
	// Warnings and errors go to the test's output, shown when it fails:
	// a stalled order then says why (CI saw one once, not reproduced).
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	var reg prometheus.Registerer = prometheus.NewRegistry()
	if w.reg != nil {
		reg = w.reg
	}
	s, err := dispatch.NewService(w.cfg, dispatch.Deps{
		Orders: w.store.Orders(), Masters: w.store.Masters(), Notifier: w.tg, Log: log, Registerer: reg,
	})
	require.NoError(t, err)
	return s
}

// run starts s's timer and listener until the test ends.
func (w *world) run(t *testing.T, s *dispatch.Service) {
	t.Helper()
	domaintest.Run(t, w.ctx, func(ctx context.Context) { s.Run(ctx, domaintest.Listen(w.store)) })
}

func (w *world) master(t *testing.T, s *dispatch.Service, id int64, args string) {
	t.Helper()
	_, err := w.store.Users().Upsert(w.ctx, domain.User{ID: id, FirstName: fmt.Sprint("M", id), Username: fmt.Sprint("m", id)})
	require.NoError(t, err)
	_, _, err = s.RegisterMaster(w.ctx, id, args)
	require.NoError(t, err)
}

// create has the admin create an order from text through s.
func (w *world) create(t *testing.T, s *dispatch.Service, text string) dispatch.Order {
	t.Helper()
	o, err := s.CreateOrder(w.ctx, admin, domain.MessageRef{}, text)
	require.NoError(t, err)
	return o
}

// masters registers each of ids as a master with the same args.
func (w *world) masters(t *testing.T, s *dispatch.Service, args string, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		w.master(t, s, id, args)
	}
}

func (w *world) offer(t *testing.T, id int64) dispatch.Offer {
	t.Helper()
	f, err := w.store.Orders().Offer(w.ctx, id)
	require.NoError(t, err)
	return f
}

func (w *world) order(t *testing.T, id int64) dispatch.Order {
	t.Helper()
	o, err := w.store.Orders().Get(w.ctx, id)
	require.NoError(t, err)
	return o
}

func (w *world) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := w.store.Pool().Exec(w.ctx, sql, args...)
	require.NoError(t, err)
}

func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
}

// recorder stands in for the bot's renderer: it records what the workflow
// asked to tell, and renders messages the outbox takes.
type recorder struct {
	mu     sync.Mutex
	sent   []dispatch.Offer
	closed []dispatch.Offer
	notes  []dispatch.Note
	events []dispatch.Event
	// assigned are the assigned masters' message edits; photos the
	// photos passed to the admins.
	assigned []dispatch.Assignment
	photos   []string
	// customer are what the orders' customers were told.
	customer []dispatch.CustomerUpdate
	relays   []dispatch.RelayNote
	// panicOffer and panicClosed make Offer and Closed panic for the
	// offers of that order, as a renderer's bug on one order would.
	panicOffer, panicClosed atomic.Int64
}

// liveLogChat is the admin chat the recorder's live-log lines go to.
const liveLogChat = -100

func (r *recorder) Offer(m dispatch.Master, _ dispatch.Order, f dispatch.Offer) []domain.Message {
	if f.OrderID == r.panicOffer.Load() {
		panic(fmt.Sprint("a renderer's bug on the offer of order ", f.OrderID))
	}
	domaintest.Record(&r.mu, &r.sent, f)
	return []domain.Message{{ChatID: m.UserID, Kind: domain.KindOffer, Ref: f.ID, Key: fmt.Sprint("offer:", f.ID), Text: "offer"}}
}

func (r *recorder) Closed(m dispatch.Master, _ dispatch.Order, f dispatch.Offer) []domain.Message {
	if f.OrderID == r.panicClosed.Load() {
		panic(fmt.Sprint("a renderer's bug on the closing edit of order ", f.OrderID))
	}
	domaintest.Record(&r.mu, &r.closed, f)
	return []domain.Message{{ChatID: m.UserID, Kind: domain.KindOfferClose, Ref: f.ID, Key: fmt.Sprint("offer:", f.ID), Edit: true, Text: string(f.State)}}
}

func (r *recorder) Note(n dispatch.Note) []domain.Message {
	domaintest.Record(&r.mu, &r.notes, n)
	return []domain.Message{{ChatID: n.Master.UserID, Kind: domain.KindNote, Text: string(n.Kind)}}
}

func (r *recorder) Event(e dispatch.Event) []domain.Message {
	domaintest.Record(&r.mu, &r.events, e)
	return []domain.Message{{ChatID: liveLogChat, Kind: domain.KindLiveLog, Ref: e.OrderID, Text: string(e.Kind)}}
}

func (r *recorder) Assigned(a dispatch.Assignment) []domain.Message {
	domaintest.Record(&r.mu, &r.assigned, a)
	return []domain.Message{{ChatID: a.Master.UserID, Kind: domain.KindAssigned, Ref: a.Offer.ID, Key: fmt.Sprint("offer:", a.Offer.ID),
		Edit: true, Text: string(a.Order.State)}}
}

func (r *recorder) Photo(m dispatch.Master, o dispatch.Order, fileID, caption string) []domain.Message {
	domaintest.Record(&r.mu, &r.photos, fileID)
	return []domain.Message{{ChatID: liveLogChat, Kind: domain.KindPhoto, Ref: o.ID, Text: caption, Photo: fileID}}
}

func (r *recorder) Customer(u dispatch.CustomerUpdate) []domain.Message {
	domaintest.Record(&r.mu, &r.customer, u)
	return []domain.Message{{ChatID: u.Customer.UserID, Kind: domain.KindCustomer, Ref: u.Order.ID, Text: string(u.Note)}}
}

func (r *recorder) Relay(n dispatch.RelayNote) []domain.Message {
	domaintest.Record(&r.mu, &r.relays, n)
	return []domain.Message{{ChatID: n.To, Kind: domain.KindRelay, Ref: n.Order.ID, Text: n.Text}}
}

func (r *recorder) relayed() []dispatch.RelayNote {
	return domaintest.Recorded(&r.mu, &r.relays)
}

func (r *recorder) customerNotes() []dispatch.CustomerUpdate {
	return domaintest.Recorded(&r.mu, &r.customer)
}

func (r *recorder) assignments() []dispatch.Assignment {
	return domaintest.Recorded(&r.mu, &r.assigned)
}

// outbox lists the outbox rows of a chat in delivery order as kind:ref.
func (w *world) outbox(t *testing.T, chat int64) []string {
	t.Helper()
	rows, err := w.store.Pool().Query(w.ctx, `SELECT kind || ':' || ref FROM outbox WHERE chat_id = $1 ORDER BY id`, chat)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func (r *recorder) sentTo() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int64
	for _, f := range r.sent {
		out = append(out, f.MasterID)
	}
	return out
}

func (r *recorder) sentOffers() []dispatch.Offer {
	return domaintest.Recorded(&r.mu, &r.sent)
}

func (r *recorder) closedOffers() []dispatch.Offer {
	return domaintest.Recorded(&r.mu, &r.closed)
}

// log renders the events of one order as "kind[:master]" lines.
func (r *recorder) log(orderID int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.OrderID != orderID {
			continue
		}
		if e.MasterID != 0 {
			out = append(out, fmt.Sprintf("%s:%d", e.Kind, e.MasterID))
		} else {
			out = append(out, string(e.Kind))
		}
	}
	return out
}

func (r *recorder) noteKinds(master int64) []dispatch.NoteKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []dispatch.NoteKind
	for _, n := range r.notes {
		if n.Master.UserID == master {
			out = append(out, n.Kind)
		}
	}
	return out
}

const admin = 1

// The seed's story: A does not answer, the watchdog (here the timer, well
// before any tick) expires the offer and edits A's message, B gets the
// order and accepts; the live log has every step in order.
func TestExpiredOfferGoesToTheNextMaster(t *testing.T) {
	t.Parallel()
	// The second offer must still be open when master 11 accepts it: a
	// loaded CI host took more than 300 ms from its send to the press.
	w, s := setup(t, dispatch.Config{OfferSLA: 2 * time.Second, CommissionRate: 10})
	w.run(t, s)
	w.master(t, s, 10, "Moscow Center plumber")
	w.master(t, s, 11, "moscow center Plumber,electrician")
	w.master(t, s, 12, "Moscow North plumber")      // another district
	w.master(t, s, 13, "Moscow Center electrician") // another skill
	w.exec(t, `UPDATE masters SET last_offer_at = now() - interval '1 hour' WHERE user_id = 10`)
	w.exec(t, `UPDATE masters SET last_offer_at = now() WHERE user_id = 11`)

	o := w.create(t, s, "MOSCOW center plumber 1500 Leaking tap")
	// The running distributor's recheck of owed orders (every
	// OwedRecheck) may take the new order's step from CreateOrder.
	eventually(t, func() bool { return len(w.tg.sentTo()) > 0 }, "the order offered")
	require.Equal(t, []int64{10}, w.tg.sentTo(), "idle longest first, only matching masters")
	first := w.tg.sentOffers()[0]
	require.Equal(t, dispatch.Sent, w.offer(t, first.ID).State)
	require.Equal(t, []string{fmt.Sprint("offer:", first.ID)}, w.outbox(t, 10), "the offer's message is queued with the offer")
	require.Contains(t, w.outbox(t, liveLogChat), fmt.Sprint("live_log:", o.ID))

	// The notifier renders inside the transaction: wait for its commit too.
	eventually(t, func() bool {
		if len(w.tg.sentTo()) < 2 {
			return false
		}
		f, err := w.store.Orders().Offer(w.ctx, w.tg.sentOffers()[1].ID)
		return err == nil && f.State == dispatch.Sent
	}, "offer expired and went to master 11")
	expired := w.offer(t, first.ID)
	require.Equal(t, dispatch.Expired, expired.State)
	lag := expired.RespondedAt.Sub(expired.ExpiresAt)
	// No tick runs here; the bound only keeps a lost timer from passing
	// unnoticed (lag is measured by the bench, not by tests).
	require.Less(t, lag, 10*time.Second, "expired by the timer")
	require.GreaterOrEqual(t, lag, time.Duration(0))
	closed := w.tg.closedOffers()
	require.Len(t, closed, 1)
	require.Equal(t, first.ID, closed[0].ID)
	require.Equal(t, dispatch.Expired, closed[0].State)

	second := w.tg.sentOffers()[1]
	require.Equal(t, int64(11), second.MasterID)
	_, got, err := s.Accept(w.ctx, second.ID, 11)
	require.NoError(t, err)
	require.Equal(t, dispatch.Assigned, got.State)
	require.Equal(t, int64(11), w.order(t, o.ID).MasterID)
	require.Equal(t, []string{
		"order_created", "offer_sent:10", "offer_expired:10", "offer_sent:11", "offer_accepted:11", "order_assigned:11",
	}, w.tg.log(o.ID))

	// Pressing the expired offer now, or the accepted one again, changes nothing.
	f, _, err := s.Accept(w.ctx, first.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOfferClosed)
	require.Equal(t, dispatch.Expired, f.State)
	f, _, err = s.Accept(w.ctx, second.ID, 11)
	require.ErrorIs(t, err, dispatch.ErrOfferClosed)
	require.Equal(t, dispatch.Accepted, f.State)
	_, _, err = s.Accept(w.ctx, second.ID, 10)
	require.ErrorIs(t, err, dispatch.ErrForbidden)
	_, _, err = s.Accept(w.ctx, 1<<40, 10)
	require.ErrorIs(t, err, domain.ErrNotFound)
}

// Decline frees the master and offers the order on at once, and is final
// for that order; an offer left to expire comes again in round 2. With
// nobody left the order is reported unassignable once, and a new master
// makes it assignable again.
func TestDeclineRoundsAndUnassignable(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.masters(t, s, "Kyiv Podil plumber", 10, 11)
	o := w.create(t, s, "Kyiv Podil plumber 800 Fix the sink")
	last := func() dispatch.Offer { sent := w.tg.sentOffers(); return sent[len(sent)-1] }
	decline := func() {
		t.Helper()
		f := last()
		_, _, err := s.Decline(w.ctx, f.ID, f.MasterID)
		require.NoError(t, err)
	}
	decline() // 10, round 1
	w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, last().ID)
	n, err := s.Expire(w.ctx) // 11 lets round 1 expire
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, last().Round, "round 2 goes to 11 only: 10 declined")
	decline() // 11, round 2
	require.Equal(t, []int64{10, 11, 11}, w.tg.sentTo(), "a master who declined is never offered the order again")
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)
	log := w.tg.log(o.ID)
	require.Equal(t, "order_unassignable", log[len(log)-1])
	require.NoError(t, s.Distribute(w.ctx))
	require.Equal(t, 1, count(w.tg.log(o.ID), "order_unassignable"), "reported once")

	// Resuming a master who declined changes nothing for this order.
	_, err = s.SetActive(w.ctx, 10, false)
	require.NoError(t, err)
	_, err = s.SetActive(w.ctx, 10, true)
	require.NoError(t, err)
	require.NoError(t, s.Distribute(w.ctx))
	require.Equal(t, []int64{10, 11, 11}, w.tg.sentTo())

	// A new candidate makes it assignable again.
	w.master(t, s, 12, "Kyiv Podil plumber")
	require.NoError(t, s.Distribute(w.ctx))
	require.Equal(t, int64(12), last().MasterID)
	require.True(t, w.order(t, o.ID).Unassignable.IsZero())
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// A master the outbox cannot write to (blocked the bot) is paused, the
// offer declined and the next master offered at once.
func TestUnreachableMasterIsSkipped(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.masters(t, s, "Lviv Center painter", 10, 11)
	w.exec(t, `UPDATE masters SET last_offer_at = now() WHERE user_id = 11`)
	o := w.create(t, s, "Lviv Center painter 300 Paint the door")
	require.Equal(t, []int64{10}, w.tg.sentTo())
	first := w.tg.sentOffers()[0]

	s.Undeliverable(w.ctx, first.ID) // the outbox dropped its message
	require.Equal(t, []int64{10, 11}, w.tg.sentTo())
	require.Equal(t, dispatch.Declined, w.offer(t, first.ID).State)
	m, _, err := s.Master(w.ctx, 10)
	require.NoError(t, err)
	require.False(t, m.Active, "paused")
	require.Contains(t, w.tg.log(o.ID), "offer_undelivered:10")

	// Told twice (two replicas' senders): the second changes nothing.
	s.Undeliverable(w.ctx, first.ID)
	require.Equal(t, []int64{10, 11}, w.tg.sentTo())
}

// A master with an open offer is never a candidate; after it expires or is
// declined they are again.
func TestMasterWithOpenOfferIsNoCandidate(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.master(t, s, 10, "Odesa Port welder")
	a := w.create(t, s, "Odesa Port welder 100 first")
	b := w.create(t, s, "Odesa Port welder 100 second")
	require.Len(t, w.tg.sentOffers(), 1, "busy with order a")
	require.Equal(t, a.ID, w.tg.sentOffers()[0].OrderID)

	w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, w.tg.sentOffers()[0].ID)
	n, err := s.Expire(w.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// Free again: the expiry offers order a on, and the master, its only
	// candidate, gets it in round 2.
	require.Len(t, w.tg.sentOffers(), 2)
	require.Equal(t, a.ID, w.tg.sentOffers()[1].OrderID)
	require.Equal(t, 2, w.tg.sentOffers()[1].Round)

	_, _, err = s.Decline(w.ctx, w.tg.sentOffers()[1].ID, 10)
	require.NoError(t, err)
	// Free again after declining; order a has nobody left, so b is next.
	require.NoError(t, s.Distribute(w.ctx))
	require.Len(t, w.tg.sentOffers(), 3)
	require.Equal(t, b.ID, w.tg.sentOffers()[2].OrderID)
}

// Two replicas over one database: every expiry handled once, never two
// open offers for one order.
func TestTwoReplicasExpireEachOfferOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dispatch.Config{OfferSLA: 200 * time.Millisecond, CommissionRate: 10})
	s1, s2 := w.service(t), w.service(t)
	w.run(t, s1)
	w.run(t, s2)
	const masters, orders = 6, 4
	for i := range masters {
		w.master(t, s1, int64(100+i), "Dnipro Center roofer")
	}
	for i := range orders {
		svc := s1
		if i%2 == 1 {
			svc = s2
		}
		_, err := svc.CreateOrder(w.ctx, admin, domain.MessageRef{}, fmt.Sprintf("Dnipro Center roofer 100 job %d", i))
		require.NoError(t, err)
	}
	// Nobody answers: every order goes round both rounds and ends unassignable.
	// That is 48 offers, 8 after one another per master at a 200 ms SLA:
	// 3–7 s with the whole suite running under -race, once over 10 s, so
	// this wait is longer than the shared one.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var open int
		require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM orders WHERE unassignable_at IS NULL`).Scan(&open))
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			// Where each order stands, for a stall CI once saw and nobody
			// reproduced since.
			var state string
			require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT string_agg(format('order %s: %s round %s unassignable %s parked %s; offers %s', o.id, o.state, o.round, o.unassignable_at, o.parked,
    (SELECT string_agg(format('%s/%s/%s', f.master_id, f.round, f.state), ' ' ORDER BY f.id) FROM offers f WHERE f.order_id = o.id)), E'\n')
FROM orders o WHERE o.unassignable_at IS NULL`).Scan(&state))
			t.Fatalf("every order unassignable: %d open after 30 s:\n%s", open, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var offers, expired, maxOpen int
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'EXPIRED') FROM offers`).Scan(&offers, &expired))
	require.Equal(t, offers, expired)
	require.Equal(t, orders*masters*2, offers, "each master offered each order once per round")
	// The follow-up of an expiry may still be editing its message when
	// another replica's pass has already moved the order on.
	eventually(t, func() bool { return len(w.tg.closedOffers()) >= offers }, "every expiry followed up")
	closed := w.tg.closedOffers()
	ids := map[int64]int{}
	for _, f := range closed {
		ids[f.ID]++
	}
	require.Len(t, ids, offers, "every expiry handled")
	for id, n := range ids {
		require.Equal(t, 1, n, "offer %d handled %d times", id, n)
	}
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT coalesce(max(c), 0) FROM (
		SELECT count(*) c FROM offers a JOIN offers b ON a.order_id = b.order_id AND a.id < b.id
		WHERE a.sent_at < coalesce(b.responded_at, 'infinity') AND b.sent_at < coalesce(a.responded_at, 'infinity')
		GROUP BY a.order_id) x`).Scan(&maxOpen))
	require.Zero(t, maxOpen, "no two offers of one order were open at once")
}

// A replica that was down three minutes: when it starts, the first thing
// it does expires everything that fell due meanwhile.
func TestStartExpiresWhatAccumulated(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10})
	for i := range 5 {
		w.master(t, s, int64(10+i), fmt.Sprintf("City%d Center fitter", i))
		_, err := s.CreateOrder(w.ctx, admin, domain.MessageRef{}, fmt.Sprintf("City%d Center fitter 100 job", i))
		require.NoError(t, err)
	}
	w.exec(t, `UPDATE offers SET sent_at = now() - interval '5 minutes', expires_at = now() - interval '3 minutes'`)
	s2 := w.service(t) // the restarted replica
	w.run(t, s2)
	// The recorder sees the closing edits as they are rendered, inside the
	// expiry's transaction: the database says when it committed.
	due := func() int {
		var n int
		require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM offers WHERE state IN ('SENT','VIEWED') AND expires_at <= now()`).Scan(&n))
		return n
	}
	eventually(t, func() bool { return len(w.tg.closedOffers()) >= 5 && due() == 0 }, "all five expired at start")
	require.Len(t, w.tg.closedOffers(), 5)
	for _, f := range w.tg.closedOffers() {
		require.Equal(t, dispatch.Expired, f.State)
		require.Equal(t, 1, f.Round, "the accumulated ones; round 2 went out after")
	}
}

// Details marks the offer VIEWED; a VIEWED offer expires like a SENT one.
func TestViewThenExpire(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.master(t, s, 10, "Kharkiv Center tiler")
	o := w.create(t, s, "Kharkiv Center tiler 100 Tiles <b>bold</b>")
	id := w.tg.sentOffers()[0].ID
	f, got, err := s.View(w.ctx, id, 10)
	require.NoError(t, err)
	require.Equal(t, dispatch.Viewed, f.State)
	require.Equal(t, "Tiles <b>bold</b>", got.Description)
	_, _, err = s.View(w.ctx, id, 10)
	require.NoError(t, err, "Details again shows the text again")
	require.Equal(t, 1, count(w.tg.log(o.ID), "offer_viewed:10"), "viewed reported once")
	_, _, err = s.View(w.ctx, id, 11)
	require.ErrorIs(t, err, dispatch.ErrForbidden)

	w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 millisecond' WHERE id = $1`, id)
	_, _, err = s.Accept(w.ctx, id, 10)
	require.ErrorIs(t, err, dispatch.ErrOfferClosed, "one millisecond late")
	require.Equal(t, dispatch.Searching, w.order(t, o.ID).State)
	n, err := s.Expire(w.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, dispatch.Expired, w.offer(t, id).State)
}

// Commission: DONE owes 10 % within the deadline; overdue blocks the master
// from distribution and tells them; /paid unblocks. Autoclose closes DONE
// orders after AUTOCLOSE_AFTER.
func TestCommissionBlocksAndPaidUnblocks(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10, CommissionDeadline: time.Hour, AutocloseAfter: 24 * time.Hour})
	w.master(t, s, 10, "Lutsk Center glazier")
	o := w.create(t, s, "Lutsk Center glazier 1999 Window")
	_, _, err := s.Accept(w.ctx, w.tg.sentOffers()[0].ID, 10)
	require.NoError(t, err)
	_, _, err = s.Complete(w.ctx, 1<<40)
	require.ErrorIs(t, err, domain.ErrNotFound)
	done, doneBy, err := s.Complete(w.ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Done, done.State)
	require.Equal(t, int64(200), done.Commission, "10 % of 1999, rounded up")
	require.Equal(t, "M10", doneBy.Name, "the master, named")
	_, _, err = s.Complete(w.ctx, o.ID)
	require.ErrorIs(t, err, dispatch.ErrOrderState)

	n, err := s.Commission(w.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "not yet due")
	w.exec(t, `UPDATE orders SET commission_due_at = now() - interval '1 minute', done_at = now() - interval '25 hours' WHERE id = $1`, o.ID)
	n, err = s.Commission(w.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = s.Commission(w.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "blocked once")
	require.Equal(t, []dispatch.NoteKind{dispatch.NoteOrderDone, dispatch.NoteBlocked}, w.tg.noteKinds(10))

	next := w.create(t, s, "Lutsk Center glazier 500 Another window")
	require.Len(t, w.tg.sentOffers(), 1, "a blocked master gets no offers")

	closed, err := s.Autoclose(w.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, closed)
	require.Equal(t, dispatch.Closed, w.order(t, o.ID).State)

	m, debt, wasBlocked, err := s.Paid(w.ctx, "@M10", domain.MessageRef{Chat: 1, ID: 1})
	require.NoError(t, err)
	require.True(t, wasBlocked)
	require.Equal(t, int64(10), m.UserID)
	require.Equal(t, int64(200), debt.Amount)
	require.Equal(t, []int64{o.ID}, debt.Orders)
	eventually(t, func() bool { return s.Distribute(w.ctx) == nil && len(w.tg.sentTo()) == 2 }, "unblocked master offered the waiting order")
	require.Equal(t, next.ID, w.tg.sentOffers()[1].OrderID)
	_, _, _, err = s.Paid(w.ctx, "@nobody", domain.MessageRef{Chat: 1, ID: 2})
	require.ErrorIs(t, err, dispatch.ErrNotMaster)
}

// Cancelling withdraws the open offer and edits its message; the assigned
// master of a cancelled order is told.
func TestCancel(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.master(t, s, 10, "Rivne Center mason")
	o := w.create(t, s, "Rivne Center mason 100 Wall")
	got, err := s.Cancel(w.ctx, o.ID)
	require.NoError(t, err)
	require.Equal(t, dispatch.Cancelled, got.State)
	require.Equal(t, dispatch.Withdrawn, w.offer(t, w.tg.sentOffers()[0].ID).State)
	require.Len(t, w.tg.closedOffers(), 1)
	_, err = s.Cancel(w.ctx, o.ID)
	require.ErrorIs(t, err, dispatch.ErrOrderState)
	_, _, err = s.Accept(w.ctx, w.tg.sentOffers()[0].ID, 10)
	require.ErrorIs(t, err, dispatch.ErrOfferClosed)

	o2 := w.create(t, s, "Rivne Center mason 100 Wall two")
	_, _, err = s.Accept(w.ctx, w.tg.sentOffers()[1].ID, 10)
	require.NoError(t, err)
	_, err = s.Cancel(w.ctx, o2.ID)
	require.NoError(t, err)
	require.Equal(t, []dispatch.NoteKind{dispatch.NoteCancelled}, w.tg.noteKinds(10))
}

// Paused masters get nothing; resuming offers what waits.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	_, err := s.SetActive(w.ctx, 99, false)
	require.ErrorIs(t, err, dispatch.ErrNotMaster)
	w.master(t, s, 10, "Poltava Center carpenter")
	changed, err := s.SetActive(w.ctx, 10, false)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = s.SetActive(w.ctx, 10, false)
	require.NoError(t, err)
	require.False(t, changed)
	w.create(t, s, "Poltava Center carpenter 100 Shelf")
	require.Empty(t, w.tg.sentTo())
	_, err = s.SetActive(w.ctx, 10, true)
	require.NoError(t, err)
	require.NoError(t, s.Distribute(w.ctx))
	require.Equal(t, []int64{10}, w.tg.sentTo())
	_, st, err := s.Master(w.ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, st.Offers[dispatch.Sent])
}

// A database outage fails the sweep with an error (the job logs it) and
// loses nothing: the next sweep expires everything that fell due.
func TestExpireSurvivesDatabaseOutage(t *testing.T) {
	t.Parallel()
	url := storagetest.NewURL(t)
	ctx := context.Background()
	st, err := storage.Open(ctx, url, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, st.Migrate(ctx))
	t.Cleanup(st.Close)
	w := &world{ctx: ctx, store: st, tg: &recorder{}, cfg: dispatch.Config{OfferSLA: time.Hour}}
	s := w.service(t)
	w.master(t, s, 10, "Sumy Center smith")
	_, err = s.CreateOrder(ctx, admin, domain.MessageRef{}, "Sumy Center smith 100 Gate")
	require.NoError(t, err)
	w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 second'`)

	down, err := storage.Open(ctx, url, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	down.Close() // every query on it now fails, as in an outage
	broken, err := dispatch.NewService(w.cfg, dispatch.Deps{Orders: down.Orders(), Masters: down.Masters(), Notifier: w.tg, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	n, err := broken.Expire(ctx)
	require.Error(t, err)
	require.Zero(t, n)
	require.Equal(t, dispatch.Sent, w.offer(t, w.tg.sentOffers()[0].ID).State)

	n, err = s.Expire(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// An offer that expires before its message went out: its closing edit
// takes the queued message's place (the outbox folds an edit into its
// message's pending send), so the master gets the offer already closed,
// once, instead of an offer with live buttons and then its edit.
func TestOfferExpiredBeforeDeliveryIsSentClosed(t *testing.T) {
	t.Parallel()
	w, s := setup(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	w.master(t, s, 10, "Chernihiv Center plumber")
	w.create(t, s, "Chernihiv Center plumber 100 Tap")
	f := w.tg.sentOffers()[0]
	w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, f.ID)
	n, err := s.Expire(w.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// Then round 2 offers the order to the same master again.
	rows := w.outbox(t, 10)
	require.Equal(t, fmt.Sprint("offer:", f.ID), rows[0])
	require.NotContains(t, rows, fmt.Sprint("offer_close:", f.ID), "the edit was folded into the send")
	var text string
	require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT body->>'text' FROM outbox WHERE kind = 'offer' AND ref = $1`, f.ID).Scan(&text))
	require.Equal(t, string(dispatch.Expired), text)
	closed := w.tg.closedOffers()
	require.Len(t, closed, 1)
	require.Equal(t, dispatch.Expired, closed[0].State)
}

// flakyRepo fails the timer's two reads while down is set, as a server
// refusing connections ("too many clients") does.
type flakyRepo struct {
	dispatch.Orders
	down     *atomic.Bool
	failures *atomic.Int64
}

func (r flakyRepo) ExpireOffers(ctx context.Context, by string, tell domain.Render[dispatch.Changed]) ([]dispatch.Offer, error) {
	if r.down.Load() {
		r.failures.Add(1)
		return nil, errors.New("sorry, too many clients already")
	}
	return r.Orders.ExpireOffers(ctx, by, tell)
}

func (r flakyRepo) NextOfferExpiry(ctx context.Context) (time.Time, bool, error) {
	if r.down.Load() {
		r.failures.Add(1)
		return time.Time{}, false, errors.New("sorry, too many clients already")
	}
	return r.Orders.NextOfferExpiry(ctx)
}

// A sweep that fails when its offer falls due, with the read of the next
// deadline failing too, is tried again a second later: the offer expires
// by the timer once the database answers, with no new offer's NOTIFY to
// re-arm it and no WATCHDOG_INTERVAL tick (Expire is never called here).
func TestTimerRetriesAFailedSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dispatch.Config{OfferSLA: 300 * time.Millisecond, CommissionRate: 10})
	var down atomic.Bool
	var failures atomic.Int64
	s, err := dispatch.NewService(w.cfg, dispatch.Deps{
		Orders: flakyRepo{Orders: w.store.Orders(), down: &down, failures: &failures}, Masters: w.store.Masters(), Notifier: w.tg,
		Log: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	w.run(t, s)
	w.master(t, s, 10, "Poltava Center glazier")
	down.Store(true)
	w.create(t, s, "Poltava Center glazier 100 Window")
	// The running distributor's recheck of owed orders may take the
	// order's first step from CreateOrder.
	eventually(t, func() bool { return len(w.tg.sentOffers()) > 0 }, "the order offered")
	f := w.tg.sentOffers()[0]
	eventually(t, func() bool { return failures.Load() >= 2 }, "the timer's sweep and its re-arm failed")
	down.Store(false)
	require.Eventually(t, func() bool { return w.offer(t, f.ID).State == dispatch.Expired }, 5*time.Second, 10*time.Millisecond,
		"the timer tried again")
}

// failOnce is the real store whose first NextOffer fails, as a deadlock
// or a dropped connection would make it.
type failOnce struct {
	dispatch.Orders
	failed atomic.Bool
}

func (r *failOnce) NextOffer(ctx context.Context, orderID int64, sla time.Duration, gate dispatch.Gate, tell domain.Render[dispatch.Changed]) (dispatch.Offer, dispatch.Order, dispatch.Outcome, error) {
	if r.failed.CompareAndSwap(false, true) {
		return dispatch.Offer{}, dispatch.Order{}, dispatch.Busy, errors.New("injected: connection reset by peer")
	}
	return r.Orders.NextOffer(ctx, orderID, sla, gate, tell)
}

// An order whose distribution failed has no open offer and is not marked
// waiting, so only a pass over every searching order finds it: the replica
// asks for one a second later instead of leaving it to the
// DISTRIBUTION_INTERVAL tick (not run here).
func TestFailedDistributionIsRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
	repo := &failOnce{Orders: w.store.Orders()}
	s, err := dispatch.NewService(w.cfg, dispatch.Deps{
		Orders: repo, Masters: w.store.Masters(), Notifier: w.tg, Log: slog.New(slog.DiscardHandler), Registerer: prometheus.NewRegistry(),
	})
	require.NoError(t, err)
	w.run(t, s)
	w.master(t, s, 100, "Dnipro Center roofer")
	o := w.create(t, s, "Dnipro Center roofer 100 job")
	require.True(t, repo.failed.Load(), "the order's first distribution failed")
	eventually(t, func() bool { return len(w.tg.sentTo()) == 1 }, "offered after the retry")
	require.Equal(t, o.ID, w.tg.sentOffers()[0].OrderID)
}

// Every SEARCHING order left without an open offer is taken up
// again from what PostgreSQL holds, whichever replica's transaction held
// its row and whatever wake-up was lost. Each case forces its interleaving
// rather than hoping for it under load: replica 1 runs (its timer is a
// minute away, so only its recheck of owed orders can act), and the
// order's offer ends in a way that leaves replica 1 no wake-up.
func TestOrderLeftWithoutOfferIsTakenUpAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, w *world, s2 *dispatch.Service, f dispatch.Offer)
	}{
		{
			// Another replica expired the offer and died before its
			// follow-up offered the order on.
			name: "expired by a replica that died",
			end: func(t *testing.T, w *world, _ *dispatch.Service, f dispatch.Offer) {
				w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, f.ID)
				_, err := w.store.Orders().ExpireOffers(w.ctx, "", nil)
				require.NoError(t, err)
				// This expiry, or replica 1's own sweep of due offers a
				// moment before it: either way the offer ended with no
				// follow-up from whoever expired it here.
				var state string
				require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT state FROM offers WHERE id = $1`, f.ID).Scan(&state))
				require.Equal(t, "EXPIRED", state)
			},
		},
		{
			// The master declined on a replica that died before offering
			// the order on.
			name: "declined on a replica that died",
			end: func(t *testing.T, w *world, _ *dispatch.Service, f dispatch.Offer) {
				_, ok, err := w.store.Orders().DeclineOffer(w.ctx, f.ID, f.MasterID, nil)
				require.NoError(t, err)
				require.True(t, ok)
			},
		},
		{
			// Replica 2 expires the offer while another transaction holds
			// the order's row (an acceptance, a cancel, another replica's
			// step): its follow-up finds the row taken and leaves the
			// order to the holder, which does not move it on.
			name: "follow-up found the row held",
			end: func(t *testing.T, w *world, s2 *dispatch.Service, f dispatch.Offer) {
				hold, err := w.store.Pool().Begin(w.ctx)
				require.NoError(t, err)
				defer hold.Rollback(w.ctx) //nolint:errcheck // committed below
				_, err = hold.Exec(w.ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, f.OrderID)
				require.NoError(t, err)
				w.exec(t, `UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, f.ID)
				done := make(chan error, 1)
				go func() { _, err := s2.Expire(w.ctx); done <- err }()
				// Release the row once replica 2 has either finished or
				// waits for it: either order of events must end well.
				for waiting := false; !waiting; {
					select {
					case err := <-done:
						require.NoError(t, err)
						waiting = true
						done <- nil
					default:
						require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting))
						time.Sleep(5 * time.Millisecond)
					}
				}
				require.NoError(t, hold.Commit(w.ctx))
				require.NoError(t, <-done)
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, dispatch.Config{OfferSLA: time.Minute, CommissionRate: 10})
			// Replica 2 takes every command, so replica 1 has no wake-up
			// pending when it starts: what it does, it finds in the
			// database.
			s1, s2 := w.service(t), w.service(t)
			w.masters(t, s2, "Lviv Center tiler", 10, 11)
			o := w.create(t, s2, "Lviv Center tiler 500 Bathroom floor")
			first := w.tg.sentOffers()
			require.Len(t, first, 1)
			require.Equal(t, int64(10), first[0].MasterID)
			w.run(t, s1)

			tc.end(t, w, s2, first[0])

			// Replica 1's recheck runs every second; ten mean a stall. The
			// recorder sees an offer as it is rendered, inside its
			// transaction: the database says when it committed.
			open := func() (master int64) {
				err := w.store.Pool().QueryRow(w.ctx, `SELECT master_id FROM offers WHERE order_id = $1 AND state = 'SENT'`, o.ID).Scan(&master)
				if !errors.Is(err, pgx.ErrNoRows) {
					require.NoError(t, err)
				}
				return master
			}
			require.Eventually(t, func() bool { return open() != 0 }, 10*time.Second, 5*time.Millisecond,
				"order %d has no open offer and nobody takes it up: %v", o.ID, w.tg.log(o.ID))
			require.Equal(t, int64(11), open())
			require.Len(t, w.tg.sentOffers(), 2)
			ids, err := w.store.Orders().Searching(w.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
			require.NoError(t, err)
			require.Empty(t, ids, "the step that offered it cleared the mark")
		})
	}
}

// Offers go out only within the city's working hours, in its
// time zone. An order created at 22:00 Moscow time waits, is not offered
// by any pass before 10:00, and the first recheck after 10:00 offers it;
// a city open at that instant is served meanwhile.
func TestOrderAfterHoursIsOfferedAtOpening(t *testing.T) {
	t.Parallel()
	cal, err := dispatch.ParseCalendar("Asia/Almaty", "10:00-20:00", "Moscow=Europe/Moscow")
	require.NoError(t, err)
	moscow := cal.Zone("Moscow")
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 25, 22, 0, 0, 0, moscow)) // 00:00 in Almaty
	w := newWorld(t, dispatch.Config{OfferSLA: time.Hour, CommissionRate: 10, Calendar: cal})
	s, err := dispatch.NewService(w.cfg, dispatch.Deps{Orders: w.store.Orders(), Masters: w.store.Masters(), Notifier: w.tg, Clock: clock, Registerer: prometheus.NewRegistry(),
		Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	w.master(t, s, 10, "Moscow Arbat electrician")
	o := w.create(t, s, "Moscow Arbat electrician 900 Socket sparks")
	require.Empty(t, w.tg.sentOffers(), "22:00 in Moscow: nobody is offered anything")
	open, at, _ := s.Opening("moscow")
	require.False(t, open)
	require.Equal(t, time.Date(2026, 11, 26, 10, 0, 0, 0, moscow), at)

	clock.Advance(11*time.Hour + 59*time.Minute + 30*time.Second) // 09:59:30
	require.NoError(t, s.Distribute(w.ctx))
	require.Empty(t, w.tg.sentOffers(), "09:59:30: still closed")
	ids, err := w.store.Orders().Searching(w.ctx, 10, dispatch.PassOwed, "", dispatch.Gate{})
	require.NoError(t, err)
	require.Equal(t, []int64{o.ID}, ids, "still owed its first step")

	w.run(t, s)
	clock.Advance(30 * time.Second) // 10:00: the recheck's tick
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, w.store.Pool().QueryRow(w.ctx, `SELECT count(*) FROM offers WHERE order_id = $1 AND master_id = 10`, o.ID).Scan(&n))
		if n == 0 {
			clock.Advance(dispatch.OwedRecheck) // the distributor may not have been waiting on its ticker yet
		}
		return n == 1
	}, 10*time.Second, 20*time.Millisecond, "offered once Moscow opens")
}
