package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/config"
	"switchboard/domain"
	"switchboard/domain/analysis"
	"switchboard/domain/dispatch"
	"switchboard/domain/memory"
	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/jobs"
	"switchboard/jobs/prune"
	"switchboard/llm"
	"switchboard/locales"
	"switchboard/redisgate"
	"switchboard/storage"
)

// app is every long-lived piece of one replica, in start order.
type app struct {
	cfg   config.Config
	log   *slog.Logger
	store *storage.Store
	redis *redis.Client // nil without REDIS_URL
	lease *storage.PollingLease
	reg   *prometheus.Registry
	llm   *llm.Client
	sched *jobs.Scheduler
	bot   *bot.Bot
	out   *delivery.Sender
	hh    *hh.Client
	vac   *vacancy.Service
	mem   *memory.Service
	disp  *dispatch.Service
	anl   *analysis.Service
	prune *prune.Job
}

func migrateOnly(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	st, err := openStore(ctx, cfg.DatabaseURL, log, migrateWaitLimit)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

func newApp(ctx context.Context, cfg config.Config, log *slog.Logger) (a *app, err error) {
	a = &app{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	// The error paths below return a nil *app; closing what was built goes
	// through built, or the deferred close would dereference that nil and
	// its panic would hide the start-up error.
	built := a
	defer func() {
		if err != nil {
			built.close()
		}
	}()
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if a.store, err = openStore(ctx, cfg.DatabaseURL, log, 0); err != nil {
		return nil, err
	}
	if err = a.store.Migrate(ctx); err != nil {
		return nil, err
	}

	// Exactly one replica polls Telegram, with or without Redis: the holder
	// of a PostgreSQL session lock, which its death releases at once. In
	// webhook mode Telegram pushes to every replica and nobody polls.
	var webhook *bot.WebhookConfig
	if cfg.WebhookURL != "" {
		webhook = &bot.WebhookConfig{URL: cfg.WebhookURL, Secret: cfg.WebhookSecret, Listen: cfg.WebhookListen, MaxConnections: cfg.WebhookMaxConn}
	} else {
		a.lease = a.store.PollingLease()
	}

	var locker jobs.Locker
	if cfg.RedisURL != "" {
		opts, perr := redis.ParseURL(cfg.RedisURL)
		if perr != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", perr)
		}
		opts.ContextTimeoutEnabled = true // lets per-call contexts bound socket reads
		// Fail fast when Redis is down: every user of it falls back in
		// process on an error, so retrying inside the client only delays
		// (the defaults, 3 retries of 5 dials, cost ~3 s a call).
		if opts.MaxRetries == 0 {
			opts.MaxRetries = 1
		}
		if opts.DialerRetries == 0 {
			opts.DialerRetries = 2
		}
		redis.SetLogger(redisLogger{log})
		a.redis = redis.NewClient(opts)
		// Redis down at start is survivable: jobs skip ticks until it is back,
		// so follow it in the log rather than refuse to start.
		if perr := a.redis.Ping(ctx).Err(); perr != nil {
			go followRedisAtStart(ctx, a.redis, log, perr)
		}
		// While Redis fails, ticks are locked in process: every job is safe
		// twice (ARCHITECTURE), so an outage costs repeated work, not jobs.
		locker = jobs.NewFallbackLocker(jobs.NewRedisLocker(a.redis, jobs.RedisLockerOptions{Prefix: cfg.RedisPrefix, Log: log}),
			jobs.NewMemoryLocker(jobs.MemoryLockerOptions{Log: log}), a.redisGate("job locker"))
	}

	a.llm, err = llm.New(llm.Config{
		Provider: cfg.LLMProvider, URL: cfg.LLMURL, APIKey: cfg.LLMAPIKey,
		Model: cfg.LLMModel, StrongModel: cfg.LLMStrongModel, EmbedModel: cfg.LLMEmbedModel,
		Timeout: cfg.LLMTimeout, MaxConcurrency: cfg.LLMMaxConcurrency,
		NumCtx: cfg.LLMNumCtx, Think: cfg.LLMThink, KeepAlive: cfg.LLMKeepAlive,
		MaxTokensJSON: cfg.LLMMaxTokensJSON, MaxTokensText: cfg.LLMMaxTokensText,
	}, llm.WithRegistry(a.reg), llm.WithLogger(log), llm.WithBreaker(cfg.LLMBreakerFailures, cfg.LLMBreakerOpenFor))
	if err != nil {
		return nil, fmt.Errorf("llm: %w", err)
	}

	// HH's pace is the deployment's: shared through Redis when replicas
	// share one, else this process's own.
	pacer := hh.NewMemoryPacer(cfg.HHRate, max(1, int(cfg.HHRate)))
	if a.redis != nil {
		pacer = hh.NewFallbackPacer(hh.NewRedisPacer(a.redis, cfg.RedisPrefix+"hh:pace", cfg.HHRate, max(1, int(cfg.HHRate))),
			a.redisGate("hh pacer"), cfg.HHRate, a.liveReplicas)
	}
	// The application token, if configured, is one for every replica
	// (config.HHToken); its host is HH_OAUTH_URL, not the API's.
	hhToken, err := cfg.HHToken(a.store.HHTokens(), log)
	if err != nil {
		return nil, fmt.Errorf("hh: %w", err)
	}
	a.hh, err = hh.New(hh.Config{URL: cfg.HHAPIURL, UserAgent: cfg.HHUserAgent, Registerer: a.reg, Log: log, Pacer: pacer,
		BreakerOpenFor: cfg.HHBreakerOpenFor, BreakerMaxOpen: cfg.HHBreakerMaxOpen, Token: hhToken})
	if err != nil {
		return nil, fmt.Errorf("hh: %w", err)
	}
	if lease := cfg.VacancyClaimLease; lease < 2*cfg.LLMTimeout {
		// Two relevance attempts may outlast the claim; another replica
		// could then take the vacancy over while this one still works on it.
		log.Warn("VACANCY_CLAIM_LEASE is shorter than two LLM_TIMEOUTs", "lease", lease, "llm_timeout", cfg.LLMTimeout)
	}
	a.vac, err = vacancy.NewService(vacancy.Config{
		FetchLimit:     cfg.VacancyFetchLimit,
		RecoveryWindow: cfg.VacancyRecoveryWindow,
		ClaimLease:     cfg.VacancyClaimLease,
		Workers:        vacancy.WorkersFor(cfg.LLMMaxConcurrency),
		SweepInterval:  cfg.QueueInterval,
	}, vacancy.Deps{
		Repo: a.store, Source: a.hh, Log: log, Registerer: a.reg,
		LLM: llm.Port{Client: a.llm, Label: "vacancy_relevance", Invalid: vacancy.ErrInvalidAnswer, Refusal: vacancy.ErrRefused},
	})
	if err != nil {
		return nil, fmt.Errorf("vacancies: %w", err)
	}

	// Ollama's window is LLM_NUM_CTX, which every request carries; an
	// OpenAI-compatible server's is its model's own, which we do not know.
	window := 0
	if cfg.LLMProvider == "ollama" {
		window = cfg.LLMNumCtx
	}
	a.mem, err = memory.NewService(memory.Config{
		Workers: cfg.MemoryWorkers, Lease: cfg.MemoryLease, SweepInterval: cfg.MemoryReaperInterval,
		Window: window,
	}, memory.Deps{Repo: a.store, LLM: llm.MemoryPort{Client: a.llm}, Log: log, Registerer: a.reg})
	if err != nil {
		return nil, fmt.Errorf("memory chat: %w", err)
	}

	calendar, err := cfg.Calendar()
	if err != nil {
		return nil, fmt.Errorf("dispatch calendar: %w", err)
	}
	clock := startedClock(cfg.ClockStart)
	a.disp, err = dispatch.NewService(dispatch.Config{
		OfferSLA: cfg.OfferSLA, CommissionRate: cfg.CommissionRate,
		CommissionDeadline: cfg.CommissionDeadline, AutocloseAfter: cfg.AutocloseAfter,
		Calendar: calendar,
	}, dispatch.Deps{Repo: a.store, Log: log, Registerer: a.reg, CalendarClock: clock})
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}

	a.anl, err = analysis.NewService(analysis.Config{BatchGap: cfg.AnalysisBatchGap, Lease: cfg.AnalysisLease}, analysis.Deps{
		Repo: a.store, Publisher: a.store, Log: log, Registerer: a.reg,
		LLM: llm.AnalysisPort{Client: a.llm, Invalid: analysis.ErrInvalidAnswer},
	})
	if err != nil {
		return nil, fmt.Errorf("analysis runs: %w", err)
	}

	if a.prune, err = prune.New(cfg, a.store, log, a.reg); err != nil {
		return nil, fmt.Errorf("prune: %w", err)
	}

	a.sched, err = jobs.New(jobs.Config{Replica: cfg.Replica, StopTimeout: cfg.ShutdownTimeout / 2, Locker: locker},
		jobs.Deps{Log: log, Registerer: a.reg, Recorder: jobs.RecorderFunc(func(ctx context.Context, r jobs.Run) error {
			return a.store.RecordJobRun(ctx, storage.JobRun(r))
		})})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}

	limits := delivery.DefaultLimits()
	limits.Global, limits.Private, limits.Group = cfg.TelegramRate, cfg.TelegramChatRate, cfg.TelegramGroupRate/60
	var limiter delivery.Limiter = delivery.NewMemoryLimiter(limits)
	if a.redis != nil {
		// While Redis fails each replica paces alone at its share of the
		// limits (the live replicas by heartbeat), and goes back once it answers.
		limiter = delivery.NewFallbackLimiter(delivery.NewRedisLimiter(a.redis, cfg.RedisPrefix, limits),
			a.redisGate("telegram limiter"), limits, a.liveReplicas)
	}
	a.out, err = delivery.NewSender(delivery.Config{Workers: cfg.OutboxWorkers, MaxBackoff: cfg.OutboxMaxBackoff}, a.store,
		delivery.NewClient(cfg.TelegramAPIURL, cfg.TelegramToken, nil), limiter, log, a.reg)
	if err != nil {
		return nil, err
	}

	adminZone, err := cfg.AdminLocation()
	if err != nil {
		return nil, fmt.Errorf("admin chat time zone: %w", err)
	}
	// (A nil *PollingLease in the interface would not be nil.)
	var lease bot.Lease
	if a.lease != nil {
		lease = a.lease
	}
	a.bot, err = bot.New(bot.Config{
		URL: cfg.TelegramAPIURL, Token: cfg.TelegramToken, Lease: lease, Webhook: webhook,
		InboxWorkers: cfg.InboxWorkers, InboxLease: cfg.InboxLease,
		DrainTimeout: cfg.ShutdownTimeout / 2,
		AdminChatID:  cfg.AdminChatID, AdminLang: cfg.AdminLang, AdminZone: adminZone, Currency: cfg.DispatchCurrency,
		BoardEvery: cfg.BoardInterval, LiveLogEvery: cfg.LiveLogInterval,
	}, bot.Deps{
		Users: a.store, Status: jobStatus{a.store, cfg.HeartbeatInterval, a.llm, a.hh, cfg.VacancyClaimLease}, Catalog: locales.MustLoad(), Log: log,
		Admins: cfg.AdminIDs, Replica: cfg.Replica, Direct: a.out, Queue: a.store,
		Inbox: a.store, Passing: storage.Passing,
	})
	if err != nil {
		return nil, err
	}
	a.bot.RegisterVacancies(a.vac)
	a.vac.SetNotifier(a.bot)
	a.bot.RegisterMemory(a.mem)
	a.mem.SetNotifier(a.bot)
	a.bot.RegisterDispatch(a.disp)
	a.disp.SetNotifier(a.bot.DispatchNotes())
	// An offer whose master Telegram refuses for good is declined at once
	// and the order moves on.
	a.out.OnDrop(domain.KindOffer, a.disp.Undeliverable)
	a.bot.RegisterAnalysis(a.anl)
	a.anl.SetNotifier(a.bot)
	if err := a.scheduleJobs(); err != nil {
		return nil, err
	}
	return a, nil
}

