package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/llm"
	"switchboard/llm/llmtest"
	"switchboard/locales"
	"switchboard/storage"
)

const (
	memoryPollEvery = 10 * time.Millisecond
	memoryFirstUser = 600_000_001
	// memoryLLMConc is the LLM client's MaxConcurrency: above any worker
	// count the bench runs, so the client never holds a call back.
	memoryLLMConc = 64
	// queryMarker tags every query with its submission index; the LLM
	// timer finds it in the prompts to charge each call to its run.
	queryMarker = "[bench-q"
)

// The bot is the memory chat's notifier, as in the application.
var _ memory.Notifier = (*bot.Bot)(nil)

// The scripted model. Each rule matches one stage by a sentence of its
// seeded system prompt (migrations/00003_memory.sql). No reply contains a
// query marker, so the first marker in any prompt is the run's own query
// (earlier queries and answers come after it, see markerOf).
var (
	memoryAnalysis = map[string]any{"needs_context": true, "context_type": "facts", "time_scope": "recent",
		"search_keywords": []string{"go"}, "context_found": false}
	memoryNote   = map[string]any{"summary": "The user asked about Go and got practical advice.", "tags": []string{"go"}}
	memoryNotes  = "The user writes Go; earlier advice was about testing and profiling."
	memoryAnswer = "Measure first: write a benchmark, profile it, then change one thing at a time."
	memoryRules  = []struct{ name, system string }{
		{"analyzer", "Decide whether answering needs that memory"},
		{"assembler", "You prepare the context"},
		{"responder", "patient, practical mentor"},
		{"archivist", "You summarise one exchange"},
	}
)

type memoryConfig struct {
	commonFlags
	runs          int
	users         int
	workers       int
	orchestrators int
	submitters    int
	timeout       time.Duration
	stages        bool
	// rate paces the submissions at this many runs a second (run i at
	// i/rate); zero submits them all at once.
	rate float64
	// load sets the second pass's rate as a share of the first pass's
	// runs/s when rate is zero (0: no second pass).
	load float64
	// warmup is how many of the runs (the first submitted) are left out of
	// the figures.
	warmup int
	// streamEvery is memory.Config.StreamEvery: answers are asked of the
	// model as a stream and shown as drafts (none with an instant model,
	// which answers within it).
	streamEvery time.Duration
}

// memoryReport is the scenario's JSON line.
type memoryReport struct {
	Scenario      string  `json:"scenario"`
	Runs          int     `json:"runs"`
	RunsPerS      float64 `json:"runs_per_s"`
	OverheadP50MS float64 `json:"overhead_p50_ms"`
	OverheadP99MS float64 `json:"overhead_p99_ms"`
	// OverheadRate is pass 2's runs/s.
	OverheadRate float64 `json:"overhead_rate"`
	tail
}

// benchMemoryPasses runs the scenario's two passes, each on a database of
// its own: the capacity, then the overhead at -rate (none when it is 0).
func benchMemoryPasses(ctx context.Context, cfg memoryConfig, stdout io.Writer, log *slog.Logger) (memoryReport, error) {
	// Pass 1, capacity: every run submitted at once, so the machine
	// is saturated and runs/s is what it can do.
	burst := cfg
	burst.rate = 0
	fmt.Fprintln(stdout, "pass 1, capacity: all runs submitted at once")
	rep, err := benchMemory(ctx, burst, stdout, log)
	rate := cfg.rate
	if rate == 0 {
		// A fixed rate would say how fast the host is: 300 runs/s is 0.57 of
		// one host's capacity and beyond another's. A share of this run's own
		// capacity puts every host under the same load.
		rate = round(cfg.load*rep.RunsPerS, 1)
	}
	if err != nil || rate == 0 {
		return rep, err
	}
	cfg.rate = rate
	rep.OverheadRate = rate
	// Pass 2, overhead: the same runs arriving at a steady rate. Under
	// pass 1's flood a run mostly waits for a worker (about users ÷
	// throughput, Little's law), which says nothing about what the
	// orchestration adds to a run; at a load the machine sustains, the
	// overhead is that addition.
	// The first second's runs warm the replicas up (pool connections
	// opened, statements prepared, HTTP connections to the fakes) and
	// are not counted: the measured runs arrive at a steady state.
	paced := cfg
	paced.warmup = int(math.Ceil(cfg.rate))
	paced.runs += paced.warmup
	fmt.Fprintf(stdout, "pass 2, overhead: runs submitted at %.0f runs/s, the first %d (one second) not counted\n",
		cfg.rate, paced.warmup)
	second, err := benchMemory(ctx, paced, stdout, log)
	if err != nil {
		return rep, err
	}
	rep.OverheadP50MS, rep.OverheadP99MS = second.OverheadP50MS, second.OverheadP99MS
	rep.PeakRSSMB = max(rep.PeakRSSMB, second.PeakRSSMB)
	return rep, nil
}

