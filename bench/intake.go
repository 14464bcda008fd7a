package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/locales"
	"switchboard/storage"
)

// intakeConfig is the intake scenario's flags.
type intakeConfig struct {
	commonFlags
	rate     float64
	dur      time.Duration
	users    int
	replicas int
	workers  int
	conc     int
	warmup   time.Duration
	timeout  time.Duration
}

type intakeReport struct {
	Scenario             string  `json:"scenario"`
	Rate                 float64 `json:"rate"`
	Updates              int     `json:"updates"`
	PollingStoredPerS    float64 `json:"polling_stored_per_s"`
	PollingHandledPerS   float64 `json:"polling_handled_per_s"`
	PollingOverheadP50MS float64 `json:"polling_overhead_p50_ms"`
	PollingOverheadP99MS float64 `json:"polling_overhead_p99_ms"`
	WebhookStoredPerS    float64 `json:"webhook_stored_per_s"`
	WebhookHandledPerS   float64 `json:"webhook_handled_per_s"`
	WebhookOverheadP50MS float64 `json:"webhook_overhead_p50_ms"`
	WebhookOverheadP99MS float64 `json:"webhook_overhead_p99_ms"`
	PollingInboxP50MS    float64 `json:"polling_inbox_p50_ms"`
	PollingInboxP99MS    float64 `json:"polling_inbox_p99_ms"`
	WebhookInboxP50MS    float64 `json:"webhook_inbox_p50_ms"`
	WebhookInboxP99MS    float64 `json:"webhook_inbox_p99_ms"`
	Replicas             int     `json:"replicas"`
	tail
}

const intakeCommand = "bench"

// benchIntake runs the polling run and the webhook run on one database
// (the inbox emptied in between), dropped before it returns.
func benchIntake(ctx context.Context, cfg intakeConfig, out io.Writer, log *slog.Logger) (intakeReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep intakeReport, err error) {
		n := int(cfg.rate * cfg.dur.Seconds())
		fmt.Fprintf(out, "intake: database %s (PostgreSQL %s), %d updates (/%s commands) from %d users at %g/s for %s, "+
			"%d inbox workers per bot\n", db.name, db.pgVersion, n, intakeCommand, cfg.users, cfg.rate, cfg.dur, cfg.workers)
		catalog := locales.MustLoad()
		polling, err := intakeRun(ctx, cfg, db, catalog, n, 1, false, out, log)
		if err != nil {
			return rep, fmt.Errorf("polling run: %w", err)
		}
		if _, err := db.store.Pool().Exec(ctx, `TRUNCATE inbox`); err != nil {
			return rep, err
		}
		webhook, err := intakeRun(ctx, cfg, db, catalog, n, cfg.replicas, true, out, log)
		if err != nil {
			return rep, fmt.Errorf("webhook run: %w", err)
		}
		rep.Scenario, rep.Rate, rep.Updates, rep.Replicas = "intake", cfg.rate, n, cfg.replicas
		rep.PollingStoredPerS, rep.PollingHandledPerS = round(polling.storedPerS, 1), round(polling.handledPerS, 1)
		rep.PollingOverheadP50MS, rep.PollingOverheadP99MS = msr(polling.overhead.p(0.5)), msr(polling.overhead.p(0.99))
		rep.WebhookStoredPerS, rep.WebhookHandledPerS = round(webhook.storedPerS, 1), round(webhook.handledPerS, 1)
		rep.WebhookOverheadP50MS, rep.WebhookOverheadP99MS = msr(webhook.overhead.p(0.5)), msr(webhook.overhead.p(0.99))
		rep.PollingInboxP50MS, rep.PollingInboxP99MS = msr(polling.inbox.p(0.5)), msr(polling.inbox.p(0.99))
		rep.WebhookInboxP50MS, rep.WebhookInboxP99MS = msr(webhook.inbox.p(0.5)), msr(webhook.inbox.p(0.99))
		if rep.PeakRSSMB, err = peakRSSMB(); err != nil {
			return rep, err
		}
		rep.PeakRSSMB = round(rep.PeakRSSMB, 1)
		return rep, nil
	})
}

