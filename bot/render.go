package bot

import (
	"github.com/jonboulle/clockwork"

	"log/slog"
	"time"

	"switchboard/domain"
	"switchboard/domain/dispatch"
	"switchboard/locales"
)

// RenderConfig is what the renderers need beside the locale catalog: the
// admin chat and how its messages are written and paced.
type RenderConfig struct {
	// AdminChatID is where dispatch events go (ADMIN_CHAT_ID; 0: nowhere),
	// written in AdminLang (ADMIN_CHAT_LANGUAGE; empty: English).
	AdminChatID int64
	AdminLang   string
	// Currency is the ISO code dispatch prices are in (DISPATCH_CURRENCY;
	// empty: amounts are bare numbers).
	Currency string
	// AdminZone is the zone of every time written in the admin chat
	// (ADMIN_CHAT_TIMEZONE, else DISPATCH_TIMEZONE; nil: UTC).
	AdminZone *time.Location
	// BoardEvery is the least time between two edits of a run's board in
	// the admin chat (ANALYSIS_BOARD_INTERVAL; 0: 3 s): edits in between
	// coalesce, the latest state winning, the last always shown.
	BoardEvery time.Duration
	// LiveLogEvery gathers the dispatch live log: lines that burst go out
	// as one message per this long (LIVE_LOG_INTERVAL; 0: 3 s).
	LiveLogEvery time.Duration
	// Calendar gives each dispatch city its time zone (the zero Calendar
	// is UTC).
	Calendar dispatch.Calendar
	// Clock is the time offers count down from (nil: the real clock).
	Clock clockwork.Clock
	// CalendarClock is the day a written date is read against: a date of
	// another year than its today names the year (CLOCK_START's clock, as
	// the dispatch calendar's; Clock if nil). Offers still count down on
	// Clock, which their database times agree with.
	CalendarClock clockwork.Clock
}

// Renderer turns the workflows' state into the messages the outbox
// delivers: vacancy cards and first news (vacancy.Notifier), memory answers
// (memory.Renderer), the dispatch workflow's offers, notes and live log
// (DispatchNotes) and analysis runs' events and boards (analysis.Notifier).
// It needs only the catalog and the admin-chat settings, so it is built
// before the services that take it and before the bot, which renders its
// own edits with the same code.
type Renderer struct {
	rc  RenderConfig
	cat *locales.Catalog
	log *slog.Logger
}

// NewRenderer builds the renderers from the catalog and the admin-chat
// settings; log reports what cannot be rendered (a bug).
func NewRenderer(rc RenderConfig, cat *locales.Catalog, log *slog.Logger) *Renderer {
	if log == nil {
		log = slog.Default()
	}
	return &Renderer{rc: rc.withDefaults(), cat: cat, log: log}
}

func (rc RenderConfig) withDefaults() RenderConfig {
	domain.OrDefault(&rc.BoardEvery, 3*time.Second)
	domain.OrDefault(&rc.LiveLogEvery, 3*time.Second)
	return rc
}

// stateKeys maps a workflow's states to their catalogue keys, spelled out
// where the map is declared so the catalogue test sees them used.
type stateKeys[S ~string] map[S]string

// name is state s in lang; a state keys lacks shows as itself.
func (keys stateKeys[S]) name(cat *locales.Catalog, lang string, s S) string {
	if k, ok := keys[s]; ok {
		return cat.T(lang, k)
	}
	return string(s)
}