// replica is one orchestrator with its own pool, LLM client and bot, as a
// replica of the application has.
type replica struct {
	store *storage.Store
	llmc  *llm.Client
	svc   *memory.Service
}

// benchMemory submits the runs and times them until all are archived, on a
// database of its own that is dropped before it returns whatever happened.
func benchMemory(ctx context.Context, cfg memoryConfig, out io.Writer, log *slog.Logger) (memoryReport, error) {
	return onBenchDB(ctx, cfg.db, log, func(db *benchDB) (rep memoryReport, err error) {
		rig, err := startMemoryRig(ctx, cfg, db, out, log)
		if err != nil {
			return rep, err
		}
		defer rig.close()
		runIDs, elapsed, submitTook, err := rig.drive(ctx, nil)
		if err != nil {
			return rep, err
		}
		warm := make(map[int64]bool, cfg.warmup)
		for _, id := range runIDs[:cfg.warmup] {
			warm[id] = true
		}
		res, err := rig.result(ctx, runIDs, elapsed, submitTook, func(id int64, _ time.Time) bool { return !warm[id] })
		if err != nil {
			return rep, err
		}
		res.print(out)
		if err := rig.verify(ctx, res, len(runIDs)); err != nil {
			return rep, err
		}

		rep.notePeakRSS(out)
		rep.Scenario = "memory"
		rep.Runs = cfg.runs
		rep.RunsPerS = round(res.rate(), 1)
		rep.OverheadP50MS = round(ms(res.overhead.p(0.50)), 2)
		rep.OverheadP99MS = round(ms(res.overhead.p(0.99)), 2)
		return rep, nil
	})
}

// memoryRig is the memory chat as the memory scenario runs it, on a bench
// database: its users, the scripted LLM and the fake Telegram, the
// orchestrators (LISTENing) and an outbox sender, and a poll connection.
// Its runs are those with an id above floor, so a scenario may run it
// beside other runs it seeded first (the prune scenario does).
type memoryRig struct {
	cfg      memoryConfig
	db       *benchDB
	out      io.Writer
	users    []int64
	llmSrv   *llmtest.Server
	tg       *telegram
	timer    *llmTimer
	clock    *runClock
	st       *stages // nil without -stages
	replicas []*replica
	poll     *pgx.Conn
	floor    int64
	notified atomic.Int64 // notifications received, all orchestrators
	runCtx   context.Context
	// stopRuns stops the orchestrators and waits for them; stopSender the
	// outbox sender; closers undo the rest, last first.
	stopRuns, stopSender func()
	closers              []func()
	closeOnce            sync.Once
}

