package main

// Each scenario's own flags and the check of their values; every
// scenario also has the common flags (commonFlags).

import (
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"switchboard/domain/analysis"
)

func (cfg *vacanciesConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", 3000, "matches in the zero-latency run")
	fs.IntVar(&cfg.llmConc, "llm-concurrency", 16, "LLM calls in flight in the zero-latency run (workers: vacancy.WorkersFor of it, as in the bot)")
	fs.IntVar(&cfg.latencyN, "latency-n", 200, "matches in the 200 ms LLM latency run (LLM concurrency 4)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "give up on a run that has not delivered everything after this long")
	fs.BoolVar(&cfg.stages, "stages", false, "also time each collaborator call (DB, HH, LLM, Telegram) and print where worker time goes")
}

func (cfg *vacanciesConfig) resolve() string {
	if cfg.n <= 0 || cfg.llmConc <= 0 || cfg.latencyN <= 0 || cfg.timeout <= 0 {
		return "-n, -llm-concurrency, -latency-n and -timeout must be positive"
	}
	return ""
}

func (cfg *memoryConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.runs, "runs", 2000, "pipeline runs (private messages) to submit")
	cfg.defineOrchestrators(fs)
	fs.IntVar(&cfg.submitters, "submitters", 0, "goroutines calling Submit (0: one per user, as the bot serves each chat on a goroutine of its own)")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "give up when the runs are not all archived after this long")
	fs.Float64Var(&cfg.rate, "rate", 0, "runs/s of the second pass, which measures the overhead at a steady load (0: -load of pass 1's runs/s)")
	fs.Float64Var(&cfg.load, "load", 0.6, "with -rate 0, the second pass's rate as a share of pass 1's runs/s, the same load on any host\n(0 with -rate 0: no second pass)")
}

// defineOrchestrators adds the flags that shape the orchestrators and
// their users, which the prune scenario's memory chat has too.
func (cfg *memoryConfig) defineOrchestrators(fs *flag.FlagSet) {
	fs.IntVar(&cfg.users, "users", 100, "users the runs are spread over, round robin (a user's runs go one after another)")
	fs.IntVar(&cfg.workers, "workers", 16, "memory.Config.Workers of each orchestrator (MEMORY_WORKERS; the application's default, 8,\nis sized for LLM_MAX_CONCURRENCY=2; an instant LLM keeps more workers busy)")
	fs.IntVar(&cfg.orchestrators, "orchestrators", 1, "orchestrators (replicas: a service, store, LLM client and bot each) on the database")
	fs.BoolVar(&cfg.stages, "stages", false, "also time each repository, LLM and Telegram call and print where worker time goes")
	fs.DurationVar(&cfg.streamEvery, "stream-every", time.Second, "MEMORY_STREAM_EVERY: the answer is streamed from the model and shown this often (0: asked whole)")
}

func (cfg *memoryConfig) resolve() string {
	if cfg.runs <= 0 || cfg.users <= 0 || cfg.workers <= 0 || cfg.orchestrators <= 0 || cfg.submitters < 0 || cfg.timeout <= 0 || cfg.rate < 0 || cfg.load < 0 || cfg.load >= 1 ||
		cfg.streamEvery < 0 {
		return "-runs, -users, -workers, -orchestrators and -timeout must be positive, -submitters, -rate and -stream-every not negative, -load in [0, 1)"
	}
	if cfg.submitters == 0 {
		cfg.submitters = cfg.users
	}
	return ""
}

func (cfg *dispatchConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", 10_000, "offers in the lag run, each with its own order and master")
	fs.IntVar(&cfg.replicas, "replicas", 2, "dispatch services (replicas: a service, store and listener each) running their expiry timers")
	fs.DurationVar(&cfg.spread, "spread", 10*time.Second, "the lag run's offers are created at a steady rate over this long")
	fs.DurationVar(&cfg.slaMin, "sla-min", time.Second, "shortest SLA (expires_at − sent_at) of a lag-run offer; SLAs are uniform in [-sla-min, -sla-max]")
	fs.DurationVar(&cfg.slaMax, "sla-max", 10*time.Second, "longest SLA of a lag-run offer")
	fs.IntVar(&cfg.batch, "batch", 10, "orders with their offers per statement in the lag run")
	fs.IntVar(&cfg.sweeps, "sweeps", 3, "sweep runs, each on fresh data; sweep_100k_ms is their median")
	fs.IntVar(&cfg.sweepN, "sweep-n", 100_000, "due offers expired by each sweep's one ExpireOffers call")
	fs.IntVar(&cfg.sweepMessages, "sweep-messages", 10_000, "due offers of one more sweep that also writes each expiry's closing edit and\n"+
		"live-log line to the outbox, as the watchdog does (0: none)")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "give up when, this long after the last offers are created, offers are still open or not closed")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the random SLAs")
	fs.BoolVar(&cfg.stages, "stages", false, "also time each repository call the replicas make in the lag run and print where their time goes")
}

