// Package config is every setting Switchboard reads, from the environment
// only: the Config struct, _FILE secrets, validation that names each bad
// variable, the `switchboard -help` table, and the JSON logger that keeps
// the configured secrets out of every log line.
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caarlos0/env/v11"

	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// Config is every setting Switchboard reads. The environment is the only
// source; the variable names are a public contract (README.md "Configuration").
// The help tag feeds `switchboard -help`; secret marks values never logged.
type Config struct {
	TelegramToken  string `env:"TELEGRAM_TOKEN" secret:"true" help:"bot token from @BotFather (required; or TELEGRAM_TOKEN_FILE)"`
	WebhookURL     string `env:"TELEGRAM_WEBHOOK_URL" help:"webhook mode: the HTTPS URL Telegram pushes updates to (a TLS proxy or load balancer in front of every replica); empty: one replica polls"`
	WebhookSecret  string `env:"TELEGRAM_WEBHOOK_SECRET" secret:"true" help:"webhook mode: the secret token Telegram sends with each update, 1-256 of A-Z a-z 0-9 _ - (required with TELEGRAM_WEBHOOK_URL; or TELEGRAM_WEBHOOK_SECRET_FILE)"`
	WebhookListen  string `env:"TELEGRAM_WEBHOOK_LISTEN" envDefault:"127.0.0.1:8081" help:"webhook mode: where each replica listens for what the proxy forwards"`
	WebhookMaxConn int    `env:"TELEGRAM_WEBHOOK_MAX_CONNECTIONS" envDefault:"40" help:"webhook mode: requests Telegram sends at once (1-100)"`
	TelegramAPIURL string `env:"TELEGRAM_API_URL" envDefault:"https://api.telegram.org" help:"Bot API server (a local Bot API server or a test fake)"`

	DatabaseURL string `env:"DATABASE_URL" envDefault:"postgres://postgres@127.0.0.1:5432/switchboard?sslmode=disable" secret:"true" help:"PostgreSQL; the database is created on first start if missing"`
	RedisURL    string `env:"REDIS_URL" secret:"true" help:"empty: single replica with in-process locks; set: job locks shared by replicas (the polling lease is in PostgreSQL either way)"`
	RedisPrefix string `env:"REDIS_PREFIX" envDefault:"sb:" help:"prefix of every Redis key, so deployments can share one Redis"`

	LLMProvider        string        `env:"LLM_PROVIDER" envDefault:"ollama" help:"ollama or openai (any OpenAI-compatible API)"`
	LLMURL             string        `env:"LLM_URL" envDefault:"http://127.0.0.1:11434" help:"where the LLM is (for openai: the base URL, e.g. https://api.openai.com/v1)"`
	LLMAPIKey          string        `env:"LLM_API_KEY" secret:"true" help:"API key for the openai provider (or LLM_API_KEY_FILE)"`
	LLMModel           string        `env:"LLM_MODEL" envDefault:"qwen2.5:7b" help:"cheap model"`
	LLMStrongModel     string        `env:"LLM_STRONG_MODEL" help:"final-answer model (default: LLM_MODEL)"`
	LLMEmbedModel      string        `env:"LLM_EMBED_MODEL" envDefault:"nomic-embed-text" help:"embeddings model"`
	LLMTimeout         time.Duration `env:"LLM_TIMEOUT" envDefault:"30s" help:"per LLM call"`
	LLMMaxConcurrency  int           `env:"LLM_MAX_CONCURRENCY" envDefault:"2" help:"LLM calls in flight per replica"`
	LLMBreakerFailures int           `env:"LLM_BREAKER_FAILURES" envDefault:"5" help:"consecutive LLM failures that open the circuit breaker"`
	LLMBreakerOpenFor  time.Duration `env:"LLM_BREAKER_OPEN_FOR" envDefault:"30s" help:"how long the open breaker refuses calls before one probe"`
	LLMNumCtx          int           `env:"LLM_NUM_CTX" envDefault:"16384" help:"Ollama context window (num_ctx), the same on every request"`
	LLMThink           bool          `env:"LLM_THINK" envDefault:"false" help:"let reasoning models think (Ollama think:true); reasoning is never shown either way"`
	LLMKeepAlive       string        `env:"LLM_KEEP_ALIVE" help:"Ollama keep_alive: how long the model stays loaded, e.g. 30m, -1m (empty: server default)"`
	LLMMaxTokensJSON   int           `env:"LLM_MAX_TOKENS_JSON" envDefault:"2048" help:"answer budget of JSON calls (num_predict / max_tokens)"`
	LLMMaxTokensText   int           `env:"LLM_MAX_TOKENS_TEXT" envDefault:"2048" help:"answer budget of text calls that set none themselves"`

	HHAPIURL         string        `env:"HH_API_URL" envDefault:"https://api.hh.ru" help:"HH.ru API"`
	HHUserAgent      string        `env:"HH_USER_AGENT" help:"User-Agent sent to HH.ru (default: switchboard/<version>)"`
	HHRate           float64       `env:"HH_RATE" envDefault:"3" help:"requests per second to HH.ru for the whole deployment (shared through Redis when REDIS_URL is set); a 429's Retry-After pauses them"`
	HHBreakerOpenFor time.Duration `env:"HH_BREAKER_OPEN_FOR" envDefault:"1m" help:"after HH refuses us (captcha, forbidden, 429), how long no request goes to it before one probe; each failed probe doubles it"`
	HHBreakerMaxOpen time.Duration `env:"HH_BREAKER_MAX_OPEN" envDefault:"30m" help:"the longest HH_BREAKER_OPEN_FOR grows to"`

	HHOAuthURL     string `env:"HH_OAUTH_URL" envDefault:"https://hh.ru" help:"where HH.ru issues application tokens (POST /oauth/token)"`
	HHClientID     string `env:"HH_CLIENT_ID" secret:"true" help:"Client ID of the application registered at dev.hh.ru; with HH_CLIENT_SECRET, every request to HH.ru carries an application token (empty: anonymous)"`
	HHClientSecret string `env:"HH_CLIENT_SECRET" secret:"true" help:"Client Secret of that application"`
	HHAppToken     string `env:"HH_APP_TOKEN" secret:"true" help:"an application token to send as it is, instead of obtaining one with HH_CLIENT_ID and HH_CLIENT_SECRET"`

	GitHubURL          string        `env:"GITHUB_API_URL" envDefault:"https://api.github.com" help:"GitHub's REST API (GitHub Enterprise: https://HOST/api/v3)"`
	GitHubToken        string        `env:"GITHUB_TOKEN" secret:"true" help:"a fine-grained personal access token with Issues read and write on the repositories approved tasks go to (empty: no GitHub destination works; or GITHUB_TOKEN_FILE)"`
	TasksWebhookSecret string        `env:"TASKS_WEBHOOK_SECRET" secret:"true" help:"the key a webhook destination's JSON is signed with (HMAC-SHA256 in X-Switchboard-Signature-256; empty: no webhook destination works; or TASKS_WEBHOOK_SECRET_FILE)"`
	TasksPushInterval  time.Duration `env:"TASKS_PUSH_INTERVAL" envDefault:"2s" help:"how often approved tasks waiting for their tracker are pushed"`
	TasksSyncInterval  time.Duration `env:"TASKS_SYNC_INTERVAL" envDefault:"5m" help:"how often the filed tasks' states are read back from GitHub (conditional requests: an unchanged issue costs no rate limit)"`

	AdminIDs    []int64 `env:"ADMIN_IDS" envSeparator:"," help:"admins' Telegram user ids, comma-separated"`
	AdminChatID int64   `env:"ADMIN_CHAT_ID" help:"chat for events and the live log (0: none)"`
	AdminLang   string  `env:"ADMIN_CHAT_LANGUAGE" envDefault:"en" help:"language of the admin chat's events and live log: en, ru or uk"`
	AdminZone   string  `env:"ADMIN_CHAT_TIMEZONE" help:"time zone of every time written in the admin chat: an IANA name (Europe/Moscow) or an offset (+3) (empty: DISPATCH_TIMEZONE)"`

	HTTPAddr string `env:"HTTP_ADDR" envDefault:"127.0.0.1:8080" help:"/healthz, /readyz, /metrics"`
	LogLevel string `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error; logs are JSON on stdout"`

	FetchInterval     time.Duration `env:"FETCH_INTERVAL" envDefault:"15m" help:"vacancy fetch"`
	QueueInterval     time.Duration `env:"QUEUE_INTERVAL" envDefault:"10m" help:"vacancy queue sweep"`
	RecoveryInterval  time.Duration `env:"RECOVERY_INTERVAL" envDefault:"5m" help:"SKIPPED vacancy recovery"`
	FirstNewsInterval time.Duration `env:"FIRST_NEWS_INTERVAL" envDefault:"30s" help:"new searches whose user has not heard what their first discovery brought: discovered if another replica did not, or told when their vacancies all ended without a card"`
	DigestInterval    time.Duration `env:"DIGEST_INTERVAL" envDefault:"1m" help:"how often users' vacancy digests are checked for being due: a digest goes at most this late"`

	CoverLettersPerDay int `env:"COVER_LETTERS_PER_DAY" envDefault:"10" help:"cover letters the LLM writes for one user within 24 hours (1-1000)"`

	VacancyFetchLimit     int           `env:"VACANCY_FETCH_LIMIT" envDefault:"100" help:"unseen vacancies one fetch collects per search"`
	VacancyRecoveryWindow time.Duration `env:"VACANCY_RECOVERY_WINDOW" envDefault:"48h" help:"how far back SKIPPED vacancies are retried"`
	VacancyClaimLease     time.Duration `env:"VACANCY_CLAIM_LEASE" envDefault:"2m" help:"how long a worker holds a vacancy before another replica may take it over"`

	ApplicationFollowUp         time.Duration `env:"APPLICATION_FOLLOW_UP" envDefault:"168h" help:"how long an application (Applied, or Invited) waits without news before a reminder asks how it went, once per step (168h: 7 days; 1h to 2160h, and less than RETAIN_VACANCY_MATCHES)"`
	ApplicationFollowUpInterval time.Duration `env:"APPLICATION_FOLLOW_UP_INTERVAL" envDefault:"15m" help:"how often due follow-up reminders are looked for"`

	ResumeMaxFileMB int `env:"RESUME_MAX_FILE_MB" envDefault:"5" help:"largest résumé file (PDF, DOCX, text) a user may send for a profile draft, in MB (1-20: Telegram lets bots download at most 20 MB)"`
	ResumeMaxPages  int `env:"RESUME_MAX_PAGES" envDefault:"20" help:"longest résumé PDF read for a profile draft, in pages (1-200)"`
	// ResumeReadTimeout bounds the child process that reads one file.
	ResumeReadTimeout time.Duration `env:"RESUME_READ_TIMEOUT" envDefault:"20s" help:"how long reading one résumé file may take, in a child process killed past it (the user is told the file is unreadable); a sane 20-page PDF takes well under a second (1s-5m)"`
	// ResumeModelWait and ResumeModelRetry: a draft whose model is not
	// answering waits for it, spending no attempt.
	ResumeModelWait  time.Duration `env:"RESUME_MODEL_WAIT" envDefault:"12h" help:"how long a résumé waits for an LLM that is not answering (breaker open, model or key refused, rate-limited) before its sender is asked to send the file again; told once that it waits (1m-24h)"`
	ResumeModelRetry time.Duration `env:"RESUME_MODEL_RETRY" envDefault:"30s" help:"how often a résumé waiting for the LLM is tried again; each try downloads and reads the file anew (1s-10m)"`

	MemoryWorkers        int           `env:"MEMORY_WORKERS" envDefault:"8" help:"memory-chat runs one replica works on at once"`
	MemoryLease          time.Duration `env:"MEMORY_LEASE" envDefault:"2m" help:"how long a memory-chat stage may take before the reaper returns it"`
	MemoryReaperInterval time.Duration `env:"MEMORY_REAPER_INTERVAL" envDefault:"30s" help:"memory-chat reaper of stalled runs"`
	MemoryStreamEvery    time.Duration `env:"MEMORY_STREAM_EVERY" envDefault:"1s" help:"how often an answer being written is shown (a draft; a placeholder's edit at most once a second); 0: answers are sent whole"`

	AnalysisBatchGap time.Duration `env:"ANALYSIS_BATCH_GAP" envDefault:"10m" help:"analysis runs: a pause longer than this in a chat starts a new batch"`
	AnalysisLease    time.Duration `env:"ANALYSIS_LEASE" envDefault:"1m" help:"analysis runs: a running run whose executor has not renewed its lease for this long is failed as interrupted"`

	DistributionInterval time.Duration `env:"DISTRIBUTION_INTERVAL" envDefault:"15s" help:"dispatch distribution"`
	WatchdogInterval     time.Duration `env:"WATCHDOG_INTERVAL" envDefault:"60s" help:"expired-offers watchdog"`
	OfferSLA             time.Duration `env:"OFFER_SLA" envDefault:"2m" help:"time a master has to answer an offer"`
	DispatchCurrency     string        `env:"DISPATCH_CURRENCY" help:"ISO code of the currency order prices and commissions are in (RUB, UAH, KZT, USD…), shown with its sign; empty: bare numbers"`
	DispatchTimezone     string        `env:"DISPATCH_TIMEZONE" envDefault:"UTC" help:"time zone (IANA name, e.g. Europe/Moscow) of every city not in DISPATCH_CITIES: their working hours and every time shown about them"`
	DispatchHours        string        `env:"DISPATCH_HOURS" envDefault:"10:00-20:00" help:"local working hours in which offers go out (HH:MM-HH:MM; 24h: always); an order created outside them is offered at opening"`
	DispatchCities       string        `env:"DISPATCH_CITIES" help:"per-city time zone and, optionally, hours: Moscow=Europe/Moscow; Kyiv=Europe/Kyiv 09:00-19:00 (matched case-insensitively with the orders' city)"`
	ClockStart           string        `env:"CLOCK_START" help:"for tests and demos only: dispatch's calendar, the dates of job applications (their follow-ups) and the year written dates are read against see a clock that starts at this RFC 3339 instant and runs at real speed"`

	CommissionRate     float64       `env:"COMMISSION_RATE" envDefault:"10" help:"commission a master owes on a DONE order, percent of its price"`
	CommissionDeadline time.Duration `env:"COMMISSION_DEADLINE" envDefault:"3h" help:"time after DONE to pay the commission before the master is blocked"`
	AutocloseAfter     time.Duration `env:"AUTOCLOSE_AFTER" envDefault:"24h" help:"DONE orders older than this become CLOSED"`
	CommissionInterval time.Duration `env:"COMMISSION_INTERVAL" envDefault:"10m" help:"dispatch commission"`
	AutocloseInterval  time.Duration `env:"AUTOCLOSE_INTERVAL" envDefault:"1h" help:"dispatch autoclose"`
	HeartbeatInterval  time.Duration `env:"HEARTBEAT_INTERVAL" envDefault:"5m" help:"how often each replica records its heartbeat (a replica seen within three is live: /status, and its share of the rates while Redis is down)"`

	TelegramRate      float64       `env:"TELEGRAM_RATE" envDefault:"30" help:"messages per second the bot sends in all (Telegram's limit is about 30)"`
	TelegramChatRate  float64       `env:"TELEGRAM_CHAT_RATE" envDefault:"1" help:"messages per second to one private chat (Telegram's limit is about 1)"`
	TelegramGroupRate float64       `env:"TELEGRAM_GROUP_RATE" envDefault:"20" help:"messages per minute to one group (Telegram's limit is 20)"`
	InboxWorkers      int           `env:"INBOX_WORKERS" envDefault:"16" help:"incoming updates one replica handles at once (each chat's one at a time)"`
	InboxLease        time.Duration `env:"INBOX_LEASE" envDefault:"30s" help:"lease of an update being handled, renewed while it runs: the longest a dead replica's updates wait when its death cannot be seen sooner"`
	OutboxWorkers     int           `env:"OUTBOX_WORKERS" envDefault:"16" help:"outgoing messages one replica delivers at once"`
	OutboxRetention   time.Duration `env:"OUTBOX_RETENTION" envDefault:"168h" help:"how long delivered, dropped and failed outbox rows are kept (0: for ever)"`
	OutboxMaxBackoff  time.Duration `env:"OUTBOX_MAX_BACKOFF" envDefault:"1m" help:"longest wait between retries of a message Telegram failed to take (5xx, network)"`
	BoardInterval     time.Duration `env:"ANALYSIS_BOARD_INTERVAL" envDefault:"3s" help:"least time between two edits of an analysis run's board in the admin chat (edits in between coalesce)"`
	LiveLogInterval   time.Duration `env:"LIVE_LOG_INTERVAL" envDefault:"3s" help:"dispatch live-log lines that burst go to the admin chat as one message per this long"`

	// Data retention (README "Data retention"); 0 keeps a kind for ever.
	RetainGroupMessages   time.Duration `env:"RETAIN_GROUP_MESSAGES" envDefault:"720h" help:"group messages kept for analysis runs (never those of a run not closed); 0: for ever"`
	RetainRunContext      time.Duration `env:"RETAIN_RUN_CONTEXT" envDefault:"72h" help:"a finished memory-chat run's draft and assembled context are cleared after this; the run, answer and summary stay; 0: never"`
	RetainMemory          time.Duration `env:"RETAIN_MEMORY" envDefault:"0" help:"raw logs and summaries of the memory chat; 0: for ever"`
	RetainVacancyMatches  time.Duration `env:"RETAIN_VACANCY_MATCHES" envDefault:"2160h" help:"vacancy matches in a final state (and vacancies no match needs) after their last change; each user's taste examples stay; 0: for ever"`
	RetainSearchHits      time.Duration `env:"RETAIN_SEARCH_HITS" envDefault:"2160h" help:"ids of vacancies a search has seen; older ones stay seen by id; 0: for ever"`
	RetainOrderContacts   time.Duration `env:"RETAIN_ORDER_CONTACTS" envDefault:"720h" help:"the customer's address, name and phone of a dispatch order are cleared this long after it is closed or cancelled (personal data: never kept for ever)"`
	PruneInterval         time.Duration `env:"PRUNE_INTERVAL" envDefault:"1h" help:"the prune job, which deletes what is past its retention"`
	PruneBatch            int           `env:"PRUNE_BATCH" envDefault:"1000" help:"rows one prune batch (its own short transaction) deletes at most"`
	PruneStatementTimeout time.Duration `env:"PRUNE_STATEMENT_TIMEOUT" envDefault:"2s" help:"statement timeout of a prune batch; a batch that hits it ends its kind's turn"`

	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"15s" help:"graceful stop budget on SIGINT/SIGTERM"`
	Replica         string        `env:"REPLICA_NAME" help:"name of this replica in logs and /status (default: hostname-pid)"`
}

// currencyCode is an ISO 4217 code, as DISPATCH_CURRENCY takes it.
var currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)

// webhookSecret is Telegram's rule for setWebhook's secret_token.
var webhookSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// secretFiles lets a deployment mount secrets as files (Docker/Kubernetes
// secrets) instead of putting them in the environment: every setting
// tagged secret, so a secret added later cannot miss it (GITHUB_TOKEN and
// TASKS_WEBHOOK_SECRET did, and their _FILE was ignored without a word).
var secretFiles = func() []string {
	var out []string
	for _, f := range configFields() {
		if f.secret {
			out = append(out, f.key)
		}
	}
	return out
}()

// Defaults is the configuration an empty environment gives, before
// validation (which would refuse it for want of a token): what the bench
// runs the production settings with.
func Defaults() (Config, error) {
	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: map[string]string{}}); err != nil {
		return Config{}, fmt.Errorf("defaults: %w", err)
	}
	return cfg, nil
}

// Load reads the environment (lookup, usually os.LookupEnv) and
// validates it, reporting every bad value with its variable's name at once.
func Load(lookup func(string) (string, bool), version string) (Config, error) {
	// Only known keys are read, so lookup can be a test's map as well as os.LookupEnv.
	vars := map[string]string{}
	for _, f := range configFields() {
		for _, k := range []string{f.key, f.key + "_FILE"} {
			if v, ok := lookup(k); ok {
				vars[k] = v
			}
		}
	}
	// "1, 2" is how people write lists; the parser wants "1,2".
	if v, ok := vars["ADMIN_IDS"]; ok {
		vars["ADMIN_IDS"] = strings.ReplaceAll(v, " ", "")
	}
	var problems []string
	for _, key := range secretFiles {
		path := vars[key+"_FILE"]
		if vars[key] != "" || path == "" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s_FILE: %v", key, err))
			continue
		}
		vars[key] = strings.TrimSpace(string(b))
	}

	var cfg Config
	if err := env.ParseWithOptions(&cfg, env.Options{Environment: vars}); err != nil {
		problems = append(problems, describeEnvErrors(err)...)
	}
	problems = append(problems, cfg.validate()...)
	if len(problems) > 0 {
		return Config{}, fmt.Errorf("invalid configuration:\n  %s", strings.Join(problems, "\n  "))
	}
	if cfg.LLMStrongModel == "" {
		cfg.LLMStrongModel = cfg.LLMModel
	}
	if cfg.HHUserAgent == "" {
		cfg.HHUserAgent = "switchboard/" + version
	}
	if cfg.Replica == "" {
		host, _ := os.Hostname()
		cfg.Replica = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return cfg, nil
}

// describeEnvErrors turns the library's per-field errors into lines that
// name the environment variable, which is what an operator can act on.
func describeEnvErrors(err error) []string {
	var agg env.AggregateError
	errs := []error{err}
	if errors.As(err, &agg) {
		errs = agg.Errors
	}
	keys := map[string]string{}
	for _, f := range configFields() {
		keys[f.field] = f.key
	}
	var out []string
	for _, e := range errs {
		var pe env.ParseError
		if errors.As(e, &pe) {
			inner := pe.Err
			var ne *strconv.NumError
			if errors.As(inner, &ne) {
				inner = fmt.Errorf("%q is not a valid number", ne.Num)
			}
			out = append(out, fmt.Sprintf("%s: %v", keys[pe.Name], inner))
			continue
		}
		out = append(out, e.Error())
	}
	return out
}

// AdminLocation is the admin chat's zone: ADMIN_CHAT_TIMEZONE, else
// DISPATCH_TIMEZONE, whose cities the admins run.
func (c Config) AdminLocation() (*time.Location, error) {
	zone := strings.TrimSpace(c.AdminZone)
	if zone == "" {
		zone = strings.TrimSpace(c.DispatchTimezone)
	}
	_, loc, err := locales.ParseZone(zone)
	return loc, err
}

// Calendar is the dispatch calendar the DISPATCH_* variables describe.
func (c Config) Calendar() (dispatch.Calendar, error) {
	return dispatch.ParseCalendar(c.DispatchTimezone, c.DispatchHours, c.DispatchCities)
}

// longestAnalysisWindow is /run_new's longest window (domain/analysis
// parse.go): group messages must be kept at least that long.
const longestAnalysisWindow = 7 * 24 * time.Hour

// ownZero are the durations whose 0 means something of their own, which
// their check in checkWorkflows allows: MEMORY_STREAM_EVERY's "send
// answers whole".
var ownZero = map[string]bool{"MEMORY_STREAM_EVERY": true}

// keptForEver are the retentions where 0 means "keep for ever".
var keptForEver = map[string]bool{
	"RETAIN_GROUP_MESSAGES": true, "RETAIN_RUN_CONTEXT": true, "RETAIN_MEMORY": true,
	"RETAIN_VACANCY_MATCHES": true, "RETAIN_SEARCH_HITS": true, "OUTBOX_RETENTION": true,
}

// LogValue keeps secrets out of logs: tokens vanish, URL passwords are masked.
func (c Config) LogValue() slog.Value {
	var attrs []slog.Attr
	v := reflect.ValueOf(c)
	for _, f := range configFields() {
		val := fmt.Sprint(v.FieldByName(f.field).Interface())
		if f.secret {
			val = redact(val)
		}
		attrs = append(attrs, slog.String(f.key, val))
	}
	return slog.GroupValue(attrs...)
}

func redact(v string) string {
	if v == "" {
		return ""
	}
	if u, err := url.Parse(v); err == nil && u.Scheme != "" && u.Host != "" {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		return u.String()
	}
	return "[redacted]"
}

type configField struct {
	field, key, def, help string
	secret                bool
	typ                   reflect.Type
}

func configFields() []configField {
	t := reflect.TypeOf(Config{})
	out := make([]configField, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("env"), ",")
		out = append(out, configField{
			field: sf.Name, key: key, def: sf.Tag.Get("envDefault"), help: sf.Tag.Get("help"),
			secret: sf.Tag.Get("secret") == "true", typ: sf.Type,
		})
	}
	return out
}

// PrintHelp writes the table `switchboard -help` shows.
func PrintHelp(w io.Writer) {
	fmt.Fprintln(w, "Usage: switchboard [migrate]")
	fmt.Fprintln(w, "\nConfiguration is read from the environment only:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nVARIABLE\tDEFAULT\tMEANING")
	for _, f := range configFields() {
		def := f.def
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.key, def, f.help)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nSecrets (%s) may also be given as a file path in NAME_FILE.\n", strings.Join(secretFiles, ", "))
}
