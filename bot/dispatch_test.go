package bot_test

import (
	"context"
	"html"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/dispatch"
	"switchboard/e2e/tgfake"
	"switchboard/hh"
	"switchboard/llm"
	"switchboard/locales"
	"switchboard/outage"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// adminChat is ADMIN_CHAT_ID: the supergroup the live log goes to.
const adminChat = -1001000000001

type dispEnv struct {
	bundle
	st    *storage.Store
	svc   *dispatch.Service
	admin *tgfake.Person
}

// status is what app.go gives /status, over the test's database and
// clients that have called nothing: the LLM and HH lines say both answer.
func status(t *testing.T, st *storage.Store) outage.Status {
	t.Helper()
	model, err := llm.New(llm.Config{Provider: llm.ProviderOllama, URL: "http://127.0.0.1:1", Model: "m"})
	require.NoError(t, err)
	hhc, err := hh.New(hh.Config{URL: "http://127.0.0.1:1", UserAgent: "switchboard-test"})
	require.NoError(t, err)
	return outage.Status{Store: st, Beats: st.Heartbeats("test", "", 5*time.Minute, slog.New(slog.DiscardHandler)),
		LLM: model, HH: hhc, VacancyClaimLease: 2 * time.Minute, VacancyRecoveryWindow: 48 * time.Hour}
}

// setupDispatch is the bot with the dispatch workflow over one database,
// the live log going to adminChat. The workflow's Run is not started: the
// tests call its watchdog themselves, so nothing expires behind their back.
func setupDispatch(t *testing.T) dispEnv {
	t.Helper()
	return dispatchBot(t, bot.RenderConfig{AdminChatID: adminChat, AdminLang: "en"},
		dispatch.Config{OfferSLA: 10 * time.Minute, CommissionRate: 10}, nil)
}

// dispatchBot is the bot with the dispatch workflow of cfg over a database
// of its own, rendering by rc, the calendar on calendarClock (nil: the
// real one).
func dispatchBot(t *testing.T, rc bot.RenderConfig, cfg dispatch.Config, calendarClock clockwork.Clock) dispEnv {
	t.Helper()
	st := storagetest.New(t)
	svc, err := dispatch.NewService(cfg, dispatch.Deps{
		Orders: st.Orders(), Masters: st.Masters(), Notifier: testRenderer(rc).DispatchNotes(), Log: slog.New(slog.DiscardHandler),
		CalendarClock: calendarClock,
	})
	require.NoError(t, err)
	tb := setupDeps(t, bot.Config{RateLimit: 1000, RateBurst: 1000, RenderConfig: rc},
		st, bot.Deps{Status: status(t, st), Dispatch: svc}, nil)
	// The module's drop hooks, as app.go wires them.
	for kind, drop := range svc.Module(dispatch.Schedule{}).Drops {
		tb.sender.OnDrop(kind, drop)
	}
	tb.srv.Supergroup(adminChat, "Dispatch log", "")
	return dispEnv{bundle: tb, st: st, svc: svc, admin: tb.srv.User(adminID, "Boss", "en")}
}

// register makes each of people a master with /master args and checks
// they were welcomed.
func (env dispEnv) register(t *testing.T, args string, people ...*tgfake.Person) {
	t.Helper()
	for _, p := range people {
		require.Contains(t, env.ask(t, p, "/master "+args).Text, "\n\n")
		require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM masters WHERE user_id = $1`, p.ID()))
	}
}

// logLines are the live log's lines, oldest first: lines that burst come
// gathered into one message.
func (env dispEnv) logLines(t *testing.T) []string {
	t.Helper()
	env.settle(t)
	var out []string
	for _, m := range env.srv.Messages(adminChat) {
		out = append(out, strings.Split(m.Text, "\n")...)
	}
	return out
}

type offerRow struct {
	ID, OrderID, MasterID int64
	State                 string
	Round                 int
	ChatID, MessageID     *int64
	ViewedAt              *time.Time
}

func offers(t *testing.T, st *storage.Store) []offerRow {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(),
		`SELECT id, order_id, master_id, state, round, chat_id, message_id, viewed_at FROM offers ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[offerRow])
	require.NoError(t, err)
	return out
}

type orderRow struct {
	ID         int64
	State      string
	MasterID   *int64
	Round      int
	Commission *int64
	DueAt      *time.Time
}

func orderByID(t *testing.T, st *storage.Store, id int64) orderRow {
	t.Helper()
	rows, err := st.Pool().Query(context.Background(),
		`SELECT id, state, master_id, round, commission, commission_due_at FROM orders WHERE id = $1`, id)
	require.NoError(t, err)
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[orderRow])
	require.NoError(t, err)
	return o
}

// offerMessage is the master's message for an offer, as it is once the
// outbox has delivered everything queued.
func (env dispEnv) offerMessage(t *testing.T, f offerRow) tgfake.BotMessage {
	t.Helper()
	env.settle(t)
	for _, g := range offers(t, env.st) {
		if g.ID == f.ID {
			f = g
		}
	}
	require.NotNil(t, f.ChatID, "offer %d has its message recorded", f.ID)
	require.NotNil(t, f.MessageID)
	m, ok := env.srv.MessageByID(*f.ChatID, int(*f.MessageID))
	require.True(t, ok)
	return m
}

// messages are a chat's messages once the outbox has delivered everything.
func (env dispEnv) messages(t *testing.T, chat int64) []tgfake.BotMessage {
	t.Helper()
	env.settle(t)
	return env.srv.Messages(chat)
}

// press presses the button of msg whose data is data, as p, and returns
// the bot's answer.
func press(t *testing.T, srv *tgfake.Server, p *tgfake.Person, msg tgfake.BotMessage, data string) tgfake.CallbackAnswer {
	t.Helper()
	q, err := p.Press(msg, data)
	require.NoError(t, err)
	return answer(t, srv, q)
}

// pressRaw is press with any data, whether msg shows it or not: a stale or
// forged press.
func pressRaw(t *testing.T, srv *tgfake.Server, p *tgfake.Person, msg tgfake.BotMessage, data string) tgfake.CallbackAnswer {
	t.Helper()
	return answer(t, srv, p.PressRaw(msg, data))
}

// requireAlert asserts that a press was answered with text in an alert,
// which the presser must dismiss.
func requireAlert(t *testing.T, a tgfake.CallbackAnswer, text string, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, text, a.Text, msgAndArgs...)
	require.True(t, a.ShowAlert, msgAndArgs...)
}

// requireToast asserts that a press was answered with text in a toast,
// which goes by itself.
func requireToast(t *testing.T, a tgfake.CallbackAnswer, text string, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, text, a.Text, msgAndArgs...)
	require.False(t, a.ShowAlert, msgAndArgs...)
}

func int64p(v int64) *int64 { return &v }

// requireDisabled asserts that a closed offer's buttons are one disabled
// button saying how it ended.
func requireDisabled(t *testing.T, m tgfake.BotMessage, label string) {
	t.Helper()
	buttons := m.ReplyMarkup.Buttons()
	require.Len(t, buttons, 1, "a closed offer keeps one button: %v", m.ReplyMarkup.Labels())
	require.Equal(t, label, buttons[0].Text)
	require.NotNil(t, buttons[0].Disabled, "it does nothing")
}

const usageMaster = "Usage: /master city district skill[,skill]\nA name of several words goes in quotes.\n" +
	"Example: /master \"Saint Petersburg\" Center plumbing,electrics"