// scheduleJobs registers every periodic job. Each is locked per tick across
// replicas; correctness comes from the conditional SQL inside.
func (a *app) scheduleJobs() error {
	jobs := []struct {
		name  string
		every time.Duration
		fn    func(context.Context) error
	}{
		{"vacancy-fetch", a.cfg.FetchInterval, a.vac.Fetch},
		// Workers run on every replica and wake on NOTIFY; this tick is the
		// guarantee behind the notifications.
		{"vacancy-queue", a.cfg.QueueInterval, func(context.Context) error { a.vac.Wake(); return nil }},
		// A new search is discovered at once by the replica that saved
		// it; this tick tells its user the outcome if that replica died,
		// or once HH answers again after refusing us.
		{"vacancy-first-news", a.cfg.FirstNewsInterval, a.vac.FirstNews},
		{"vacancy-recovery", a.cfg.RecoveryInterval, func(ctx context.Context) error {
			_, err := a.vac.Recover(ctx)
			return err
		}},
		{"memory-reaper", a.cfg.MemoryReaperInterval, func(ctx context.Context) error {
			_, err := a.mem.Reap(ctx)
			return err
		}},
		{"dispatch-distribution", a.cfg.DistributionInterval, a.disp.Distribute},
		// Each replica's timer expires offers as they fall due; this tick
		// is the seed's watchdog, the guarantee behind the timers.
		{"dispatch-watchdog", a.cfg.WatchdogInterval, func(ctx context.Context) error {
			_, err := a.disp.Expire(ctx)
			return err
		}},
		{"dispatch-commission", a.cfg.CommissionInterval, func(ctx context.Context) error {
			_, err := a.disp.Commission(ctx)
			return err
		}},
		// Everything past its retention, the outbox's included (jobs/prune).
		{"prune", a.cfg.PruneInterval, a.prune.Run},
		{"dispatch-autoclose", a.cfg.AutocloseInterval, func(ctx context.Context) error {
			_, err := a.disp.Autoclose(ctx)
			return err
		}},
	}
	for _, j := range jobs {
		if err := a.sched.Every(j.name, j.every, j.fn); err != nil {
			return fmt.Errorf("schedule %s: %w", j.name, err)
		}
	}
	return nil
}

