package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/locales"
	"switchboard/storage"
)

const (
	dispatchPollEvery = 10 * time.Millisecond
	// dispatchFirstUser is the first bench master's user id; master i (from
	// 0) is dispatchFirstUser + i in both runs.
	dispatchFirstUser = 700_000_001
	// dispatchMasterCity is where every bench master lives. No order is in
	// that city, so no master is ever a candidate: an expired order goes
	// through both rounds and is reported unassignable.
	dispatchMasterCity = "Benchford"
)

type dispatchConfig struct {
	commonFlags
	n        int
	replicas int
	spread   time.Duration
	slaMin   time.Duration
	slaMax   time.Duration
	batch    int
	sweeps   int
	sweepN   int
	// sweepMessages is the size of the sweep with messages (0: none).
	sweepMessages int
	timeout       time.Duration
	seed          uint64
	stages        bool
}

// dispatchReport is the scenario's JSON line.
type dispatchReport struct {
	Scenario    string  `json:"scenario"`
	LagP50MS    float64 `json:"lag_p50_ms"`
	LagP99MS    float64 `json:"lag_p99_ms"`
	Sweep100kMS float64 `json:"sweep_100k_ms"`
	LagP90MS    float64 `json:"lag_p90_ms"`
	LagMaxMS    float64 `json:"lag_max_ms"`
	N           int     `json:"n"`
	Replicas    int     `json:"replicas"`
	// SweepN is the number of due offers each sweep expires (100 000
	// unless -sweep-n says otherwise; sweep_100k_ms is then for that many).
	SweepN int `json:"sweep_n"`
	// SweepMessagesMS is the sweep of SweepMessagesN due offers that also
	// writes their closing edits and live-log lines (0, 0: not run).
	SweepMessagesMS float64 `json:"sweep_messages_ms"`
	SweepMessagesN  int     `json:"sweep_messages_n"`
	tail
}

// benchDispatch runs the lag run and then the sweeps on a database of its
// own, dropped before it returns whatever happened.
func benchDispatch(ctx context.Context, cfg dispatchConfig, out io.Writer, log *slog.Logger) (dispatchReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep dispatchReport, err error) {
		store := db.store
		fmt.Fprintf(out, "dispatch: database %s (PostgreSQL %s, pool max %d connections per replica)\n",
			db.name, db.pgVersion, store.Pool().Config().MaxConns)

		lag, err := lagRun(ctx, cfg, store, db.url, log)
		if err != nil {
			return rep, fmt.Errorf("lag run: %w", err)
		}
		lag.print(out)

		sweeps := make(durations, 0, cfg.sweeps)
		for i := range cfg.sweeps {
			d, err := sweepRun(ctx, store, cfg.sweepN, i+1, nil, out)
			if err != nil {
				return rep, fmt.Errorf("sweep %d: %w", i+1, err)
			}
			sweeps = append(sweeps, d)
		}
		each := make([]string, len(sweeps))
		for i, d := range sweeps {
			each[i] = fmt.Sprintf("%.1fms", ms(d))
		}
		slices.Sort(sweeps)
		fmt.Fprintf(out, "sweep of %d due offers (one ExpireOffers call): median %.1fms (each: %s)\n",
			cfg.sweepN, ms(sweeps.p(0.5)), strings.Join(each, ", "))

		if cfg.sweepMessages > 0 {
			render, err := newBenchRenderer(store, log)
			if err != nil {
				return rep, err
			}
			d, err := sweepRun(ctx, store, cfg.sweepMessages, cfg.sweeps+1, render, out)
			if err != nil {
				return rep, fmt.Errorf("sweep with messages: %w", err)
			}
			rep.SweepMessagesMS, rep.SweepMessagesN = round(ms(d), 1), cfg.sweepMessages
		}

		rep.notePeakRSS(out)
		rep.Scenario = "dispatch"
		rep.LagP50MS = round(ms(lag.lag.p(0.50)), 2)
		rep.LagP99MS = round(ms(lag.lag.p(0.99)), 2)
		rep.Sweep100kMS = round(ms(sweeps.p(0.5)), 1)
		rep.LagP90MS = round(ms(lag.lag.p(0.90)), 2)
		rep.LagMaxMS = round(ms(lag.lag.p(1)), 2)
		rep.N = cfg.n
		rep.Replicas = cfg.replicas
		rep.SweepN = cfg.sweepN
		return rep, nil
	})
}

