package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/bot/delivery"
	"switchboard/storage"
)

// profiles are the files a scenario profiles itself into ("": none).
type profiles struct{ cpu, mem string }

// commonFlags are the flags every scenario has besides its own: -db,
// -cpuprofile and -memprofile. Each scenario's config embeds them.
type commonFlags struct {
	db   string
	prof profiles
}

func (c *commonFlags) common() *commonFlags { return c }

// options is a scenario's config as its command line sets it.
type options[C any] interface {
	*C
	common() *commonFlags
	// define adds the scenario's own flags to fs, bound to the config.
	define(fs *flag.FlagSet)
	// resolve checks the parsed values and derives the fields that follow
	// from them; it returns why the values cannot run, "" when they can.
	resolve() string
}

// newScenario is the scenario name: its run parses the common flags and
// C's own, refuses what C's resolve refuses and runs bench through
// runScenario.
func newScenario[C any, R any, PC options[C], PR scored[R]](name, summary string,
	bench func(ctx context.Context, cfg C, out io.Writer, log *slog.Logger) (R, error)) scenario {
	run := func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		var cfg C
		common := PC(&cfg).common()
		fs := scenarioFlags(name, stderr, common)
		PC(&cfg).define(fs)
		if err := parseFlags(fs, args, stderr, &common.db); err != nil {
			return err
		}
		if why := PC(&cfg).resolve(); why != "" {
			return refuse(fs, stderr, why)
		}
		return runScenario[R, PR](ctx, stdout, common.db, common.prof, func() (R, error) {
			return bench(ctx, cfg, stdout, newLogger(stderr))
		})
	}
	return scenario{name: name, summary: summary, run: run}
}

// scenarioFlags starts a scenario's flag set with the common flags and
// the usage line.
func scenarioFlags(name string, stderr io.Writer, common *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&common.db, "db", "", "PostgreSQL server URL; the bench creates and drops its own database there\n(default $DATABASE_URL, else "+defaultDB+")")
	fs.StringVar(&common.prof.cpu, "cpuprofile", "", "write a CPU profile of the whole scenario (in-process fakes included) to this file")
	fs.StringVar(&common.prof.mem, "memprofile", "", "write an allocation profile of the whole scenario (in-process fakes included) to this file")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: go run ./bench %s [flags]\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// refuse turns down flag values: why, then the usage, as a usageError.
func refuse(fs *flag.FlagSet, stderr io.Writer, why string) error {
	fmt.Fprintln(stderr, why)
	fs.Usage()
	return usageError{errors.New(why)}
}

// scored is a scenario's report: it embeds reference and judges itself.
type scored[R any] interface {
	*R
	setReference(reference)
	goals() []goal
}

// runScenario is the tail every scenario's run shares once its flags are
// parsed: it measures the same-run reference on the server, profiles the
// CPU while bench runs and writes the allocation profile after it, as prof
// asks, prints the verdict on every goal and then bench's report, with the
// reference, as one JSON object, the last line of stdout.
func runScenario[R any, P scored[R]](ctx context.Context, stdout io.Writer, server string, prof profiles, bench func() (R, error)) error {
	ref, err := measureReference(ctx, server, stdout)
	if err != nil {
		return err
	}
	stop, err := startCPUProfile(prof.cpu)
	if err != nil {
		return err
	}
	defer stop()
	rep, err := bench()
	if err != nil {
		return err
	}
	if err := writeAllocProfile(prof.mem); err != nil {
		return err
	}
	p := P(&rep)
	p.setReference(ref)
	ref.GoalsMet = judge(stdout, p.goals())
	p.setReference(ref)
	line, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", line)
	return err
}

// benchDB is a scenario's own database (switchboard_bench_<random>) on the
// -db server, created and migrated by openBenchDB and dropped by close.
type benchDB struct {
	store     *storage.Store
	server    string // the -db server URL, which drops it
	name      string
	url       string // the database's own URL
	pgVersion string // SHOW server_version
}

// openBenchDB creates a fresh bench database on server, opens a store on it
// and migrates it. When it fails after naming the database, it has closed
// the store and dropped the database already, the drop's error joined to
// its own; otherwise the caller defers close.
func openBenchDB(ctx context.Context, server string, log *slog.Logger) (_ *benchDB, err error) {
	name, dbURL, err := benchDatabaseURL(server)
	if err != nil {
		return nil, err
	}
	db := &benchDB{server: server, name: name, url: dbURL}
	opened := false
	defer func() {
		// On a panic too, as the scenarios' deferred close does.
		if !opened {
			db.close(&err)
		}
	}()
	// storage.Open creates the missing database, as it does for a newcomer.
	if db.store, err = storage.Open(ctx, dbURL, log); err != nil {
		return nil, err
	}
	if err := db.store.Migrate(ctx); err != nil {
		return nil, err
	}
	if err := db.store.Pool().QueryRow(ctx, `SHOW server_version`).Scan(&db.pgVersion); err != nil {
		return nil, err
	}
	opened = true
	return db, nil
}

// close closes the store (if open) and drops the database, disconnecting
// whatever still holds it, whatever happened: a drop's failure is joined
// into *err. Scenarios defer it with their named error result.
func (db *benchDB) close(err *error) {
	if db.store != nil {
		db.store.Close()
	}
	if derr := dropDatabase(db.server, db.name); derr != nil {
		*err = errors.Join(*err, fmt.Errorf("drop database %s: %w", db.name, derr))
	}
}

