package bot_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/e2e/tgfake"
	"switchboard/internal/testkit"
	"switchboard/locales"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// The tests here mostly wait on the fake Bot API's pacing and the outbox,
// not on the processor: at four at once the package took 128 s alone on a
// 2-vCPU host (about 240 s at go test's default of two there, beside the
// other packages) with at most 18 connections to PostgreSQL. Six took 90 s
// with 26, but it starts beside e2e and bench, the server's largest users
// (a whole run peaked at 76 of 100 with bot holding 20), and it ends long
// before e2e either way.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(4)
	os.Exit(m.Run())
}

const adminID = 1

type bundle struct {
	srv    *tgfake.Server
	bot    *bot.Bot
	sender *delivery.Sender // nil when the test gives no store
	st     *storage.Store   // nil when the test gives no store
}

// setup builds a bot over a fresh database and a strict fake Telegram;
// extra lets a test add commands before the bot starts.
func setup(t *testing.T, cfg bot.Config, extra func(*bot.Bot)) bundle {
	t.Helper()
	return setupStore(t, cfg, storagetest.New(t), extra)
}

// setupStore is setup over a database the test also uses itself.
func setupStore(t *testing.T, cfg bot.Config, st *storage.Store, extra func(*bot.Bot)) bundle {
	t.Helper()
	return setupDeps(t, cfg, st, bot.Deps{}, extra)
}

// setupDeps is setupStore with more of the bot's collaborators; users,
// outbox, inbox, catalogue, admins, replica name and log are filled in
// when unset (st's, when st is not nil).
func setupDeps(t *testing.T, cfg bot.Config, st *storage.Store, deps bot.Deps, extra func(*bot.Bot)) bundle {
	t.Helper()
	return setupWith(t, cfg, st, deps, extra, delivery.DefaultLimits())
}

// setupWith is setupDeps with the outbox's sender pacing under pace and the
// fake Telegram built with opts.
func setupWith(t *testing.T, cfg bot.Config, st *storage.Store, deps bot.Deps, extra func(*bot.Bot), pace delivery.Limits, opts ...tgfake.Option) bundle {
	t.Helper()
	srv := tgfake.New(t, opts...)
	cfg.URL, cfg.Token = srv.URL(), srv.Token()
	if cfg.PollTimeout == 0 {
		cfg.PollTimeout = time.Second
	}
	if deps.Catalog == nil {
		deps.Catalog = locales.MustLoad()
	}
	if deps.Admins == nil {
		deps.Admins = []int64{adminID}
	}
	if deps.Replica == "" {
		deps.Replica = "test"
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var sender *delivery.Sender
	if st != nil && deps.Users == nil {
		deps.Users = st.Users()
	}
	if st != nil && deps.Direct == nil {
		// The outbox's senders deliver what the workflows write, as in the app.
		var err error
		sender, err = delivery.NewSender(delivery.Config{Poll: 20 * time.Millisecond}, st.Outbox(),
			delivery.NewClient(srv.URL(), srv.Token(), nil), delivery.NewMemoryLimiter(pace), deps.Log, nil)
		require.NoError(t, err)
		deps.Direct = sender
	}
	if st != nil && deps.Queue == nil {
		deps.Queue = st.Outbox()
	}
	if st != nil && deps.Inbox == nil {
		// Updates go through the inbox, as in the app.
		deps.Inbox, deps.Passing = st.Inbox(), storage.Passing
	}
	b, err := bot.New(cfg, deps)
	require.NoError(t, err)
	if extra != nil {
		extra(b)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		if sender != nil {
			sender.Run(ctx)
		}
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		<-sent
	})
	return bundle{srv: srv, bot: b, sender: sender, st: st}
}

