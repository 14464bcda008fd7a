package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/e2e/tgfake"
	"switchboard/internal/testkit"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// The tests here mostly wait on the fake Bot API's pacing: at six at once
// the package took 39 s alone on a 2-vCPU host (60 s at go test's default
// of two there, beside the other packages) with at most 18 connections to
// PostgreSQL.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(6)
	os.Exit(m.Run())
}

type bundle struct {
	srv   *tgfake.Server
	store *storage.Store
	ctx   context.Context
}

func setup(t *testing.T, opts ...tgfake.Option) bundle {
	t.Helper()
	return bundle{srv: tgfake.New(t, append([]tgfake.Option{tgfake.WithWaitTimeout(30 * time.Second)}, opts...)...),
		store: storagetest.New(t), ctx: context.Background()}
}

// client is a Bot API client of the fake, with the bot's own token.
func (b bundle) client() *delivery.Client {
	return delivery.NewClient(b.srv.URL(), b.srv.Token(), nil)
}

// run starts a sender with limiter; it stops when the test ends.
func (b bundle) run(t *testing.T, limiter delivery.Limiter, cfg delivery.Config) *delivery.Sender {
	t.Helper()
	return start(t, b.sender(t, b.store.Outbox(), limiter, cfg))
}

// sender builds a sender of store's rows to the fake, polling every 10 ms
// unless cfg says otherwise.
func (b bundle) sender(t *testing.T, store delivery.Store, limiter delivery.Limiter, cfg delivery.Config) *delivery.Sender {
	t.Helper()
	if cfg.Poll == 0 {
		cfg.Poll = 10 * time.Millisecond
	}
	s, err := delivery.NewSender(cfg, store, b.client(), limiter,
		slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	return s
}

// start runs s until the test ends.
func start(t *testing.T, s *delivery.Sender) *delivery.Sender {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// requirePaced checks that the fake refused no send for going too fast,
// and saw none before a retry_after it had answered had passed.
func (b bundle) requirePaced(t *testing.T, why string) {
	t.Helper()
	require.Zero(t, b.srv.RateLimited(), why)
	require.Zero(t, b.srv.EarlySends())
}

// user registers a user who has started the bot (Telegram lets a bot
// write only to those).
func (b bundle) user(id int64, name string) *tgfake.Person {
	p := b.srv.User(id, name, "en")
	p.SendText(id, "/start")
	return p
}

func (b bundle) texts(chat int64) []string {
	var out []string
	for _, m := range b.srv.Messages(chat) {
		out = append(out, m.Text)
	}
	return out
}

func (b bundle) waitTexts(t *testing.T, chat int64, n int) []string {
	t.Helper()
	require.Eventually(t, func() bool { return len(b.texts(chat)) >= n }, 60*time.Second, 20*time.Millisecond,
		"chat %d: %d of %d messages", chat, len(b.texts(chat)), n)
	return b.texts(chat)
}

func (b bundle) state(t *testing.T, text string) string {
	t.Helper()
	var st string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT state FROM outbox WHERE body->>'text' = $1`, text).Scan(&st))
	return st
}

func note(chat int64, text string) domain.Message {
	return domain.Message{ChatID: chat, Kind: domain.KindNote, Text: text}
}

// notes registers users 1…users and writes each of them each notes, "u1 #0"
// on, to the outbox.
func (b bundle) notes(t *testing.T, users, each int) {
	t.Helper()
	var msgs []domain.Message
	for u := int64(1); u <= int64(users); u++ {
		b.user(u, fmt.Sprint("U", u))
		for i := range each {
			msgs = append(msgs, note(u, fmt.Sprintf("u%d #%d", u, i)))
		}
	}
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, msgs...))
}

// Every row arrives, each chat's in the order written, under the fake's
// limits, with no 429 and no send before a retry_after.
func TestSenderDeliversInOrderUnderTheLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var msgs []domain.Message
	for u := int64(1); u <= 4; u++ {
		b.user(u, fmt.Sprint("U", u))
	}
	b.srv.Group(-100, "Admins")
	for i := range 8 {
		for u := int64(1); u <= 4; u++ {
			msgs = append(msgs, note(u, fmt.Sprintf("u%d #%d", u, i)))
		}
		msgs = append(msgs, note(-100, fmt.Sprintf("g #%d", i)))
	}
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, msgs...))
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	for u := int64(1); u <= 4; u++ {
		got := b.waitTexts(t, u, 8)
		for i, text := range got {
			require.Equal(t, fmt.Sprintf("u%d #%d", u, i), text)
		}
	}
	g := b.waitTexts(t, -100, 8)
	require.Equal(t, "g #7", g[7])
	b.requirePaced(t, "paced under every limit")
}

// A user who blocked the bot: the chat is marked, every pending row of it
// dropped and counted, the drop hook told, and nothing more is tried.
func TestSenderUnreachableRecipient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(1, "Ann")
	b.user(2, "Bob")
	ann.Block()
	var hooked atomic.Int64
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: 1, Kind: domain.KindOffer, Ref: 42, Text: "offer"}, note(1, "after"), note(2, "bob")))
	s := b.sender(t, b.store.Outbox(), delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	s.OnDrop(domain.KindOffer, func(_ context.Context, ref int64) { hooked.Store(ref) })
	start(t, s)

	b.waitTexts(t, 2, 1)
	require.Eventually(t, func() bool { return hooked.Load() == 42 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "dropped", b.state(t, "offer"))
	require.Equal(t, "dropped", b.state(t, "after"))
	gone, err := b.store.Outbox().Unreachable(b.ctx, 1)
	require.NoError(t, err)
	require.True(t, gone)
	require.Len(t, b.srv.CallsTo("sendMessage"), 2, "one refused attempt to Ann, one message to Bob")

	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "while gone")))
	require.Eventually(t, func() bool { return b.state(t, "while gone") == "dropped" }, 10*time.Second, 10*time.Millisecond)
	require.Len(t, b.srv.CallsTo("sendMessage"), 2, "no attempt while the mark stands")
}

// The Bot API behind a proxy answering 502 for a while: nothing is lost,
// delivery resumes with backoff.
func TestSenderRidesOutABadGateway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	b.srv.FailFor(2*time.Second, http.StatusBadGateway)
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "one"), note(1, "two")))
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{MaxBackoff: time.Second})
	require.Equal(t, []string{"one", "two"}, b.waitTexts(t, 1, 2))
	var attempts int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT attempts FROM outbox WHERE body->>'text' = 'one'`).Scan(&attempts))
	require.Greater(t, attempts, 1, "the first tries met the 502")
}