// run serves until ctx ends, then stops everything in reverse order within
// SHUTDOWN_TIMEOUT: polling and handlers, jobs, HTTP, Redis, the pool.
func (a *app) run(ctx context.Context) error {
	checks := []readiness{
		{"postgres", a.store.Ping},
		{"migrations", func(ctx context.Context) error {
			pending, err := a.store.MigrationsPending(ctx)
			if err == nil && pending {
				err = errors.New("pending migrations")
			}
			return err
		}},
	}
	reports := []report{{"held_past_lease", func(ctx context.Context) (any, error) {
		return a.store.HeldPastLease(ctx, a.cfg.VacancyClaimLease)
	}}}
	if a.redis != nil {
		// Reported, not required: without Redis every replica still serves,
		// pacing and locking in process (ARCHITECTURE "Redis down"), and a
		// load balancer that dropped them all for it would stop the bot.
		reports = append(reports, report{"redis", func(ctx context.Context) (any, error) {
			if err := a.redis.Ping(ctx).Err(); err != nil {
				return nil, err
			}
			return "ok", nil
		}})
	}
	stopHTTP, err := serveHTTP(ctx, a.cfg.HTTPAddr, newHTTPHandler(a.reg, checks, reports...), a.log)
	if err != nil {
		a.close()
		return err
	}
	a.sched.Start()
	// Workers get their own context so the shutdown decides when they
	// stop: after polling, and before the pool closes.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var workers sync.WaitGroup
	workers.Add(10)
	go func() { defer workers.Done(); a.watchLLM(workCtx) }()
	go func() { defer workers.Done(); a.watchHH(workCtx) }()
	go func() { defer workers.Done(); a.vac.Run(workCtx) }()
	// Delivery runs on every replica; rows of one chat still go out in order.
	go func() { defer workers.Done(); a.out.Run(workCtx) }()
	go func() {
		defer workers.Done()
		a.mem.Run(workCtx, func(ctx context.Context, ch string, onConnect func(), onNotify func(string)) {
			a.store.Listen(ctx, []string{ch}, onConnect, func(_, payload string) { onNotify(payload) })
		})
	}()
	go func() {
		defer workers.Done()
		a.store.Listen(workCtx, []string{storage.QueueChannel}, a.vac.Wake, func(string, string) { a.vac.Wake() })
	}()
	go func() {
		defer workers.Done()
		a.disp.Run(workCtx, func(ctx context.Context, ch string, onConnect func(), onNotify func(string)) {
			a.store.Listen(ctx, []string{ch}, onConnect, func(_, payload string) { onNotify(payload) })
		})
	}()
	go func() { defer workers.Done(); a.heartbeat(workCtx) }()
	// Every replica handles updates from the inbox; the NOTIFY of stored
	// updates wakes its workers (which also sweep every second).
	go func() {
		defer workers.Done()
		a.store.Listen(workCtx, []string{storage.InboxChannel}, a.bot.WakeInbox, func(string, string) { a.bot.WakeInbox() })
	}()
	// Fails runs whose executor died, and hosts the executors /run_start
	// launches; on stop they fail their runs as interrupted.
	go func() { defer workers.Done(); a.anl.Serve(workCtx) }()
	botDone := make(chan error, 1)
	go func() { botDone <- a.bot.Run(ctx) }()

	var botErr error
	select {
	case <-ctx.Done():
	case botErr = <-botDone: // Telegram refused the token, say
		botDone = nil
	}
	a.log.Info("shutting down", "budget", a.cfg.ShutdownTimeout)
	// Workers stop alongside the bot's drain: what they have in flight
	// becomes SKIPPED at once rather than after the handlers finish.
	stopWork()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.ShutdownTimeout)
	defer cancel()
	if botDone != nil {
		select {
		case botErr = <-botDone:
		case <-sctx.Done():
			a.log.Error("bot did not stop in time")
		}
	}
	if err := a.sched.Shutdown(sctx); err != nil {
		a.log.Error("stop jobs", "err", err)
	}
	stopped := make(chan struct{})
	go func() { workers.Wait(); close(stopped) }()
	select {
	case <-stopped:
	case <-sctx.Done():
		a.log.Error("vacancy workers did not stop in time")
	}
	if err := stopHTTP(sctx); err != nil {
		a.log.Error("stop http", "err", err)
	}
	a.close()
	a.log.Info("stopped")
	return botErr
}