// settle waits until the outbox has no pending row: everything the
// workflows wrote so far was delivered (or dropped).
func (tb bundle) settle(t *testing.T) {
	t.Helper()
	require.NotNil(t, tb.st, "settle needs the bot over a store")
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, tb.st.Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM outbox WHERE state = 'pending'`).Scan(&n))
		return n == 0
	}, 60*time.Second, 10*time.Millisecond, "the outbox drains")
}

// exec runs a statement a test sets its rows up with.
func exec(t *testing.T, st *storage.Store, sql string, args ...any) {
	t.Helper()
	_, err := st.Pool().Exec(context.Background(), sql, args...)
	require.NoError(t, err, sql)
}

// queryOne reads the one value of the one row sql returns.
func queryOne[T any](t *testing.T, st *storage.Store, sql string, args ...any) T {
	t.Helper()
	var v T
	require.NoError(t, st.Pool().QueryRow(context.Background(), sql, args...).Scan(&v), sql)
	return v
}

// annAndBob are the users most tests talk as: Ann (42) and Bob (43), both
// writing in English.
func (tb bundle) annAndBob() (ann, bob *tgfake.Person) {
	return tb.srv.User(42, "Ann", "en"), tb.srv.User(43, "Bob", "en")
}

// ask sends text and returns the bot's first reply to it.
func (tb bundle) ask(t *testing.T, who *tgfake.Person, text string) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(who.ID(), text)
	return tb.srv.WaitMessageAfter(t, who.ID(), sent.MessageID, nil)
}

func TestStartHelpAndRoles(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{}, nil)
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	tb.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	ann := tb.srv.User(42, "Ann", "en")
	admin := tb.srv.User(adminID, "Boss", "en")

	reply := tb.ask(t, ann, "/start")
	require.Contains(t, reply.Text, "Hello, Ann!")
	require.Contains(t, reply.Text, "/help")
	require.NotContains(t, reply.Text, "/status", "a plain user does not see admin commands")

	reply = tb.ask(t, admin, "/help")
	require.Contains(t, reply.Text, "/status — replicas, jobs and queues")
	require.Contains(t, reply.Text, "Admin")

	reply = tb.ask(t, ann, "/status")
	require.Equal(t, "This command is for admins only.", reply.Text)

	reply = tb.ask(t, admin, "/status")
	require.Contains(t, reply.Text, "Status — replica test")

	// The command menus Telegram shows are built from the same list: the
	// private commands in private chats, nothing in groups or in the
	// default list groups fall back to.
	def := tb.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "")
	require.Equal(t, []string{"start", "help", "lang", "timezone"}, commandNames(def))
	require.Empty(t, tb.srv.Commands(tgfake.BotCommandScope{Type: "all_group_chats"}, ""))
	require.Empty(t, tb.srv.Commands(tgfake.BotCommandScope{Type: "default"}, ""))
	adm := tb.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminID}, "uk")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "status"}, commandNames(adm))
	require.Equal(t, "репліки, задачі та черги", adm[4].Description)
}

func commandNames(cs []tgfake.BotCommand) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Command)
	}
	return out
}

func TestLanguageSwitchAndFallback(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{}, nil)
	olena := tb.srv.User(7, "Олена", "ru") // Telegram says ru; she prefers uk

	require.Contains(t, tb.ask(t, olena, "/help").Text, "Что я умею")
	require.Equal(t, "Мову змінено на українську.", tb.ask(t, olena, "/lang uk").Text)
	require.Contains(t, tb.ask(t, olena, "/help").Text, "Що я вмію", "the next reply follows the choice")
	require.Equal(t, "Мови «de» я не знаю. Доступні мови: en, ru, uk. Приклад: /lang uk", tb.ask(t, olena, "/lang de").Text)
	require.Contains(t, tb.ask(t, olena, "/lang").Text, "/lang en|ru|uk")

	pierre := tb.srv.User(8, "Pierre", "fr")
	require.Contains(t, tb.ask(t, pierre, "/help").Text, "What I can do", "unknown language falls back to en")
}

func TestUnknownCommandAndPlainText(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{}, nil)
	ann := tb.srv.User(42, "Ann", "en")
	reply := tb.ask(t, ann, "/frobnicate<b>Go & Rust</b> now")
	require.Equal(t, "I don't know the command /frobnicate<b>Go. Send /help to see what I can do.", reply.Text,
		"user text is escaped, so Telegram shows it literally")
	for _, e := range reply.Entities {
		require.Equal(t, "bot_command", e.Type, "no markup was injected")
	}

	require.Equal(t, "Send /help to see what I can do.", tb.ask(t, ann, "hello there").Text)
}

func TestPanickingHandlerIsContained(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	panics := domain.NewPanics(domain.NewRegistrar(reg))
	tb := setupDeps(t, bot.Config{}, storagetest.New(t), bot.Deps{Panics: panics}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "boom", Desc: "cmd.help", Handle: func(r *bot.Request) error { panic("kaboom") }})
	})
	ann := tb.srv.User(42, "Ann", "ru")
	// A panic is no passing failure: the inbox fails the update at once and
	// says, in reply to it, that it was not carried out.
	boom := ann.SendText(ann.ID(), "/boom")
	reply := tb.srv.WaitMessageAfter(t, ann.ID(), boom.MessageID, nil)
	require.Equal(t, "Это сообщение не удалось выполнить, поэтому ничего не сделано. Пожалуйста, отправьте его ещё раз.", reply.Text)
	require.Equal(t, boom.MessageID, reply.ReplyToID())
	require.Contains(t, tb.ask(t, ann, "/start").Text, "Здравствуйте, Ann!", "the next update is still served")
	require.Equal(t, 1.0, domaintest.Counter(t, reg, "panics_total", "update"), "counted once, where every contained panic is")
}

// A handler failing for a passing reason is retried from the inbox and the
// user hears nothing until it succeeds; the chat's next update waits for it.
func TestInboxRetriesAPassingFailureSilently(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	tries := 0
	tb := setup(t, bot.Config{InboxMaxBackoff: 50 * time.Millisecond}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "flaky", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			mu.Lock()
			tries++
			n := tries
			mu.Unlock()
			if n < 3 {
				return fmt.Errorf("database away: %w", context.DeadlineExceeded)
			}
			return r.Reply("done at last", nil)
		}})
	})
	ann := tb.srv.User(42, "Ann", "en")
	flaky := ann.SendText(ann.ID(), "/flaky")
	next := ann.SendText(ann.ID(), "/start")
	first := tb.srv.WaitMessageAfter(t, ann.ID(), flaky.MessageID, nil)
	require.Equal(t, "done at last", first.Text, "nothing before the success")
	after := tb.srv.WaitMessageAfter(t, ann.ID(), first.MessageID, nil)
	require.Contains(t, after.Text, "Hello, Ann!", "the next update waited its turn")
	require.Greater(t, after.MessageID, next.MessageID)
	mu.Lock()
	require.Equal(t, 3, tries)
	mu.Unlock()
}

// An update that keeps failing for a passing reason is failed after
// InboxAttempts, and the user is told once that it was not carried out.
func TestInboxGivesUpAfterItsAttemptsAndTellsOnce(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	tries := 0
	tb := setup(t, bot.Config{InboxAttempts: 3, InboxMaxBackoff: 50 * time.Millisecond}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "down", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			mu.Lock()
			tries++
			mu.Unlock()
			return fmt.Errorf("database away: %w", context.DeadlineExceeded)
		}})
	})
	ann := tb.srv.User(42, "Ann", "en")
	down := ann.SendText(ann.ID(), "/down")
	told := tb.srv.WaitMessageAfter(t, ann.ID(), down.MessageID, nil)
	require.Equal(t, "This message could not be carried out, so nothing was done. Please send it again.", told.Text)
	require.Contains(t, tb.ask(t, ann, "/start").Text, "Hello, Ann!")
	mu.Lock()
	require.Equal(t, 3, tries)
	mu.Unlock()
	n := 0
	for _, m := range tb.srv.Messages(ann.ID()) {
		if strings.Contains(m.Text, "could not be carried out") {
			n++
		}
	}
	require.Equal(t, 1, n)

	// Told in the language chosen with /lang, which the database still
	// knows, not Telegram's.
	require.Equal(t, "Мову змінено на українську.", tb.ask(t, ann, "/lang uk").Text)
	again := ann.SendText(ann.ID(), "/down")
	told = tb.srv.WaitMessageAfter(t, ann.ID(), again.MessageID, nil)
	require.Equal(t, "Це повідомлення не вдалося виконати, тож нічого не зроблено. Будь ласка, надішліть його ще раз.", told.Text)
}

var echoAction = bot.NewAction("t_echo", 1)

func TestEscapingSplittingAndButtons(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "vacancy", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			title := "<b>Go & Rust</b>"                    // as HH might send it
			data, err := bot.Encode(echoAction, r.User.ID) // the button belongs to its recipient
			if err != nil {
				return err
			}
			kb := &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{{Text: "Applied", Data: data}}}}
			return r.Reply("<b>"+bot.Escape(title)+"</b>", kb)
		}})
		b.Handle(bot.Command{Name: "long", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			return r.Reply(strings.Repeat(strings.Repeat("я", 99)+"\n", 100), nil)
		}})
		b.Handle(bot.Command{Name: "links", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			var lines []string
			for i := range 150 {
				lines = append(lines, fmt.Sprintf(`<a href="https://t.me/%d">%d</a>`, i, i+1))
			}
			return r.Reply(strings.Join(lines, "\n"), nil)
		}})
		b.HandleButton(echoAction, func(r *bot.Request, cb bot.Callback) error {
			if cb.IDs[0] != r.User.ID {
				return r.Forbidden()
			}
			return r.Toast("pressed " + bot.Escape(cb.Action.Name))
		})
	})
	ann := tb.srv.User(42, "Ann", "en")

	msg := tb.ask(t, ann, "/vacancy")
	require.Equal(t, "<b>Go & Rust</b>", msg.Text, "shown literally, inside real bold")
	require.Len(t, msg.Entities, 1)
	require.Equal(t, "bold", msg.Entities[0].Type)

	q, err := ann.Press(msg, "t_echo:16") // 42 in base 36
	require.NoError(t, err)
	require.Equal(t, "pressed t_echo", tb.srv.WaitCallbackAnswer(t, q.ID).Text)

	q = ann.PressRaw(msg, "t_echo:17") // well-formed, but names user 43
	a := tb.srv.WaitCallbackAnswer(t, q.ID)
	requireAlert(t, a, "This button is not for you.")

	for _, forged := range []string{"t_echo:025", "t_echo", "nope:1", "t_echo:1:2"} {
		q = ann.PressRaw(msg, forged)
		a := tb.srv.WaitCallbackAnswer(t, q.ID)
		requireAlert(t, a, "This button is no longer valid.", forged)
	}

	sent := ann.SendText(ann.ID(), "/long")
	tb.srv.WaitFor(t, 5*time.Second, func() bool {
		return len(botMessagesAfter(tb.srv.Messages(ann.ID()), sent.MessageID)) == 3
	})
	var letters int
	for _, m := range botMessagesAfter(tb.srv.Messages(ann.ID()), sent.MessageID) {
		require.LessOrEqual(t, len([]rune(m.Text)), bot.MaxMessageLen)
		letters += strings.Count(m.Text, "я")
	}
	require.Equal(t, 9900, letters, "10 000 characters arrive whole, in three messages")

	// 150 links fit one message's length but not Telegram's 100 entities,
	// past which it would show them as plain text.
	sent = ann.SendText(ann.ID(), "/links")
	tb.srv.WaitFor(t, 5*time.Second, func() bool {
		return len(botMessagesAfter(tb.srv.Messages(ann.ID()), sent.MessageID)) == 2
	})
	var links int
	for _, m := range botMessagesAfter(tb.srv.Messages(ann.ID()), sent.MessageID) {
		links += len(m.Entities)
	}
	require.Equal(t, 150, links, "every link arrives a link, in two messages")
}

func botMessagesAfter(ms []tgfake.BotMessage, id int) []tgfake.BotMessage {
	var out []tgfake.BotMessage
	for _, m := range ms {
		if m.MessageID > id {
			out = append(out, m)
		}
	}
	return out
}

func TestRateLimitWarnsOnceThenDrops(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{RateLimit: 0.001, RateBurst: 2}, nil)
	ann := tb.srv.User(42, "Ann", "en")
	tb.ask(t, ann, "/help")
	tb.ask(t, ann, "/help")
	require.Equal(t, "You are sending messages too fast. Please wait a few seconds.", tb.ask(t, ann, "/help").Text)
	before := len(tb.srv.Messages(ann.ID()))
	ann.SendText(ann.ID(), "/help")
	// A different user is not affected, and serving them proves the dropped
	// update was processed (updates are handled in order of arrival).
	bob := tb.srv.User(43, "Bob", "en")
	tb.ask(t, bob, "/help")
	tb.srv.WaitUpdatesConsumed(t)
	require.Equal(t, before, len(tb.srv.Messages(ann.ID())), "no second warning")

	// An admin is not limited.
	boss := tb.srv.User(adminID, "Boss", "en")
	for range 4 {
		require.Contains(t, tb.ask(t, boss, "/help").Text, "What I can do for you")
	}
}

// testRenderer is the renderers the workflows under test get, as the app
// builds them: from the catalog and the admin chat's settings alone.
func testRenderer(rc bot.RenderConfig) *bot.Renderer {
	return bot.NewRenderer(rc, locales.MustLoad(), slog.New(slog.DiscardHandler))
}

// typistFunc is a memory.Typist of a test's own.
type typistFunc func(ctx context.Context, chatID int64) error

func (f typistFunc) Typing(ctx context.Context, chatID int64) error { return f(ctx, chatID) }