// seedMasters creates n users, each a master in dispatchMasterCity:
// master i (from 0) is dispatchFirstUser + i.
func seedMasters(ctx context.Context, store *storage.Store, n int) error {
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO users (id, username, first_name, telegram_language)
SELECT $1 + g, 'bm' || g, 'Master ' || g, 'en' FROM generate_series(0, $2 - 1) g`, dispatchFirstUser, n)
	b.Queue(`INSERT INTO masters (user_id, city, district, skills)
SELECT $1 + g, $3, 'Centre', ARRAY['plumbing'] FROM generate_series(0, $2 - 1) g`, dispatchFirstUser, n, dispatchMasterCity)
	if err := store.Pool().SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("seed masters: %w", err)
	}
	return nil
}

// orderIDs takes n ids from the orders' sequence, ascending. Order i (from
// 0) is for master dispatchFirstUser + i, in City i: a city of its own,
// where no master lives.
func orderIDs(ctx context.Context, store *storage.Store, n int) ([]int64, error) {
	rows, err := store.Pool().Query(ctx, `SELECT nextval(pg_get_serial_sequence('orders', 'id')) FROM generate_series(1, $1)`, n)
	if err != nil {
		return nil, fmt.Errorf("order ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("order ids: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// insertOffers is one statement that creates, for each (order id, master,
// SLA in microseconds, index) of its arrays, the SEARCHING order and its
// round-1 offer to the master, SENT now and expiring after the SLA, with
// a message (chat = the master, message id = index + 1); it returns each
// offer's id and expires_at. Order and offer are created together, as
// CreateOrder's distribution does, so that no distribution pass ever sees
// the order without its offer.
const insertOffers = `
WITH t AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[]) AS t(o, m, s, k)
), o AS (
    INSERT INTO orders (id, created_by, city, district, skill, price, description)
    SELECT o, 1, 'City ' || k, 'Centre', 'plumbing', 1000, 'Bench order ' || k FROM t
    RETURNING id
)
INSERT INTO offers (order_id, master_id, round, sent_at, expires_at, chat_id, message_id)
SELECT t.o, t.m, 1, x.now - $5 * interval '1 microsecond', x.now + t.s * interval '1 microsecond', t.m, t.k + 1
FROM t JOIN o ON o.id = t.o, (SELECT now() AS now) x
RETURNING id, expires_at`

// seedDue creates n masters and, for each, an order with an offer that
// fell due between one and two minutes ago (the watchdog was down, say).
func seedDue(ctx context.Context, store *storage.Store, n int) error {
	if err := seedMasters(ctx, store, n); err != nil {
		return err
	}
	ids, err := orderIDs(ctx, store, n)
	if err != nil {
		return err
	}
	masters, ages, idx := make([]int64, n), make([]int64, n), make([]int64, n)
	for i := range n {
		masters[i] = int64(dispatchFirstUser + i)
		ages[i] = -(time.Minute + time.Duration(i%60_000)*time.Millisecond).Microseconds()
		idx[i] = int64(i)
	}
	// The SLA is negative (due in the past); sent_at is two minutes before now.
	tag, err := store.Pool().Exec(ctx, insertOffers, ids, masters, ages, idx, (2 * time.Minute).Microseconds())
	if err != nil {
		return fmt.Errorf("seed offers: %w", err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("seed offers: %d created, want %d", tag.RowsAffected(), n)
	}
	return nil
}

// offerClock records, per offer, when it was created to expire, when the
// ExpireOffers call that returned it started and returned (and how many
// calls returned it), and when its closing edit was rendered and committed (and how many
// times); and counts the live-log events and other notifier calls.
type offerClock struct {
	mu        sync.Mutex
	expiresAt map[int64]time.Time
	swept     map[int64]sweepMark
	closed    map[int64]closeMark
	events    map[dispatch.EventKind]int
	sendOffer int
	tell      int
	closes    int // closing edits rendered, duplicates included
}

type sweepMark struct {
	start, end time.Time
	replica    int
	times      int
}

type closeMark struct {
	at      time.Time
	replica int
	times   int
	state   dispatch.OfferState
}

func newOfferClock(n int) *offerClock {
	return &offerClock{expiresAt: make(map[int64]time.Time, n), swept: make(map[int64]sweepMark, n),
		closed: make(map[int64]closeMark, n), events: map[dispatch.EventKind]int{}}
}

// done reports whether every offer has been closed and its order's
// follow-up (offering it on, here: reporting it unassignable) is over.
func (c *offerClock) done() (closed, unassignable int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.closed), c.events[dispatch.EventUnassignable]
}

// replicaStats counts one replica's timer at work.
type replicaStats struct {
	notified   atomic.Int64 // NOTIFY payloads received
	sweeps     atomic.Int64 // ExpireOffers calls
	nonEmpty   atomic.Int64 // … that expired something
	expired    atomic.Int64 // offers they returned
	nextExpiry atomic.Int64 // NextExpiry calls (re-arming)
}

// clockedDispatchOrders times the watchdog statement for the offer clock.
type clockedDispatchOrders struct {
	dispatch.Orders
	c       *offerClock
	st      *replicaStats
	replica int
}

func (r clockedDispatchOrders) ExpireOffers(ctx context.Context, by string, tell domain.Render[dispatch.Changed]) ([]dispatch.Offer, error) {
	start := time.Now()
	offers, err := r.Orders.ExpireOffers(ctx, by, tell)
	end := time.Now()
	r.st.sweeps.Add(1)
	if len(offers) > 0 {
		r.st.nonEmpty.Add(1)
		r.st.expired.Add(int64(len(offers)))
		r.c.mu.Lock()
		for _, f := range offers {
			m := r.c.swept[f.ID]
			m.times++
			if m.times == 1 {
				m.start, m.end, m.replica = start, end, r.replica
			}
			r.c.swept[f.ID] = m
			// The closing edit was rendered inside the expiry's
			// transaction; it exists once that commits, which is now.
			if c, ok := r.c.closed[f.ID]; ok && c.at.Before(end) {
				c.at = end
				r.c.closed[f.ID] = c
			}
		}
		r.c.mu.Unlock()
	}
	return offers, err
}

func (r clockedDispatchOrders) NextOfferExpiry(ctx context.Context) (time.Time, bool, error) {
	r.st.nextExpiry.Add(1)
	return r.Orders.NextOfferExpiry(ctx)
}

// benchNotifier is the bot's own renderer (bot.DispatchNotes, the
// Notifier app.go wires) with a recorder around it: every expiry writes
// the outbox rows the bot writes (the closing edit of the offer's message,
// the offer_expired live-log line, and the follow-up's order_unassignable
// line), rendered from the same templates, so their cost is in the
// measured path. It records Closed and counts the rest; Offer should not
// be called (the bench inserts its offers itself).
type benchNotifier struct {
	dispatch.Notifier
	c       *offerClock
	replica int
}

// benchAdminChat is the live log's chat (ADMIN_CHAT_ID).
const benchAdminChat = -1001

// newBenchRenderer is the renderer as app.go builds it.
func newBenchRenderer(store *storage.Store, log *slog.Logger) (dispatch.Notifier, error) {
	return bot.NewRenderer(bot.RenderConfig{AdminChatID: benchAdminChat, AdminLang: "en"}, locales.MustLoad(), log).DispatchNotes(), nil
}

func (b benchNotifier) Offer(m dispatch.Master, o dispatch.Order, f dispatch.Offer) []domain.Message {
	b.c.mu.Lock()
	b.c.sendOffer++
	b.c.mu.Unlock()
	return b.Notifier.Offer(m, o, f)
}

func (b benchNotifier) Closed(m dispatch.Master, o dispatch.Order, f dispatch.Offer) []domain.Message {
	now := time.Now()
	b.c.mu.Lock()
	b.c.closes++
	c := b.c.closed[f.ID]
	c.times++
	if c.times == 1 {
		c.at, c.replica, c.state = now, b.replica, f.State
	}
	b.c.closed[f.ID] = c
	b.c.mu.Unlock()
	return b.Notifier.Closed(m, o, f)
}

func (b benchNotifier) Note(n dispatch.Note) []domain.Message {
	b.c.mu.Lock()
	b.c.tell++
	b.c.mu.Unlock()
	return b.Notifier.Note(n)
}

func (b benchNotifier) Event(e dispatch.Event) []domain.Message {
	b.c.mu.Lock()
	b.c.events[e.Kind]++
	b.c.mu.Unlock()
	return b.Notifier.Event(e)
}

type lagResult struct {
	n, replicas, workers int
	spread               time.Duration
	slaMin, slaMax       time.Duration
	batch                int
	insertTook           time.Duration // from the first statement creating offers to the last one's return
	behind               time.Duration // the most such a statement started after its slot
	waitTook             time.Duration // from the last one to everything closed and followed up
	// Per offer, sorted: closing edit committed − expires_at (the lag); the start of
	// the sweep that expired it − expires_at (the timer's part); that
	// ExpireOffers call's duration; and its return → the edit committed (the
	// follow-up: reading master and order, queueing behind the sweep's
	// other offers).
	lag, timer, statement, followUp durations
	stats                           []*replicaStats
	events                          map[dispatch.EventKind]int
	closes, sendOffer, tell         int
	stages                          *stages // nil without -stages
	elapsed                         time.Duration
}

func (r lagResult) print(out io.Writer) {
	fmt.Fprintf(out, "lag run: n=%d offers created over %s (%d per statement; took %.3fs, at most %.1fms behind schedule), "+
		"SLA uniform in [%s, %s], %d replica(s) × %d follow-up workers\n",
		r.n, r.spread, r.batch, r.insertTook.Seconds(), ms(r.behind), r.slaMin, r.slaMax, r.replicas, r.workers)
	fmt.Fprintln(out, "  the WATCHDOG_INTERVAL job is not run: every expiry below is the per-replica timers' (NOTIFY-armed); the 60 s tick is only the safety net")
	line := func(name string, d durations) { d.printRow(out, 44, name) }
	line("lag (closing edit committed − expires_at)", r.lag)
	line("  timer (sweep start − expires_at)", r.timer)
	line("  statement (the ExpireOffers call)", r.statement)
	line("  follow-up (statement returned → edit committed; 0 now that they commit together)", r.followUp)
	for i, st := range r.stats {
		fmt.Fprintf(out, "  replica %d: notifications=%d sweeps=%d (expiring something: %d) offers_expired=%d next_expiry_reads=%d\n",
			i, st.notified.Load(), st.sweeps.Load(), st.nonEmpty.Load(), st.expired.Load(), st.nextExpiry.Load())
	}
	fmt.Fprintf(out, "  close_offer=%d (distinct offers %d) events offer_expired=%d order_unassignable=%d send_offer=%d tell=%d; all %d orders unassignable after round 2\n",
		r.closes, len(r.lag), r.events[dispatch.EventOfferExpired], r.events[dispatch.EventUnassignable], r.sendOffer, r.tell, r.n)
	fmt.Fprintf(out, "  everything closed and followed up %.3fs after the last offers were created\n", r.waitTook.Seconds())
	if r.stages != nil {
		// Workers here: each replica's follow-up workers and as many
		// for its distribution passes (Config.Workers each).
		r.stages.printPer(out, "offer", r.n, 2*r.replicas*r.workers, r.elapsed)
	}
}

// lagRun starts the replicas, creates cfg.n offers at a steady rate with
// random SLAs and waits until every one is EXPIRED, closed and followed up.
func lagRun(ctx context.Context, cfg dispatchConfig, store *storage.Store, dbURL string, log *slog.Logger) (lagResult, error) {
	res := lagResult{n: cfg.n, replicas: cfg.replicas, spread: cfg.spread, slaMin: cfg.slaMin, slaMax: cfg.slaMax, batch: cfg.batch}
	if err := seedMasters(ctx, store, cfg.n); err != nil {
		return res, err
	}
	orders, err := orderIDs(ctx, store, cfg.n)
	if err != nil {
		return res, err
	}
	// A live database has statistics (autovacuum).
	if _, err := store.Pool().Exec(ctx, `ANALYZE users, masters`); err != nil {
		return res, fmt.Errorf("analyze: %w", err)
	}
	clock := newOfferClock(cfg.n)
	render, err := newBenchRenderer(store, log)
	if err != nil {
		return res, err
	}
	if cfg.stages {
		res.stages = newStages()
	}

	type disp struct {
		store *storage.Store
		svc   *dispatch.Service
		st    *replicaStats
		live  *storage.Liveness
	}
	reps := make([]disp, cfg.replicas)
	for i := range reps {
		rp := disp{store: store, st: &replicaStats{}}
		if i > 0 {
			if rp.store, err = storage.Open(ctx, dbURL, log); err != nil {
				return res, err
			}
			defer rp.store.Close()
		}
		var orders dispatch.Orders = rp.store.Orders()
		var masters dispatch.Masters = rp.store.Masters()
		if res.stages != nil {
			orders = timedDispatchOrders{orders, res.stages}
			masters = timedDispatchMasters{masters, res.stages}
		}
		// Each replica claims its expiries' follow-ups in the name its
		// liveness lock proves alive, as main wires it.
		rp.live = rp.store.Liveness(fmt.Sprintf("bench-%d", i))
		defer rp.live.Close()
		rp.svc, err = dispatch.NewService(dispatch.Config{Claimer: rp.live.Claimer()}, dispatch.Deps{
			Orders:   clockedDispatchOrders{Orders: orders, c: clock, st: rp.st, replica: i},
			Masters:  masters,
			Notifier: benchNotifier{Notifier: render, c: clock, replica: i}, Log: log.With("replica", i), Registerer: prometheus.NewRegistry(),
		})
		if err != nil {
			return res, err
		}
		res.workers = rp.svc.Config().Workers
		res.stats = append(res.stats, rp.st)
		reps[i] = rp
	}

	poll, err := connect(ctx, dbURL)
	if err != nil {
		return res, fmt.Errorf("poll connection: %w", err)
	}
	defer poll.Close(context.WithoutCancel(ctx))
	ins, err := connect(ctx, dbURL)
	if err != nil {
		return res, fmt.Errorf("insert connection: %w", err)
	}
	defer ins.Close(context.WithoutCancel(ctx))

	// The replicas' timers, each fed by a LISTEN of its own, as main wires
	// them; nothing else of the service runs (no jobs, no distribution).
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
	}()
	listening := make(chan struct{}, len(reps))
	for _, rp := range reps {
		listen := countedListen(rp.store, &rp.st.notified, listening)
		wg.Add(2)
		go func() {
			defer wg.Done()
			rp.live.Run(runCtx)
		}()
		go func() {
			defer wg.Done()
			rp.svc.Run(runCtx, listen)
		}()
	}
	if err := awaitListening(ctx, listening, len(reps), "replicas"); err != nil {
		return res, err
	}

	begin := time.Now()
	if err := createOffers(ctx, ins, cfg, orders, clock, &res); err != nil {
		return res, err
	}
	lastInsert := time.Now()
	if err := waitExpired(ctx, poll, clock, cfg.n, cfg.timeout); err != nil {
		return res, err
	}
	res.waitTook = time.Since(lastInsert)
	res.elapsed = time.Since(begin)
	// Run returns once its sweep in progress and that sweep's follow-up
	// are over, so nothing is counted after this.
	stop()
	wg.Wait()

	clock.mu.Lock()
	defer clock.mu.Unlock()
	res.events = clock.events
	res.closes, res.sendOffer, res.tell = clock.closes, clock.sendOffer, clock.tell
	for id, exp := range clock.expiresAt {
		c, ok := clock.closed[id]
		if !ok {
			continue // verifyLag reports it
		}
		res.lag = append(res.lag, c.at.Sub(exp))
		if s, ok := clock.swept[id]; ok {
			res.timer = append(res.timer, s.start.Sub(exp))
			res.statement = append(res.statement, s.end.Sub(s.start))
			res.followUp = append(res.followUp, c.at.Sub(s.end))
		}
	}
	for _, d := range []durations{res.lag, res.timer, res.statement, res.followUp} {
		slices.Sort(d)
	}
	return res, verifyLag(ctx, poll, clock, res, cfg.n)
}

// createOffers creates each order with its offer, cfg.batch per statement
// (insertOffers; each offer NOTIFYs its expires_at through the offers
// trigger), the statements evenly spaced over cfg.spread. Each offer is for
// its order's master, expires after a random SLA and has a message, so
// that expiring it edits one.
func createOffers(ctx context.Context, conn *pgx.Conn, cfg dispatchConfig, orders []int64, clock *offerClock, res *lagResult) error {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x5eed))
	batches := (len(orders) + cfg.batch - 1) / cfg.batch
	every := cfg.spread / time.Duration(max(batches-1, 1))
	start := time.Now()
	for b := range batches {
		if slot := start.Add(time.Duration(b) * every); time.Until(slot) > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Until(slot)):
			}
		} else {
			res.behind = max(res.behind, -time.Until(slot))
		}
		lo, hi := b*cfg.batch, min((b+1)*cfg.batch, len(orders))
		ids, masters, slas, msgs := make([]int64, 0, hi-lo), make([]int64, 0, hi-lo), make([]int64, 0, hi-lo), make([]int64, 0, hi-lo)
		for i := lo; i < hi; i++ {
			sla := cfg.slaMin
			if span := cfg.slaMax - cfg.slaMin; span > 0 {
				sla += time.Duration(rng.Int64N(int64(span) + 1))
			}
			ids = append(ids, orders[i])
			masters = append(masters, int64(dispatchFirstUser+i))
			slas = append(slas, sla.Microseconds())
			msgs = append(msgs, int64(i))
		}
		rows, err := conn.Query(ctx, insertOffers, ids, masters, slas, msgs, 0)
		if err != nil {
			return fmt.Errorf("create offers: %w", err)
		}
		var id int64
		var exp time.Time
		clock.mu.Lock()
		_, err = pgx.ForEachRow(rows, []any{&id, &exp}, func() error {
			clock.expiresAt[id] = exp
			return nil
		})
		clock.mu.Unlock()
		if err != nil {
			return fmt.Errorf("create offers: %w", err)
		}
	}
	res.insertTook = time.Since(start)
	if len(clock.expiresAt) != len(orders) {
		return fmt.Errorf("create offers: %d created, want %d", len(clock.expiresAt), len(orders))
	}
	return nil
}

// waitExpired polls every 10 ms until the notifier has seen n offers closed
// and n orders reported unassignable (their follow-up done), then checks
// that the database has them all EXPIRED and the orders marked. It gives up timeout after its
// start with the offers' states.
func waitExpired(ctx context.Context, conn *pgx.Conn, c *offerClock, n int, timeout time.Duration) error {
	var asked time.Time
	var closed, unassignable int
	return poll(ctx, dispatchPollEvery, timeout, func() (bool, error) {
		closed, unassignable = c.done()
		if (closed < n || unassignable < n) && time.Since(asked) < time.Second {
			return false, nil
		}
		asked = time.Now()
		// The notifier counts what was rendered, inside transactions
		// that may not have committed yet: the database says when
		// they have (stopping the replicas earlier would cancel them).
		var expired, marked int
		if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM offers WHERE state = 'EXPIRED'),
       (SELECT count(*) FROM orders WHERE unassignable_at IS NOT NULL)`).Scan(&expired, &marked); err != nil {
			return false, fmt.Errorf("poll: %w", err)
		}
		return closed >= n && unassignable >= n && expired >= n && marked >= n, nil
	}, func() error {
		return fmt.Errorf("after %s: %d of %d offers closed, %d orders followed up (unassignable); offers: %s",
			timeout, closed, n, unassignable, offerBreakdown(ctx, conn))
	})
}

