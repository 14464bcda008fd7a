package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/jonboulle/clockwork"
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
	"switchboard/domain/resume"
	"switchboard/domain/tasks"
	"switchboard/domain/vacancy"
	"switchboard/health"
	"switchboard/hh"
	"switchboard/internal/isolate"
	"switchboard/jobs"
	"switchboard/jobs/prune"
	"switchboard/llm"
	"switchboard/locales"
	"switchboard/outage"
	"switchboard/redisgate"
	"switchboard/service"
	"switchboard/storage"
	"switchboard/tracker/github"
	"switchboard/tracker/webhook"
)

// app is every long-lived piece of one replica, in start order.
type app struct {
	cfg    config.Config
	log    *slog.Logger
	store  *storage.Store
	beats  *storage.Heartbeats
	redis  *redis.Client // nil without REDIS_URL
	locker jobs.Locker   // nil without REDIS_URL: the scheduler's own
	lease  *storage.SessionLock
	reg    *prometheus.Registry
	llm    *llm.Client
	sched  *jobs.Scheduler
	bot    *bot.Bot
	out    *delivery.Sender
	// render is the admin chat's settings the renderers are built from,
	// before the services; tg is the Bot API client, before the sender.
	render  bot.RenderConfig
	catalog *locales.Catalog
	tg      *delivery.Client
	hh      *hh.Client
	vac     *vacancy.Service
	letters *vacancy.Letters
	mem     *memory.Service
	disp    *dispatch.Service
	anl     *analysis.Service
	res     *resume.Service
	tasks   *tasks.Service
	prune   *prune.Job
}

func migrateOnly(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	st, err := openStore(ctx, cfg.DatabaseURL, log, migrateWaitLimit)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Migrate(ctx)
}