// startMemoryRig sets the memory chat up on db (migrated) and returns once
// every orchestrator LISTENs; the caller defers close.
func startMemoryRig(ctx context.Context, cfg memoryConfig, db *benchDB, out io.Writer, log *slog.Logger) (_ *memoryRig, err error) {
	rig := &memoryRig{cfg: cfg, db: db, out: out, stopRuns: func() {}, stopSender: func() {}}
	defer func() {
		if err != nil {
			rig.close()
		}
	}()
	store := db.store
	if err := store.Pool().QueryRow(ctx, `SELECT COALESCE(max(id), 0) FROM pipeline_runs`).Scan(&rig.floor); err != nil {
		return nil, err
	}
	rig.users = make([]int64, cfg.users)
	langs := []string{"en", "ru", "uk"}
	for i := range rig.users {
		rig.users[i] = int64(memoryFirstUser + i)
		if _, err := store.Users().Upsert(ctx, domain.User{ID: rig.users[i], Username: fmt.Sprintf("mem%03d", i),
			FirstName: fmt.Sprintf("Memory %d", i), TelegramLanguage: langs[i%len(langs)]}); err != nil {
			return nil, err
		}
	}

	rig.llmSrv = llmtest.New(llmtest.WithoutRecording())
	rig.closers = append(rig.closers, rig.llmSrv.Close)
	for _, r := range memoryRules {
		rule := rig.llmSrv.On(llmtest.SystemContains(r.system)).Named(r.name)
		switch r.name {
		case "analyzer":
			rule.ReplyJSON(memoryAnalysis)
		case "assembler":
			rule.Reply(memoryNotes)
		case "responder":
			rule.Reply(memoryAnswer)
		case "archivist":
			rule.ReplyJSON(memoryNote)
		}
	}
	rig.tg = newTelegram(tgToken)
	rig.closers = append(rig.closers, rig.tg.Close)
	catalog := locales.MustLoad()
	rig.timer = newLLMTimer(cfg.runs)
	rig.clock = &runClock{begin: map[int64]time.Time{}, end: map[int64]time.Time{}}
	if cfg.stages {
		rig.st = newStages()
	}

	rig.replicas = make([]*replica, cfg.orchestrators)
	for i := range rig.replicas {
		rp := &replica{store: store}
		if i > 0 {
			if rp.store, err = storage.Open(ctx, db.url, log); err != nil {
				return nil, err
			}
			rig.closers = append(rig.closers, rp.store.Close)
		}
		rp.llmc, err = llm.New(llm.Config{Provider: llm.ProviderOllama, URL: rig.llmSrv.URL(), Model: "bench", StrongModel: "bench-strong",
			Timeout: 30 * time.Second, MaxConcurrency: memoryLLMConc},
			llm.WithRegistry(prometheus.NewRegistry()), llm.WithLogger(log))
		if err != nil {
			return nil, err
		}
		rig.closers = append(rig.closers, rp.llmc.Close)
		// The application's streaming: drafts and "typing" through a sender
		// paced at Telegram's limits, as app.go builds it.
		tgClient := delivery.NewClient(rig.tg.URL(), tgToken, nil)
		sender, err := delivery.NewSender(delivery.Config{}, rp.store.Outbox(), tgClient, delivery.NewMemoryLimiter(delivery.DefaultLimits()),
			log, prometheus.NewRegistry())
		if err != nil {
			return nil, err
		}
		// The app's renderer, and "typing" over HTTP to the fake Telegram.
		deps := memory.Deps{Runs: clockedRuns{rp.store.PipelineRuns(), rig.clock}, Memories: rp.store.Memories(), Prompts: rp.store.Prompts(), Outbox: rp.store.Outbox(), Users: rp.store.Users(), LLM: rig.timer.wrap(rp.llmc, rig.st),
			Notifier: bot.NewRenderer(bot.RenderConfig{}, catalog, log), Typist: bot.Typist{Sender: sender},
			Log: log, Registerer: prometheus.NewRegistry()}
		if rig.st != nil {
			deps.Runs = timedMemoryRuns{deps.Runs, rig.st}
			deps.Memories = timedMemories{deps.Memories, rig.st}
			deps.Prompts = timedPrompts{deps.Prompts, rig.st}
			deps.Notifier = timedMemoryNotifier{deps.Notifier, rig.st}
			deps.Typist = timedTypist{deps.Typist, rig.st}
		}
		deps.Drafts = bot.Drafts{Sender: sender}
		if rp.svc, err = memory.NewService(memory.Config{Workers: cfg.workers, StreamEvery: cfg.streamEvery}, deps); err != nil {
			return nil, err
		}
		rig.replicas[i] = rp
	}
	fmt.Fprintf(out, "memory: database %s (PostgreSQL %s, pool max %d connections per orchestrator), %d users, "+
		"%d orchestrator(s) × %d workers, %d submitters, LLM MaxConcurrency %d\n",
		db.name, db.pgVersion, store.Pool().Config().MaxConns, len(rig.users), cfg.orchestrators, cfg.workers, cfg.submitters,
		memoryLLMConc)

	if rig.poll, err = connect(ctx, db.url); err != nil {
		return nil, fmt.Errorf("poll connection: %w", err)
	}
	rig.closers = append(rig.closers, func() { rig.poll.Close(context.WithoutCancel(ctx)) })

	// The orchestrators, each listening on a connection of its own; the
	// clock starts once every one of them is LISTENing.
	runCtx, stop := context.WithCancel(ctx)
	rig.runCtx = runCtx
	var wg sync.WaitGroup
	var once sync.Once
	rig.stopRuns = func() { once.Do(func() { stop(); wg.Wait() }) }
	listening := make(chan struct{}, len(rig.replicas))
	for _, rp := range rig.replicas {
		listen := countedListen(rp.store, &rig.notified, listening)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rp.svc.Run(runCtx, listen)
		}()
	}
	if err := awaitListening(ctx, listening, len(rig.replicas), "orchestrators"); err != nil {
		return nil, err
	}

	// The bot only renders the answers: Runs.MarkDelivered writes them to the
	// outbox, and an outbox sender delivers them to the fake Telegram, as
	// in the application. It runs alongside the orchestrators; verify
	// waits for it to drain the outbox before reading what Telegram got.
	if rig.stopSender, err = startSender(ctx, store, rig.tg.URL(), log); err != nil {
		rig.stopSender = func() {}
		return nil, err
	}
	return rig, nil
}

