// Package bot is Switchboard's only interface: telebot v3 routes, the
// middleware every update passes (recover, user upsert, locale, roles, rate
// limit), the callback codec, HTML formatting and splitting, and the polling
// lease that lets exactly one replica read updates. Each workflow adds its
// commands and buttons in a file of its own; domain logic stays in domain/.
package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	tele "gopkg.in/telebot.v3"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/locales"
	"switchboard/storage"
)

// Users is the users as the bot keeps them: each one seen on an update,
// their language and time zone (storage.Users).
type Users interface {
	Upsert(ctx context.Context, u domain.User) (domain.User, error)
	// Get reads a user: a failed update is told in the language they chose.
	Get(ctx context.Context, id int64) (domain.User, error)
	SetLanguage(ctx context.Context, id int64, lang string) error
	SetTimeZone(ctx context.Context, id int64, zone string) error
}

// StatusSource feeds /status with the rows storage reads.
type StatusSource interface {
	JobRuns(ctx context.Context) ([]domain.JobRunSummary, error)
	// Replicas lists the live replicas (recent heartbeats).
	Replicas(ctx context.Context) ([]storage.Replica, error)
}

// Config is how the bot reaches Telegram.
type Config struct {
	URL, Token string
	// PollTimeout is the long-poll hold; a takeover after a replica dies
	// waits at most the polling lock's TTL plus this.
	PollTimeout time.Duration
	// PollingLock, when set, makes polling conditional on holding it (several replicas).
	PollingLock PollingLock
	// InboxWorkers is how many updates this replica handles at once (with
	// an inbox; 0: 16). InboxLease is a claim's lease, renewed while its
	// handler runs (0: 30 s): a dead replica's updates wait this long.
	// InboxAttempts is how many times an update failing for a passing
	// reason is tried before the user is told (0: 7), waiting 1 s, 2 s,
	// 4 s … up to InboxMaxBackoff (0: 30 s) between tries. InboxSweep is
	// how often the workers look for due work without a notification
	// (0: 1 s).
	InboxWorkers    int
	InboxLease      time.Duration
	InboxAttempts   int
	InboxMaxBackoff time.Duration
	InboxSweep      time.Duration
	// DrainTimeout bounds how long Run waits for in-flight handlers on stop.
	DrainTimeout time.Duration
	// HandlerTimeout bounds one update's work.
	HandlerTimeout time.Duration
	// RateLimit and RateBurst bound updates per user (per second, burst).
	RateLimit float64
	RateBurst int
	// Webhook, when set, has Telegram push updates to every replica
	// (TELEGRAM_WEBHOOK_URL) instead of one replica polling; it needs the
	// inbox.
	Webhook *WebhookConfig
	// RenderConfig is the admin chat's settings, which the bot's own
	// renderer (the edits it makes itself) shares with the services'.
	RenderConfig
}