// newApp builds the replica step by step, each step on what the steps
// before it built.
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
	a.beats = a.store.Heartbeats(cfg.Replica, version, cfg.HeartbeatInterval, log)
	for _, step := range []func(context.Context) error{a.connectRedis, a.connectOutside, a.buildDelivery, a.buildWorkflows, a.buildJobs, a.buildBot} {
		if err = step(ctx); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// connectRedis connects REDIS_URL, if set, and builds the job locker on it.
func (a *app) connectRedis(ctx context.Context) error {
	cfg, log := a.cfg, a.log
	if cfg.RedisURL == "" {
		return nil
	}
	opts, perr := redis.ParseURL(cfg.RedisURL)
	if perr != nil {
		return fmt.Errorf("REDIS_URL: %w", perr)
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
	a.locker = jobs.NewFallbackLocker(jobs.NewRedisLocker(a.redis, jobs.RedisLockerOptions{Prefix: cfg.RedisPrefix, Log: log}),
		jobs.NewMemoryLocker(jobs.MemoryLockerOptions{Log: log}), a.redisGate("job locker"))
	return nil
}

// connectOutside builds the LLM and HH clients.
func (a *app) connectOutside(context.Context) error {
	cfg, log := a.cfg, a.log
	var err error
	a.llm, err = llm.New(llm.Config{
		Provider: cfg.LLMProvider, URL: cfg.LLMURL, APIKey: cfg.LLMAPIKey,
		Model: cfg.LLMModel, StrongModel: cfg.LLMStrongModel, EmbedModel: cfg.LLMEmbedModel,
		Timeout: cfg.LLMTimeout, MaxConcurrency: cfg.LLMMaxConcurrency,
		NumCtx: cfg.LLMNumCtx, Think: cfg.LLMThink, KeepAlive: cfg.LLMKeepAlive,
		MaxTokensJSON: cfg.LLMMaxTokensJSON, MaxTokensText: cfg.LLMMaxTokensText,
	}, llm.WithRegistry(a.reg), llm.WithLogger(log), llm.WithBreaker(cfg.LLMBreakerFailures, cfg.LLMBreakerOpenFor))
	if err != nil {
		return fmt.Errorf("llm: %w", err)
	}

	// HH's pace is the deployment's: shared through Redis when replicas
	// share one, else this process's own.
	pacer := hh.NewMemoryPacer(cfg.HHRate, max(1, int(cfg.HHRate)))
	if a.redis != nil {
		pacer = hh.NewFallbackPacer(hh.NewRedisPacer(a.redis, cfg.RedisPrefix+"hh:pace", cfg.HHRate, max(1, int(cfg.HHRate))),
			a.redisGate("hh pacer"), cfg.HHRate, a.beats.LiveCount)
	}
	// The application token, if configured, is one for every replica
	// (config.HHToken); its host is HH_OAUTH_URL, not the API's.
	hhToken, err := cfg.HHToken(a.store.HHTokens(), log)
	if err != nil {
		return fmt.Errorf("hh: %w", err)
	}
	a.hh, err = hh.New(hh.Config{URL: cfg.HHAPIURL, UserAgent: cfg.HHUserAgent, Registerer: a.reg, Log: log, Pacer: pacer,
		BreakerOpenFor: cfg.HHBreakerOpenFor, BreakerMaxOpen: cfg.HHBreakerMaxOpen, Token: hhToken})
	if err != nil {
		return fmt.Errorf("hh: %w", err)
	}
	return nil
}

// buildWorkflows builds the four workflow services.
func (a *app) buildWorkflows(context.Context) error {
	cfg, log := a.cfg, a.log
	var err error
	if lease := cfg.VacancyClaimLease; lease < 2*cfg.LLMTimeout {
		// Two relevance attempts may outlast the claim; another replica
		// could then take the vacancy over while this one still works on it.
		log.Warn("VACANCY_CLAIM_LEASE is shorter than two LLM_TIMEOUTs", "lease", lease, "llm_timeout", cfg.LLMTimeout)
	}
	// The renderers need only the catalog and the admin chat's settings:
	// built first, they go to the services, and the services to the bot.
	adminZone, err := cfg.AdminLocation()
	if err != nil {
		return fmt.Errorf("admin chat time zone: %w", err)
	}
	calendar, err := cfg.Calendar()
	if err != nil {
		return fmt.Errorf("dispatch calendar: %w", err)
	}
	clock := cfg.Clock()
	a.render = bot.RenderConfig{
		AdminChatID: cfg.AdminChatID, AdminLang: cfg.AdminLang, AdminZone: adminZone, Currency: cfg.DispatchCurrency,
		BoardEvery: cfg.BoardInterval, LiveLogEvery: cfg.LiveLogInterval, Calendar: calendar, CalendarClock: clock,
	}
	a.catalog = locales.MustLoad()
	notes := bot.NewRenderer(a.render, a.catalog, log)

	if err := a.buildVacancies(notes, clock); err != nil {
		return err
	}
	if a.mem, err = a.buildMemory(notes); err != nil {
		return fmt.Errorf("memory chat: %w", err)
	}

	a.disp, err = dispatch.NewService(dispatch.Config{
		OfferSLA: cfg.OfferSLA, CommissionRate: cfg.CommissionRate,
		CommissionDeadline: cfg.CommissionDeadline, AutocloseAfter: cfg.AutocloseAfter,
		Calendar: calendar, Claimer: a.beats.Claimer(),
	}, dispatch.Deps{Orders: a.store.Orders(), Masters: a.store.Masters(), Notifier: notes.DispatchNotes(), Log: log, Registerer: a.reg, CalendarClock: clock})
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}

	a.anl, err = analysis.NewService(analysis.Config{BatchGap: cfg.AnalysisBatchGap, RunLease: cfg.AnalysisLease}, analysis.Deps{
		Runs: a.store.Runs(), Chats: a.store.GroupChats(), Publisher: a.store.Runs(), Notifier: notes, Log: log, Registerer: a.reg,
		LLM: llm.AnalysisPort{Client: a.llm},
	})
	if err != nil {
		return fmt.Errorf("analysis runs: %w", err)
	}

	if a.tasks, err = a.buildTasks(notes); err != nil {
		return fmt.Errorf("tasks: %w", err)
	}
	a.tasks.ShowOn(a.anl)

	if a.res, err = a.buildResume(notes); err != nil {
		return fmt.Errorf("résumé drafts: %w", err)
	}
	return nil
}

// buildVacancies builds the vacancy workflow and its cover letters.
func (a *app) buildVacancies(notes *bot.Renderer, clock clockwork.Clock) error {
	cfg, log := a.cfg, a.log
	var err error
	a.vac, err = vacancy.NewService(vacancy.Config{
		FetchLimit:     cfg.VacancyFetchLimit,
		RecoveryWindow: cfg.VacancyRecoveryWindow,
		ClaimLease:     cfg.VacancyClaimLease,
		Claimer:        a.beats.Claimer(),
		Workers:        vacancy.WorkersFor(cfg.LLMMaxConcurrency),
		SweepInterval:  cfg.QueueInterval,
		FollowUp:       cfg.ApplicationFollowUp,
	}, vacancy.Deps{
		Matches: a.store.Matches(), Profiles: a.store.Users(), Searches: a.store.Searches(), Applications: a.store.Applications(),
		Source: a.hh, Notifier: notes, Log: log, Registerer: a.reg, CalendarClock: clock, AboutData: storage.AboutData,
		LLM: llm.Port{Client: a.llm, Label: "vacancy_relevance"},
	})
	if err != nil {
		return fmt.Errorf("vacancies: %w", err)
	}
	a.letters, err = vacancy.NewLetters(vacancy.LetterConfig{
		PerDay: cfg.CoverLettersPerDay, Lease: cfg.VacancyClaimLease, Workers: cfg.LLMMaxConcurrency,
		SweepInterval: cfg.QueueInterval, Claimer: a.beats.Claimer(),
	}, vacancy.LetterDeps{
		Applications: a.store.Applications(), Matches: a.store.Matches(), Profiles: a.store.Users(),
		LLM: llm.LetterPort{Client: a.llm}, Notifier: notes, Log: log, Registerer: a.reg,
	})
	if err != nil {
		return fmt.Errorf("cover letters: %w", err)
	}
	return nil
}

// buildMemory builds the memory chat.
func (a *app) buildMemory(notes *bot.Renderer) (*memory.Service, error) {
	cfg := a.cfg
	// Ollama's window is LLM_NUM_CTX, which every request carries; an
	// OpenAI-compatible server's is its model's own, which we do not know.
	window := 0
	if cfg.LLMProvider == "ollama" {
		window = cfg.LLMNumCtx
	}
	return memory.NewService(memory.Config{
		Workers: cfg.MemoryWorkers, StageLease: cfg.MemoryLease, SweepInterval: cfg.MemoryReaperInterval,
		Window: window, StreamEvery: cfg.MemoryStreamEvery, Claimer: a.beats.Claimer(),
	}, memory.Deps{
		Runs: a.store.PipelineRuns(), Memories: a.store.Memories(), Prompts: a.store.Prompts(), Outbox: a.store.Outbox(), Users: a.store.Users(), LLM: a.llm, Notifier: notes, Typist: bot.Typist{Sender: a.out},
		Drafts: bot.Drafts{Sender: a.out}, Log: a.log, Registerer: a.reg,
	})
}

// buildResume builds the résumé drafts a profile can start from.
func (a *app) buildResume(notes *bot.Renderer) (*resume.Service, error) {
	cfg := a.cfg
	return resume.NewService(resume.Config{
		MaxBytes: int64(cfg.ResumeMaxFileMB) << 20, MaxPages: cfg.ResumeMaxPages, MaxProfile: vacancy.MaxProfile, Claimer: a.beats.Claimer(),
		ModelWait: cfg.ResumeModelWait, ModelRetry: cfg.ResumeModelRetry,
	}, resume.Deps{
		Drafts: a.store.ProfileDrafts(), Notifier: notes, Log: a.log, Registerer: a.reg,
		Files:     bot.TelegramFiles{Client: a.tg},
		Extractor: resume.Isolated{Run: extractRun(cfg.ResumeReadTimeout)},
		LLM:       llm.Port{Client: a.llm, Label: "resume_profile"},
	})
}

// extractRun runs this binary as the child that reads one résumé file,
// with the child's faults named as the résumé workflow knows them.
func extractRun(timeout time.Duration) resume.Run {
	return func(ctx context.Context, stdin []byte) ([]byte, error) {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("own binary: %w", err)
		}
		out, err := isolate.Child{Path: exe, Args: []string{extractCommand}, Timeout: timeout}.Run(ctx, stdin)
		var crash *isolate.CrashError
		switch {
		case errors.Is(err, isolate.ErrTimeout):
			return nil, fmt.Errorf("%w: %w", resume.ErrChildTimeout, err)
		case errors.As(err, &crash):
			return nil, fmt.Errorf("%w: %w", resume.ErrChildCrashed, err)
		}
		return out, err
	}
}