const usageOrder = "Usage: /order city district skill price description\n" +
	"A name of several words goes in quotes; the description may take several lines.\n" +
	"Optional fields go on lines of their own in the description:\n" +
	"address: Tverskaya 12, apt 5\nname: Ivan\nphone: +7 999 123-45-67\n" +
	"when: 2026-11-27 10:00-12:00 (or 27.11.2026, 27.11 10-12; the time may be left out)\n" +
	"Only the master who accepts the order sees the address, name and phone.\n" +
	"Example: /order Moscow Center plumbing 3000 The kitchen tap is leaking"

func TestMasterRegistrationAndAvailability(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ann := env.srv.User(42, "Ann", "en")
	ask := func(text string) string { return env.ask(t, ann, text).Text }

	notMaster := "You are not registered as a master yet.\n\n" + usageMaster
	require.Equal(t, notMaster, ask("/master"))
	require.Equal(t, notMaster, ask("/pause"))
	require.Equal(t, notMaster, ask("/resume"))

	example := "e.g. /master Moscow Center plumbing,electrics."
	for in, want := range map[string]string{
		"/master Moscow":        "Missing: the district and your skills. After the city Moscow give the district, then your skills separated by commas, " + example,
		"/master Moscow Center": "Missing: your skills. After the district Center list them separated by commas, " + example,
		"/master Moscow Center " + strings.Repeat("x", dispatch.MaxSkill+1):        strings.Repeat("x", 39) + "… is too long for a skill: at most 50 characters.",
		"/master Moscow Center a,b,c,d,e,f,g,h,i,j,k":                              "At most 10 skills, please.",
		"/master " + strings.Repeat("я", dispatch.MaxPlace+1) + " Center plumbing": strings.Repeat("я", 39) + "… is too long for a city or a district: at most 100 characters.",
		"/master Moscow \"\" plumbing":                                             "A city or a district cannot be empty: write it, in quotes if it has several words, e.g. \"Saint Petersburg\".",
		"/master Moscow Center , ,":                                                "Give at least one skill, e.g. plumbing or plumbing,electrics.",
	} {
		require.Equal(t, want, ask(in), in)
	}
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM masters`), "refused registrations store nothing")

	reply := env.ask(t, ann, `/master "Saint Petersburg" <Center> Plumbing, electrics`)
	require.Equal(t, "Welcome aboard! You are registered as a master: orders that match your city, district and skills will come here.\n\n"+
		"Your master profile\nCity: Saint Petersburg\nDistrict: <Center>\nSkills: plumbing, electrics\n"+
		"Status: ✅ active — you receive offers (/pause to stop)\nCommission owed: none\nOffers: none yet\nOrders: none yet", reply.Text)
	var city, district string
	var skills []string
	var active bool
	require.NoError(t, env.st.Pool().QueryRow(context.Background(),
		`SELECT city, district, skills, active FROM masters WHERE user_id = 42`).Scan(&city, &district, &skills, &active))
	require.Equal(t, "Saint Petersburg", city)
	require.Equal(t, "<Center>", district, "stored as written, escaped only when shown")
	require.Equal(t, []string{"plumbing", "electrics"}, skills)
	require.True(t, active)

	require.True(t, strings.HasPrefix(ask("/master Moscow Center plumbing"), "Your master profile is updated.\n\nYour master profile\nCity: Moscow\n"))

	require.Equal(t, "⏸ Paused. No new offers come until you send /resume.", ask("/pause"))
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM masters WHERE user_id = 42 AND NOT active`))
	require.Equal(t, "You are already paused; send /resume to receive offers again.", ask("/pause"))
	require.Contains(t, ask("/master"), "Status: ⏸ paused — no offers until /resume")
	require.Equal(t, "✅ Back to work: new offers will come here.", ask("/resume"))
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM masters WHERE user_id = 42 AND active`))
	require.Equal(t, "You are already active and receive offers.", ask("/resume"))

	// The menu shows the masters' commands to everyone and the dispatch
	// commands to admins only (an admin's menu is set by their first
	// update if their chat did not exist when the bot started).
	env.ask(t, env.admin, "/help")
	def := env.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "master", "pause", "resume"}, commandNames(def))
	adm := env.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminID}, "ru")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "master", "pause", "resume", "status", "order", "orders", "done", "cancel", "paid", "masters", "thread"},
		commandNames(adm))
	require.Equal(t, "отметить оплату комиссии мастером", adm[12].Description)
}

func TestCommissionBlockAndPaid(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ctx := context.Background()
	ann := env.srv.User(42, "Ann", "en")
	env.register(t, "Moscow Center plumbing", ann)

	// An order Ann did yesterday whose commission is an hour overdue.
	var orderID int64
	require.NoError(t, env.st.Pool().QueryRow(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id,
                    assigned_at, done_at, commission, commission_due_at)
VALUES (1, 'Moscow', 'Center', 'plumbing', 3000, 'tap', 'DONE', 42,
        now() - interval '1 day', now() - interval '4 hours', 300, now() - interval '1 hour')
RETURNING id`).Scan(&orderID))
	before := len(env.messages(t, 42))
	n, err := env.svc.Commission(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM masters WHERE user_id = 42 AND blocked_at IS NOT NULL`))
	msgs := env.messages(t, 42)
	require.Len(t, msgs, before+1)
	require.Equal(t, "⛔ Commission of 300 is overdue. No new offers come until it is paid; once you have paid, an admin records it with /paid.",
		msgs[len(msgs)-1].Text)
	require.Equal(t, []string{"⛔ Ann (id 42) blocked: commission 300 overdue"}, env.logLines(t))

	profile := env.ask(t, ann, "/master").Text
	require.Regexp(t, `\nStatus: ✅ not paused, but offers are blocked until your commission is paid \(below\)\n`+
		`⛔ Blocked since \d+ \w{3}( \d{4})?, \d\d:\d\d \(Moscow\): commission of 300 is overdue\. No offers come until an admin records your payment with /paid\.\n`+
		`Commission owed: 300, overdue since \d+ \w{3}( \d{4})?, \d\d:\d\d \(Moscow\)\nOffers: none yet\nOrders: done 1$`, profile)
	require.Equal(t, "You are not paused, but ⛔ your commission is overdue: no offers come until an admin records your payment.",
		env.ask(t, ann, "/resume").Text)
	require.Equal(t, "⏸ Paused. No new offers come until you send /resume.", env.ask(t, ann, "/pause").Text)
	require.Equal(t, "▶️ Pause ended, but ⛔ your commission is overdue: no offers come until an admin records your payment.",
		env.ask(t, ann, "/resume").Text)

	// Only an admin records payment.
	require.Equal(t, "This command is for admins only.", env.ask(t, ann, "/paid 42").Text)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM orders WHERE commission_paid_at IS NULL`))

	require.Equal(t, "Usage: /paid MASTER, the master's user id or @username. It settles all their unpaid commission and lifts a block.",
		env.ask(t, env.admin, "/paid").Text)
	require.Equal(t, "@nobody is not a registered master: give the master's user id or @username, e.g. /paid @ivan.", env.ask(t, env.admin, "/paid @nobody").Text)
	require.Equal(t, "777 is not a registered master: give the master's user id or @username, e.g. /paid @ivan.", env.ask(t, env.admin, "/paid 777").Text)
	require.Equal(t, "@ann @bob is not one master: give a single user id or @username, e.g. /paid @ivan or /paid 123456789.",
		env.ask(t, env.admin, "/paid @ann @bob").Text)

	// Telegram reports a username with each update; the fake has none, so
	// the test gives Ann one the way the users table would hold it.
	_, err = env.st.Pool().Exec(ctx, `UPDATE users SET username = 'ann_fix' WHERE id = 42`)
	require.NoError(t, err)
	before = len(env.messages(t, 42))
	require.Equal(t, "💵 Recorded: Ann (@ann_fix, id 42) paid 300 of commission (orders: 1).\nThe block is lifted; they receive offers again.",
		env.ask(t, env.admin, "/paid @ANN_fix").Text)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM masters WHERE user_id = 42 AND blocked_at IS NULL`))
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM orders WHERE id = $1 AND commission_paid_at IS NOT NULL`, orderID))
	msgs = env.messages(t, 42)
	require.Len(t, msgs, before+1)
	require.Equal(t, "✅ Commission of 300 is settled. New offers will come here again.", msgs[len(msgs)-1].Text)

	require.Equal(t, []string{
		"⛔ Ann (id 42) blocked: commission 300 overdue",
		"💵 Ann (@ann_fix, id 42) paid commission 300; block lifted",
	}, env.logLines(t))
	require.Equal(t, "Ann (@ann_fix, id 42) owes no commission; nothing to record.", env.ask(t, env.admin, "/paid 42").Text)

	// Blocked again while paused: paying lifts the block, not her pause,
	// and neither she nor the admin is told offers come again.
	_, err = env.st.Pool().Exec(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id,
                    assigned_at, done_at, commission, commission_due_at)
