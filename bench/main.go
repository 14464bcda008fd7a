// Command bench is Switchboard's load generator. It drives the real
// production code (domain services, storage over a real PostgreSQL, the
// real HTTP clients and the real Telegram delivery path) against in-process
// fakes of the outside world served over loopback HTTP, and reports how
// fast the pipeline goes.
//
// Usage:
//
//	go run ./bench <scenario> [flags]
//	go run ./bench <scenario> -h      # the scenario's flags
//
// Each scenario prints human-readable lines and, as the very last line of
// standard output, exactly one JSON object with its headline numbers, so a
// script can take `tail -n1`. Service logs are discarded unless LOG_LEVEL
// (debug, info, warn, error) is set; they then go to standard error.
// Results are recorded in docs/BENCHMARKS.md.
//
// Before its scenario every run measures a same-run reference and prints
// it: a fixed CPU loop (200 000 SHA-256 sums of 1 KiB on one goroutine,
// ref_cpu_ops_per_s) and a fixed PostgreSQL commit loop (500 single-row
// INSERTs on a table of its own in the -db server's database, each its own
// transaction, ref_pg_commits_per_s). After the scenario it prints a
// "goal: … met" (or MISSED) line per goal; a rate goal that would only
// describe the host is stated per 1000 reference commits/s. Every JSON
// line ends with ref_cpu_ops_per_s, ref_pg_commits_per_s and goals_met.
//
// # Scenarios
//
// vacancies measures the vacancy queue: workers claiming QUEUED matches
// from PostgreSQL (FOR UPDATE SKIP LOCKED), fetching the HH detail, asking
// the LLM, delivering through the real *bot.Bot (telebot over HTTP) and
// marking the match SENT_TO_USER. It creates its own database
// (switchboard_bench_<random>) on the server named by -db (default
// $DATABASE_URL, else postgres://postgres@127.0.0.1:5432/postgres) and drops
// it at the end, on error and on Ctrl-C too. Two runs:
//
//   - A, zero latency: -n matches (default 3000) spread over 50 users,
//     -llm-concurrency LLM calls in flight (default 16) and, as the bot
//     runs them, vacancy.WorkersFor(that) workers; the
//     fakes answer at once, so this is the pipeline's own cost: database
//     round trips, HTTP, JSON, rendering. Goal: at least 80 matches/s per
//     1000 reference commits/s.
//   - B, 200 ms LLM latency: -latency-n matches (default 200), 4 LLM calls
//     in flight (8 workers), every LLM answer taking 200 ms. The ideal is
//     4 / 0.2 s = 20 matches/s; efficiency is the measured rate / 20, the
//     share of the LLM budget the pipeline actually uses. Goal: at least 0.95.
//
// The wall time of a run starts when the workers start and ends at the first
// poll (every 20 ms, on a connection of its own) that sees all matches
// SENT_TO_USER. After each run the bench checks that the fake Telegram got
// exactly one valid message per match and no duplicates. -stages also times
// every call the workers make (DB queries, HH, LLM, Telegram) and prints
// where the worker time went; -cpuprofile and -memprofile write CPU and
// allocation profiles. The JSON line is
//
//	{"scenario":"vacancies","zero_latency_per_s":…,"latency_200ms_per_s":…,"efficiency":…,"peak_rss_mb":…}
//
// where peak_rss_mb is the process's VmHWM (fakes included).
//
// memory measures the memory chat's pipeline: -runs private messages
// (default 2000) from -users users (default 100, round robin, each user's
// messages numbered in order) go in through memory.Service.Submit (a
// goroutine per user, as the bot serves each chat) and through the orchestrator — LISTEN/NOTIFY on a connection
// of its own, captures, the four LLM stages, the answer delivered by the
// real *bot.Bot as a reply, the archivist's summary — until every run has
// archived_at. The database is created and dropped as for vacancies. The
// LLM (llmtest, scripted per stage by its system prompt) answers at once
// through the real llm.Client (MaxConcurrency 64).
// -orchestrators K starts K services on the database, each with its own
// pool, listener, LLM client and bot, like K replicas; -workers is each
// one's memory.Config.Workers (default 16: MEMORY_WORKERS's default, 8, is
// sized for an LLM that takes seconds and serves two calls at once; with an
// instant one, 16 keep both vCPUs busier).
//
// It makes two passes, each on a fresh database. Pass 1 (capacity)
// submits every run at once; its wall time runs from the first Submit to
// the first poll (every 10 ms) that sees every run archived, and gives
// runs_per_s. Pass 2 (overhead) submits the runs at a steady rate (run i
// at i/rate): -rate runs/s, or by default -load (0.6) of pass 1's runs/s,
// the same load on any host (overhead_rate in the JSON), after one
// second's worth of warm-up runs that are not counted, and gives the
// overhead figures; -rate 0 -load 0 skips it and reports pass 1's. Under pass 1's
// flood a run mostly waits for a free worker, about users ÷ throughput
// (Little's law), whatever the orchestration does; pass 2 shows what the
// orchestration adds to a run at a load the machine sustains. A run's
// orchestration overhead is the time from the start of its processing to
// its archived_at, less the time spent inside its four LLM calls (each
// query carries a marker the LLM timer finds in the prompts); the start
// is its created_at or, if later, the archived_at of the same user's
// previous run, since a user's runs go one after another. The bench
// prints that split into the wait for a worker and the time in a worker,
// and checks that every run is COMPLETED, delivered and archived, made
// each stage's LLM call exactly once, has one lsm_storage summary and got
// exactly one Telegram answer replying to its message. -stages times
// every repository, LLM and Telegram call the orchestrators make;
// -cpuprofile and -memprofile write CPU and allocation profiles. The JSON
// line (runs_per_s from pass 1, the overhead from pass 2) is
//
//	{"scenario":"memory","runs":…,"runs_per_s":…,"overhead_p50_ms":…,"overhead_p99_ms":…,"overhead_rate":…,"peak_rss_mb":…}
//
// Goals: at least 50 runs/s per 1000 reference commits/s, overhead p50 at
// most 10 ms and p99 at most 50 ms.
//
// dispatch measures the expired-offers watchdog. The database is created
// and dropped as for vacancies. Two runs:
//
//   - Lag: -n offers (default 10 000), each for an order and a master of
//     its own (the users and masters bulk-inserted first), are created with
//     SQL, each order together with its offer in one statement, -batch per
//     statement (default 10), at a steady rate over -spread (default 10 s),
//     each expiring after a random SLA uniform in [-sla-min, -sla-max]
//     (default 1 s to 10 s) and carrying a message id, so that expiring it
//     edits a message. The offers trigger's NOTIFY of every row is how the
//     replicas learn of them: -replicas dispatch.Services (default 2), each
//     with its own store (pool), its own LISTEN (as main wires it) and
//     Config.Workers 8, run only Service.Run: the per-replica expiry timer
//     and the distribution passes it serves. The WATCHDOG_INTERVAL job is
//     not run, so every expiry is a timer's. The closing edit (and two
//     live-log lines) of each expiry are outbox rows the bot's own
//     renderer (bot.DispatchNotes, with its lanes and pacing fields)
//     writes in the expiry's transaction, checked in the outbox at the
//     end; the bench records when that transaction committed. Every order is in a city of its own where
//     no master lives, so after the expiry the order is offered on, finds
//     nobody in either round and is reported unassignable: realistic
//     follow-up work for every expiry. An offer's lag is the commit of its
//     closing edit − expires_at; the bench also splits it into the timer's
//     part (start of the ExpireOffers call that expired it − expires_at)
//     and that transaction. The run ends at the first poll (every 10 ms) that sees
//     every offer closed, every order reported unassignable and every
//     offer EXPIRED in the database (-timeout after the last offers are
//     created it gives up with the offers' states). The bench then checks that each offer
//     was returned by exactly one ExpireOffers call and closed exactly once
//     (as EXPIRED, by the replica that expired it), that there are n offers,
//     all EXPIRED, and n orders marked unassignable in round 2. Goal: p99
//     at most 100 ms (the seed promises 60 s).
//   - Sweep: the dispatch tables are emptied and -sweep-n offers (default
//     100 000), each with its user, master and order, bulk-inserted already
//     due (INSERT … SELECT, one statement per table), then VACUUM ANALYZE;
//     one call of the storage's ExpireOffers, the watchdog's one statement,
//     is timed; it must return every offer, and a second call none. -sweeps
//     times (default 3), each on fresh data; the median counts. Goal: at
//     most 2 s for 100 000. Then one more sweep of -sweep-messages due
//     offers (default 10 000; 0: none) that also writes what the watchdog
//     writes with them, each offer's closing edit and live-log line,
//     rendered by the bot's renderer: 2 per offer in the outbox (no goal;
//     it shows what a large backlog costs the watchdog's transaction).
//
// -stages times every repository call the replicas make in the lag run
// (NextOffer by its outcome) and prints them per expired offer;
// -cpuprofile and -memprofile write CPU and allocation profiles. The JSON
// line is
//
//	{"scenario":"dispatch","lag_p50_ms":…,"lag_p99_ms":…,"sweep_100k_ms":…,"lag_p90_ms":…,"lag_max_ms":…,"n":…,"replicas":…,"sweep_n":…,"sweep_messages_ms":…,"sweep_messages_n":…,"peak_rss_mb":…}
//
// where sweep_100k_ms is the median sweep of sweep_n offers.
//
// analysis measures an analysis run (docs/ARCHITECTURE.md "Analysis runs"): -n group
// messages (default 10 000) in -chats groups (default 20) go through the
// executor's fetch, prefilter, batching and per-batch proposals with a
// zero-latency LLM. The database is created and dropped as for vacancies.
// The messages, dated in the last 23¾ hours, are generated per group as
// sessions of people talking (3–40 messages, three in ten sessions 55–160,
// up to 9 minutes apart; 12–75 minutes of quiet between sessions; per-group
// message ids counting up), with texts from "ok" to multi-line plans, about
// one in eight with an @mention, many with keywords (deploy, bug, release,
// invoice…), so that batching splits both at the 10-minute gap and at the
// 50-message cap; they are bulk-inserted with COPY (setup, not timed). The
// model (llmtest) reads the batch's "[id=N …]" lines from the prompt and
// answers at once with one or two proposals (the first citing the batch's
// first three messages, the second its last two), through the real
// llm.Client and llm.AnalysisPort. The notifier is the real *bot.Bot with
// an admin chat (ADMIN_CHAT_ID) against the fake Telegram, which also
// serves editMessageText: the run's events, its progress message (edited
// after every batch) and every proposal with its Approve / Reject buttons
// go over HTTP; the publisher is the store (pg_notify). With analysis.Service.Serve running, the bench
// opens a run with /run_new's "24h" (no filters: every message is
// analysed) and times from Start until the first poll (every 10 ms, on a
// connection of its own) that sees the run completed. It then stops Serve,
// which waits for the executor's last posts, and checks the run: messages
// and filtered = n, batches = the bench's own count, batches_done =
// batches, one LLM call per batch with every message in one prompt,
// proposals_total = what the model proposed, those proposals (and their
// sources) in the database, each posted once to the admin chat with its
// message id recorded, the progress message edited after every batch and
// once at the end (completed, 100 %), and every event posted and
// published. -filters ARGS (e.g. "keywords=deploy,bug min_len=20") also
// decides the first run's proposals (one in ten approved, so embedded),
// closes it and times a second run opened with those /run_new arguments,
// checked the same way against the messages no proposal cites that pass
// the prefilter. -stages times every repository, LLM, Telegram and
// pg_notify call of the executor (one goroutine) and prints where the
// run's time went; -llm-latency delays every LLM answer (the goal is for
// none); -cpuprofile and -memprofile write CPU and allocation profiles.
// The JSON line is
//
//	{"scenario":"analysis","messages":…,"total_s":…,"messages_per_s":…,"batches":…,"proposals":…,"chats":…,"peak_rss_mb":…}
//
// with filtered_messages, filtered_batches and filtered_total_s before
// peak_rss_mb when -filters is given. Goal: total_s at most 10 for 10 000
// messages.
//
// outbox measures the delivery outbox (bot/delivery) against Telegram's
// flood limits. -n messages (default 3000) to -chats private chats
// (default 300, 10 each) are written at once with storage's
// Enqueue into a fresh database (created and dropped as for
// vacancies), each chat's one after another (-order round interleaves the
// chats instead), and ONE delivery.Sender as the application builds it
// (delivery.Config{}: 16 workers; NewMemoryLimiter(DefaultLimits()): 30
// msg/s burst 5, 1 per private chat burst 2) delivers them to the fake
// Telegram, which here enforces Telegram's limits: a token bucket of 30
// msg/s (burst 30) for the bot and one of 1 msg/s (burst 3) per private
// chat; a message over either is answered 429 "Too Many Requests: retry
// after N" with parameters.retry_after N (whole seconds until a token, at
// least 1) and takes no token. The fake records when it accepted each
// message: per_s = n / (last accepted − first accepted), efficiency =
// per_s / 30, rate_limited = 429 answers / sendMessage requests; the time
// from the sender's start to the last accepted message is printed too.
// Then the same messages on a fresh database with the fake's limits off,
// the sender's limiter lifted and -workers workers (default 64), which is
// the outbox's own ceiling: unlimited_per_s = n / (last − first
// accepted). Each run ends when no outbox row is pending (-timeout, by
// default 60 s + 3 × n/30 s); it then fails unless every message arrived
// exactly once, each chat's in the order written, Telegram refused
// nothing but for its limits and every row is sent. It also prints the
// 429s by bucket, the rows the sender put back (by reason, from its
// metrics), the claims per row, TCP connections and the messages accepted
// per second. Goal: per_s at least 29.4 (98 % of 30) with rate_limited at
// most 0.002. The JSON line is
//
//	{"scenario":"outbox","messages":…,"per_s":…,"efficiency":…,"rate_limited":…,"unlimited_per_s":…}
//
// intake measures Telegram intake through the inbox. The
// database is created and dropped as for vacancies. -rate updates/s
// (default 300) are offered for -d (default 20 s), each a "/bench <seq>"
// command from one of -users private chats (default 100, round robin),
// which a command the bench registers on the real *bot.Bot answers at once
// ("ok <seq>" through the bot's direct send, limits lifted: see
// benchLimits); the bots' per-user flood limit is raised out of the way.
// Two runs, the inbox emptied in between:
//
//   - polling: one bot (Deps.Inbox, no lease) reads the fake Telegram's
//     getUpdates (long poll, up to 100 at a time) into the inbox;
//   - webhook: -replicas bots (default 3), each with its own pool, LISTEN
//     and webhook listener, as replicas on one machine; the bench's pusher
//     posts each chat's updates one at a time (the next once the last was
//     answered 200, anything else sent again) to the replicas round robin,
//     at most -push-concurrency requests in flight (default 40).
//
// Every bot runs -workers inbox workers (default 16). An update is offered
// when getUpdates first returns it or its first push starts; the inbox
// overhead is offered → the /bench handler's start, split into offered →
// stored (the inbox row's received_at, the database's clock on this
// machine), stored → handler start, and offered → the start of the bot's
// user upsert (its identify middleware; the bench notes the call), the
// inbox's own part without the bot's middleware. The first -warmup
// (default 1 s) of updates are left out of the percentiles. stored/s is
// the updates over first → last received_at; handled/s over first
// received_at → last done_at. The run ends at the first poll (every 20 ms)
// that sees every row done; it then fails unless every row is done, every
// update was handled exactly once and each chat's in the order sent, and
// the fake got each reply exactly once, each chat's in order. The JSON
// line is
//
//	{"scenario":"intake","rate":…,"updates":…,"polling_stored_per_s":…,"polling_handled_per_s":…,"polling_overhead_p50_ms":…,"polling_overhead_p99_ms":…,"webhook_stored_per_s":…,"webhook_handled_per_s":…,"webhook_overhead_p50_ms":…,"webhook_overhead_p99_ms":…,"polling_inbox_p50_ms":…,"polling_inbox_p99_ms":…,"webhook_inbox_p50_ms":…,"webhook_inbox_p99_ms":…,"replicas":…,"peak_rss_mb":…}
//
// Goal: the inbox adds under 5 ms p99 per update at 300 updates/s, and the
// webhook replicas hold the rate with per-chat order and nothing lost.
//
// prune measures the retention job beside the memory
// chat. The database is created and dropped as for vacancies. It is seeded
// with COPY (not timed): -messages group messages (default 1 000 000) in
// 24 groups of 5–16 members, texts as the analysis scenario writes them,
// dated over the two months before RETAIN_GROUP_MESSAGES' horizon (720 h),
// and 1 % as many inside it; -runs closed (archived) pipeline runs
// (default 200 000) of 500 other users, closed over the two months before
// RETAIN_RUN_CONTEXT's horizon (72 h), and 2 % as many inside it, each
// with a draft (the mentor's role, the message, recent messages, summaries:
// 3–6 KB) and an assembled context (1–2 KB) in the assembler's shape, the
// insert trigger off. Then VACUUM ANALYZE, CHECKPOINT and the two tables'
// pg_total_relation_size. The memory chat (the memory scenario's
// orchestrators, fakes, sender and checks) then runs one stream of runs at
// a steady -rate (default 150 runs/s): one second's warm-up, -baseline
// (default 20 s) alone, then beside the prune; the stream ends when the
// prune does. The prune is the job's: Store.Prune with the default
// retentions, PRUNE_BATCH (-batch, 1000), PRUNE_STATEMENT_TIMEOUT
// (-statement-timeout, 2 s) and the job's 50 ms pause between batches
// (-pause), called again until a round finds nothing left;
// PruneOptions.OnBatch times every batch (BEGIN to COMMIT). A run belongs
// to the baseline or to the prune by its created_at; the overhead is the
// memory scenario's. The bench prints both passes, every kind's rows,
// batches and batch times, and the sizes after VACUUM (with pgstattuple's
// free space: VACUUM makes the space reusable but gives back only empty
// pages at a table's end) and after VACUUM FULL. It fails unless every
// seeded row past retention is gone (run contexts cleared, context_pruned_at
// set), every one inside it and every memory-chat run is whole, no batch
// hit or outlasted the statement timeout, both tables are smaller after
// VACUUM FULL and use less than before after VACUUM (size − free space),
// and the memory chat's checks pass. Goal: overhead p99 at most 50 ms
// during the prune. The JSON line is
//
//	{"scenario":"prune","overhead_p50_ms":…,"overhead_p99_ms":…,"overhead_runs":…,"baseline_p50_ms":…,"baseline_p99_ms":…,"rate":…,"prune_s":…,"prune_batches":…,"prune_max_batch_ms":…,"prune_timeout_ms":…,"prune_timeouts":…,"messages_pruned":…,"runs_cleared":…,"group_messages_mb_before":…,"group_messages_mb_after":…,"group_messages_mb_after_full":…,"pipeline_runs_mb_before":…,"pipeline_runs_mb_after":…,"pipeline_runs_mb_after_full":…,"peak_rss_mb":…}
//
// tasks measures the approved tasks' push to GitHub against GitHub's
// content limits (80 new issues and labels a minute, 500 an hour). The
// database is created and dropped as for vacancies. A team whose
// destination is a repository of the fake GitHub (e2e/ghfake, started
// with ghfake.Start and its documented limits) gets -n proposals (default
// 1000; priorities high, medium, low round robin, so the first three
// pushes each make a label too) saved in a completed analysis run and
// approved all at once through storage, as the admin's approve-all does:
// the pushes are queued in the approval's transaction and each approval's
// time is its decided_at. Those limits would hold 1000 pushes for two
// hours, so the fake runs WithTimeScale(-scale) (default 60: the minute
// lasts a second, the hour a minute, the counts unchanged) and the
// pusher's Config.Content is GitHub's windows shortened the same. One
// tasks.Service (the real tracker/github client, storage.Tasks, the bot's
// renderer) runs its Push job as the scheduler runs it on one replica: at
// once, then at each -interval (default 2 s, TASKS_PUSH_INTERVAL) on the
// interval's multiples, until every push is recorded. The bench reads the
// fake's request log: each 201 to a POST of an issue or a label is a
// creation at its arrival; the time is the job's start to the last one.
// The ideal is the fastest schedule the fake's sliding windows allow for
// that many creations when a request takes no time (creation j no earlier
// than creation j−Limit plus Per, for each window): for 1000 issues and 3
// labels at -scale 60, 120 s, or the hour's 500 per minute.
// Efficiency = ideal time / measured time; pushes/s is n / the measured
// time, printed beside the hour's limit in the run's time. Approval →
// issue created (the POST's arrival) gives p50, p90, p99 and max, beside
// the same under the ideal schedule. It also prints the most creations
// within any of each window, the requests by route, the refusals (403 or
// 429), the requests the fake saw before a Retry-After or reset it gave
// (early) and the claims per push. It fails unless every approved
// proposal's issue is on the fake exactly once (by the marker in its
// body), nothing else was filed and every push is recorded with a
// distinct issue number. Goals: efficiency at least 0.98, no refusal, no
// early request. The JSON line is
//
//	{"scenario":"tasks","pushes":…,"per_s":…,"limit_per_s":…,"ideal_per_s":…,"efficiency":…,"total_s":…,"ideal_s":…,"latency_p50_s":…,"latency_p99_s":…,"ideal_latency_p99_s":…,"refused":…,"early":…,"labels":…,"scale":…,"peak_rss_mb":…}
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
)