// buildTasks builds the pusher of approved tasks over the trackers the
// configuration enables: GitHub with GITHUB_TOKEN, webhooks with
// TASKS_WEBHOOK_SECRET (a destination of a kind not enabled waits, named
// in the log).
func (a *app) buildTasks(notes *bot.Renderer) (*tasks.Service, error) {
	cfg := a.cfg
	trackers := map[string]tasks.Tracker{}
	if cfg.GitHubToken != "" {
		gh, err := github.New(github.Config{URL: cfg.GitHubURL, Token: cfg.GitHubToken, UserAgent: "switchboard/" + version})
		if err != nil {
			return nil, fmt.Errorf("github: %w", err)
		}
		trackers[tasks.KindGitHub] = gh
	}
	if cfg.TasksWebhookSecret != "" {
		wh, err := webhook.New(webhook.Config{Secret: []byte(cfg.TasksWebhookSecret), UserAgent: "switchboard/" + version})
		if err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		trackers[tasks.KindWebhook] = wh
	}
	return tasks.NewService(tasks.Config{Claimer: a.beats.Claimer(), Registerer: a.reg}, a.store.Tasks(), trackers,
		storage.TaskNotices{Notices: a.store.Notices()}, notes, a.log.With("component", "tasks")), nil
}

// buildJobs builds the scheduler and registers every periodic job.
func (a *app) buildJobs(context.Context) error {
	var err error
	if a.prune, err = prune.New(a.cfg, a.store.Jobs(), a.log, a.reg); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	a.sched, err = jobs.New(jobs.Config{Replica: a.cfg.Replica, StopTimeout: a.cfg.ShutdownTimeout / 2, Locker: a.locker},
		jobs.Deps{Log: a.log, Registerer: a.reg, Recorder: a.store.Jobs()})
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	return a.scheduleJobs()
}

