package outage

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// adminChat is where the notices go in these tests.
const adminChat = -100

// flaky is the real admin_notices with a switch that makes every call fail
// as an unreachable database would.
type flaky struct {
	*storage.Notices
	down atomic.Bool
}

var errDown = errors.New("database unreachable")

func (f *flaky) Once(ctx context.Context, key, text string, tell domain.Render[string]) (int64, bool, error) {
	if f.down.Load() {
		return 0, false, errDown
	}
	return f.Notices.Once(ctx, key, text, tell)
}

func (f *flaky) End(ctx context.Context, key string, gen int64, tell domain.Render[string]) (bool, error) {
	if f.down.Load() {
		return false, errDown
	}
	return f.Notices.End(ctx, key, gen, tell)
}

func (f *flaky) Open(ctx context.Context, key string) (int64, bool, error) {
	if f.down.Load() {
		return 0, false, errDown
	}
	return f.Notices.Open(ctx, key)
}

// replica is one replica's watch of one service: its client's state is
// what the test sets.
type replica struct {
	reason   atomic.Value // string: why the client refuses, "" while it does not
	over     atomic.Bool  // the client's breaker is closed
	answered atomic.Bool  // the client has had an answer since start
	polls    atomic.Int32
	ended    atomic.Int32
	stop     func()
}

// afterPolls waits until r's watch has read its client n more times.
func (r *replica) afterPolls(t *testing.T, n int32) {
	t.Helper()
	from := r.polls.Load()
	require.Eventually(t, func() bool { return r.polls.Load() >= from+n }, 30*time.Second, time.Millisecond)
}

type fixture struct {
	notices *flaky
	pool    *pgxpool.Pool
}

func setup(t *testing.T) *fixture {
	t.Helper()
	st := storagetest.New(t)
	return &fixture{notices: &flaky{Notices: st.Notices()}, pool: st.Pool()}
}

// start runs a watch over f's notices until the test ends or stop is
// called, as one replica does.
func (f *fixture) start(t *testing.T, reason string) *replica {
	t.Helper()
	r := &replica{}
	r.reason.Store(reason)
	w := &Watch{
		deps: Deps{Notices: f.notices, Wake: func() {}, Log: slog.New(slog.DiscardHandler)},
		key:  "k", what: "refused", back: "back",
		reason: func() (string, string) {
			r.polls.Add(1)
			return r.reason.Load().(string), ""
		},
		over:     r.over.Load,
		answered: r.answered.Load,
		notice: func(reason, _ string) []domain.Message {
			text := "end"
			if reason != "" {
				text = "start: " + reason
			}
			return []domain.Message{{ChatID: adminChat, Kind: domain.KindNote, Text: text}}
		},
		ended: func() { r.ended.Add(1) },
		every: 5 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	r.stop = func() { cancel(); <-done }
	t.Cleanup(r.stop)
	return r
}

// told is what the admin chat was sent, in order.
func (f *fixture) told(t *testing.T) []string {
	t.Helper()
	var texts []string
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`SELECT coalesce(array_agg(body->>'text' ORDER BY id), '{}') FROM outbox WHERE chat_id = $1`, adminChat).Scan(&texts))
	return texts
}

// recovers has r's client answer again, its breaker closed: the end of
// its outage is certain.
func (r *replica) recovers() {
	r.reason.Store("")
	r.over.Store(true)
}

// refusedAgain has r refused anew after the first outage was told ended,
// and waits for that new outage to be told as one.
func (f *fixture) refusedAgain(t *testing.T, r *replica) {
	t.Helper()
	r.reason.Store("model missing")
	f.waitTold(t, "start: key refused", "end", "start: model missing")
}

// waitTold waits until the admin chat was sent want.
func (f *fixture) waitTold(t *testing.T, want ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return len(f.told(t)) >= len(want) }, 30*time.Second, time.Millisecond)
	require.Equal(t, want, f.told(t))
}

// The admin chat hears a refusal once however long it lasts, its end once
// the end is certain; ended runs then, once.
func TestWatchTellsStartAndEndOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.start(t, "key refused")
	f.waitTold(t, "start: key refused")
	r.afterPolls(t, 3)
	require.Equal(t, []string{"start: key refused"}, f.told(t), "told once, however many polls see it")

	r.reason.Store("")
	r.afterPolls(t, 3) // probing, not yet over
	require.Equal(t, []string{"start: key refused"}, f.told(t), "no end while it is not certain")
	r.over.Store(true)
	f.waitTold(t, "start: key refused", "end")
	r.afterPolls(t, 3)
	require.EqualValues(t, 1, r.ended.Load(), "the end is told once")
	require.Equal(t, []string{"start: key refused", "end"}, f.told(t))

	f.refusedAgain(t, r)
}

// A start or an end the store could not record is tried again at the next
// poll, and told once it is.
func TestWatchRetriesWhatWasNotRecorded(t *testing.T) {
	t.Parallel()
	f, r := refusedWhileDown(t)
	require.Empty(t, f.told(t))
	f.notices.down.Store(false)
	f.waitTold(t, "start: key refused")

	f.notices.down.Store(true)
	r.recovers()
	r.afterPolls(t, 3)
	require.Equal(t, []string{"start: key refused"}, f.told(t))
	require.Zero(t, r.ended.Load())
	f.notices.down.Store(false)
	f.waitTold(t, "start: key refused", "end")
}