// scenario is one benchmark: go run ./bench <name> [flags].
type scenario struct {
	name    string
	summary string
	// run parses its own flags from args, prints human-readable lines and
	// then the JSON summary as the last line of stdout. Flag errors are
	// returned as usageError.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var scenarios = []scenario{
	newScenario("vacancies", "vacancy queue throughput: zero-latency fakes, then a 200 ms LLM at concurrency 4", benchVacancies),
	newScenario("memory", "memory chat: pipeline runs through the LISTEN/NOTIFY orchestrator with a zero-latency LLM", benchMemoryPasses),
	newScenario("memory-quality", "memory chat: accuracy per question kind and answer latency on the evaluation set, scripted or a real model", benchMemoryQuality),
	newScenario("dispatch", "expired offers: expiry lag of the per-replica timers, and one watchdog sweep of 100 000 due offers", benchDispatch),
	newScenario("analysis", "analysis runs: 10 000 group messages through prefilter, batching and proposals with a zero-latency LLM", benchAnalysis),
	newScenario("outbox", "delivery outbox: 3000 messages to 300 chats through one sender under Telegram's 30 msg/s, then unlimited", benchOutbox),
	newScenario("intake", "Telegram intake through the inbox: one bot polling, then three on webhooks, at 300 updates/s", benchIntake),
	newScenario("prune", "retention: 1 000 000 group messages and 200 000 runs' contexts pruned beside the memory chat at 150 runs/s", benchPrune),
	newScenario("tasks", "approved tasks: 1000 pushed to a fake GitHub at its content limits (80/min, 500/h), time-scaled 60×", benchTasks),
}