// llmNoticeKey is the admin_notices key of "the LLM refuses the model or key".
const llmNoticeKey = "llm_refused"

// watchLLM asks the model server at start which configured models it
// lacks (logging the fix for each), then follows this replica's LLM
// client: when a refusal (model not found, 401/403) opens its breaker the
// admin chat is told, once across replicas (admin_notices), and when this
// replica's calls succeed again after a refusal it saw, the end is told.
func (a *app) watchLLM(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	missing, err := a.llm.CheckModels(cctx)
	cancel()
	switch {
	case err != nil:
		a.log.Warn("could not ask the LLM server which models it serves", "err", err)
	case len(missing) == 0:
		a.log.Info("the LLM server serves every configured model")
	}
	for _, m := range missing {
		a.log.Error("LLM model missing", "model", m.Model, "setting", m.Setting, "fix", m.Fix)
	}
	a.watchOutage(ctx, outage{
		key: llmNoticeKey, what: "the LLM refuses the model or key; work waits", back: "the LLM answers again",
		reason: func() (string, string) {
			if rf := a.llm.Refusal(); rf != nil {
				return rf.Reason, ""
			}
			return "", ""
		},
		over:   func() bool { return a.llm.BreakerState() == llm.BreakerClosed },
		notice: func(reason, _ string) []domain.Message { return a.bot.LLMNotice(reason) },
	})
}