// close stops whatever still runs and closes the rest; once.
func (rig *memoryRig) close() {
	rig.closeOnce.Do(func() {
		rig.stopRuns()
		rig.stopSender()
		for i := len(rig.closers) - 1; i >= 0; i-- {
			rig.closers[i]()
		}
	})
}

// drive submits the runs (see submitRuns; stopSubmit, if not nil, ends the
// submissions early), waits until every submitted run is archived and the
// outbox is drained, and stops the orchestrators and the sender. It
// returns the ids of the runs submitted, in submission order, the time
// from the first Submit to the poll that saw them all archived, and each
// Submit's duration, sorted.
func (rig *memoryRig) drive(ctx context.Context, stopSubmit <-chan struct{}) ([]int64, time.Duration, durations, error) {
	start := time.Now()
	runIDs, submitTook, submitErr := submitRuns(rig.runCtx, rig.replicas[0].svc, rig.cfg, rig.users, start, stopSubmit)
	var elapsed time.Duration
	var err error
	if submitErr == nil {
		elapsed, err = waitArchived(ctx, rig.poll, rig.tg, rig.clock, rig.floor, len(runIDs), start, rig.cfg.timeout)
	}
	rig.stopRuns()
	if submitErr != nil {
		return nil, 0, nil, submitErr
	}
	if err != nil {
		return nil, 0, nil, err
	}
	if err := waitOutboxDrained(ctx, rig.poll, rig.cfg.timeout); err != nil {
		return nil, 0, nil, err
	}
	rig.stopSender()
	return runIDs, elapsed, submitTook, nil
}

// result measures the runs drive returned; counted says which of them are
// in the figures, by run id and created_at.
func (rig *memoryRig) result(ctx context.Context, runIDs []int64, elapsed time.Duration, submitTook durations,
	counted func(id int64, created time.Time) bool) (memoryResult, error) {
	res := memoryResult{runs: len(runIDs), workers: rig.cfg.workers * rig.cfg.orchestrators, elapsed: elapsed,
		notified: rig.notified.Load(), calls: map[string]int{}, tg: rig.tg.stats(), stages: rig.st, submit: submitTook}
	for _, r := range memoryRules {
		res.calls[r.name] = rig.llmSrv.Calls(r.name)
	}
	err := res.measure(ctx, rig.poll, rig.floor, runIDs, counted, rig.timer, rig.clock)
	return res, err
}

// verify checks the n runs drive submitted (see verifyMemory).
func (rig *memoryRig) verify(ctx context.Context, res memoryResult, n int) error {
	return verifyMemory(ctx, rig.poll, rig.tg, rig.timer, res, rig.users, rig.floor, n)
}

// memoryQuery is the text of submission i: unique, and tagged with its
// index for the LLM timer.
func memoryQuery(i int, user int64) string {
	return fmt.Sprintf("How should I profile my Go service? Question %d from user %d %s%07d]", i, user, queryMarker, i)
}