func (cfg *dispatchConfig) resolve() string {
	if cfg.n <= 0 || cfg.replicas <= 0 || cfg.spread < 0 || cfg.slaMin <= 0 || cfg.batch <= 0 || cfg.sweeps <= 0 ||
		cfg.sweepN <= 0 || cfg.timeout <= 0 || cfg.sweepMessages < 0 {
		return "-n, -replicas, -sla-min, -batch, -sweeps, -sweep-n and -timeout must be positive, -spread and -sweep-messages not negative"
	}
	if cfg.slaMax < cfg.slaMin {
		return "-sla-max must not be less than -sla-min"
	}
	return ""
}

func (cfg *analysisConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", 10_000, "group messages in the last 24 hours, all analysed by the timed run")
	fs.IntVar(&cfg.chats, "chats", 20, "groups the messages are spread over")
	fs.StringVar(&cfg.filters, "filters", "", "also time a second run with these /run_new filters (e.g. \"keywords=deploy,bug min_len=20\"),\n"+
		"after the first run's proposals are decided and the run closed")
	fs.DurationVar(&cfg.latency, "llm-latency", 0, "delay every LLM answer by this long (the goal is for 0: the pipeline's own cost)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of the generated conversations")
	fs.DurationVar(&cfg.timeout, "timeout", 2*time.Minute, "give up when a run is not completed after this long")
	fs.BoolVar(&cfg.stages, "stages", false, "also time each repository, LLM, Telegram and pg_notify call and print where the executor's time goes")
}

func (cfg *analysisConfig) resolve() string {
	if cfg.n <= 0 || cfg.chats <= 0 || cfg.timeout <= 0 || cfg.latency < 0 {
		return "-n, -chats and -timeout must be positive, -llm-latency not negative"
	}
	if cfg.chats > 1000 {
		return "-chats must be at most 1000"
	}
	if strings.TrimSpace(cfg.filters) != "" {
		if _, err := analysis.ParseRunArgs(cfg.filters); err != nil {
			return fmt.Sprintf("-filters %q: not what /run_new takes (%v)", cfg.filters, err)
		}
	}
	return ""
}

func (cfg *outboxConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", 3000, "messages to enqueue")
	fs.IntVar(&cfg.chats, "chats", 300, "private chats the messages go to (as evenly as they divide)")
	fs.IntVar(&cfg.workers, "workers", 64, "delivery.Config.Workers of the unlimited run (the limited run uses the default, 16)")
	fs.StringVar(&cfg.order, "order", "chat", "the order the messages are enqueued in: chat (each chat's messages one after another)\nor round (the first message of every chat, then the second of every chat, …)")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "give up on a run whose outbox is not drained after this long (0: 60 s + 3 × n/30 s)")
}

func (cfg *outboxConfig) resolve() string {
	if cfg.n < 2 || cfg.chats <= 0 || cfg.workers <= 0 || cfg.timeout < 0 {
		return "-n must be at least 2, -chats and -workers must be positive, -timeout not negative"
	}
	if cfg.chats > cfg.n {
		return "-chats must not exceed -n: every chat gets a message"
	}
	if cfg.order != "chat" && cfg.order != "round" {
		return fmt.Sprintf("-order %q: want chat or round", cfg.order)
	}
	if cfg.timeout == 0 {
		cfg.timeout = time.Minute + time.Duration(3*float64(cfg.n)/outboxTelegramRate*float64(time.Second))
	}
	return ""
}

func (cfg *intakeConfig) define(fs *flag.FlagSet) {
	fs.Float64Var(&cfg.rate, "rate", 300, "updates offered per second")
	fs.DurationVar(&cfg.dur, "d", 20*time.Second, "how long each run offers updates")
	fs.IntVar(&cfg.users, "users", 100, "users (private chats) sending, round robin")
	fs.IntVar(&cfg.replicas, "replicas", 3, "bots in the webhook run")
	fs.IntVar(&cfg.workers, "workers", 16, "inbox workers per bot (INBOX_WORKERS)")
	fs.IntVar(&cfg.conc, "push-concurrency", 40, "webhook requests in flight at most (setWebhook's max_connections)")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "the first updates offered in this long are not in the overhead figures")
	fs.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "give up on a run not handled this long after the last update was offered")
}