// hhNoticeKey is the admin_notices key of "HH refuses our requests".
const hhNoticeKey = "hh_refused"

// watchHH follows this replica's HH breaker: when HH refuses us (captcha,
// forbidden, 429) the admin chat is told once across replicas, with the
// captcha's URL and how to be let in for good, and once when HH answers
// again; waiting vacancy work is woken then.
func (a *app) watchHH(ctx context.Context) {
	a.watchOutage(ctx, outage{
		key: hhNoticeKey, what: "HH refuses our requests; vacancy work waits", back: "HH answers again",
		reason: func() (string, string) {
			if r := a.hh.Refusal(); r != nil {
				return r.Short(), r.CaptchaURL
			}
			return "", ""
		},
		over:   func() bool { return true },
		notice: a.bot.HHNotice,
		// Matches that waited for HH go on now, not at the next sweep.
		ended: a.vac.Wake,
	})
}

// outage is a condition of an outside service the admin chat hears of
// once when it starts and once when it ends, across replicas.
type outage struct {
	key, what, back string
	// reason is why the service refuses us ("" while it does not) and an
	// extra the notice may show (a captcha's URL).
	reason func() (reason, extra string)
	// over says the end is certain (the LLM: its breaker closed, not
	// merely probing).
	over   func() bool
	notice func(reason, extra string) []domain.Message
	// ended, if set, runs once the end is told.
	ended func()
}