// buildDelivery builds the outbox sender, paced at Telegram's limits,
// before the workflows: the memory chat shows its drafts through it.
func (a *app) buildDelivery(context.Context) error {
	cfg, log := a.cfg, a.log
	a.tg = delivery.NewClient(cfg.TelegramAPIURL, cfg.TelegramToken, nil)
	limits := delivery.DefaultLimits()
	limits.Global, limits.Private, limits.Group = cfg.TelegramRate, cfg.TelegramChatRate, cfg.TelegramGroupRate/60
	var limiter delivery.Limiter = delivery.NewMemoryLimiter(limits)
	if a.redis != nil {
		// While Redis fails each replica paces alone at its share of the
		// limits (the live replicas by heartbeat), and goes back once it answers.
		limiter = delivery.NewFallbackLimiter(delivery.NewRedisLimiter(a.redis, cfg.RedisPrefix, limits),
			a.redisGate("telegram limiter"), limits, a.beats.LiveCount)
	}
	var err error
	a.out, err = delivery.NewSender(delivery.Config{Workers: cfg.OutboxWorkers, MaxBackoff: cfg.OutboxMaxBackoff, Claimer: a.beats.Claimer()}, a.store.Outbox(),
		a.tg, limiter, log, a.reg)
	return err
}

// buildBot builds the bot over the workflows, whose commands it serves.
func (a *app) buildBot(context.Context) error {
	cfg, log := a.cfg, a.log
	// Exactly one replica polls Telegram, with or without Redis: the holder
	// of a PostgreSQL session lock, which its death releases at once. In
	// webhook mode Telegram pushes to every replica and nobody polls.
	var webhook *bot.WebhookConfig
	if cfg.WebhookURL != "" {
		webhook = &bot.WebhookConfig{URL: cfg.WebhookURL, Secret: cfg.WebhookSecret, Listen: cfg.WebhookListen, MaxConnections: cfg.WebhookMaxConn}
	} else {
		a.lease = a.store.PollingLock()
	}
	// (A nil *storage.SessionLock in the interface would not be nil.)
	var lease bot.PollingLock
	if a.lease != nil {
		lease = a.lease
	}
	var err error
	a.bot, err = bot.New(bot.Config{
		URL: cfg.TelegramAPIURL, Token: cfg.TelegramToken, PollingLock: lease, Webhook: webhook,
		InboxWorkers: cfg.InboxWorkers, InboxLease: cfg.InboxLease,
		DrainTimeout: cfg.ShutdownTimeout / 2,
		RenderConfig: a.render,
	}, bot.Deps{
		Users: a.store.Users(), Status: outage.Status{Store: a.store, Beats: a.beats, LLM: a.llm, HH: a.hh, VacancyClaimLease: cfg.VacancyClaimLease, VacancyRecoveryWindow: cfg.VacancyRecoveryWindow}, Catalog: a.catalog, Log: log,
		Admins: cfg.AdminIDs, Replica: cfg.Replica, Claimer: a.beats.Claimer(), Direct: a.out, Queue: a.store.Outbox(),
		Inbox: a.store.Inbox(), Passing: storage.Passing, AboutData: storage.AboutData, Topics: a.store.ChatTopics(), Connected: a.topicModes,
		Vacancies: a.vac, Letters: a.letters, Rhythm: a.vac, Memory: a.mem, Dispatch: a.disp, Analysis: a.anl, Resume: a.res,
		Tasks: a.store.Tasks(), Panics: domain.NewPanics(domain.NewRegistrar(a.reg)),
	})
	if err != nil {
		return err
	}
	for _, m := range a.modules() {
		for kind, drop := range m.Drops {
			a.out.OnDrop(kind, drop)
		}
	}
	// An export's files are built from the tables as they are sent.
	a.out.OnDocument(domain.KindMemoryExport, a.bot.ExportDocuments(a.mem))
	a.out.UseTopics(a.store.ChatTopics(), a.bot.TopicName)
	return nil
}