// msr is d in milliseconds, two decimals.
func msr(d time.Duration) float64 { return round(ms(d), 2) }

// intakeResult is one run's figures.
type intakeResult struct {
	storedPerS, handledPerS float64
	// overhead is offered → handler start; store offered → received_at;
	// claim received_at → handler start; e2e scheduled → handler start;
	// each sorted, the warm-up left out.
	overhead, store, claim, e2e durations
	// inbox is offered → the bot's middleware begins the user upsert (the
	// inbox's part of overhead); middleware the rest (upsert and all).
	inbox, middleware durations
	retries           int64 // webhook requests answered other than 200, or failed
	attempts          int64 // inbox attempts beyond the first
}

// intakeTrace is what the run records per update (index = sequence).
type intakeTrace struct {
	scheduled []time.Time
	offered   []atomic.Int64 // unix nanos
	started   []atomic.Int64 // unix nanos: the /bench handler began
	entered   []atomic.Int64 // unix nanos: the bot's middleware began its user upsert
	handled   []atomic.Int32

	mu         sync.Mutex
	lastSeq    map[int64]int   // chat → last sequence handled
	upserts    map[int64]int64 // chat → when its latest user upsert began (unix nanos)
	outOfOrder int
}

func intakeUpdateID(seq int) int64 { return int64(seq) + 1000 }

func intakeChat(seq, users int) int64 { return 8_000_000_000 + int64(seq%users) }

func intakeBody(seq, users int, date int64) json.RawMessage {
	chat := intakeChat(seq, users)
	text := fmt.Sprintf("/%s %d", intakeCommand, seq)
	b, _ := json.Marshal(map[string]any{
		"update_id": intakeUpdateID(seq),
		"message": map[string]any{
			"message_id": seq + 1,
			"date":       date,
			"chat":       map[string]any{"id": chat, "type": "private"},
			"from":       map[string]any{"id": chat, "is_bot": false, "first_name": "Bench", "language_code": "en"},
			"text":       text,
			"entities":   []map[string]any{{"type": "bot_command", "offset": 0, "length": len(intakeCommand) + 1}},
		},
	})
	return b
}