// offerBreakdown describes the offers for an error message.
func offerBreakdown(ctx context.Context, conn *pgx.Conn) string {
	return describeCounts(ctx, conn, "state", `SELECT state, expires_at <= now(), count(*) FROM offers GROUP BY 1, 2 ORDER BY 1, 2`, "no offers",
		func(rows pgx.Rows) (string, error) {
			var state string
			var due bool
			var c int
			if err := rows.Scan(&state, &due, &c); err != nil {
				return "", err
			}
			if due && state != string(dispatch.Expired) {
				state += "(due)"
			}
			return fmt.Sprintf("%s=%d", state, c), nil
		})
}

// orderBreakdown describes the orders for an error message.
func orderBreakdown(ctx context.Context, conn *pgx.Conn) string {
	return describeCounts(ctx, conn, "state", `SELECT state, round, unassignable_at IS NOT NULL, count(*) FROM orders GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`, "no orders",
		func(rows pgx.Rows) (string, error) {
			var state string
			var round, c int
			var unassignable bool
			if err := rows.Scan(&state, &round, &unassignable, &c); err != nil {
				return "", err
			}
			mark := ""
			if unassignable {
				mark = ",unassignable"
			}
			return fmt.Sprintf("%s(round %d%s)=%d", state, round, mark, c), nil
		})
}