VALUES (1, 'Moscow', 'Center', 'plumbing', 2000, 'sink', 'DONE', 42,
        now() - interval '1 day', now() - interval '4 hours', 200, now() - interval '1 hour')`)
	require.NoError(t, err)
	before = len(env.messages(t, 42))
	n, err = env.svc.Commission(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, env.messages(t, 42), before+1, "the block's notice")
	require.Equal(t, "⏸ Paused. No new offers come until you send /resume.", env.ask(t, ann, "/pause").Text)
	before = len(env.messages(t, 42))
	require.Equal(t, "💵 Recorded: Ann (id 42) paid 200 of commission (orders: 1).\nThe block is lifted; they are paused, so offers come again once they send /resume.",
		env.ask(t, env.admin, "/paid 42").Text)
	msgs = env.messages(t, 42)
	require.Len(t, msgs, before+1)
	require.Equal(t, "✅ Commission of 200 is settled. You are still paused: send /resume to receive offers again.", msgs[len(msgs)-1].Text)
	require.Contains(t, env.ask(t, ann, "/master").Text, "Status: ⏸ paused — no offers until /resume")

	// Paid before its deadline: a thank-you, and no block to lift.
	_, err = env.st.Pool().Exec(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id,
                    assigned_at, done_at, commission, commission_due_at)
VALUES (1, 'Moscow', 'Center', 'plumbing', 1000, 'tap', 'DONE', 42,
        now() - interval '2 hours', now() - interval '1 hour', 100, now() + interval '2 hours')`)
	require.NoError(t, err)
	before = len(env.messages(t, 42))
	require.Equal(t, "💵 Recorded: Ann (id 42) paid 100 of commission (orders: 1).", env.ask(t, env.admin, "/paid 42").Text)
	msgs = env.messages(t, 42)
	require.Len(t, msgs, before+1)
	require.Equal(t, "💵 An admin recorded your commission payment: 100 (orders: 1). Thank you!", msgs[len(msgs)-1].Text)
	lines := env.logLines(t)
	require.Equal(t, []string{"💵 Ann (id 42) paid commission 200; block lifted", "💵 Ann (id 42) paid commission 100"}, lines[len(lines)-2:])
}