// intakeRun runs bots bots against a fresh fake Telegram: one polling, or
// several on webhooks behind the bench's pusher; it offers n updates at
// cfg.rate, waits until the inbox has them all done and checks them.
func intakeRun(ctx context.Context, cfg intakeConfig, db *benchDB, catalog *locales.Catalog, n, bots int, webhook bool,
	out io.Writer, log *slog.Logger) (res intakeResult, err error) {
	name := "polling"
	if webhook {
		name = "webhook"
	}
	tr := &intakeTrace{scheduled: make([]time.Time, n), offered: make([]atomic.Int64, n), started: make([]atomic.Int64, n),
		entered: make([]atomic.Int64, n), handled: make([]atomic.Int32, n), lastSeq: map[int64]int{}, upserts: map[int64]int64{}}
	opts := []tgOption{withTranscript()}
	if !webhook {
		opts = append(opts, withUpdates(func(id int64, at time.Time) {
			if seq := int(id - intakeUpdateID(0)); seq >= 0 && seq < n {
				tr.offered[seq].Store(at.UnixNano())
			}
		}))
	}
	tg := newTelegram(tgToken, opts...)
	defer tg.Close()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	const secret = "bench-webhook-secret"
	addrs := make([]string, bots)
	for i := range bots {
		store := db.store
		if i > 0 {
			if store, err = storage.Open(ctx, db.url, log); err != nil {
				return res, err
			}
			closers = append(closers, store.Close)
		}
		direct, err := delivery.NewSender(delivery.Config{}, nil, delivery.NewClient(tg.URL(), tgToken, nil),
			delivery.NewMemoryLimiter(benchLimits), log, prometheus.NewRegistry())
		if err != nil {
			return res, err
		}
		bc := bot.Config{URL: tg.URL(), Token: tgToken, PollTimeout: 2 * time.Second, InboxWorkers: cfg.workers,
			RateLimit: 1e6, RateBurst: 1_000_000}
		if webhook {
			// Bound here, on a port of the kernel's choice, and handed over:
			// nothing else can take it between.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return res, err
			}
			addrs[i] = ln.Addr().String()
			bc.Webhook = &bot.WebhookConfig{URL: "https://bench.invalid/webhook", Secret: secret, Listener: ln, MaxConnections: cfg.conc}
		}
		b, err := bot.New(bc, bot.Deps{Users: intakeUsers{store.Users(), tr}, Catalog: catalog, Log: log, Replica: fmt.Sprintf("bench-%d", i),
			Direct: direct, Inbox: store.Inbox(), Passing: storage.Passing, AboutData: storage.AboutData})
		if err != nil {
			return res, err
		}
		b.Handle(bot.Command{Name: intakeCommand, Desc: "cmd.help", Handle: tr.handler})
		wg.Add(2)
		go func() {
			defer wg.Done()
			store.Listen(runCtx, []string{storage.InboxChannel}, b.WakeInbox, func(_, payload string) { b.InboxNotified(payload) })
		}()
		go func() {
			defer wg.Done()
			if err := b.Run(runCtx); err != nil {
				log.Error("bot run", "err", err)
			}
		}()
	}
	if webhook {
		for _, a := range addrs {
			if err := awaitWebhook(ctx, a, 10*time.Second); err != nil {
				return res, err
			}
		}
	}
	mode := "1 bot polling getUpdates (no lease)"
	if webhook {
		mode = fmt.Sprintf("%d bots on webhooks (own pools), pushed round robin, each chat one at a time, at most %d requests in flight",
			bots, cfg.conc)
	}
	fmt.Fprintf(out, "%s: %s\n", name, mode)

	var retries atomic.Int64
	var push *intakePusher
	if webhook {
		push = newIntakePusher(runCtx, cfg, addrs, secret, tr, &retries)
		defer push.close()
	}
	start := time.Now()
	for seq := range n {
		at := start.Add(time.Duration(float64(seq) / cfg.rate * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				return res, ctx.Err()
			case <-time.After(d):
			}
		}
		tr.scheduled[seq] = time.Now()
		body := intakeBody(seq, cfg.users, tr.scheduled[seq].Unix())
		if webhook {
			push.offer(seq, body)
		} else {
			tg.offerUpdate(intakeUpdateID(seq), body)
		}
	}
	offeredAll := time.Now()
	if push != nil {
		push.close()
	}
	deadline := offeredAll.Add(cfg.timeout)
	for {
		var pending int
		if err := db.store.Pool().QueryRow(ctx, `SELECT $1 - count(*) FILTER (WHERE state <> 'pending') FROM inbox`, n).Scan(&pending); err != nil {
			return res, err
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d updates not handled %s after the last was offered", pending, n, cfg.timeout)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	wg.Wait()
	res.retries = retries.Load()
	if err := res.measure(ctx, db, tr, cfg, n); err != nil {
		return res, err
	}
	if err := verifyIntake(tr, tg, cfg, n); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "%s: offered %d updates in %.2fs; stored %.1f/s, handled %.1f/s (first received → last done)\n",
		name, n, offeredAll.Sub(start).Seconds(), res.storedPerS, res.handledPerS)
	for _, l := range []struct {
		what string
		d    durations
	}{
		{"inbox overhead (offered → handler start)", res.overhead},
		{"  offered → stored (received_at)", res.store},
		{"  stored → handler start", res.claim},
		{"  offered → bot middleware (user upsert)", res.inbox},
		{"  bot middleware → handler start", res.middleware},
		{"scheduled → handler start", res.e2e},
	} {
		fmt.Fprintf(out, "  %-42s p50 %7.2fms  p90 %7.2fms  p99 %7.2fms  max %7.2fms\n", l.what,
			msr(l.d.p(0.5)), msr(l.d.p(0.9)), msr(l.d.p(0.99)), msr(l.d.p(1)))
	}
	fmt.Fprintf(out, "%s: verified: %d updates done in the inbox, each handled exactly once, every chat's in the order sent, "+
		"every reply arrived once and in order; %d inbox retries, %d webhook requests retried\n", name, n, res.attempts, res.retries)
	return res, nil
}

