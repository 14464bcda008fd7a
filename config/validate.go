package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"strings"
	"time"

	"switchboard/locales"
)

// problems collects every bad value, each line naming its variable, so an
// operator fixes them all in one go.
type problems []string

func (p *problems) bad(key, format string, args ...any) {
	*p = append(*p, key+": "+fmt.Sprintf(format, args...))
}

// validate reports every bad value, in the order of the checks below.
func (c Config) validate() []string {
	var p problems
	c.checkEndpoints(&p)
	c.checkLimits(&p)
	c.checkTelegram(&p)
	c.checkWorkflows(&p)
	c.checkOperations(&p)
	return p
}

// checkEndpoints: the bot token, every URL and the HH credentials.
func (c Config) checkEndpoints(p *problems) {
	bad := p.bad
	if c.TelegramToken == "" {
		bad("TELEGRAM_TOKEN", "required: the bot token from @BotFather")
	}
	checkURL := func(key, raw string, schemes ...string) {
		if raw == "" {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			bad(key, "not a valid URL (want %s://host…)", strings.Join(schemes, " or "))
			return
		}
		for _, s := range schemes {
			if u.Scheme == s {
				return
			}
		}
		bad(key, "scheme %q not supported (want %s)", u.Scheme, strings.Join(schemes, " or "))
	}
	checkURL("TELEGRAM_API_URL", c.TelegramAPIURL, "https", "http")
	checkURL("DATABASE_URL", c.DatabaseURL, "postgres", "postgresql")
	checkURL("REDIS_URL", c.RedisURL, "redis", "rediss", "unix")
	checkURL("LLM_URL", c.LLMURL, "http", "https")
	checkURL("HH_API_URL", c.HHAPIURL, "https", "http")
	checkURL("HH_OAUTH_URL", c.HHOAuthURL, "https", "http")
	switch {
	case c.HHClientID == "" && c.HHClientSecret != "":
		bad("HH_CLIENT_ID", "required with HH_CLIENT_SECRET: set both or neither")
	case c.HHClientID != "" && c.HHClientSecret == "":
		bad("HH_CLIENT_SECRET", "required with HH_CLIENT_ID: set both or neither")
	case c.HHAppToken != "" && c.HHClientID != "":
		bad("HH_APP_TOKEN", "set either HH_APP_TOKEN or HH_CLIENT_ID and HH_CLIENT_SECRET, not both")
	}
	if strings.ContainsFunc(c.HHAppToken, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		bad("HH_APP_TOKEN", "contains spaces or control characters")
	}
}

// checkLimits: the LLM's and HH's rates, budgets and breakers, and
// Telegram's rates.
func (c Config) checkLimits(p *problems) {
	bad := p.bad
	if c.LLMProvider != "ollama" && c.LLMProvider != "openai" {
		bad("LLM_PROVIDER", "%q: want ollama or openai", c.LLMProvider)
	}
	if c.LLMMaxConcurrency < 1 {
		bad("LLM_MAX_CONCURRENCY", "%d: want at least 1", c.LLMMaxConcurrency)
	}
	if c.LLMBreakerFailures < 1 {
		bad("LLM_BREAKER_FAILURES", "%d: want at least 1", c.LLMBreakerFailures)
	}
	if c.LLMNumCtx < 1 {
		bad("LLM_NUM_CTX", "%d: want at least 1", c.LLMNumCtx)
	}
	if c.LLMMaxTokensJSON < 1 || c.LLMMaxTokensText < 1 {
		bad("LLM_MAX_TOKENS_JSON", "LLM_MAX_TOKENS_JSON and LLM_MAX_TOKENS_TEXT must be at least 1")
	}
	if c.TelegramRate <= 0 || c.TelegramChatRate <= 0 || c.TelegramGroupRate <= 0 {
		bad("TELEGRAM_RATE", "TELEGRAM_RATE, TELEGRAM_CHAT_RATE and TELEGRAM_GROUP_RATE must be positive")
	}
	if c.HHBreakerOpenFor <= 0 {
		bad("HH_BREAKER_OPEN_FOR", "%v: want a positive duration", c.HHBreakerOpenFor)
	}
	if c.HHBreakerMaxOpen < c.HHBreakerOpenFor {
		bad("HH_BREAKER_MAX_OPEN", "%v: want at least HH_BREAKER_OPEN_FOR", c.HHBreakerMaxOpen)
	}
	if c.HHRate <= 0 {
		bad("HH_RATE", "%v: want a positive rate", c.HHRate)
	}
}