// submitRuns submits the runs the way private messages arrive: run i
// belongs to user i mod len(users) and is that user's message i/len(users)+1.
// Submitter j takes the users u with u mod submitters = j, in order, so a
// user's messages are submitted (and numbered) in the order they are sent.
// With cfg.rate set, run i is submitted no earlier than start + i/rate.
// When stop (if not nil) closes, the submissions end: the runs submitted
// are the first n, n being one past the last whose time had come (or that
// a submitter had taken up), and the rest are not submitted.
// It returns the run id of each submission and how long each Submit took.
func submitRuns(ctx context.Context, svc *memory.Service, cfg memoryConfig, users []int64, start time.Time,
	stop <-chan struct{}) ([]int64, durations, error) {
	ids := make([]int64, cfg.runs)
	took := make(durations, cfg.runs)
	var mu sync.Mutex
	var errs []error
	// limit is where the submissions end; a submitter takes run i up only
	// below it, and the cut never falls below a run taken up.
	var cutMu sync.Mutex
	limit, taken := cfg.runs, -1
	takeUp := func(i int) bool {
		cutMu.Lock()
		defer cutMu.Unlock()
		if i >= limit {
			return false
		}
		taken = max(taken, i)
		return true
	}
	finished := make(chan struct{})
	if stop != nil {
		go func() {
			select {
			case <-finished:
			case <-stop:
				cutMu.Lock()
				cut := taken + 1
				if cfg.rate > 0 {
					cut = max(cut, int(time.Since(start).Seconds()*cfg.rate)+1)
				}
				limit = min(limit, cut)
				cutMu.Unlock()
			}
		}()
	}
	var wg sync.WaitGroup
	for j := range cfg.submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cfg.runs {
				u := i % len(users)
				if u%cfg.submitters != j {
					continue
				}
				if cfg.rate > 0 {
					at := start.Add(time.Duration(float64(i) / cfg.rate * float64(time.Second)))
					select {
					case <-ctx.Done():
						return
					case <-stop:
					case <-time.After(time.Until(at)):
					}
				}
				if !takeUp(i) {
					return
				}
				t0 := time.Now()
				r, _, err := svc.Submit(ctx, users[u], users[u], i/len(users)+1, memoryQuery(i, users[u]))
				took[i] = time.Since(t0)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("submit %d: %w", i, err))
					mu.Unlock()
					return
				}
				ids[i] = r.ID
			}
		}()
	}
	wg.Wait()
	close(finished)
	cutMu.Lock()
	n := limit
	cutMu.Unlock()
	ids, took = ids[:n], took[:n]
	slices.Sort(took)
	return ids, took, errors.Join(errs...)
}