// topicModes puts each workflow's messages into its own topic where the
// bot has topics: in private chats when its topic mode is on (@BotFather),
// in the admin chat when it is a forum. The bot calls it on connecting to
// Telegram; a failure leaves the chats without topics, as before.
func (a *app) topicModes(ctx context.Context, me delivery.Me) {
	var forums []int64
	if id := a.cfg.AdminChatID; id < 0 {
		switch forum, err := a.tg.IsForum(ctx, id); {
		case err != nil:
			a.log.Warn("topics: the admin chat not read; its messages go to it without topics", "chat", id, "err", err)
		case forum:
			forums = append(forums, id)
		}
	}
	a.out.TopicModes(me.HasTopicsEnabled, forums...)
	a.log.Info("topics", "private_chats", me.HasTopicsEnabled != nil && *me.HasTopicsEnabled,
		"server_knows", me.HasTopicsEnabled != nil, "admin_chat_forum", len(forums) > 0)
}

// modules are the workflows as the house runs them: each lists its jobs,
// loops and drop hooks (domain.Module); the bot registers their commands
// (bot/bot.go). A new workflow is one more entry here.
func (a *app) modules() []domain.Module {
	cfg := a.cfg
	return []domain.Module{
		a.vac.Module(vacancy.Schedule{
			Fetch: cfg.FetchInterval, Queue: cfg.QueueInterval, FirstNews: cfg.FirstNewsInterval,
			FollowUp: cfg.ApplicationFollowUpInterval, Digest: cfg.DigestInterval, Recovery: cfg.RecoveryInterval,
		}),
		a.letters.Module(),
		a.mem.Module(cfg.MemoryReaperInterval),
		a.disp.Module(dispatch.Schedule{
			Distribution: cfg.DistributionInterval, Watchdog: cfg.WatchdogInterval,
			Commission: cfg.CommissionInterval, Autoclose: cfg.AutocloseInterval,
		}),
		a.anl.Module(),
		a.res.Module(),
		a.tasks.Module(cfg.TasksPushInterval, cfg.TasksSyncInterval),
	}
}

// scheduleJobs registers every periodic job: the workflows' and the prune
// job. Each is locked per tick across replicas; correctness comes from the
// conditional SQL inside.
func (a *app) scheduleJobs() error {
	// Everything past its retention, the outbox's included (jobs/prune).
	jobs := []domain.Job{{Name: "prune", Every: a.cfg.PruneInterval, Run: a.prune.Run}}
	for _, m := range a.modules() {
		jobs = append(jobs, m.Jobs...)
	}
	for _, j := range jobs {
		if err := a.sched.Every(j.Name, j.Every, j.Run); err != nil {
			return fmt.Errorf("schedule %s: %w", j.Name, err)
		}
	}
	return nil
}