// verifyLag checks that the run did what it should, exactly once: n offers,
// all EXPIRED; each returned by one ExpireOffers call of one replica and
// closed once, as EXPIRED, by the replica that expired it; each order
// reported unassignable once and marked so in round 2; nothing sent.
// The caller holds c.mu.
func verifyLag(ctx context.Context, conn *pgx.Conn, c *offerClock, res lagResult, n int) error {
	var wrong findings
	var total, expired, unassignable int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM offers), (SELECT count(*) FROM offers WHERE state = 'EXPIRED'),
       (SELECT count(*) FROM orders WHERE state = 'SEARCHING' AND round = 2 AND unassignable_at IS NOT NULL)`).
		Scan(&total, &expired, &unassignable); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if total != n || expired != n {
		wrong.addf("%d offers, %d EXPIRED, want %d: %s", total, expired, n, offerBreakdown(ctx, conn))
	}
	if unassignable != n {
		wrong.addf("%d orders SEARCHING in round 2 and marked unassignable, want %d: %s",
			unassignable, n, orderBreakdown(ctx, conn))
	}
	// What the bot writes for each expiry: one closing edit of the offer's
	// message (keyed offer:ID, rendered as offer.expired) and two live-log
	// lines in the admin chat.
	var edits, editsExpired, logs, logsExpired, logsUnassignable, other int
	if err := conn.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE kind = 'offer_close' AND edit AND msg_key = 'offer:' || ref),
       count(*) FILTER (WHERE kind = 'offer_close' AND body->>'text' LIKE '⌛ The offer of order #% expired%'),
       count(*) FILTER (WHERE kind = 'live_log' AND chat_id = $1),
       count(*) FILTER (WHERE kind = 'live_log' AND body->>'text' LIKE '⌛ Order #%: offer #% to % expired unanswered, round 1'),
       count(*) FILTER (WHERE kind = 'live_log' AND body->>'text' LIKE '⚠️ Order #%: nobody left to offer it to%'),
       count(*) FILTER (WHERE kind NOT IN ('offer_close', 'live_log'))
FROM outbox`, benchAdminChat).Scan(&edits, &editsExpired, &logs, &logsExpired, &logsUnassignable, &other); err != nil {
		return fmt.Errorf("verify outbox: %w", err)
	}
	if edits != n || editsExpired != n || logs != 2*n || logsExpired != n || logsUnassignable != n || other != 0 {
		wrong.addf("outbox: %d closing edits (%d rendered as expired), %d live-log lines (%d offer_expired, %d order_unassignable), "+
			"%d other rows; want %d, %d, %d (%d, %d), 0", edits, editsExpired, logs, logsExpired, logsUnassignable, other, n, n, 2*n, n, n)
	}
	var sweptTwice, closedTwice, notSwept, notClosed, wrongReplica, wrongState int
	for id := range c.expiresAt {
		s, sok := c.swept[id]
		cl, cok := c.closed[id]
		switch {
		case !sok:
			notSwept++
		case s.times != 1:
			sweptTwice++
		}
		switch {
		case !cok:
			notClosed++
		case cl.times != 1:
			closedTwice++
		}
		if sok && cok && s.replica != cl.replica {
			wrongReplica++
		}
		if cok && cl.state != dispatch.Expired {
			wrongState++
		}
	}
	strangers := 0 // offers swept or closed that the bench did not create
	for id := range c.swept {
		if _, ok := c.expiresAt[id]; !ok {
			strangers++
		}
	}
	for id := range c.closed {
		if _, ok := c.expiresAt[id]; !ok {
			strangers++
		}
	}
	if notSwept+sweptTwice+notClosed+closedTwice+wrongReplica+wrongState+strangers > 0 || c.closes != n {
		wrong.addf("of %d offers %d never and %d more than once returned by ExpireOffers, %d never and %d more than once closed "+
			"(%d closing edits in all, %d by another replica than the one that expired the offer, %d not as EXPIRED; %d unknown offers swept or closed)",
			n, notSwept, sweptTwice, notClosed, closedTwice, c.closes, wrongReplica, wrongState, strangers)
	}
	var returned int64
	for _, st := range res.stats {
		returned += st.expired.Load()
	}
	if returned != int64(n) {
		wrong.addf("the replicas' ExpireOffers calls returned %d offers in all, want %d", returned, n)
	}
	if c.events[dispatch.EventOfferExpired] != n || c.events[dispatch.EventUnassignable] != n || c.sendOffer != 0 {
		wrong.addf("%d offer_expired and %d order_unassignable events, %d offers sent, want %d, %d and 0",
			c.events[dispatch.EventOfferExpired], c.events[dispatch.EventUnassignable], c.sendOffer, n, n)
	}
	return wrong.err()
}