// Deps are the bot's collaborators.
type Deps struct {
	Users   Users
	Status  StatusSource
	Catalog *locales.Catalog
	Log     *slog.Logger
	Clock   clockwork.Clock
	Admins  []int64
	Replica string
	// Claimer names this replica in its inbox claims (storage.Liveness);
	// empty: Replica, whose claims end only with their lease.
	Claimer string
	// Direct is the bot's port to Telegram (the app's delivery.Sender):
	// every call the bot makes goes through it or its client. Nil: a
	// sender of its own with an in-process limiter and no outbox (tests).
	Direct Direct
	// Queue is the outbox replies to commands are written to. Nil: they
	// are sent at once (tests without a database).
	Queue Queue
	// Inbox, when set, stores every update before Telegram is told it
	// arrived and every replica handles updates from it (ARCHITECTURE
	// "Telegram intake and the inbox"). Nil: updates are handled in memory
	// as fetched (tests without a database).
	Inbox Inbox
	// Passing says whether a handler's error may go away by itself (the
	// database away, a deadline): such an update is retried from the
	// inbox. Nil: only a deadline is.
	Passing func(error) bool
	// AboutData says whether a storage error is about what was written
	// (a character or size the database refuses): intake then keeps the
	// update in a form it can store instead of retrying it for ever. Nil:
	// no error is.
	AboutData func(error) bool
	// Topics tells which workflow a topic of a private chat is, so what
	// the user writes there goes to it (storage's ChatTopics). Nil: the
	// bot reads no topics (they are the sender's alone).
	Topics Topics
	// Connected, when set, is told the bot's account each time the bot
	// connects to Telegram (the app learns its topic mode from it).
	Connected func(ctx context.Context, me delivery.Me)
	// Panics counts an update's panic, its handler's or telebot's own, in
	// panics_total{where="update"} (the app's shared counter). Zero: logged
	// only.
	Panics domain.Panics
	// The workflows whose commands and buttons the bot serves (each
	// optional: a bot without one has none of its commands).
	Vacancies Vacancies
	Letters   Letters
	Rhythm    Rhythms
	Memory    Memory
	Dispatch  Dispatch
	Analysis  Analysis
	Resume    Resumes
	Tasks     Tasks
}

// Bot serves Telegram updates.
type Bot struct {
	*Renderer
	// joinOrder opens an order's link for its customer (/start o_<token>;
	// nil without the dispatch workflow).
	joinOrder func(r *Request, token string) error
	// orderRelay passes a private reply to a message about an order to
	// the order's other side (customer ↔ master).
	orderRelay func(r *Request) (handled bool, err error)
	cfg        Config
	deps       Deps
	tb         *tele.Bot // the router of what arrives; nothing is sent through it
	tg         *delivery.Client
	webhook    *webhookIntake // webhook mode's intake; nil: polling
	admins     map[int64]bool
	commands   []Command
	buttons    map[Action]button
	actions    Actions
	limiter    *rateLimiter
	started    time.Time
	// adminMenus remembers which admins' chats have their command menu.
	adminMenus sync.Map
	// groupText takes plain text written in groups (the analysis workflow
	// sets it); nil leaves group text alone.
	groupText func(r *Request) error
	// groupEdit takes an edit of a message written in a group (the
	// analysis workflow sets it).
	groupEdit func(r *Request) error
	// location takes a location a user sent in their private chat, or
	// (edited) the move or stop of a live one they share (the dispatch
	// workflow sets it).
	location func(r *Request, edited bool) error
	// privateFirst sees plain private text before the private route (the
	// résumé workflow's corrected draft); handled false passes it on.
	privateFirst func(r *Request) (handled bool, err error)
	// vacancyLink takes plain private text carrying a vacancy's link
	// (RegisterVacancies sets it; vacancy_link.go); handled false passes
	// it on.
	vacancyLink func(r *Request) (handled bool, err error)
	// searchLink takes plain text written in the Vacancies topic that is
	// a search's link, as /search with it (RegisterVacancies sets it);
	// handled false passes it on.
	searchLink func(r *Request) (handled bool, err error)
	// masters knows who is a registered master (RegisterDispatch sets
	// it); nil: nobody is.
	masters Masters
	// stopAnswer stops the answer a draft shows being written, when its
	// reader presses the draft's stop button (RegisterMemory sets it).
	stopAnswer func(ctx context.Context, userID, draftID int64) (bool, error)

	// stopping is closed when Run's context ends; it aborts a held getUpdates.
	stopping chan struct{}

	// inflight counts the updates fetched (without an inbox) or claimed
	// (with one) and not yet handled, which a stop waits for.
	inflight *sync.WaitGroup
	// inbox is the worker pool over Deps.Inbox (nil without one).
	inbox *inboxPoller
	// outcomes holds, per update an inbox worker is running, where the
	// recover middleware reports how its handler ended.
	outcomes sync.Map
	// handlerCtx outlives the stop signal so in-flight work can finish; it is
	// cancelled only when the drain budget is spent.
	handlerCtx    context.Context
	cancelHandler context.CancelFunc
}