// waitArchived polls every 10 ms until n runs (with an id above floor) are archived and returns the
// time since start at the poll that saw it in the database. The database
// count is only asked for once the orchestrators' own count of Runs.Archive
// calls has reached n (and every second regardless): the count is a
// sequential scan of pipeline_runs, some 3 ms once the table holds 2000
// runs and their dead versions, and asked every 10 ms it took about 5 % of
// the throughput from the code under test. It fails fast when a run FAILED or
// Telegram refused a message: the runs could never all finish.
func waitArchived(ctx context.Context, conn *pgx.Conn, tg *telegram, c *runClock, floor int64, n int, start time.Time,
	timeout time.Duration) (elapsed time.Duration, err error) {
	var asked time.Time
	var archived int
	err = poll(ctx, memoryPollEvery, timeout, func() (bool, error) {
		var failed int
		archived, failed = c.counts()
		if archived >= n || failed > 0 || time.Since(asked) >= time.Second {
			asked = time.Now()
			err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE archived_at IS NOT NULL), count(*) FILTER (WHERE status = 'FAILED')
FROM pipeline_runs WHERE id > $1`, floor).Scan(&archived, &failed)
			if err != nil {
				return false, fmt.Errorf("poll: %w", err)
			}
			if archived >= n {
				// Finishing late is a timeout too, however the polls fell.
				if elapsed = time.Since(start); elapsed <= timeout {
					return true, nil
				}
				return false, fmt.Errorf("%d of %d runs archived after %s: %s", archived, n, timeout, runBreakdown(ctx, conn, floor))
			}
			if failed > 0 {
				return false, fmt.Errorf("%d runs FAILED: %s", failed, runBreakdown(ctx, conn, floor))
			}
		}
		return false, tg.refused()
	}, func() error {
		return fmt.Errorf("%d of %d runs archived after %s: %s", archived, n, timeout, runBreakdown(ctx, conn, floor))
	})
	if err != nil {
		return 0, err
	}
	return elapsed, nil
}

// runBreakdown describes the runs with an id above floor for an error message.
func runBreakdown(ctx context.Context, conn *pgx.Conn, floor int64) string {
	rows, err := conn.Query(ctx, `SELECT status, archived_at IS NOT NULL, COALESCE(min(error_message), ''), count(*)
FROM pipeline_runs WHERE id > $1 GROUP BY 1, 2 ORDER BY 1, 2`, floor)
	if err != nil {
		return "(status counts unavailable: " + err.Error() + ")"
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var status, msg string
		var archived bool
		var c int
		if err := rows.Scan(&status, &archived, &msg, &c); err != nil {
			return "(status counts unavailable: " + err.Error() + ")"
		}
		if archived {
			status += "(archived)"
		}
		if msg != "" {
			status += fmt.Sprintf("(e.g. %q)", msg)
		}
		parts = append(parts, fmt.Sprintf("%s=%d", status, c))
	}
	if len(parts) == 0 {
		return "no runs"
	}
	return strings.Join(parts, " ")
}

// durations is a sample with percentiles.
type durations []time.Duration

// p is the nearest-rank percentile q (0 < q ≤ 1) of a sorted sample.
func (d durations) p(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(d))*q)) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// printRow writes the sample's line of a percentile table: name in a
// column width wide, then p50, p90, p99 and max in milliseconds.
func (d durations) printRow(out io.Writer, width int, name string) {
	fmt.Fprintf(out, "  %-*s p50 %8.2fms  p90 %8.2fms  p99 %8.2fms  max %8.2fms\n",
		width, name, ms(d.p(0.5)), ms(d.p(0.9)), ms(d.p(0.99)), ms(d.p(1)))
}

type memoryResult struct {
	runs, workers int
	counted       int   // runs in the figures: runs less the warm-up
	notified      int64 // NOTIFY payloads the orchestrators received
	elapsed       time.Duration
	calls         map[string]int // llmtest calls per rule
	tg            telegramStats
	stages        *stages
	// overhead, llmTime, latency (created → archived) and service
	// (start of processing → archived) per run, each sorted.
	overhead, llmTime, latency, service durations
	// inWorker is the time from the capture of the NEW run to Runs.Archive's
	// return, less LLM time; queued is service − that span: the wait for
	// a worker (and the NOTIFY or dispatch that leads to one).
	inWorker, queued durations
	submit           durations // each Submit call (intake), sorted
}

func (r memoryResult) rate() float64 { return float64(r.runs) / r.elapsed.Seconds() }

// measure reads every run's times and computes its orchestration overhead:
// the time from the start of its processing to archived_at, less the time
// spent inside its LLM calls. A user's runs go one after another, so a run
// starts at its created_at or at its predecessor's archived_at, whichever
// is later; the wait behind the predecessor is not overhead. Only the runs
// with an id above floor are read, and only those counted says yes to
// (by id and created_at) are in the figures.
func (r *memoryResult) measure(ctx context.Context, conn *pgx.Conn, floor int64, runIDs []int64,
	counted func(id int64, created time.Time) bool, t *llmTimer, c *runClock) error {
	rows, err := conn.Query(ctx, `SELECT id, user_id, created_at, archived_at FROM pipeline_runs
WHERE id > $1 AND archived_at IS NOT NULL ORDER BY user_id, id`, floor)
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	type times struct {
		id, user          int64
		created, archived time.Time
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (times, error) {
		var x times
		err := row.Scan(&x.id, &x.user, &x.created, &x.archived)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("measure: %w", err)
	}
	llmByRun := make(map[int64]time.Duration, len(runIDs))
	for i, id := range runIDs {
		llmByRun[id] = t.total(i)
	}
	r.counted = 0
	var prev times
	for _, x := range all {
		begin := x.created
		if prev.user == x.user && prev.archived.After(begin) {
			begin = prev.archived
		}
		svc := x.archived.Sub(begin)
		l := llmByRun[x.id]
		if !counted(x.id, x.created) {
			prev = x
			continue
		}
		r.counted++
		r.service = append(r.service, svc)
		r.llmTime = append(r.llmTime, l)
		r.overhead = append(r.overhead, svc-l)
		r.latency = append(r.latency, x.archived.Sub(x.created))
		if span, ok := c.span(x.id); ok {
			r.inWorker = append(r.inWorker, span-l)
			r.queued = append(r.queued, svc-span)
		}
		prev = x
	}
	for _, d := range []durations{r.overhead, r.llmTime, r.latency, r.service, r.inWorker, r.queued} {
		slices.Sort(d)
	}
	return nil
}

func (r memoryResult) print(out io.Writer) {
	fmt.Fprintf(out, "run: runs=%d workers=%d elapsed=%.3fs rate=%.1f runs/s\n", r.runs, r.workers, r.elapsed.Seconds(), r.rate())
	if r.counted != r.runs {
		fmt.Fprintf(out, "  the figures below are over %d runs (%d left out: the warm-up, or outside the window measured)\n", r.counted, r.runs-r.counted)
	}
	line := func(name string, d durations) { d.printRow(out, 38, name) }
	line("overhead (processing − LLM)", r.overhead)
	line("processing (start → archived_at)", r.service)
	line("  waiting for a worker", r.queued)
	line("  in a worker, less LLM", r.inWorker)
	line("LLM calls (4 per run)", r.llmTime)
	line("latency (created_at → archived_at)", r.latency)
	line("Submit (intake transaction)", r.submit)
	fmt.Fprintf(out, "  notifications received=%d (%.2f per run)\n", r.notified, float64(r.notified)/float64(r.runs))
	fmt.Fprintf(out, "  llm_calls analyzer=%d assembler=%d responder=%d archivist=%d\n",
		r.calls["analyzer"], r.calls["assembler"], r.calls["responder"], r.calls["archivist"])
	fmt.Fprintf(out, "  telegram answers=%d (distinct messages answered %d, duplicates %d) other_messages=%d chat_actions=%d telegram_tcp_conns=%d\n",
		r.tg.Replies, r.tg.ReplyDistinct, r.tg.ReplyDuplicates, r.tg.Messages-r.tg.Replies, r.tg.ChatActions, r.tg.Conns)
	if r.stages != nil {
		r.stages.printPer(out, "run", r.runs, r.workers, r.elapsed)
	}
}

// verifyMemory checks that every run went the whole way exactly once:
// COMPLETED, delivered and archived; four LLM calls, one per stage; one
// summary in lsm_storage; one answer in Telegram, replying to its message.
func verifyMemory(ctx context.Context, conn *pgx.Conn, tg *telegram, t *llmTimer, res memoryResult, users []int64, floor int64, n int) error {
	var wrong findings
	var total, done int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'COMPLETED'
  AND delivered_at IS NOT NULL AND archived_at IS NOT NULL) FROM pipeline_runs WHERE id > $1`, floor).Scan(&total, &done); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if total != n || done != n {
		wrong.addf("%d runs, %d COMPLETED, delivered and archived, want %d: %s",
			total, done, n, runBreakdown(ctx, conn, floor))
	}
	var sums, sumRuns int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT source_run_ids[1]) FROM lsm_storage
WHERE source_run_ids[1] > $1`, floor).Scan(&sums, &sumRuns); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if sums != n || sumRuns != n {
		wrong.addf("lsm_storage has %d rows for %d runs, want %d", sums, sumRuns, n)
	}
	for name, c := range res.calls {
		if c != n {
			wrong.addf("%d %s calls, want %d", c, name, n)
		}
	}
	if bad := t.notOncePerStage(n); bad != "" {
		wrong = append(wrong, bad)
	}
	st := tg.stats()
	if st.Replies != n || st.ReplyDistinct != n || st.ReplyDuplicates != 0 || st.Messages != n || st.Rejected != 0 {
		wrong.addf("Telegram got %d messages, %d of them answers to %d distinct messages (%d duplicates, %d refused), want %d",
			st.Messages, st.Replies, st.ReplyDistinct, st.ReplyDuplicates, st.Rejected, n)
	}
	got := tg.replies()
	missing := 0
	for i := range n {
		u := users[i%len(users)]
		if got[replyKey{Chat: u, MessageID: int64(i/len(users) + 1)}] != 1 {
			missing++
		}
	}
	if missing > 0 {
		wrong.addf("%d messages were not answered exactly once", missing)
	}
	return wrong.err()
}

// runClock records, per run, when a worker started it (the Runs.Capture call
// that took it from NEW) and when its Runs.Archive returned, and counts the
// runs archived and failed.
type runClock struct {
	mu         sync.Mutex
	begin, end map[int64]time.Time
	failed     int
}

func (c *runClock) counts() (archived, failed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.end), c.failed
}

// span is the time a worker had the run, capture to archive.
func (c *runClock) span(id int64) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok1 := c.begin[id]
	e, ok2 := c.end[id]
	return e.Sub(b), ok1 && ok2
}

type clockedRuns struct {
	memory.Runs
	c *runClock
}

func (r clockedRuns) Capture(ctx context.Context, id int64, from, to memory.Status, lease time.Duration, claimer string, size memory.RecallSize) (memory.PipelineRun, memory.Recall, bool, error) {
	start := time.Now()
	run, rc, ok, err := r.Runs.Capture(ctx, id, from, to, lease, claimer, size)
	if ok && err == nil && from == memory.New {
		r.c.mu.Lock()
		r.c.begin[id] = start
		r.c.mu.Unlock()
	}
	return run, rc, ok, err
}

func (r clockedRuns) Step(ctx context.Context, id int64, st memory.Step) (bool, error) {
	ok, err := r.Runs.Step(ctx, id, st)
	if ok && err == nil && st.To == memory.Failed {
		r.c.mu.Lock()
		r.c.failed++
		r.c.mu.Unlock()
	}
	return ok, err
}

func (r clockedRuns) Archive(ctx context.Context, id int64, sum *memory.Summary) (memory.Ref, bool, error) {
	next, ok, err := r.Runs.Archive(ctx, id, sum)
	if ok && err == nil {
		now := time.Now()
		r.c.mu.Lock()
		r.c.end[id] = now
		r.c.mu.Unlock()
	}
	return next, ok, err
}

// llmTimer wraps memory.LLM and records each call's duration against the
// run whose query marker the prompt carries (the first one: the run's own
// query comes before any earlier one in every stage's prompt).
type llmTimer struct {
	mu      sync.Mutex
	perRun  []time.Duration
	calls   []map[string]int // per run: calls per label
	unknown int              // calls without a marker
}

func newLLMTimer(runs int) *llmTimer {
	return &llmTimer{perRun: make([]time.Duration, runs), calls: make([]map[string]int, runs)}
}

func (t *llmTimer) wrap(l memory.LLM, st *stages) memory.LLM { return timedMemoryLLM{l, t, st} }

func (t *llmTimer) record(c memory.Call, d time.Duration) {
	i, ok := markerOf(c.Prompt)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !ok || i >= len(t.perRun) {
		t.unknown++
		return
	}
	t.perRun[i] += d
	if t.calls[i] == nil {
		t.calls[i] = map[string]int{}
	}
	t.calls[i][c.Label]++
}

func (t *llmTimer) total(i int) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.perRun[i]
}

// notOncePerStage describes runs, of the first n submitted, whose four
// calls were not made exactly once each, or "".
func (t *llmTimer) notOncePerStage(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	bad := 0
	for _, c := range t.calls[:n] {
		if len(c) != 4 || c["memory_analyzer"] != 1 || c["memory_assembler"] != 1 || c["memory_responder"] != 1 || c["memory_archivist"] != 1 {
			bad++
		}
	}
	switch {
	case bad > 0 || t.unknown > 0:
		return fmt.Sprintf("%d runs did not make each stage's LLM call exactly once (%d calls without a query marker)", bad, t.unknown)
	}
	return ""
}

// markerOf reads the submission index from the first query marker in s.
func markerOf(s string) (int, bool) {
	_, rest, ok := strings.Cut(s, queryMarker)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "]")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	return i, err == nil && i >= 0
}

type timedMemoryLLM struct {
	memory.LLM
	t  *llmTimer
	st *stages // nil without -stages
}

func (l timedMemoryLLM) Text(ctx context.Context, c memory.Call) (string, error) {
	start := time.Now()
	s, err := l.LLM.Text(ctx, c)
	l.done(c, start)
	return s, err
}

func (l timedMemoryLLM) JSON(ctx context.Context, c memory.Call, out any) error {
	start := time.Now()
	err := l.LLM.JSON(ctx, c, out)
	l.done(c, start)
	return err
}

func (l timedMemoryLLM) done(c memory.Call, start time.Time) {
	l.t.record(c, time.Since(start))
	if l.st != nil {
		l.st.since("llm "+strings.TrimPrefix(c.Label, "memory_"), start)
	}
}