// intakeUsers notes when the bot's identify middleware begins a chat's
// user upsert: a chat's updates run one at a time, so the latest is the
// update's own, and the time before it is the inbox's. Upsert overrides
// bot.Users' method of that name: a method of another name would compile
// and time nothing (as UpsertUser did once the store named it Upsert), so
// TestIntakeSmoke checks that the inbox part is a duration.
type intakeUsers struct {
	bot.Users
	tr *intakeTrace
}

func (u intakeUsers) Upsert(ctx context.Context, user domain.User) (domain.User, error) {
	now := time.Now().UnixNano()
	u.tr.mu.Lock()
	u.tr.upserts[user.ID] = now
	u.tr.mu.Unlock()
	return u.Users.Upsert(ctx, user)
}

// handler is the /bench command: it records when it began, checks its
// chat's order and replies with the sequence.
func (tr *intakeTrace) handler(r *bot.Request) error {
	now := time.Now().UnixNano()
	seq, err := strconv.Atoi(r.Message().Payload)
	if err != nil || seq < 0 || seq >= len(tr.started) {
		return fmt.Errorf("bench: bad payload %q", r.Message().Payload)
	}
	if tr.handled[seq].Add(1) == 1 {
		tr.started[seq].Store(now)
	}
	chat := r.Chat().ID
	tr.mu.Lock()
	tr.entered[seq].Store(tr.upserts[chat])
	if last, ok := tr.lastSeq[chat]; ok && last >= seq {
		tr.outOfOrder++
	}
	tr.lastSeq[chat] = seq
	tr.mu.Unlock()
	return r.Reply("ok "+strconv.Itoa(seq), nil)
}