// countedListen is a replica's LISTEN as app.go adapts storage's: it also
// counts the notifications into notified and, after the first connect,
// tells ready.
func countedListen(store *storage.Store, notified *atomic.Int64, ready chan<- struct{}) func(context.Context, string, func(), func(string)) {
	var once sync.Once
	return func(ctx context.Context, ch string, onConnect func(), onNotify func(string)) {
		store.Listen(ctx, []string{ch}, func() {
			onConnect()
			once.Do(func() { ready <- struct{}{} })
		}, func(_, payload string) {
			notified.Add(1)
			onNotify(payload)
		})
	}
}

// awaitListening waits until n replicas have said ready (a clock must not
// start before everyone LISTENs: a lost NOTIFY would be counted as lag).
func awaitListening(ctx context.Context, ready <-chan struct{}, n int, who string) error {
	for range n {
		select {
		case <-ready:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return fmt.Errorf("the %s did not LISTEN within 30s", who)
		}
	}
	return nil
}

// benchLimits lift the sender's rate limits: the bench's fake Telegram
// enforces none, and the bench measures the pipeline, not Telegram's caps.
var benchLimits = delivery.Limits{Global: 1e6, GlobalBurst: 1000, Private: 1e6, PrivateBurst: 1000, Group: 1e6, GroupBurst: 1000}

// startSender runs an outbox sender (bot/delivery), as the application
// does next to the workflows, delivering to the fake Telegram at tgURL
// until the returned stop, which waits for deliveries in flight.
func startSender(ctx context.Context, store *storage.Store, tgURL string, log *slog.Logger) (stop func(), err error) {
	return startSenderWith(ctx, store.Outbox(), tgURL, delivery.Config{}, delivery.NewMemoryLimiter(benchLimits), log, prometheus.NewRegistry())
}

// startSenderWith is startSender with the sender's configuration, limiter
// and metrics registry given.
func startSenderWith(ctx context.Context, store delivery.Store, tgURL string, cfg delivery.Config, limiter delivery.Limiter,
	log *slog.Logger, reg prometheus.Registerer) (stop func(), err error) {
	s, err := delivery.NewSender(cfg, store, delivery.NewClient(tgURL, tgToken, nil), limiter, log, reg)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(sctx)
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }, nil
}

// waitOutboxDrained polls until no outbox row is pending: every message
// the workflow wrote has been delivered (or ended otherwise).
func waitOutboxDrained(ctx context.Context, conn *pgx.Conn, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var pending int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'pending'`).Scan(&pending); err != nil {
			return fmt.Errorf("poll outbox: %w", err)
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d outbox rows still pending after %s", pending, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tail closes every report but the outbox's: the process's peak RSS
// (VmHWM, fakes included), the same-run reference and, for tests, the
// bench database's name (dropped by then).
type tail struct {
	PeakRSSMB float64 `json:"peak_rss_mb"`
	reference
	database string
}

func (t *tail) setDatabase(name string) { t.database = name }

func (t tail) databaseName() string { return t.database }

// notePeakRSS prints the process's peak RSS and records it in the report
// (left 0 when it cannot be read).
func (t *tail) notePeakRSS(out io.Writer) {
	rss, err := peakRSSMB()
	if err != nil {
		fmt.Fprintf(out, "peak RSS: unknown (%v)\n", err)
		return
	}
	fmt.Fprintf(out, "peak RSS: %.1f MB (VmHWM, fakes included)\n", rss)
	t.PeakRSSMB = round(rss, 1)
}

// onBenchDB runs bench on a fresh bench database and drops it afterwards,
// whatever happened, the drop's failure joined to bench's error. The
// report names the database, on error too, so that tests can check that
// it is gone.
func onBenchDB[R any, P interface {
	*R
	setDatabase(string)
}](ctx context.Context, server string, log *slog.Logger, bench func(db *benchDB) (R, error)) (rep R, err error) {
	db, err := openBenchDB(ctx, server, log)
	if err != nil {
		return rep, err
	}
	defer db.close(&err)
	defer func() { P(&rep).setDatabase(db.name) }()
	return bench(db)
}

// describeCounts is the rows of query, which counts rows by what (state,
// status), each described by describe, for an error message; none when
// there is no row.
func describeCounts(ctx context.Context, conn *pgx.Conn, what, query, none string, describe func(pgx.Rows) (string, error)) string {
	rows, err := conn.Query(ctx, query)
	if err != nil {
		return "(" + what + " counts unavailable: " + err.Error() + ")"
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		part, err := describe(rows)
		if err != nil {
			return "(" + what + " counts unavailable: " + err.Error() + ")"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return none
	}
	return strings.Join(parts, " ")
}

// findings are what a verification found wrong, a sentence each.
type findings []string

func (f *findings) addf(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// err is nil when nothing was found, else one error that says it all.
func (f findings) err() error {
	if len(f) == 0 {
		return nil
	}
	return errors.New("verify: " + strings.Join(f, "; "))
}

// poll calls check every interval until it reports done or an error, and
// returns that error; after timeout it gives up with late's. Cancelling ctx
// ends it with ctx's error.
func poll(ctx context.Context, every, timeout time.Duration, check func() (done bool, err error), late func() error) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if done, err := check(); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return late()
		case <-tick.C:
		}
	}
}