// The block withdraws the offers its masters hold, and each reads it in
// their own language: the offer's message edited to say why, with one
// disabled button; their Accept refused with why and what to do. Another
// press on the old message, and Accept once the block is lifted, says it
// was withdrawn for the block, not that the order was cancelled.
func TestBlockWithdrawsOffersInTheMastersWords(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ctx := context.Background()
	boris := env.srv.User(43, "Борис", "ru")
	olena := env.srv.User(44, "Олена", "uk")
	env.register(t, "Moscow Center plumbing", boris)
	env.register(t, "Kyiv Center plumbing", olena)
	for _, id := range []int64{43, 44} {
		_, err := env.st.Pool().Exec(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description, state, master_id,
                    assigned_at, done_at, commission, commission_due_at)
VALUES (1, 'Moscow', 'Center', 'plumbing', 3000, 'tap', 'DONE', $1,
        now() - interval '1 day', now() - interval '4 hours', 300, now() - interval '1 hour')`, id)
		require.NoError(t, err)
	}
	env.ask(t, env.admin, "/order Moscow Center plumbing 5000 Bathroom pipe")
	env.ask(t, env.admin, "/order Kyiv Center plumbing 4000 Kitchen tap")
	fs := offers(t, env.st)
	require.Len(t, fs, 2)
	require.Equal(t, []int64{43, 44}, []int64{fs[0].MasterID, fs[1].MasterID})

	n, err := env.svc.Commission(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	fs = offers(t, env.st)
	require.Equal(t, []string{"WITHDRAWN", "WITHDRAWN"}, []string{fs[0].State, fs[1].State})

	ru := env.offerMessage(t, fs[0])
	require.Equal(t, "⛔ Предложение по заказу #"+itoa(fs[0].OrderID)+" отозвано: просрочена комиссия. "+
		"Когда она будет оплачена и администратор отметит оплату командой /paid, предложения снова будут приходить.\n"+
		"📍 Moscow, Center\n🛠 plumbing\n💰 5\u00a0000\n📝 Bathroom pipe", ru.Text)
	requireDisabled(t, ru, "⛔ Комиссия просрочена")
	uk := env.offerMessage(t, fs[1])
	require.Equal(t, "⛔ Пропозицію щодо замовлення #"+itoa(fs[1].OrderID)+" відкликано: прострочено комісію. "+
		"Щойно її буде сплачено й адміністратор позначить сплату командою /paid, пропозиції знову надходитимуть.\n"+
		"📍 Kyiv, Center\n🛠 plumbing\n💰 4\u00a0000\n📝 Kitchen tap", uk.Text)
	requireDisabled(t, uk, "⛔ Комісію прострочено")

	requireAlert(t, pressRaw(t, env.srv, boris, ru, data(t, "oa", fs[0].ID)),
		"⛔ Комиссия просрочена: новые заказы брать нельзя, пока она не оплачена. "+
			"После оплаты администратор отметит её командой /paid, и предложения снова будут приходить. Сумма долга — в /master.")
	requireAlert(t, pressRaw(t, env.srv, olena, uk, data(t, "oa", fs[1].ID)),
		"⛔ Комісію прострочено: нові замовлення брати не можна, доки її не сплачено. "+
			"Після сплати адміністратор позначить її командою /paid, і пропозиції знову надходитимуть. Суму боргу видно в /master.")
	require.Equal(t, []string{"WITHDRAWN", "WITHDRAWN"}, []string{offers(t, env.st)[0].State, offers(t, env.st)[1].State})

	requireAlert(t, pressRaw(t, env.srv, olena, uk, data(t, "od", fs[1].ID)), "Пропозицію відкликано, поки комісію було прострочено.")
	_, err = env.st.Pool().Exec(ctx, `UPDATE masters SET blocked_at = NULL WHERE user_id = 43`)
	require.NoError(t, err)
	requireAlert(t, pressRaw(t, env.srv, boris, ru, data(t, "oa", fs[0].ID)), "Предложение отозвано, пока комиссия была просрочена.")

	a, b := itoa(fs[0].OrderID), itoa(fs[1].OrderID)
	nobody := ": nobody left to offer it to (every matching master declined it or let it expire twice, or none matches); it waits for a new or resumed master"
	lines := env.logLines(t)
	require.Len(t, lines, 10, strings.Join(lines, "\n"))
	require.Equal(t, []string{
		"🆕 Order #" + a + " created",
		"📤 Order #" + a + ": offer #" + itoa(fs[0].ID) + " sent to Борис (id 43), round 1",
		"🆕 Order #" + b + " created",
		"📤 Order #" + b + ": offer #" + itoa(fs[1].ID) + " sent to Олена (id 44), round 1",
		"⛔ Борис (id 43) blocked: commission 300 overdue",
		"⛔ Олена (id 44) blocked: commission 300 overdue",
		"↩️ Order #" + a + ": offer #" + itoa(fs[0].ID) + " to Борис (id 43) withdrawn, commission overdue",
		"↩️ Order #" + b + ": offer #" + itoa(fs[1].ID) + " to Олена (id 44) withdrawn, commission overdue",
	}, lines[:8])
	// Each order's follow-up runs on its own, in either order.
	require.ElementsMatch(t, []string{"⚠️ Order #" + a + nobody, "⚠️ Order #" + b + nobody}, lines[8:])
}

var answerWithin = regexp.MustCompile(`\n\n⏳ Answer within (10 min|9 min \d{1,2} s)\.$`)

func TestOrderOfferedViewedAccepted(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ctx := context.Background()
	ann, bob := env.annAndBob()
	carl := env.srv.User(44, "Carl", "en")
	env.register(t, "Moscow Center plumbing,electrics", ann)
	env.register(t, "moscow CENTER plumbing", bob)
	env.register(t, "Moscow North plumbing", carl)
	bobWelcome, _ := env.srv.LastMessage(43)
	carlBefore := len(env.messages(t, 44))

	// Admins only, and malformed orders are refused with the usage.
	require.Equal(t, "This command is for admins only.", env.ask(t, ann, "/order Moscow Center plumbing 3000 Tap").Text)
	require.Equal(t, usageOrder, env.ask(t, env.admin, "/order").Text)
	// A refusal names the missing or wrong part, with an example.
	example := "e.g. /order Moscow Center plumbing 3000 The kitchen tap is leaking."
	for in, want := range map[string]string{
		"/order Moscow":                          "Missing: the district, skill, price and description. After the city Moscow give them in that order, " + example,
		"/order Moscow Center":                   "Missing: the skill, price and description. After the district Center give them in that order, " + example,
		"/order Moscow Center plumbing":          "Missing: the price and description. After the skill plumbing give the price as a whole number, then what needs doing, " + example,
		"/order Moscow Center plumbing 3000":     "The description is missing: after the price, say what needs doing, " + example,
		"/order Moscow Center plumbing lots Tap": "lots is not a price: the fourth word, after the city, district and skill, must be a whole number from 1 to 100000000, " + example,
	} {
		require.Equal(t, want, env.ask(t, env.admin, in).Text, in)
	}
	require.Equal(t, "The description is too long: at most 2000 characters.",
		env.ask(t, env.admin, "/order Moscow Center plumbing 3000 "+strings.Repeat("d", dispatch.MaxDescription+1)).Text)
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM orders`))
	require.Empty(t, env.logLines(t))

	desc := "Kitchen <b>tap</b> & sink\nsecond line"
	reply := env.ask(t, env.admin, "/order Moscow Center Plumbing 3_000 "+desc)
	var orderID int64
	require.NoError(t, env.st.Pool().QueryRow(ctx, `SELECT id FROM orders`).Scan(&orderID))
	require.Equal(t, "🆕 Order #"+itoa(orderID)+" created: plumbing, Moscow, Center, price 3,000.\nKitchen <b>tap</b> & sink second line\n\n"+
		"It is being offered to matching masters; follow it in /orders."+customerLink(t, env.st, orderID), reply.Text)
	for _, e := range reply.Entities {
		require.NotEqual(t, "tap", utf16Slice(reply.Text, e.Offset, e.Length), "no markup was injected")
	}

	// Ann, idle longest among the two who match, gets the offer at once.
	fs := offers(t, env.st)
	require.Len(t, fs, 1)
	f := fs[0]
	require.Equal(t, offerRow{ID: f.ID, OrderID: orderID, MasterID: 42, State: "SENT", Round: 1,
		ChatID: int64p(42), MessageID: f.MessageID}, f)
	msg := env.offerMessage(t, f)
	require.Equal(t, "HTML", msg.ParseMode)
	require.True(t, strings.HasPrefix(msg.Text, "🔔 New order #"+itoa(orderID)+"\n📍 Moscow, Center\n🛠 plumbing\n💰 3,000\n"+
		"📝 Kitchen <b>tap</b> & sink second line\n\n⏳ Answer within "), msg.Text)
	require.Regexp(t, answerWithin, msg.Text)
	require.Len(t, msg.Entities, 1, "only our bold header; the description's tags are text")
	require.Equal(t, "bold", msg.Entities[0].Type)
	kb := msg.ReplyMarkup.InlineKeyboard
	require.Len(t, kb, 2)
	require.Len(t, kb[0], 2)
	require.Len(t, kb[1], 1)
	require.Equal(t, []string{"✅ Accept", "❌ Decline", "📄 Details"}, []string{kb[0][0].Text, kb[0][1].Text, kb[1][0].Text})
	for i, want := range []string{"oa", "od", "ov"} {
		name, ids, err := bot.ReadData(msg.ReplyMarkup.Buttons()[i].CallbackData)
		require.NoError(t, err)
		require.Equal(t, want, name)
		require.Equal(t, []int64{f.ID}, ids)
	}
	accept, decline, details := data(t, "oa", f.ID), data(t, "od", f.ID), data(t, "ov", f.ID)
	last, _ := env.srv.LastMessage(43)
	require.Equal(t, bobWelcome.MessageID, last.MessageID, "one offer at a time: Bob waits")
	require.Len(t, env.messages(t, 44), carlBefore, "Carl works in another district")

	// Details: VIEWED, and the full text, the commission it would cost and
	// where the address is, with Accept and Decline only.
	a := press(t, env.srv, ann, msg, details)
	requireToast(t, a, "The whole order is shown above. The address and contact come once you accept.")
	f = offers(t, env.st)[0]
	require.Equal(t, "VIEWED", f.State)
	require.NotNil(t, f.ViewedAt)
	msg = env.offerMessage(t, f)
	require.True(t, strings.HasPrefix(msg.Text, "🔔 New order #"+itoa(orderID)+"\n📍 Moscow, Center\n🛠 plumbing\n💰 3,000\n"+
		"📝 Kitchen <b>tap</b> & sink\nsecond line\n\n"+
		"💸 Commission if you take it: 300 (10% of the price), due within 3 h after the order is done.\n"+
		"🔒 The exact address and the customer's contact are shown once you accept.\n\n⏳ Answer within "), msg.Text)
	require.Len(t, msg.Edits, 1)
	require.Equal(t, []string{"✅ Accept", "❌ Decline"}, msg.ReplyMarkup.Labels())

	// Bob's client forges Ann's offer on a message of his own chat.
	a = pressRaw(t, env.srv, bob, bobWelcome, accept)
	requireAlert(t, a, "This button is not for you.")
	a = pressRaw(t, env.srv, bob, bobWelcome, decline)
	require.Equal(t, "This button is not for you.", a.Text)
	require.Equal(t, "VIEWED", offers(t, env.st)[0].State)
	require.Equal(t, orderRow{ID: orderID, State: "SEARCHING", Round: 1}, orderByID(t, env.st, orderID))
	bobNow, _ := env.srv.MessageByID(43, bobWelcome.MessageID)
	require.Empty(t, bobNow.Edits)

	a = press(t, env.srv, ann, msg, accept)
	requireToast(t, a, "Accepted. The order is yours!")
	require.Equal(t, "ACCEPTED", offers(t, env.st)[0].State)
	require.Equal(t, orderRow{ID: orderID, State: "ASSIGNED", MasterID: int64p(42), Round: 1}, orderByID(t, env.st, orderID))
	msg = env.offerMessage(t, f)
	require.Equal(t, "✅ Accepted: order #"+itoa(orderID)+" is yours\n📍 Moscow, Center\n🛠 plumbing\n💰 3,000\n"+
		"📝 Kitchen <b>tap</b> & sink\nsecond line\n\n"+
		"ℹ️ The admins gave no address or contact for this order: ask them where to go.\n\n"+
		"Commission: 10% of the price, due within 3 h after the order is done.\n\n"+
		"Next: when you set off, press 🚗 with about how long you will take (the customer is told), 📍 Arrived at the customer's and ✅ Done when the job is finished. "+
		"If you cannot do it, 🙅 Can't do it gives the order back.", msg.Text)
	require.Equal(t, []string{"🚗 15 min", "🚗 30 min", "🚗 1 h", "📍 Arrived", "✅ Done", "🙅 Can't do it"}, msg.ReplyMarkup.Labels())

	// A stale client presses again: nothing changes; the message shows the
	// order as it is (unchanged here, so not edited).
	a = pressRaw(t, env.srv, ann, msg, accept)
	requireAlert(t, a, "You have already accepted this offer.")
	a = pressRaw(t, env.srv, ann, msg, decline)
	require.Equal(t, "You have already accepted this offer.", a.Text)
	require.Len(t, env.offerMessage(t, f).Edits, 2)
	a = pressRaw(t, env.srv, ann, msg, data(t, "oa", f.ID+100))
	requireAlert(t, a, "This button is no longer valid.")

	require.Equal(t, "Open orders (1)\n\n#"+itoa(orderID)+" assigned · 3,000 · Moscow, Center · plumbing\n↳ master: Ann (id 42)\n"+
		"↳ 🔗 customer's link (not opened yet): "+strings.TrimPrefix(customerLink(t, env.st, orderID), "\n\n🔗 Link for the customer: ")[:len("https://t.me/tgfake_bot?start=o_")+22],
		env.ask(t, env.admin, "/orders").Text)

	require.Equal(t, "Usage: /done ID marks an assigned order done; /orders lists them.", env.ask(t, env.admin, "/done").Text)
	require.Equal(t, "x is not an order number: write it as digits, e.g. /done 12; /orders lists the orders.", env.ask(t, env.admin, "/done x").Text)
	require.Equal(t, "There is no order #999.", env.ask(t, env.admin, "/done 999").Text)
	annBefore := len(env.messages(t, 42))
	reply = env.ask(t, env.admin, "/done #"+itoa(orderID))
	o := orderByID(t, env.st, orderID)
	require.Equal(t, "DONE", o.State)
	require.Equal(t, int64p(300), o.Commission)
	require.NotNil(t, o.DueAt)
	// The admin reads the admin chat's zone (UTC here); Ann, a master in
	// Moscow, reads Moscow's.
	require.Equal(t, "🏁 Order #"+itoa(orderID)+" is done. Commission of 300 is due from Ann (id 42) by "+locales.Time("en", *o.DueAt, time.UTC, time.Now())+".", reply.Text)
	msk, err := locales.LoadZone("Europe/Moscow")
	require.NoError(t, err)
	due := locales.Time("en", *o.DueAt, msk, time.Now())
	annMsgs := env.messages(t, 42)
	require.Len(t, annMsgs, annBefore+1)
	require.Equal(t, "🏁 Order #"+itoa(orderID)+" is done. Commission of 300 is due by "+due+"; after that no new offers come until it is paid.",
		annMsgs[len(annMsgs)-1].Text)
	// Her order's message keeps no buttons, no description: done.
	require.Equal(t, "🏁 Order #"+itoa(orderID)+" is done — plumbing, Moscow, Center.\nCommission of 300 is due by "+due+".\n"+
		"📷 To show the admins the finished work, send photos of it here within 1 h.", env.offerMessage(t, f).Text)
	require.Empty(t, env.offerMessage(t, f).ReplyMarkup.Buttons())

	require.Equal(t, "Order #"+itoa(orderID)+" is done: only an assigned order can be marked done.",
		env.ask(t, env.admin, "/done "+itoa(orderID)).Text)
	require.Equal(t, "Order #"+itoa(orderID)+" is done: only a searching or assigned order can be cancelled.",
		env.ask(t, env.admin, "/cancel "+itoa(orderID)).Text)
	require.Equal(t, "DONE", orderByID(t, env.st, orderID).State)
	require.Contains(t, env.ask(t, ann, "/master").Text, "\nCommission owed: 300, next due "+due+"\nOffers: accepted 1\nOrders: done 1")

	o1 := itoa(orderID)
	require.Equal(t, append(assignedToAnn(o1, itoa(f.ID)),
		"🏁 Order #"+o1+" done by Ann (id 42); commission 300",
	), env.logLines(t))
}