// usageError is a command-line mistake: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	// SIGPIPE too: with the output piped into head, a write would otherwise
	// kill the process before it drops its database.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sc, ok := lookup(args[0])
	if !ok {
		fmt.Fprintf(stderr, "bench: unknown scenario %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := sc.run(ctx, args[1:], stdout, stderr)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		// The flag package has already printed the problem and the flags.
		return 2
	default:
		fmt.Fprintf(stderr, "bench %s: %v\n", sc.name, err)
		return 1
	}
}

func lookup(name string) (scenario, bool) {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc, true
		}
	}
	return scenario{}, false
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: go run ./bench <scenario> [flags]")
	fmt.Fprintln(w, "\nscenarios:")
	for _, sc := range scenarios {
		fmt.Fprintf(w, "  %-12s %s\n", sc.name, sc.summary)
	}
	fmt.Fprintln(w, "\nRun a scenario with -h for its flags. LOG_LEVEL=debug|info|warn|error sends service logs to stderr.")
}

// newLogger discards service logs unless LOG_LEVEL asks for them; they then
// go to stderr so that stdout stays the report.
func newLogger(stderr io.Writer) *slog.Logger {
	lvl := strings.TrimSpace(os.Getenv("LOG_LEVEL"))
	if lvl == "" {
		return slog.New(slog.DiscardHandler)
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(lvl)); err != nil {
		fmt.Fprintf(stderr, "bench: LOG_LEVEL %q not understood, using warn\n", lvl)
		l = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l}))
}

// parseFlags parses a scenario's flags: -h is returned as flag.ErrHelp,
// anything else wrong (including stray arguments) as a usageError. It then
// resolves -db (db) to the server URL, after parsing so that -h never
// prints a password from the environment.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, db *string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return refuse(fs, stderr, fmt.Sprintf("unexpected arguments: %q", fs.Args()))
	}
	*db = serverURL(*db)
	return nil
}

// serverURL resolves -db: the flag, else $DATABASE_URL, else defaultDB.
func serverURL(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := os.Getenv("DATABASE_URL"); v != "" {
		return v
	}
	return defaultDB
}

// startCPUProfile profiles the whole process into path ("" profiles nothing).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeAllocProfile writes the allocations so far to path ("": nothing);
// go tool pprof -sample_index=alloc_space reads where the garbage comes from.
func writeAllocProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("allocation profile: %w", err)
	}
	return f.Close()
}