// A refusal seen only while the store was down, and over before it came
// back, is told neither as a start nor as an end.
func TestWatchForgetsARefusalNeverRecorded(t *testing.T) {
	t.Parallel()
	f, r := refusedWhileDown(t)
	r.recovers()
	r.afterPolls(t, 3)
	f.notices.down.Store(false)
	r.afterPolls(t, 3)
	require.Empty(t, f.told(t))
	require.Zero(t, r.ended.Load())
}

// The replica that told an outage dies; the one started in its place has
// a client that has not been refused. It tells the end once its client has
// answered — not before, since an unused client proves nothing — and the
// next outage is told as one.
func TestWatchEndsAnOutageADeadReplicaTold(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.toldByDeadReplica(t)

	r := f.start(t, "")
	r.over.Store(true)
	r.afterPolls(t, 5)
	require.Equal(t, []string{"start: key refused"}, f.told(t), "no end before the client answered")
	r.answered.Store(true)
	f.waitTold(t, "start: key refused", "end")

	f.refusedAgain(t, r)
}

// A replica started while the outage goes on joins it: its own refusal is
// not told again, and it tells the end when its breaker closes.
func TestWatchJoinsAnOutageADeadReplicaTold(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.toldByDeadReplica(t)

	r := f.start(t, "key refused")
	r.afterPolls(t, 5)
	require.Equal(t, []string{"start: key refused"}, f.told(t))
	r.recovers()
	f.waitTold(t, "start: key refused", "end")
}

// refusedWhileDown starts a replica refused while the store refuses
// every write, and lets it poll a few times.
func refusedWhileDown(t *testing.T) (*fixture, *replica) {
	t.Helper()
	f := setup(t)
	f.notices.down.Store(true)
	r := f.start(t, "key refused")
	r.afterPolls(t, 3)
	return f, r
}

// toldByDeadReplica has a replica tell an outage and die in it.
func (f *fixture) toldByDeadReplica(t *testing.T) {
	t.Helper()
	dead := f.start(t, "key refused")
	f.waitTold(t, "start: key refused")
	dead.stop()
}

// endedOnOne starts two replicas refused, waits for the one notice, and
// has the first one's client answer: the end is told, the second is still
// refused.
func (f *fixture) endedOnOne(t *testing.T) (a, b *replica) {
	t.Helper()
	a, b = f.start(t, "key refused"), f.start(t, "key refused")
	f.waitTold(t, "start: key refused")
	a.afterPolls(t, 3)
	b.afterPolls(t, 3)
	a.recovers()
	f.waitTold(t, "start: key refused", "end")
	return a, b
}

// Two replicas see one outage: it is told once. The first whose client
// answers tells the end; the other, whose breaker is still open a while,
// neither tells the outage again nor its end.
func TestWatchOneOutageTwoReplicas(t *testing.T) {
	t.Parallel()
	f := setup(t)
	_, b := f.endedOnOne(t)
	b.afterPolls(t, 5) // still refused on b
	b.recovers()
	b.afterPolls(t, 5)
	require.Equal(t, []string{"start: key refused", "end"}, f.told(t))

	// A later outage is a new one, whichever replica sees it.
	f.refusedAgain(t, b)
}

// A replica still in an old outage when a new one is told does not end
// the new one when its own old one ends: the replica in the new one does.
func TestWatchEndsOnlyTheOutageItSaw(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a, b := f.endedOnOne(t)
	a.afterPolls(t, 3)
	a.reason.Store("model missing")
	f.waitTold(t, "start: key refused", "end", "start: model missing")

	b.recovers()
	b.afterPolls(t, 5)
	require.Equal(t, []string{"start: key refused", "end", "start: model missing"}, f.told(t),
		"b's outage was ended already; a's goes on")
	a.reason.Store("")
	f.waitTold(t, "start: key refused", "end", "start: model missing", "end")
}

// HH's captcha whose captcha_url holds a NUL (an escape in its JSON) is
// told to the admin chat, the URL cleaned. Taken as sent, the notice was
// refused by PostgreSQL at every poll for as long as the captcha lasted,
// and nobody was told to solve it while the vacancy work waited.
func TestACaptchaURLWithANULIsTold(t *testing.T) {
	t.Parallel()
	f := setup(t)
	srv := hhtest.Start(t)
	srv.InjectFault(hhtest.Fault{Count: 1, Status: http.StatusForbidden, On: hhtest.SearchEndpoint,
		Body: []byte(`{"errors":[{"type":"captcha_required","value":"captcha_required",` +
			`"captcha_url":"https://hh.ru/account/captcha?state=a\u0000b"}]}`)})
	c, err := hh.New(hh.Config{URL: srv.URL(), UserAgent: "switchboard-test/1.0 (dev@example.com)",
		Timeout: 5 * time.Second, Registerer: prometheus.NewRegistry(), Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, err = c.Search(context.Background(), vacancy.Params{Text: "golang"}, 0, 10)
	require.ErrorIs(t, err, vacancy.ErrHHBlocked)

	w := HH(Deps{Notices: f.notices, Wake: func() {}, Log: slog.New(slog.DiscardHandler)}, c,
		func(reason, captcha string) []domain.Message {
			return []domain.Message{{ChatID: adminChat, Kind: domain.KindNote, Text: reason + " " + captcha}}
		}, nil)
	w.every = 5 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	f.waitTold(t, "403 captcha_required https://hh.ru/account/captcha?state=a\uFFFDb")
}