func (cfg *intakeConfig) resolve() string {
	if cfg.rate <= 0 || cfg.dur <= 0 || cfg.users <= 0 || cfg.replicas <= 0 || cfg.workers <= 0 || cfg.conc <= 0 || cfg.warmup < 0 || cfg.timeout <= 0 {
		return "-rate, -d, -users, -replicas, -workers, -push-concurrency and -timeout must be positive"
	}
	if int(cfg.rate*cfg.dur.Seconds()) < 1 {
		return "-rate × -d offers no update"
	}
	return ""
}

func (cfg *pruneConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.messages, "messages", 1_000_000, "group messages past RETAIN_GROUP_MESSAGES to seed (and prune)")
	fs.IntVar(&cfg.runs, "runs", 200_000, "closed pipeline runs past RETAIN_RUN_CONTEXT to seed (and clear)")
	fs.Float64Var(&cfg.memory.rate, "rate", 150, "runs/s of the memory chat running beside the prune")
	fs.DurationVar(&cfg.baseline, "baseline", 20*time.Second, "how long the memory chat runs alone (after a second's warm-up) before the prune starts")
	cfg.memory.defineOrchestrators(fs)
	fs.IntVar(&cfg.opts.Batch, "batch", pruneDefaults.Batch, "PRUNE_BATCH: rows per prune batch")
	fs.DurationVar(&cfg.opts.StatementTimeout, "statement-timeout", pruneDefaults.StatementTimeout, "PRUNE_STATEMENT_TIMEOUT")
	fs.DurationVar(&cfg.opts.Pause, "pause", pruneDefaults.Pause, "pause between two prune batches (the job's)")
	fs.DurationVar(&cfg.maxPrune, "max-prune", 20*time.Minute, "give up when the prune takes longer")
	fs.DurationVar(&cfg.memory.timeout, "timeout", 5*time.Minute, "give up when the memory chat's runs are not all archived this long after the last submission")
}

func (cfg *pruneConfig) resolve() string {
	if cfg.messages <= 0 || cfg.runs <= 0 || cfg.memory.rate <= 0 || cfg.baseline <= 0 || cfg.memory.users <= 0 ||
		cfg.memory.workers <= 0 || cfg.memory.orchestrators <= 0 || cfg.opts.Batch <= 0 || cfg.opts.StatementTimeout <= 0 ||
		cfg.opts.Pause < 0 || cfg.maxPrune <= 0 || cfg.memory.timeout <= 0 {
		return "-messages, -runs, -rate, -baseline, -users, -workers, -orchestrators, -batch, -statement-timeout, " +
			"-max-prune and -timeout must be positive, -pause not negative"
	}
	cfg.keepMessages = max(1, cfg.messages/100)
	cfg.keepRuns = max(1, cfg.runs/50)
	cfg.memory.db = cfg.db
	cfg.memory.submitters = cfg.memory.users
	// Room for every run the stream may submit: the warm-up, the baseline
	// and the longest prune allowed.
	cfg.memory.runs = int(math.Ceil(cfg.memory.rate * (time.Second + cfg.baseline + cfg.maxPrune).Seconds()))
	return ""
}

func (cfg *tasksConfig) define(fs *flag.FlagSet) {
	fs.IntVar(&cfg.n, "n", 1000, "approved proposals to push")
	fs.Float64Var(&cfg.scale, "scale", 60, "time scale of the fake's limits and of the pusher's pace: the minute lasts 60s/scale, the hour 3600s/scale\n"+
		"(60: 80 creations a second and 500 a minute)")
	fs.DurationVar(&cfg.interval, "interval", 2*time.Second, "TASKS_PUSH_INTERVAL: the push job ticks on its multiples")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "give up when the pushes are not all filed after this long (0: 60 s + 3 × the ideal time)")
}

func (cfg *tasksConfig) resolve() string {
	if cfg.n <= 0 || !(cfg.scale > 0) || cfg.interval <= 0 || cfg.timeout < 0 {
		return "-n, -scale and -interval must be positive, -timeout not negative"
	}
	if cfg.timeout == 0 {
		sched := idealSchedule(cfg.n+tasksLabels(cfg.n), scaledContent(cfg.scale))
		cfg.timeout = time.Minute + 3*sched[len(sched)-1]
	}
	return ""
}