// sweepRun replaces the dispatch tables' contents with n due offers (each
// with its user, master and order: seedDue) and times one ExpireOffers call, which
// must return all of them; a second call must return none. With a
// renderer the call also writes what the watchdog's does: each offer's
// closing edit and offer_expired live-log line, 2n outbox rows.
func sweepRun(ctx context.Context, store *storage.Store, n, k int, render dispatch.Notifier, out io.Writer) (time.Duration, error) {
	pool := store.Pool()
	if _, err := pool.Exec(ctx, `TRUNCATE offers, orders, masters, users, outbox CASCADE`); err != nil {
		return 0, fmt.Errorf("reset: %w", err)
	}
	seedStart := time.Now()
	if err := seedDue(ctx, store, n); err != nil {
		return 0, err
	}
	// As autovacuum would have done by the time so many offers are due:
	// hint bits set, visibility map and statistics current.
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE users, masters, orders, offers`); err != nil {
		return 0, fmt.Errorf("vacuum: %w", err)
	}
	seeded := time.Since(seedStart)

	var tell domain.Render[dispatch.Changed]
	if render != nil {
		tell = func(c dispatch.Changed) []domain.Message {
			msgs := make([]domain.Message, 0, 2*len(c.Offers))
			for _, f := range c.Offers {
				m := c.Masters[f.MasterID]
				msgs = append(msgs, render.Closed(m, c.Orders[f.OrderID], f)...)
				msgs = append(msgs, render.Event(dispatch.Event{Kind: dispatch.EventOfferExpired, OrderID: f.OrderID, OfferID: f.ID,
					MasterID: f.MasterID, Master: &m, Round: f.Round})...)
			}
			return msgs
		}
	}
	start := time.Now()
	offers, err := store.Orders().ExpireOffers(ctx, "", tell)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	start2 := time.Now()
	again, err := store.Orders().ExpireOffers(ctx, "", tell)
	took2 := time.Since(start2)
	if err != nil {
		return 0, err
	}
	distinct := make(map[int64]struct{}, len(offers))
	bad := 0
	for _, f := range offers {
		distinct[f.ID] = struct{}{}
		if f.State != dispatch.Expired || f.MessageID == 0 || f.RespondedAt.IsZero() {
			bad++
		}
	}
	var expired int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM offers WHERE state = 'EXPIRED'`).Scan(&expired); err != nil {
		return 0, err
	}
	var written, wantWritten int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&written); err != nil {
		return 0, err
	}
	with := ""
	if render != nil {
		wantWritten = 2 * n
		with = fmt.Sprintf(" with %d messages", written)
	}
	fmt.Fprintf(out, "sweep %d: %d due offers (seeded and vacuumed in %.1fs), ExpireOffers%s %.1fms returned %d; second call %.1fms returned %d\n",
		k, n, seeded.Seconds(), with, ms(took), len(offers), ms(took2), len(again))
	if len(offers) != n || len(distinct) != n || bad > 0 || len(again) != 0 || expired != n || written != wantWritten {
		return 0, fmt.Errorf("verify: ExpireOffers returned %d offers (%d distinct, %d not EXPIRED with their message and responded_at), "+
			"the second call %d, %d EXPIRED in the table, %d outbox rows; want %d, %d, 0, 0, %d, %d",
			len(offers), len(distinct), bad, len(again), expired, written, n, n, n, wantWritten)
	}
	return took, nil
}