func (res *intakeResult) measure(ctx context.Context, db *benchDB, tr *intakeTrace, cfg intakeConfig, n int) error {
	rows, err := db.store.Pool().Query(ctx, `SELECT update_id, state, attempts, received_at, done_at FROM inbox ORDER BY update_id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var firstRecv, lastRecv, lastDone time.Time
	count := 0
	for rows.Next() {
		var id int64
		var state string
		var attempts int
		var recv time.Time
		var done *time.Time
		if err := rows.Scan(&id, &state, &attempts, &recv, &done); err != nil {
			return err
		}
		seq := int(id - intakeUpdateID(0))
		if seq < 0 || seq >= n || state != "done" || done == nil {
			return fmt.Errorf("inbox row %d: state %s (want done)", id, state)
		}
		count++
		res.attempts += int64(attempts - 1)
		if firstRecv.IsZero() || recv.Before(firstRecv) {
			firstRecv = recv
		}
		if recv.After(lastRecv) {
			lastRecv = recv
		}
		if done.After(lastDone) {
			lastDone = *done
		}
		if tr.scheduled[seq].Sub(tr.scheduled[0]) < cfg.warmup {
			continue
		}
		off, st := time.Unix(0, tr.offered[seq].Load()), time.Unix(0, tr.started[seq].Load())
		res.overhead = append(res.overhead, st.Sub(off))
		res.store = append(res.store, recv.Sub(off))
		res.claim = append(res.claim, st.Sub(recv))
		res.e2e = append(res.e2e, st.Sub(tr.scheduled[seq]))
		ent := time.Unix(0, tr.entered[seq].Load())
		res.inbox = append(res.inbox, ent.Sub(off))
		res.middleware = append(res.middleware, st.Sub(ent))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if count != n {
		return fmt.Errorf("%d inbox rows, want %d", count, n)
	}
	for _, d := range []durations{res.overhead, res.store, res.claim, res.e2e, res.inbox, res.middleware} {
		slices.Sort(d)
	}
	if n > 1 {
		res.storedPerS = float64(n-1) / lastRecv.Sub(firstRecv).Seconds()
		res.handledPerS = float64(n) / lastDone.Sub(firstRecv).Seconds()
	}
	return nil
}

// verifyIntake checks every update was handled once, each chat's in order,
// and the fake Telegram got each reply once, each chat's in order.
func verifyIntake(tr *intakeTrace, tg *telegram, cfg intakeConfig, n int) error {
	var errs []error
	for seq := range n {
		if h := tr.handled[seq].Load(); h != 1 {
			errs = append(errs, fmt.Errorf("update %d handled %d times", seq, h))
			if len(errs) > 5 {
				break
			}
		}
		if tr.offered[seq].Load() == 0 {
			errs = append(errs, fmt.Errorf("update %d never offered", seq))
			break
		}
	}
	if tr.outOfOrder > 0 {
		errs = append(errs, fmt.Errorf("%d updates handled before an earlier one of their chat", tr.outOfOrder))
	}
	texts := tg.transcriptTexts()
	for u := range min(cfg.users, n) {
		chat := intakeChat(u, cfg.users)
		var want []string
		for seq := u; seq < n; seq += cfg.users {
			want = append(want, "ok "+strconv.Itoa(seq))
		}
		if !slices.Equal(texts[chat], want) {
			errs = append(errs, fmt.Errorf("chat %d got %d replies, want %d in order", chat, len(texts[chat]), len(want)))
			break
		}
	}
	if st := tg.stats(); st.Rejected > 0 || st.Messages != n {
		errs = append(errs, fmt.Errorf("fake Telegram: %d messages (want %d), %d refused (%s)", st.Messages, n, st.Rejected, st.LastReject))
	}
	return errors.Join(errs...)
}

// awaitWebhook waits until the bot serves its webhook at addr (a GET is
// answered 405): the listener is bound before the bot runs, and requests
// sent before it serves would only queue.
func awaitWebhook(ctx context.Context, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusMethodNotAllowed {
				return nil
			}
			err = fmt.Errorf("answered %s", resp.Status)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("webhook at %s not served: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// intakePusher is the fake Telegram's webhook side: each chat's updates go
// one at a time, in order, the next only once the last was answered 200
// (anything else is sent again), to the replicas round robin, with at most
// conc requests in flight across chats.
type intakePusher struct {
	ctx     context.Context
	urls    []string
	secret  string
	client  *http.Client
	tr      *intakeTrace
	retries *atomic.Int64
	users   int
	next    atomic.Uint64
	sem     chan struct{}
	chats   []chan intakePush
	wg      sync.WaitGroup
	once    sync.Once
}

type intakePush struct {
	seq  int
	body json.RawMessage
}

func newIntakePusher(ctx context.Context, cfg intakeConfig, addrs []string, secret string, tr *intakeTrace, retries *atomic.Int64) *intakePusher {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = cfg.conc
	p := &intakePusher{ctx: ctx, secret: secret, client: &http.Client{Transport: t, Timeout: 30 * time.Second}, tr: tr, retries: retries,
		users: cfg.users, sem: make(chan struct{}, cfg.conc), chats: make([]chan intakePush, cfg.users)}
	for _, a := range addrs {
		p.urls = append(p.urls, "http://"+a+"/")
	}
	for i := range p.chats {
		p.chats[i] = make(chan intakePush, 1<<16)
		p.wg.Add(1)
		go p.serve(p.chats[i])
	}
	return p
}

func (p *intakePusher) offer(seq int, body json.RawMessage) {
	p.chats[seq%p.users] <- intakePush{seq, body}
}

// close waits until every update offered was answered 200.
func (p *intakePusher) close() {
	p.once.Do(func() {
		for _, c := range p.chats {
			close(c)
		}
	})
	p.wg.Wait()
}

func (p *intakePusher) serve(c <-chan intakePush) {
	defer p.wg.Done()
	for u := range c {
		for {
			p.sem <- struct{}{}
			url := p.urls[p.next.Add(1)%uint64(len(p.urls))]
			p.tr.offered[u.seq].CompareAndSwap(0, time.Now().UnixNano())
			ok := p.post(url, u.body)
			<-p.sem
			if ok {
				break
			}
			p.retries.Add(1)
			if p.ctx.Err() != nil {
				return // the run is over: give up
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func (p *intakePusher) post(url string, body []byte) bool {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(bot.SecretHeader, p.secret)
	resp, err := p.client.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