// A 429 is obeyed: the row waits out retry_after, nothing goes to the chat
// before it, and the row is delivered, not dropped.
func TestSenderObeysRetryAfter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	b.srv.FailNext("sendMessage", 1, 1)
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "one"), note(1, "two")))
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	require.Equal(t, []string{"one", "two"}, b.waitTexts(t, 1, 2))
	require.Zero(t, b.srv.EarlySends())
	calls := b.srv.CallsTo("sendMessage")
	require.Len(t, calls, 3)
	require.GreaterOrEqual(t, calls[1].Start.Sub(calls[0].End), time.Second, "retry_after 1 waited out")
	stats, err := b.store.Outbox().Stats(b.ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, stats.Throttled)
}

// A request Telegram refuses as malformed is a bug: failed with the
// description, never retried; the rows behind it go on.
func TestSenderBadRequestFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "<b>unclosed"), note(1, "fine")))
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	require.Equal(t, []string{"fine"}, b.waitTexts(t, 1, 1))
	require.Equal(t, "failed", b.state(t, "<b>unclosed"))
	var why string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT last_error FROM outbox WHERE state = 'failed'`).Scan(&why))
	require.Contains(t, why, "can't parse entities")
	require.Contains(t, why, "<b>unclosed", "the first characters of the text, to find the bug")
	require.Len(t, b.srv.CallsTo("sendMessage"), 2)
}

// Edits: one finds its message, and of edits of one message waiting
// together only the latest goes out; one that changes nothing counts as
// done; one whose message is gone is posted anew when asked (progress) and
// dropped otherwise (an offer's expiry).
func TestSenderEdits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: 1, Kind: domain.KindProgress, Key: "p", Text: "10%"},
		domain.Message{ChatID: 1, Kind: domain.KindProgress, Key: "p", Edit: true, Text: "30%"},
		domain.Message{ChatID: 1, Kind: domain.KindProgress, Key: "p", Edit: true, Text: "50%"},
		domain.Message{ChatID: 1, Kind: domain.KindOfferClose, Key: "never", Edit: true, Text: "expired"},
		domain.Message{ChatID: 1, Kind: domain.KindProgress, Key: "lost", Edit: true, Text: "100%", IfGone: domain.IfGoneSend},
	))
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	require.Equal(t, []string{"50%", "100%"}, b.waitTexts(t, 1, 2))
	require.Eventually(t, func() bool { return b.state(t, "expired") == "dropped" }, 10*time.Second, 10*time.Millisecond)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM outbox WHERE body->>'text' = '30%'`).Scan(&n))
	require.Zero(t, n, "superseded by the 50% written with it, so never written")
	progress := b.srv.Messages(1)[0]
	require.Len(t, progress.Edits, 1, "one edit reached Telegram: the latest")

	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: 1, Kind: domain.KindProgress, Key: "p", Edit: true, Text: "50%"}))
	require.Eventually(t, func() bool {
		var sent int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM outbox WHERE state = 'sent'`).Scan(&sent))
		return sent == 4
	}, 10*time.Second, 10*time.Millisecond, "the edit that changed nothing counts as done")
	require.Len(t, b.srv.Messages(1)[0].Edits, 1)
}

// A sender killed with rows claimed: after its lease the rows go out from
// another; at most those in flight could go twice.
func TestSenderTakesOverADeadSendersRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	b.user(2, "Bob")
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "a"), note(1, "b"), note(2, "c")))
	dead, err := b.store.Outbox().Claim(b.ctx, "", 10, 300*time.Millisecond) // claimed, then the process died
	require.NoError(t, err)
	require.Len(t, dead, 2)
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	require.Equal(t, []string{"a", "b"}, b.waitTexts(t, 1, 2))
	require.Equal(t, []string{"c"}, b.waitTexts(t, 2, 1))
}

func redisClient(t *testing.T) *redis.Client {
	t.Helper()
	addr := os.Getenv("TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	require.NoError(t, c.Ping(context.Background()).Err(), "Redis at %s", addr)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Two replicas sharing Redis pace as one: their combined rate stays under
// every limit the fake enforces.
func TestTwoSendersShareTheBudgetThroughRedis(t *testing.T) {
	t.Parallel()
	b := setup(t, tgfake.WithLimits(tgfake.Limits{
		Global:  tgfake.Bucket{Burst: 10, Every: time.Second / 10},
		Private: tgfake.Bucket{Burst: 3, Every: time.Second},
	}))
	rdb := redisClient(t)
	prefix := fmt.Sprintf("test:%d:", time.Now().UnixNano())
	limits := delivery.Limits{Global: 10, GlobalBurst: 2, Private: 1, PrivateBurst: 2, Group: 1.0 / 3, GroupBurst: 1}
	b.notes(t, 10, 4)
	b.run(t, delivery.NewRedisLimiter(rdb, prefix, limits), delivery.Config{})
	b.run(t, delivery.NewRedisLimiter(rdb, prefix, limits), delivery.Config{})
	for u := int64(1); u <= 10; u++ {
		got := b.waitTexts(t, u, 4)
		require.Equal(t, fmt.Sprintf("u%d #3", u), got[3])
	}
	// Each pacing alone at 10/s would have run the fake's 10/s over.
	b.requirePaced(t, "the two replicas together stayed under the limits")
}

// A photo row goes out as sendPhoto by its file id, its text the caption,
// in its place among the chat's rows; a photo never merges and is never an
// edit.
func TestPhotoBySendPhoto(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(42, "Ann")
	sent := ann.SendPhoto(42, "look")
	fileID := sent.Photo[0].FileID
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: 42, Kind: domain.KindReply, Text: "before"},
		domain.Message{ChatID: 42, Kind: domain.KindPhoto, Ref: 7, Text: "📷 <b>order #7</b> &amp; more", Photo: fileID},
		domain.Message{ChatID: 42, Kind: domain.KindReply, Text: "after"},
	))
	b.run(t, delivery.NewMemoryLimiter(delivery.Limits{Global: 1000, Private: 1000, Group: 1000, GlobalBurst: 10, PrivateBurst: 10, GroupBurst: 10}), delivery.Config{})
	require.Equal(t, []string{"before", "", "after"}, b.waitTexts(t, 42, 3))
	msgs := b.srv.Messages(42)
	require.Equal(t, "📷 order #7 & more", msgs[1].Caption)
	require.Equal(t, []tgfake.MessageEntity{{Type: "bold", Offset: 3, Length: 8}}, msgs[1].CaptionEntities)
	require.NotNil(t, msgs[1].File)
	require.Equal(t, fileID, msgs[1].File.FileID)
	require.Equal(t, "file_id", msgs[1].File.Source)
	var state string
	var messageID int64
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT state, message_id FROM outbox WHERE kind = 'photo'`).Scan(&state, &messageID))
	require.Equal(t, "sent", state)
	require.Equal(t, int64(msgs[1].MessageID), messageID)

	require.Error(t, b.store.Outbox().Enqueue(b.ctx, domain.Message{ChatID: 42, Kind: domain.KindPhoto, Key: "k", Edit: true, Photo: fileID}))
	require.Error(t, b.store.Outbox().Enqueue(b.ctx, domain.Message{ChatID: 42, Kind: domain.KindPhoto, Lane: "l", Merge: true, Photo: fileID}))
}