// run serves until ctx ends, then stops everything in reverse order within
// SHUTDOWN_TIMEOUT: polling and handlers, jobs, the services, HTTP, Redis,
// the pool.
func (a *app) run(ctx context.Context) error {
	stopHTTP, err := health.Serve(ctx, a.cfg.HTTPAddr, a.httpHandler(), a.log)
	if err != nil {
		a.close()
		return err
	}
	a.sched.Start()
	services := service.Start(ctx, a.services()...)
	defer services.Cancel()
	botDone := make(chan error, 1)
	go func() { botDone <- a.bot.Run(ctx) }()

	var botErr error
	select {
	case <-ctx.Done():
	case botErr = <-botDone: // Telegram refused the token, say
		botDone = nil
	}
	a.log.Info("shutting down", "budget", a.cfg.ShutdownTimeout)
	// The services stop alongside the bot's drain: what they have in
	// flight becomes SKIPPED at once rather than after the handlers finish.
	services.Cancel()
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
	if !services.Wait(sctx) {
		a.log.Error("services did not stop in time")
	}
	if err := stopHTTP(sctx); err != nil {
		a.log.Error("stop http", "err", err)
	}
	a.close()
	a.log.Info("stopped")
	return botErr
}

// services are the replica's long-lived loops, started together after the
// jobs and stopped together after the bot.
func (a *app) services() []service.Service {
	notices := outage.Deps{Notices: a.store.Notices(), Wake: a.out.Wake, Log: a.log}
	r := domain.NewRegistrar(a.reg)
	panics := domain.NewPanics(r) // the workflows' counter, shared
	if err := r.Err(); err != nil {
		a.log.Error("listen: panics not counted", "err", err)
	}
	listen := listenContained(a.store, panics, a.log)
	loops := []service.Service{
		outage.LLM(notices, a.llm, a.bot.LLMNotice),
		outage.HH(notices, a.hh, a.bot.HHNotice, a.vac.Wake),
		// Delivery runs on every replica; rows of one chat still go out in order.
		a.out,
		a.beats,
		// Every replica handles updates from the inbox; the NOTIFY of updates
		// another replica stored wakes its workers (which also sweep every
		// second).
		service.Func(func(ctx context.Context) { listen(ctx, storage.InboxChannel, a.bot.WakeInbox, a.bot.InboxNotified) }),
	}
	for _, m := range a.modules() {
		for _, loop := range m.Loops {
			loops = append(loops, service.Func(func(ctx context.Context) { loop(ctx, listen) }))
		}
	}
	return loops
}

// listenContained is store's Listen on one channel, as the workflows take
// it. A callback that panics fails its one notification (a hint: the sweep
// behind every channel makes up for it), not the listener's loop, and with
// it the process.
func listenContained(store *storage.Store, panics domain.Panics, log *slog.Logger) domain.Listen {
	return func(ctx context.Context, ch string, onConnect func(), onNotify func(string)) {
		where := "listen_" + ch
		if onConnect != nil {
			connected := onConnect
			onConnect = func() { _ = panics.Contain(log, where, nil, connected) }
		}
		store.Listen(ctx, []string{ch}, onConnect, func(_, payload string) {
			_ = panics.Contain(log, where, payload, func() { onNotify(payload) })
		})
	}
}

// httpHandler is /healthz, /metrics and /readyz with its checks and reports.
func (a *app) httpHandler() http.Handler {
	checks := []health.Check{
		{Name: "postgres", Check: a.store.Ping},
		{Name: "migrations", Check: func(ctx context.Context) error {
			pending, err := a.store.MigrationsPending(ctx)
			if err == nil && pending {
				err = errors.New("pending migrations")
			}
			return err
		}},
	}
	reports := []health.Report{{Name: "held_past_lease", Read: func(ctx context.Context) (any, error) {
		return a.store.HeldPastLease(ctx, a.cfg.VacancyClaimLease)
	}}}
	if a.redis != nil {
		// Reported, not required: without Redis every replica still serves,
		// pacing and locking in process (ARCHITECTURE "Redis down"), and a
		// load balancer that dropped them all for it would stop the bot.
		reports = append(reports, health.Report{Name: "redis", Read: func(ctx context.Context) (any, error) {
			if err := a.redis.Ping(ctx).Err(); err != nil {
				return nil, err
			}
			return "ok", nil
		}})
	}
	return health.Handler(a.reg, checks, reports...)
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
	a.lease.Close() // both nil-safe: no lease in webhook mode, no beats before the store
	a.beats.Close()
	if a.store != nil {
		a.store.Close()
	}
}

// redisGate follows this replica's Redis for one of its users (see redisgate).
func (a *app) redisGate(name string) *redisgate.Gate {
	return redisgate.New(name, func(ctx context.Context) error { return a.redis.Ping(ctx).Err() }, a.log)
}

// redisLogger sends go-redis's own messages ("failed to dial …") to our JSON
// log instead of stderr; the failures that matter are logged by their callers.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