// watchOutage polls o every 5 s until ctx ends.
func (a *app) watchOutage(ctx context.Context, o outage) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	refused := false
	for {
		reason, extra := o.reason()
		switch {
		case reason != "":
			if !refused {
				a.log.Error(o.what, "reason", reason)
			}
			refused = true
			if _, err := a.store.NoticeOnce(ctx, o.key, reason, o.notice(reason, extra)); err != nil && ctx.Err() == nil {
				a.log.Warn("tell the admin chat", "notice", o.key, "err", err)
			} else {
				a.out.Wake()
			}
		case refused && o.over():
			if _, err := a.store.EndNotice(ctx, o.key, o.notice("", "")); err != nil {
				if ctx.Err() == nil {
					a.log.Warn("tell the admin chat it is over", "notice", o.key, "err", err)
				}
			} else {
				refused = false
				a.log.Info(o.back)
				a.out.Wake()
				if o.ended != nil {
					o.ended()
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeat records this replica in the replicas table at start and every
// HEARTBEAT_INTERVAL, on every replica (not a locked job: each must
// report itself), so /status can tell live replicas from gone ones.
func (a *app) heartbeat(ctx context.Context) {
	started := time.Now()
	t := time.NewTicker(a.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		if err := a.store.Heartbeat(ctx, a.cfg.Replica, version, started); err != nil && ctx.Err() == nil {
			a.log.Warn("heartbeat", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// close releases connections; safe on a partly built app.
func (a *app) close() {
	if a.llm != nil {
		a.llm.Close()
	}
	if a.hh != nil {
		a.hh.Close()
	}
	if a.redis != nil {
		_ = a.redis.Close()
	}
	if a.lease != nil {
		a.lease.Close()
	}
	if a.store != nil {
		a.store.Close()
	}
}

// jobStatus adapts storage's job_runs to what /status shows.
type jobStatus struct {
	store     *storage.Store
	heartbeat time.Duration
	llm       *llm.Client
	hh        *hh.Client
	// vacancyLease tells a lapsed match claim from a put-back one (Held).
	vacancyLease time.Duration
}

// Held feeds /status's line of work held past its lease.
func (j jobStatus) Held(ctx context.Context) (bot.HeldStatus, error) {
	h, err := j.store.HeldPastLease(ctx, j.vacancyLease)
	return bot.HeldStatus{Runs: h.PipelineRuns, Matches: h.VacancyMatches, Rows: h.OutboxRows, Updates: h.InboxUpdates}, err
}

// LLMReason feeds /status's LLM line: why this replica's client refuses
// or fails calls, or "" while it answers.
func (j jobStatus) LLMReason() string { return j.llm.Health().Reason }

// Storage feeds /status's data section: the six largest tables and the
// prune job's last run per kind.
func (j jobStatus) Storage(ctx context.Context) (bot.StorageStatus, error) {
	tables, err := j.store.TableSizes(ctx, 6)
	if err != nil {
		return bot.StorageStatus{}, err
	}
	runs, err := j.store.PruneRuns(ctx)
	if err != nil {
		return bot.StorageStatus{}, err
	}
	var st bot.StorageStatus
	for _, t := range tables {
		st.Tables = append(st.Tables, bot.TableSize(t))
	}
	for _, r := range runs {
		st.Prune = append(st.Prune, bot.PruneKind{Kind: r.Kind, At: r.At, Rows: r.Rows, Total: r.Total, Timeouts: r.Timeouts, Err: r.Err})
	}
	return st, nil
}

// HHReason feeds /status's HH line: how HH refuses this replica's
// requests, or "" while it answers.
func (j jobStatus) HHReason() string {
	if r := j.hh.Refusal(); r != nil {
		return r.Describe()
	}
	return ""
}

func (j jobStatus) JobRuns(ctx context.Context) ([]bot.JobRun, error) {
	runs, err := j.store.JobRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]bot.JobRun, 0, len(runs))
	for _, r := range runs {
		out = append(out, bot.JobRun{
			Name: r.Name, Replica: r.Replica, StartedAt: r.StartedAt, Duration: r.Duration,
			Err: r.Err, Runs: r.Runs, Failures: r.Failures,
		})
	}
	return out, nil
}

// Outbox feeds /status's delivery line.
func (j jobStatus) Outbox(ctx context.Context) (bot.OutboxStatus, error) {
	st, err := j.store.OutboxStats(ctx)
	if err != nil {
		return bot.OutboxStatus{}, err
	}
	return bot.OutboxStatus{Pending: st.Pending, OldestAge: st.OldestAge, Throttled: st.Throttled,
		Unreachable: st.Unreachable, Dropped: st.Dropped, Failed: st.Failed}, nil
}

// Replicas lists replicas seen within three heartbeats: one missed beat is
// a hiccup, three a replica gone.
func (j jobStatus) Replicas(ctx context.Context) ([]bot.Replica, error) {
	list, err := j.store.Replicas(ctx, 3*j.heartbeat)
	if err != nil {
		return nil, err
	}
	out := make([]bot.Replica, 0, len(list))
	for _, r := range list {
		out = append(out, bot.Replica{Instance: r.Instance, Version: r.Version, StartedAt: r.StartedAt, SeenAt: r.SeenAt})
	}
	return out, nil
}

// redisGate follows this replica's Redis for one of its users (see redisgate).
func (a *app) redisGate(name string) *redisgate.Gate {
	return redisgate.New(name, func(ctx context.Context) error { return a.redis.Ping(ctx).Err() }, a.log)
}

// liveReplicas counts the replicas seen within three heartbeats: the share
// of a budget each takes while Redis cannot share it.
func (a *app) liveReplicas(ctx context.Context) (int, error) {
	list, err := a.store.Replicas(ctx, 3*a.cfg.HeartbeatInterval)
	return len(list), err
}

// redisLogger sends go-redis's own messages ("failed to dial …") to our JSON
// log instead of stderr; the failures that matter are logged by their callers.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