// An edit of the buttons alone, at once: editMessageReplyMarkup leaves the
// text (and its entities) as it is; the same buttons again change nothing
// and count as done; no buttons removes them. The outbox refuses such an
// edit: it would supersede a pending edit of the text.
func TestSendNowEditsTheButtonsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	s := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	id, err := s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Text: "<b>order</b> #7",
		Buttons: [][]domain.Button{{{Text: "Done", Data: "ad:1"}, {Text: "Back out", Data: "ax:1"}}}})
	require.NoError(t, err)
	yes := [][]domain.Button{{{Text: "Yes", Data: "adc:1"}, {Text: "Back", Data: "ab:1"}}}
	for range 2 {
		_, err = s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Edit: true, MarkupOnly: true, ReplyTo: id, Buttons: yes})
		require.NoError(t, err)
	}
	msg, ok := b.srv.MessageByID(1, id)
	require.True(t, ok)
	require.Equal(t, "order #7", msg.Text)
	require.Equal(t, []tgfake.MessageEntity{{Type: "bold", Offset: 0, Length: 5}}, msg.Entities)
	require.Equal(t, "Yes", msg.ReplyMarkup.Buttons()[0].Text)
	require.Equal(t, "adc:1", msg.ReplyMarkup.Buttons()[0].CallbackData)
	require.Len(t, b.srv.CallsTo("editMessageReplyMarkup"), 2)
	require.Empty(t, b.srv.CallsTo("editMessageText"))

	_, err = s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Edit: true, MarkupOnly: true, ReplyTo: id})
	require.NoError(t, err)
	msg, _ = b.srv.MessageByID(1, id)
	require.Equal(t, "order #7", msg.Text)
	require.Empty(t, msg.ReplyMarkup.Buttons())

	require.Error(t, b.store.Outbox().Enqueue(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindAssigned, Key: "offer:1", Edit: true, MarkupOnly: true}))
}