// checkTelegram: webhook mode, the inbox and the outbox.
func (c Config) checkTelegram(p *problems) {
	bad := p.bad
	if c.WebhookURL != "" {
		if u, err := url.Parse(c.WebhookURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			bad("TELEGRAM_WEBHOOK_URL", "not a valid URL")
		}
		if !webhookSecret.MatchString(c.WebhookSecret) {
			bad("TELEGRAM_WEBHOOK_SECRET", "want 1-256 characters of A-Z, a-z, 0-9, _ and - (Telegram's rule), with TELEGRAM_WEBHOOK_URL")
		}
		if c.WebhookMaxConn < 1 || c.WebhookMaxConn > 100 {
			bad("TELEGRAM_WEBHOOK_MAX_CONNECTIONS", "%d: want 1 to 100", c.WebhookMaxConn)
		}
	}
	if c.InboxWorkers < 1 {
		bad("INBOX_WORKERS", "%d: want at least 1", c.InboxWorkers)
	}
	if c.InboxLease < 3*time.Second {
		bad("INBOX_LEASE", "%s: want at least 3s (it is renewed every third of it)", c.InboxLease)
	}
	if c.OutboxWorkers < 1 {
		bad("OUTBOX_WORKERS", "%d: want at least 1", c.OutboxWorkers)
	}
	if c.BoardInterval < 0 || c.LiveLogInterval < 0 {
		bad("ANALYSIS_BOARD_INTERVAL", "ANALYSIS_BOARD_INTERVAL and LIVE_LOG_INTERVAL must not be negative")
	}
}