// CallbackHandler handles a decoded button press. It must check that the
// presser may act before changing anything.
type CallbackHandler func(r *Request, cb Callback) error

// button is a callback action's handler and the places of the messages
// that carry it.
type button struct {
	handle CallbackHandler
	where  Place
}

// New builds the bot without contacting Telegram (Run does, with retries).
func New(cfg Config, deps Deps) (*Bot, error) {
	cfg = cfg.withDefaults()
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = clockwork.NewRealClock()
	}
	if deps.Catalog == nil {
		return nil, errors.New("bot: no locale catalog")
	}
	if deps.Direct == nil {
		sender, err := delivery.NewSender(delivery.Config{}, nil,
			delivery.NewClient(cfg.URL, cfg.Token, nil), delivery.NewMemoryLimiter(delivery.DefaultLimits()), deps.Log, nil)
		if err != nil {
			return nil, fmt.Errorf("bot: %w", err)
		}
		deps.Direct = sender
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Deliveries from every vacancy worker share this client.
	tr.MaxIdleConnsPerHost = 32
	stopping := make(chan struct{})
	if cfg.Clock == nil {
		cfg.Clock = deps.Clock
	}
	b := &Bot{
		Renderer: NewRenderer(cfg.RenderConfig, deps.Catalog, deps.Log),
		cfg:      cfg,
		deps:     deps,
		admins:   map[int64]bool{},
		buttons:  map[Action]button{},
		actions:  Actions{},
		limiter:  newRateLimiter(cfg.RateLimit, cfg.RateBurst, deps.Clock),
		tg:       deps.Direct.Client(),

		stopping: stopping,
	}
	tb, err := tele.NewBot(tele.Settings{
		URL:    cfg.URL,
		Token:  cfg.Token,
		Poller: b.poller(),
		// The ordered poller, or the inbox's workers, run each chat's
		// handlers one update after another.
		Synchronous: true,
		Offline:     true, // getMe happens in Run, with retries, so start-up survives a Telegram blip
		Client:      &http.Client{Timeout: cfg.PollTimeout + 20*time.Second, Transport: pollCanceller{base: tr, stopping: stopping}},
		OnError:     func(err error, c tele.Context) { deps.Log.Error("telegram handler error", "err", err) },
	})
	if err != nil {
		return nil, fmt.Errorf("bot: %w", err)
	}
	b.tb = tb
	for _, id := range deps.Admins {
		b.admins[id] = true
	}
	b.handlerCtx, b.cancelHandler = context.WithCancel(context.Background())
	b.tb.Use(b.track, b.recover, b.rateLimit, b.identify)
	b.registerCore()
	b.registerWorkflows()
	return b, nil
}

// poller is where updates come from, and sets what a stop waits for. With
// an inbox, telebot's LongPoller (which acknowledges what it fetched with
// its next request, stored or not) gives way to intake into the inbox, and
// the handlers run from the inbox on every replica.
func (b *Bot) poller() tele.Poller {
	cfg, deps := b.cfg, b.deps
	var poller tele.Poller = &tele.LongPoller{Timeout: cfg.PollTimeout}
	switch {
	case deps.Inbox != nil && cfg.Webhook != nil:
		// Webhook mode: every replica takes pushed updates into the inbox;
		// no lease, no replica is special.
		b.inbox = newInboxPoller(b, nil)
		b.webhook = &webhookIntake{cfg: *cfg.Webhook, inbox: deps.Inbox, from: b.claimer(), aboutData: b.aboutData, wake: b.inbox.Wake, log: deps.Log, tg: b.tg}
		poller = b.webhook
	case deps.Inbox != nil:
		intake := &intakePoller{inbox: deps.Inbox, from: b.claimer(), aboutData: b.aboutData, timeout: cfg.PollTimeout, log: deps.Log}
		poller = intake
		b.inbox = newInboxPoller(b, nil)
		intake.wake = b.inbox.Wake
	}
	if cfg.PollingLock != nil && cfg.Webhook == nil {
		poller = &lockedPoller{inner: poller, lock: cfg.PollingLock, log: deps.Log}
	}
	if b.inbox != nil {
		b.inbox.intake = poller
		b.inflight = &b.inbox.inflight
		return b.inbox
	}
	ordered := newOrderedPoller(poller, deps.Log, deps.Panics)
	b.inflight = &ordered.inflight
	return ordered
}