// assignedToAnn is the admin chat's log of order o up to Ann's taking it
// through offer f: the start every test of an assigned order's later steps
// shares.
func assignedToAnn(o, f string) []string {
	return []string{
		"🆕 Order #" + o + " created",
		"📤 Order #" + o + ": offer #" + f + " sent to Ann (id 42), round 1",
		"👀 Order #" + o + ": Ann (id 42) opened the details of offer #" + f,
		"🤝 Order #" + o + ": Ann (id 42) accepted offer #" + f,
		"✅ Order #" + o + " assigned to Ann (id 42)",
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestDeclineExpireAndCancel(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ctx := context.Background()
	ann := env.srv.User(42, "Ann", "en")
	bob := env.srv.User(43, "Борис", "ru")
	env.register(t, "Moscow Center plumbing", ann, bob)

	env.ask(t, env.admin, "/order Moscow Center plumbing 5000 Bathroom pipe")
	var orderID int64
	require.NoError(t, env.st.Pool().QueryRow(ctx, `SELECT id FROM orders`).Scan(&orderID))
	f1 := offers(t, env.st)[0]
	require.Equal(t, int64(42), f1.MasterID)
	msg1 := env.offerMessage(t, f1)

	// Ann declines: her message says so, and Bob gets the offer at once.
	a := press(t, env.srv, ann, msg1, data(t, "od", f1.ID))
	requireToast(t, a, "Declined.")
	msg1 = env.offerMessage(t, f1)
	require.Equal(t, "❌ You declined order #"+itoa(orderID)+"; it will not be offered to you again.\n"+
		"📍 Moscow, Center\n🛠 plumbing\n💰 5,000\n📝 Bathroom pipe", msg1.Text)
	requireDisabled(t, msg1, "❌ Declined")
	fs := offers(t, env.st)
	require.Len(t, fs, 2)
	require.Equal(t, "DECLINED", fs[0].State)
	f2 := fs[1]
	require.Equal(t, offerRow{ID: f2.ID, OrderID: orderID, MasterID: 43, State: "SENT", Round: 1, ChatID: int64p(43), MessageID: f2.MessageID}, f2)
	msg2 := env.offerMessage(t, f2)
	require.True(t, strings.HasPrefix(msg2.Text, "🔔 Новый заказ #"+itoa(orderID)+"\n📍 Moscow, Center\n🛠 plumbing\n💰 5\u00a0000\n📝 Bathroom pipe\n\n⏳ Ответьте в течение "),
		"in the master's language: %s", msg2.Text)
	require.Equal(t, []string{"✅ Принять", "❌ Отказаться", "📄 Подробнее"}, msg2.ReplyMarkup.Labels())

	// Bob answers after expires_at, before the watchdog ran: refused, and
	// his message shows the expiry; nothing in the database moves.
	_, err := env.st.Pool().Exec(ctx, `UPDATE offers SET expires_at = now() - interval '1 second' WHERE id = $1`, f2.ID)
	require.NoError(t, err)
	a = press(t, env.srv, bob, msg2, data(t, "oa", f2.ID))
	requireAlert(t, a, "Время на ответ истекло, предложение закрыто.")
	expired := "⌛ Время на ответ по заказу #" + itoa(orderID) + " истекло; предложение закрыто.\n" +
		"📍 Moscow, Center\n🛠 plumbing\n💰 5\u00a0000\n📝 Bathroom pipe"
	msg2 = env.offerMessage(t, f2)
	require.Equal(t, expired, msg2.Text)
	requireDisabled(t, msg2, "⌛ Время вышло")
	require.Equal(t, "SENT", offers(t, env.st)[1].State)
	require.Equal(t, orderRow{ID: orderID, State: "SEARCHING", Round: 1}, orderByID(t, env.st, orderID))

	// The watchdog expires it; the message already says so, and round 2
	// goes back to Bob, not to Ann: her decline is final.
	n, err := env.svc.Expire(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	fs = offers(t, env.st)
	require.Len(t, fs, 3)
	require.Equal(t, "EXPIRED", fs[1].State)
	require.Len(t, env.offerMessage(t, f2).Edits, 1, "the watchdog's edit changed nothing more")
	f3 := offers(t, env.st)[2] // read again: its message went out meanwhile
	require.Equal(t, offerRow{ID: f3.ID, OrderID: orderID, MasterID: 43, State: "SENT", Round: 2, ChatID: int64p(43), MessageID: f3.MessageID}, f3)
	require.Equal(t, 2, orderByID(t, env.st, orderID).Round)

	list := env.ask(t, env.admin, "/orders").Text
	require.Regexp(t, `^Open orders \(1\)\n\n#`+itoa(orderID)+` searching · 5,000 · Moscow, Center · plumbing\n`+
		`↳ offered to Борис \(id 43\): sent, (10 min|9 min \d+ s) left\n`+
		`↳ 🔗 customer's link \(not opened yet\): https://t\.me/tgfake_bot\?start=o_[A-Za-z0-9_-]{22}$`, list)

	require.Equal(t, "There is no order #999.", env.ask(t, env.admin, "/cancel 999").Text)
	require.Equal(t, "Usage: /cancel ID cancels a searching or assigned order; /orders lists them.", env.ask(t, env.admin, "/cancel").Text)
	require.Equal(t, "🚫 Order #"+itoa(orderID)+" is cancelled.", env.ask(t, env.admin, "/cancel "+itoa(orderID)).Text)
	require.Equal(t, "CANCELLED", orderByID(t, env.st, orderID).State)
	require.Equal(t, "WITHDRAWN", offers(t, env.st)[2].State)
	msg3 := env.offerMessage(t, f3)
	require.Equal(t, "🚫 Заказ #"+itoa(orderID)+" отменён; предложение отозвано.\n"+
		"📍 Moscow, Center\n🛠 plumbing\n💰 5\u00a0000\n📝 Bathroom pipe", msg3.Text)
	requireDisabled(t, msg3, "🚫 Заказ отменён")
	a = pressRaw(t, env.srv, bob, msg3, data(t, "oa", f3.ID))
	requireAlert(t, a, "Заказ отменён; предложение отозвано.")
	a = pressRaw(t, env.srv, ann, msg1, data(t, "oa", f1.ID))
	require.Equal(t, "You have already declined this offer.", a.Text)
	require.Equal(t, "CANCELLED", orderByID(t, env.st, orderID).State)
	require.Equal(t, "No open orders.", env.ask(t, env.admin, "/orders").Text)
	require.Equal(t, "Order #"+itoa(orderID)+" is cancelled: only a searching or assigned order can be cancelled.",
		env.ask(t, env.admin, "/cancel "+itoa(orderID)).Text)

	o := itoa(orderID)
	require.Equal(t, []string{
		"🆕 Order #" + o + " created",
		"📤 Order #" + o + ": offer #" + itoa(f1.ID) + " sent to Ann (id 42), round 1",
		"🙅 Order #" + o + ": Ann (id 42) declined offer #" + itoa(f1.ID),
		"📤 Order #" + o + ": offer #" + itoa(f2.ID) + " sent to Борис (id 43), round 1",
		"⌛ Order #" + o + ": offer #" + itoa(f2.ID) + " to Борис (id 43) expired unanswered, round 1",
		"📤 Order #" + o + ": offer #" + itoa(f3.ID) + " sent to Борис (id 43), round 2",
		"↩️ Order #" + o + ": offer #" + itoa(f3.ID) + " to Борис (id 43) withdrawn",
		"🚫 Order #" + o + " cancelled",
	}, env.logLines(t))
}

func TestCancelAssignedTellsMaster(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ann := env.srv.User(42, "Анна", "uk")
	env.register(t, "Київ Поділ сантехніка", ann)
	env.ask(t, env.admin, `/order Київ Поділ сантехніка 700 "Кран" тече`)
	f := offers(t, env.st)[0]
	msg := env.offerMessage(t, f)
	a := press(t, env.srv, ann, msg, data(t, "oa", f.ID))
	require.Equal(t, "Прийнято. Замовлення ваше!", a.Text)
	require.Equal(t, "ASSIGNED", orderByID(t, env.st, f.OrderID).State)

	require.Equal(t, "🚫 Order #"+itoa(f.OrderID)+" is cancelled; the assigned master has been told.",
		env.ask(t, env.admin, "/cancel "+itoa(f.OrderID)).Text)
	require.Equal(t, "CANCELLED", orderByID(t, env.st, f.OrderID).State)
	env.settle(t)
	last, _ := env.srv.LastMessage(42)
	require.Equal(t, "🚫 Замовлення #"+itoa(f.OrderID)+" скасовано адміністратором; їхати не потрібно.", last.Text)
	require.Equal(t, "🚫 Замовлення #"+itoa(f.OrderID)+" скасовано адміністратором — сантехніка, Київ, Поділ. Їхати не потрібно.",
		env.offerMessage(t, f).Text, "the order's message keeps nothing of it but the place")
	require.Equal(t, "ACCEPTED", offers(t, env.st)[0].State, "an accepted offer is not withdrawn")
	lines := env.logLines(t)
	require.Equal(t, "🚫 Order #"+itoa(f.OrderID)+" cancelled; Анна (id 42) was assigned to it", lines[len(lines)-1])
}

// An offer to a master who blocked the bot is declined at once and the
// order goes to the next master; a bot without ADMIN_CHAT_ID logs nowhere.
func TestOfferToUnreachableMasterAndNoAdminChat(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ghost, ann := env.srv.User(41, "Ghost", "en"), env.srv.User(42, "Ann", "en")
	env.register(t, "Moscow Center plumbing", ghost, ann)
	_, err := env.st.Pool().Exec(context.Background(), `UPDATE masters SET last_offer_at = now() WHERE user_id = 42`)
	require.NoError(t, err)
	ghost.Block()
	env.ask(t, env.admin, "/order Moscow Center plumbing 100 Tap")
	msg := env.srv.WaitMessage(t, 42, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Tap") })
	require.NotNil(t, msg.ReplyMarkup, "the next master got the offer with its buttons")
	all := offers(t, env.st)
	require.Len(t, all, 2)
	require.Equal(t, "DECLINED", all[0].State, "the ghost's offer ended at once, not after the SLA")
	require.Equal(t, int64(41), all[0].MasterID)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM masters WHERE user_id = 41 AND NOT active`), "paused")

	plain := setup(t, bot.Config{}, nil)
	require.Empty(t, plain.bot.DispatchNotes().Event(dispatch.Event{Kind: dispatch.EventOrderCreated, OrderID: 1}))
}

// Every event kind has a line of its own in every language.
func TestEveryEventHasItsLine(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ann := &dispatch.Master{UserID: 42, Name: "<Ann>", Username: "ann"}
	kinds := []dispatch.EventKind{
		dispatch.EventOrderCreated, dispatch.EventOfferSent, dispatch.EventOfferViewed, dispatch.EventOfferAccepted,
		dispatch.EventOfferDeclined, dispatch.EventOfferExpired, dispatch.EventOfferWithdrawn, dispatch.EventOrderAssigned,
		dispatch.EventUnassignable, dispatch.EventOrderDone, dispatch.EventOrderCancelled, dispatch.EventOrderClosed,
		dispatch.EventMasterBlocked, dispatch.EventCommissionPaid, dispatch.EventOfferUndelivered,
		dispatch.EventMasterEnRoute, dispatch.EventMasterArrived, dispatch.EventOrderReturned, dispatch.EventOrderDone,
	}
	var lines []string
	for i, k := range kinds {
		// The last order_done is the master's Done button.
		msgs := env.bot.DispatchNotes().Event(dispatch.Event{Kind: k, OrderID: 7, OfferID: 9, MasterID: 42, Master: ann, Round: 2, Amount: 150,
			ByMaster: i == len(kinds)-1})
		require.Len(t, msgs, 1)
		require.Equal(t, int64(adminChat), msgs[0].ChatID)
		// As the chat shows it: HTML parsed.
		lines = append(lines, html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(msgs[0].Text, "")))
	}
	require.Len(t, lines, len(kinds))
	seen := map[string]bool{}
	for i, l := range lines {
		require.NotContains(t, l, "dispatch.event", "kind %s has its own text", kinds[i])
		require.NotContains(t, l, string(kinds[i]), "kind %s is not rendered by the fallback", kinds[i])
		require.False(t, seen[l], "line of %s is distinct", kinds[i])
		seen[l] = true
	}
	require.Equal(t, "⚠️ Order #7: nobody left to offer it to (every matching master declined it or let it expire twice, or none matches); it waits for a new or resumed master", lines[8])
	require.Equal(t, "📵 Order #7: offer #9 could not be delivered to <Ann> (@ann, id 42); the master is paused", lines[14])
	require.Equal(t, "🏁 Order #7: <Ann> (@ann, id 42) reports it done; commission 150", lines[18])
}

func TestStatusShowsReplicas(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	// The replies' text form, which these assertions read; the rich
	// form is e2e's and bot/delivery's to show.
	env.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	ctx := context.Background()
	require.NoError(t, env.st.Heartbeat(ctx, "replica-a", "v1.2.3", time.Now().Add(-90*time.Minute)))
	require.NoError(t, env.st.Heartbeat(ctx, "replica-b", "", time.Now().Add(-30*time.Second)))
	require.NoError(t, env.st.Heartbeat(ctx, "replica-gone", "v1.0.0", time.Now().Add(-48*time.Hour)))
	_, err := env.st.Pool().Exec(ctx, `UPDATE replicas SET seen_at = now() - interval '40 seconds' WHERE instance = 'replica-a';
UPDATE replicas SET seen_at = now() - interval '1 hour' WHERE instance = 'replica-gone'`)
	require.NoError(t, err)

	text := env.ask(t, env.admin, "/status").Text
	require.Regexp(t, `\n\nReplicas\n`+
		`replica-b \(\?\): up (30|31)\x{a0}s, last seen (under a second|1\x{a0}s) ago\n`+
		`replica-a \(v1\.2\.3\): up 1\x{a0}h 30\x{a0}min, last seen (40|41)\x{a0}s ago\n\nJobs\n`, text)
	require.NotContains(t, text, "replica-gone", "a replica not seen lately is not live")

	// The delivery: a 429 and an unreachable user are counted.
	require.NoError(t, env.st.Outbox().RecordThrottle(ctx, 42, time.Second))
	_, err = env.st.Outbox().MarkUnreachable(ctx, 4242, "Forbidden: bot was blocked by the user")
	require.NoError(t, err)
	// The inbox: an update failed an hour ago counts, one failed two days
	// ago does not; the /status being answered is the one pending.
	_, err = env.st.Pool().Exec(ctx, `INSERT INTO inbox (update_id, body, state, done_at) VALUES
    (900000001, '{}', 'failed', now() - interval '1 hour'), (900000002, '{}', 'failed', now() - interval '2 days')`)
	require.NoError(t, err)
	env.settle(t) // the first /status reply's row is recorded sent
	text = env.ask(t, env.admin, "/status").Text
	require.Regexp(t, `\n\nDelivery\nBacklog 0, oldest waiting under a second; 429s in the last hour: 1; unreachable recipients: 1; dropped 0, failed 0\n`+
		`Incoming updates waiting: 1, oldest waiting (under a second|\d+\x{a0}s); failed in the last day: 1\n`+
		`Vacancy matches waiting to be judged: 0; skipped, for recovery to try again: 0$`, text)
	require.Contains(t, text, "The prune job has not run yet.")
	// A table PostgreSQL has not analysed yet has no row estimate, which is
	// not zero rows.
	require.Regexp(t, `\n\nData\n\w+: [0-9.,]+\x{a0}(B|KiB|MiB), rows not counted yet\n`, text, "the largest tables")
	require.NotContains(t, text, "about 0 rows")
	_, err = env.st.Pool().Exec(ctx, `ANALYZE`)
	require.NoError(t, err)
	text = env.ask(t, env.admin, "/status").Text
	require.Regexp(t, `\n\nData\n\w+: [0-9.,]+\x{a0}(B|KiB|MiB), about [\d,]+ rows\n`, text, "the largest tables, analysed")

	// The prune job's last run, per kind, with its trouble.
	at := time.Date(2026, 11, 25, 4, 0, 0, 0, time.UTC)
	require.NoError(t, env.st.Jobs().RecordPrune(ctx, at, []storage.PruneResult{
		{Kind: storage.PruneGroupMessages, Rows: 1200},
		{Kind: storage.PruneOutboxRows, Rows: 30, Timeouts: 1},
	}))
	text = env.ask(t, env.admin, "/status").Text
	require.Contains(t, text, "Last prune: "+locales.Time("en", at, time.UTC, time.Now())+", rows deleted per kind:\n"+
		storage.PruneGroupMessages+": 1,200 (all time 1,200)\n"+
		storage.PruneOutboxRows+": 30 (all time 30) — timeouts 1")

	// A Russian reader gets the same in their units, on Moscow time, and
	// never a Go duration like 1h30m0s or 1ms.
	require.NoError(t, env.st.Users().SetLanguage(ctx, adminID, "ru"))
	text = env.ask(t, env.admin, "/status").Text
	require.NotRegexp(t, `\b\d+(ms|s|m|h)\b|\d+m\d+s`, text)
	require.Regexp(t, `replica-a \(v1\.2\.3\): работает 1\x{a0}ч 30\x{a0}мин, на связи \d+\x{a0}с назад\n`, text)
	require.Contains(t, text, "Последняя очистка: "+locales.Time("ru", at, locales.LangZone("ru"), time.Now())+", удалено строк по видам:\n"+
		storage.PruneGroupMessages+": 1\u00a0200 (всего 1\u00a0200)")
	require.Contains(t, locales.Time("ru", at, locales.LangZone("ru"), time.Now()), "07:00 (Москва)")
	require.Regexp(t, `\n\nДанные\n\w+: [0-9,]+\x{a0}(Б|КБ|МБ), строк: около [\d\x{a0}]+\n`, text)
}

// The longest order admins can write still makes one offer message whose
// buttons can be edited, and /orders stays one message however many orders
// are open.
func TestOversizedOrdersStayOneMessage(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ctx := context.Background()
	place := strings.Repeat("<&", dispatch.MaxPlace/2)
	skill := strings.Repeat("&", dispatch.MaxSkill)
	ann := env.srv.User(42, strings.Repeat("<Ann>", 20), "en")
	env.register(t, `«`+place+`» «`+place+`» `+skill, ann)
	desc := strings.Repeat(`"`, dispatch.MaxDescription)
	env.ask(t, env.admin, `/order «`+place+`» «`+place+`» `+skill+` 100000000 `+desc)

	f := offers(t, env.st)[0]
	msg := env.offerMessage(t, f)
	require.Len(t, msg.ReplyMarkup.Buttons(), 3)
	require.Contains(t, msg.Text, "📍 <&<&")
	require.Contains(t, msg.Text, "…")
	press(t, env.srv, ann, msg, data(t, "ov", f.ID))
	msg = env.offerMessage(t, f)
	require.Len(t, msg.Edits, 1, "the details fit one message")
	require.Len(t, msg.ReplyMarkup.Buttons(), 2)
	require.LessOrEqual(t, len([]rune(msg.Text)), bot.MaxMessageLen)

	// The longest order with the longest address and contact, accepted:
	// the master's message with its step buttons is still one message, and
	// so is each step's edit of it (through the outbox).
	bob := env.srv.User(43, "Bob", "en")
	env.register(t, `«`+place+`» «`+place+`» `+skill, bob)
	env.ask(t, env.admin, `/order «`+place+`» «`+place+`» `+skill+` 100000000 `+desc[:dispatch.MaxDescription-200]+
		"\naddress: "+strings.Repeat("<", dispatch.MaxAddress)+"\nname: "+strings.Repeat("&", dispatch.MaxName)+
		"\nphone: "+strings.Repeat("(1)", dispatch.MaxPhoneDigits)[:dispatch.MaxPhoneLen]+"\nwhen: 2099-12-31 00:00-23:59")
	g := offers(t, env.st)[1]
	require.Equal(t, int64(43), g.MasterID)
	press(t, env.srv, bob, env.offerMessage(t, g), data(t, "oa", g.ID))
	msg = env.offerMessage(t, g)
	// The address is longer than a copy button holds (256): the phone
	// alone gets one.
	require.Equal(t, []string{"📋 Copy phone", "🚗 15 min", "🚗 30 min", "🚗 1 h", "📍 Arrived", "✅ Done", "🙅 Can't do it"}, msg.ReplyMarkup.Labels())
	require.Equal(t, strings.Repeat("(1)", dispatch.MaxPhoneDigits)[:dispatch.MaxPhoneLen], msg.ReplyMarkup.Buttons()[0].Copies())
	require.Contains(t, msg.Text, "🏠 <<<")
	require.LessOrEqual(t, len([]rune(msg.Text)), bot.MaxMessageLen)
	press(t, env.srv, bob, msg, data(t, "aet", g.ID, 15))
	msg = env.offerMessage(t, g)
	require.Len(t, msg.ReplyMarkup.Buttons(), 4, "the step's edit was delivered")
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM outbox WHERE state = 'failed'`))

	_, err := env.st.Pool().Exec(ctx, `
INSERT INTO orders (created_by, city, district, skill, price, description)
SELECT 1, $1, $1, $2, 100000000, 'x' FROM generate_series(1, $3)`, place, skill, dispatch.MaxListedOrders)
	require.NoError(t, err)
	before := len(env.messages(t, adminID))
	list := env.ask(t, env.admin, "/orders")
	require.Len(t, env.messages(t, adminID), before+1, "one message")
	// The header counts every open order, not only those listed: the two
	// long ones and the MaxListedOrders added.
	require.True(t, strings.HasPrefix(list.Text, "Open orders ("+itoa(int64(dispatch.MaxListedOrders+2))+")\n\n#"), list.Text)
	require.Regexp(t, `\n\n… and \d+ more that do(?:es)? not fit here$`, list.Text)
	require.Contains(t, list.Text, "↳ offered to <Ann><Ann>")
	require.Contains(t, list.Text, "↳ no open offer (round 1)")
}

// Telegram down while /order is handled: the order is created once, the
// confirmation arrives when Telegram is back (through the outbox), and the
// admin is never told to try again, which would create a second order.
func TestOrderConfirmationSurvivesTelegramDown(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	env.ask(t, env.admin, "/help")
	env.srv.FailFor(5*time.Second, http.StatusBadGateway)
	sent := env.admin.SendText(adminID, "/order Oslo Center tiling 700 Floor")
	env.srv.WaitFor(t, 60*time.Second, func() bool {
		for _, m := range env.srv.Messages(adminID) {
			if m.MessageID > sent.MessageID && strings.Contains(m.Text, "created") {
				return true
			}
		}
		return false
	})
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM orders`))
	for _, m := range env.srv.Messages(adminID) {
		require.NotContains(t, m.Text, "Something went wrong", "no 'try again' for a committed order")
	}
	env.settle(t)
	require.Equal(t, 1, count(t, env.st, `SELECT count(*) FROM outbox WHERE kind = 'reply' AND state = 'sent'
AND body->>'text' LIKE '%created%'`), "the confirmation went out through the outbox, once")
}

// customerLink is the order's customer link as /order's confirmation
// ends with it.
func customerLink(t *testing.T, st *storage.Store, orderID int64) string {
	t.Helper()
	var token string
	require.NoError(t, st.Pool().QueryRow(context.Background(), `SELECT customer_token FROM orders WHERE id = $1`, orderID).Scan(&token))
	require.Len(t, token, 22, "128 bits, base64url")
	return "\n\n🔗 Link for the customer: https://t.me/tgfake_bot?start=o_" + token +
		"\nForward it to them: whoever opens it first follows the order here and hears from us at every step."
}