// checkWorkflows: memory chat, dispatch, the admin chat and vacancies.
func (c Config) checkWorkflows(p *problems) {
	bad := p.bad
	if c.MemoryWorkers < 1 {
		bad("MEMORY_WORKERS", "%d: want at least 1", c.MemoryWorkers)
	}
	// A draft lives 30 s in the user's chat: shown less often, the answer
	// being written would blink out between showings.
	if c.MemoryStreamEvery != 0 && (c.MemoryStreamEvery < 250*time.Millisecond || c.MemoryStreamEvery > 20*time.Second) {
		bad("MEMORY_STREAM_EVERY", "%s: want 250ms to 20s, or 0 to send answers whole", c.MemoryStreamEvery)
	}
	if c.ResumeMaxFileMB < 1 || c.ResumeMaxFileMB > 20 {
		bad("RESUME_MAX_FILE_MB", "%d: want 1 to 20 (Telegram lets bots download at most 20 MB)", c.ResumeMaxFileMB)
	}
	if c.ResumeMaxPages < 1 || c.ResumeMaxPages > 200 {
		bad("RESUME_MAX_PAGES", "%d: want 1 to 200", c.ResumeMaxPages)
	}
	if c.ResumeReadTimeout < time.Second || c.ResumeReadTimeout > 5*time.Minute {
		bad("RESUME_READ_TIMEOUT", "%s: want 1s to 5m", c.ResumeReadTimeout)
	}
	if c.ResumeModelWait < time.Minute || c.ResumeModelWait > 24*time.Hour {
		bad("RESUME_MODEL_WAIT", "%s: want 1m to 24h", c.ResumeModelWait)
	}
	if c.ResumeModelRetry < time.Second || c.ResumeModelRetry > 10*time.Minute {
		bad("RESUME_MODEL_RETRY", "%s: want 1s to 10m", c.ResumeModelRetry)
	}
	if _, err := c.Calendar(); err != nil {
		bad("DISPATCH_CITIES", "%v (DISPATCH_TIMEZONE, DISPATCH_HOURS and DISPATCH_CITIES together)", err)
	}
	if c.DispatchCurrency != "" && !currencyCode.MatchString(c.DispatchCurrency) {
		bad("DISPATCH_CURRENCY", "%q: want a three-letter ISO code such as RUB", c.DispatchCurrency)
	}
	if c.ClockStart != "" {
		if _, err := time.Parse(time.RFC3339, c.ClockStart); err != nil {
			bad("CLOCK_START", "%q: want an RFC 3339 instant such as 2026-11-25T22:00:00+03:00", c.ClockStart)
		}
	}
	if c.CommissionRate < 0 || c.CommissionRate > 100 {
		bad("COMMISSION_RATE", "%g: want a percentage 0..100", c.CommissionRate)
	}
	if _, err := c.AdminLocation(); err != nil {
		bad("ADMIN_CHAT_TIMEZONE", "%q: want an IANA name such as Europe/Moscow or an offset such as +3", c.AdminZone)
	}
	if !locales.Supported(c.AdminLang) {
		bad("ADMIN_CHAT_LANGUAGE", "%q: want en, ru or uk", c.AdminLang)
	}
	if c.ApplicationFollowUp < time.Hour || c.ApplicationFollowUp > 90*24*time.Hour {
		bad("APPLICATION_FOLLOW_UP", "%s: want 1h to 2160h (90 days)", c.ApplicationFollowUp)
	} else if c.RetainVacancyMatches > 0 && c.ApplicationFollowUp >= c.RetainVacancyMatches {
		bad("APPLICATION_FOLLOW_UP", "%s: want less than RETAIN_VACANCY_MATCHES (%s), or the application is pruned before its reminder", c.ApplicationFollowUp, c.RetainVacancyMatches)
	}
	if c.VacancyFetchLimit < 1 || c.VacancyFetchLimit > 2000 {
		bad("VACANCY_FETCH_LIMIT", "%d: want 1..2000 (HH serves at most 2000 results)", c.VacancyFetchLimit)
	}
	if c.CoverLettersPerDay < 1 || c.CoverLettersPerDay > 1000 {
		bad("COVER_LETTERS_PER_DAY", "%d: want 1..1000 (each letter is an LLM call)", c.CoverLettersPerDay)
	}
}

// checkOperations: the HTTP address, the log level, pruning and retention,
// and every duration's sign.
func (c Config) checkOperations(p *problems) {
	bad := p.bad
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		bad("HTTP_ADDR", "%q: want host:port", c.HTTPAddr)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.LogLevel)); err != nil {
		bad("LOG_LEVEL", "%q: want debug, info, warn or error", c.LogLevel)
	}
	if c.PruneBatch < 1 {
		bad("PRUNE_BATCH", "%d: want at least 1", c.PruneBatch)
	}
	if c.RetainGroupMessages > 0 && c.RetainGroupMessages < longestAnalysisWindow {
		bad("RETAIN_GROUP_MESSAGES", "%s: want 0 or at least the longest analysis window (/run_new 7d), %s", c.RetainGroupMessages, longestAnalysisWindow)
	}
	if c.RetainSearchHits > 0 && c.RetainSearchHits < c.VacancyRecoveryWindow {
		bad("RETAIN_SEARCH_HITS", "%s: want 0 or at least VACANCY_RECOVERY_WINDOW (a new search's backfill reads that far back)", c.RetainSearchHits)
	}
	for _, f := range configFields() {
		if f.typ != reflect.TypeOf(time.Duration(0)) {
			continue
		}
		d := reflect.ValueOf(c).FieldByName(f.field).Interface().(time.Duration)
		switch {
		case ownZero[f.key] && d == 0:
			// Its own check above reads 0 as what its help says.
		case keptForEver[f.key] && d < 0:
			bad(f.key, "%s: want 0 (for ever) or a positive duration such as 720h", d)
		case !keptForEver[f.key] && d <= 0:
			bad(f.key, "%s: want a positive duration such as 30s or 5m", d)
		}
	}
}