// registerWorkflows adds the commands and buttons of the workflows in Deps.
func (b *Bot) registerWorkflows() {
	d := b.deps
	registerIf(d.Vacancies, b.RegisterVacancies)
	registerIf(d.Letters, b.RegisterLetters)
	registerIf(d.Rhythm, b.RegisterRhythm)
	registerIf(d.Memory, b.RegisterMemory)
	registerIf(d.Dispatch, b.RegisterDispatch)
	registerIf(d.Analysis, b.RegisterAnalysis)
	registerIf(d.Resume, b.RegisterResume)
	registerIf(d.Tasks, b.RegisterTasks)
}

// registerIf registers workflow w unless Deps leaves it out (nil).
func registerIf[W comparable](w W, register func(W)) {
	var none W
	if w != none {
		register(w)
	}
}

func (c Config) withDefaults() Config {
	domain.OrDefault(&c.PollTimeout, 10*time.Second)
	domain.OrDefault(&c.DrainTimeout, 10*time.Second)
	domain.OrDefault(&c.HandlerTimeout, 2*time.Minute)
	domain.OrDefault(&c.InboxWorkers, 16)
	domain.OrDefault(&c.InboxLease, 30*time.Second)
	domain.OrDefault(&c.InboxAttempts, 7)
	domain.OrDefault(&c.InboxMaxBackoff, 30*time.Second)
	domain.OrDefault(&c.InboxSweep, time.Second)
	if c.RateLimit <= 0 {
		c.RateLimit, c.RateBurst = 1, 20
	}
	c.RenderConfig = c.RenderConfig.withDefaults()
	return c
}

// Handle adds a command; workflows call it from their own files. A command
// goes after the others of its role but before those of a higher one, so
// /help and the menus keep the admin section last whatever the order of
// registration.
func (b *Bot) Handle(cmd Command) {
	i := len(b.commands)
	for i > 0 && b.commands[i-1].Role > cmd.Role {
		i--
	}
	b.commands = slices.Insert(b.commands, i, cmd)
	b.tb.Handle("/"+cmd.Name, b.command(cmd))
}

// HandleButton routes a callback action to h, for presses on messages in
// the presser's own private chat, where every personal workflow's buttons
// are sent.
func (b *Bot) HandleButton(a Action, h CallbackHandler) {
	b.HandleButtonIn(a, InPrivate, h)
}

// HandleButtonIn routes a callback action to h for presses on messages in
// where; a press anywhere else is refused before h runs. Telegram lets any
// member of a chat send any data on any of the bot's messages there, and a
// handler answers by editing the pressed message: a personal button
// forged in a group would overwrite a message that is not the presser's
// with what is theirs alone, for the group to read.
func (b *Bot) HandleButtonIn(a Action, where Place, h CallbackHandler) {
	b.actions.Add(a)
	b.buttons[a] = button{handle: h, where: where}
}

// pressedIn is the Place of the chat of the pressed message: InPrivate only
// for the presser's own private chat; 0 for any other group than the admin
// chat, or when Telegram does not say which message it was.
func (b *Bot) pressedIn(r *Request) Place {
	msg := r.Callback().Message
	if msg == nil || msg.Chat == nil {
		return 0
	}
	if msg.Chat.Type == tele.ChatPrivate && msg.Chat.ID != r.User.ID {
		return 0
	}
	return b.placeOf(msg.Chat)
}