// refusingStore refuses the first delivery mark, as a database shutting
// down would, after the message went out.
type refusingStore struct {
	*storage.Outbox
	refused atomic.Bool
}

func (s *refusingStore) Delivered(ctx context.Context, r domain.Queued, messageID int) (bool, error) {
	if s.refused.CompareAndSwap(false, true) {
		return false, errors.New("FATAL: the database system is shutting down (SQLSTATE 57P01)")
	}
	return s.Outbox.Delivered(ctx, r, messageID)
}

// A delivery mark the database refuses is retried: the row ends sent, its
// message out once — not claimed again after its lease and sent twice.
func TestARefusedDeliveryMarkIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "U1")
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "once")))
	st := &refusingStore{Outbox: b.store.Outbox()}
	// The lease is far longer than the first retry (1 s): on a machine busy
	// enough to delay that retry past a short lease, the row would be claimed
	// again and sent twice, which is the lease's doing, not the retry's.
	start(t, b.sender(t, st, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{ClaimLease: 15 * time.Second}))
	require.Eventually(t, func() bool { return b.state(t, "once") == "sent" }, 30*time.Second, 20*time.Millisecond)
	require.True(t, st.refused.Load())
	require.Equal(t, []string{"once"}, b.texts(1), "sent once")
}

// A live location through the outbox: sent live, moved in place (a newer
// move written before an older went out replaces it), stopped; a stop of
// one stopped already, or of one never sent, is done without a refusal
// and the first without a call. A still point is sent as one. The outbox
// refuses a location with text or a stop that is not an edit.
func TestLiveLocationIsSentMovedAndStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(42, "Cora")
	where := func(lat float64, edit bool, loc domain.Location) domain.Message {
		loc.Lat, loc.Lon = lat, 30.72
		m := domain.Message{ChatID: 42, Kind: domain.KindCustomer, Key: "w", Lane: "w", Edit: edit, Location: &loc}
		if edit && !loc.Stop {
			m.IfGone = domain.IfGoneSend
		}
		return m
	}
	live := domain.Location{Live: time.Hour, Heading: 90, Accuracy: 2000}
	// The first position is an edit of nothing yet: posted anew, live.
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, where(46.48, true, live)))
	b.run(t, delivery.NewMemoryLimiter(delivery.Limits{Global: 1000, Private: 1000, Group: 1000, GlobalBurst: 10, PrivateBurst: 10, GroupBurst: 10}), delivery.Config{})
	locs := func() []tgfake.BotMessage { return b.srv.Locations(42) }
	require.Eventually(t, func() bool { return len(locs()) == 1 }, 30*time.Second, 10*time.Millisecond)
	got := locs()[0]
	require.Equal(t, tgfake.LiveActive, got.Live)
	require.Equal(t, 46.48, got.Location.Latitude)
	require.Equal(t, 3600, got.Location.LivePeriod)
	require.Equal(t, 90, got.Location.Heading)
	require.Equal(t, 1500.0, got.Location.HorizontalAccuracy, "brought into the Bot API's range")

	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, where(46.49, true, live), where(46.50, true, live)))
	require.Eventually(t, func() bool { return locs()[0].Location.Latitude == 46.50 }, 30*time.Second, 10*time.Millisecond)
	require.Len(t, locs(), 1, "moved in place")
	require.Len(t, locs()[0].Edits, 1, "the newer move replaced the older one")

	stop := domain.Location{Stop: true}
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, where(0, true, stop)))
	require.Eventually(t, func() bool { return locs()[0].Live == tgfake.LiveStopped }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, 46.50, locs()[0].Location.Latitude, "stopped where it was")
	calls := len(b.srv.CallsTo("stopMessageLiveLocation"))
	never := where(0, true, stop)
	never.Key, never.Lane = "never", "never"
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, where(0, true, stop), never,
		domain.Message{ChatID: 42, Kind: domain.KindCustomer, Location: &domain.Location{Lat: -33.86, Lon: 151.21}}))
	require.Eventually(t, func() bool { return len(locs()) == 2 }, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, tgfake.LiveNone, locs()[1].Live, "a still point")
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM outbox WHERE state <> 'sent'
AND last_error IS DISTINCT FROM 'superseded by a newer edit'`).Scan(&open))
		return open == 0
	}, 30*time.Second, 10*time.Millisecond, "the stops of nothing live are done, not dropped")
	require.Len(t, b.srv.CallsTo("stopMessageLiveLocation"), calls+1, "the stop of a message never sent made no call")

	require.Error(t, b.store.Outbox().Enqueue(b.ctx, domain.Message{ChatID: 42, Kind: domain.KindCustomer, Text: "x", Location: &live}))
	require.Error(t, b.store.Outbox().Enqueue(b.ctx, domain.Message{ChatID: 42, Kind: domain.KindCustomer, Location: &stop}))
	require.Error(t, b.store.Outbox().Enqueue(b.ctx, domain.Message{ChatID: 42, Kind: domain.KindCustomer, Key: "w", Edit: true,
		IfGone: domain.IfGoneSend, Location: &stop}))
}

// Moves written while the map's send still waits fold into it: the map
// goes out where the master is by then; a stop folded in sends it still.
func TestLiveLocationMovesFoldIntoTheWaitingMap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(42, "Cora")
	at := func(key string, lat float64, edit, stop bool) domain.Message {
		m := domain.Message{ChatID: 42, Kind: domain.KindCustomer, Key: key, Edit: edit,
			Location: &domain.Location{Lat: lat, Lon: 30.72, Live: time.Hour, Heading: 45, Stop: stop}}
		if edit {
			m.Lane = key
			if !stop {
				m.IfGone = domain.IfGoneSend
			}
		}
		if stop {
			m.Location = &domain.Location{Stop: true}
		}
		return m
	}
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, at("moving", 46.48, false, false)))
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, at("moving", 46.49, true, false)))
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, at("there", 46.50, false, false)))
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, at("there", 46.51, true, false)))
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, at("there", 0, true, true)))
	b.run(t, delivery.NewMemoryLimiter(delivery.Limits{Global: 1000, Private: 1000, Group: 1000, GlobalBurst: 10, PrivateBurst: 10, GroupBurst: 10}), delivery.Config{})
	require.Eventually(t, func() bool { return len(b.srv.Locations(42)) == 2 }, 30*time.Second, 10*time.Millisecond)
	locs := b.srv.Locations(42)
	require.Equal(t, 46.49, locs[0].Location.Latitude, "the move waiting with the map is where it goes")
	require.Equal(t, tgfake.LiveActive, locs[0].Live)
	require.Empty(t, locs[0].Edits, "folded, not sent and then edited")
	require.Equal(t, 46.51, locs[1].Location.Latitude)
	require.Equal(t, tgfake.LiveNone, locs[1].Live, "stopped before it went: a still point")
	require.Empty(t, b.srv.CallsTo("editMessageLiveLocation"))
	require.Empty(t, b.srv.CallsTo("stopMessageLiveLocation"))
}

// A refusal whose description holds a NUL (a Bot API server or a proxy
// echoing what it was sent) is still a refusal: the row fails with the
// description cleaned, once, and the chat's next row goes. Stored as sent,
// the description made the row's failure itself refused, and the row was
// claimed and sent again after every lease, the chat's later rows behind it.
func TestARefusalWithANULInItsDescriptionFailsTheRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	b.srv.FailNextWith("sendMessage", 1, &tgfake.APIError{Code: 400,
		Description: "Bad Request: can't parse entities: Unsupported start tag \"b\x00\" at byte offset 0"})
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, note(1, "refused"), note(1, "after")))
	b.run(t, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{ClaimLease: 2 * time.Second})
	require.Equal(t, []string{"after"}, b.waitTexts(t, 1, 1))
	require.Equal(t, "failed", b.state(t, "refused"))
	var why string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT last_error FROM outbox WHERE state = 'failed'`).Scan(&why))
	require.Contains(t, why, "Unsupported start tag \"b\uFFFD\"")
	require.Len(t, b.srv.CallsTo("sendMessage"), 2, "the refused row is not sent again")
}