// Run connects to Telegram (retrying until ctx ends), publishes the command
// menus, and serves updates until ctx is cancelled; then it stops polling and
// waits up to DrainTimeout for handlers still running. In webhook mode it
// first binds the webhook's address, and ends with the error if it cannot.
func (b *Bot) Run(ctx context.Context) error {
	if b.webhook != nil {
		if err := b.webhook.bind(); err != nil {
			return err
		}
		defer b.webhook.close()
	}
	if err := b.connect(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before Telegram ever answered: a clean stop
		}
		return err
	}
	if err := b.publishCommands(ctx); err != nil {
		// A missing menu is cosmetic; the commands still work.
		b.deps.Log.Warn("set command menus", "err", err)
	}
	if b.cfg.Webhook == nil {
		dropWebhook(ctx, b.tg, b.deps.Log)
	}
	b.started = b.deps.Clock.Now()
	done := make(chan struct{})
	go func() { b.tb.Start(); close(done) }()
	b.deps.Log.Info("bot started", "username", b.tb.Me.Username, "leased", b.cfg.PollingLock != nil)
	<-ctx.Done()
	close(b.stopping)
	b.tb.Stop()
	<-done
	drained := make(chan struct{})
	go func() { b.inflight.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(b.cfg.DrainTimeout):
		b.deps.Log.Warn("bot stop: handlers still running after drain timeout")
	}
	b.cancelHandler()
	b.deps.Log.Info("bot stopped")
	return nil
}

func (b *Bot) connect(ctx context.Context) error {
	backoff := 500 * time.Millisecond
	for {
		me, err := b.tg.GetMe(ctx)
		if err == nil {
			b.tb.Me = &tele.User{
				ID: me.ID, IsBot: me.IsBot, FirstName: me.FirstName, Username: me.Username,
				CanJoinGroups: me.CanJoinGroups, CanReadMessages: me.CanReadAllGroupMessages, SupportsInline: me.SupportsInlineQueries,
			}
			if b.deps.Connected != nil {
				b.deps.Connected(ctx, me)
			}
			return nil
		}
		var apiErr *delivery.APIError
		if errors.As(err, &apiErr) && apiErr.Code == http.StatusUnauthorized {
			return fmt.Errorf("bot: Telegram refused TELEGRAM_TOKEN: %w", err)
		}
		b.deps.Log.Warn("bot: Telegram not reachable, retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (b *Bot) isAdmin(id int64) bool { return b.admins[id] }

// WakeInbox tells the inbox's workers updates were stored, or may have
// become claimable; without an inbox it does nothing.
func (b *Bot) WakeInbox() {
	if b.inbox != nil {
		b.inbox.Wake()
	}
}

// InboxNotified is the inbox channel's NOTIFY: it wakes the inbox's
// workers unless this replica stored the updates itself (the payload is
// the storing replica's claimer, Intake), having woken them then; another
// replica's, or one without a payload (a lapsed claim given back), wakes
// them.
func (b *Bot) InboxNotified(payload string) {
	if payload == "" || payload != b.claimer() {
		b.WakeInbox()
	}
}

// passing classifies a handler's error for the inbox's retries.
func (b *Bot) passing(err error) bool {
	if b.deps.Passing != nil {
		return b.deps.Passing(err)
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// aboutData classifies a storage error for intake (Deps.AboutData).
func (b *Bot) aboutData(err error) bool {
	return b.deps.AboutData != nil && b.deps.AboutData(err)
}

// pollCanceller aborts a held getUpdates once the bot is stopping:
// telebot's poller looks at its stop channel only between requests, so a
// stop would otherwise wait out the whole long-poll timeout. Telegram
// confirms updates only by the next request's offset, so nothing is lost.
type pollCanceller struct {
	base     http.RoundTripper
	stopping <-chan struct{}
}

func (p pollCanceller) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasSuffix(req.URL.Path, "/getUpdates") {
		return p.base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancel(req.Context())
	go func() {
		select {
		case <-p.stopping:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, err := p.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}
