package e2e_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// mentorReplies counts, per message a user sent, the memory-chat answers
// that reply to it.
func mentorReplies(env *e2e.Env, chat int64) map[int]int {
	out := map[int]int{}
	for _, m := range env.TG.Messages(chat) {
		if strings.HasPrefix(m.Text, "Mentor says") {
			out[m.ReplyToID()]++
		}
	}
	return out
}

// errorTexts are what a user reads when the bot gave up on their message.
var errorTexts = []string{"Something went wrong", "could not be carried out"}

func requireNoErrorReplies(t *testing.T, env *e2e.Env, chat int64) {
	t.Helper()
	for _, m := range env.TG.Messages(chat) {
		for _, e := range errorTexts {
			require.NotContains(t, m.Text, e, "chat %d heard an error", chat)
		}
	}
}

// PostgreSQL stops for about ten seconds while five users write and an
// admin creates an order. Nothing is lost: the updates wait at Telegram
// (the offset does not move past what the inbox has not stored) and in the
// inbox, and once the database is back every message is answered exactly
// once and the order is created exactly once, with no error reply.
func TestInboxSurvivesAPostgreSQLOutage(t *testing.T) {
	t.Parallel()
	pg := e2e.PrivatePostgres(t)
	pg.Start()
	env := e2e.New(t)
	env.DatabaseURL = pg.URL("switchboard")
	scriptMemory(env)
	p := env.Start(nil)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/start").Text, "Boss")

	users := make([]*tgfake.Person, 5)
	for i := range users {
		users[i] = env.TG.User(int64(7600+i), fmt.Sprintf("User%d", i), "en")
	}
	sent := map[int64][]tgfake.Message{}
	var order tgfake.Message

	pg.Stop()
	down := time.Now()
	for round := 0; round < 3; round++ {
		for i, u := range users {
			sent[u.ID()] = append(sent[u.ID()], u.SendText(u.ID(), fmt.Sprintf("user %d, message %d", i, round)))
		}
		if round == 1 {
			order = boss.SendText(boss.ID(), "/order Riga Center plumbing 900 The tap leaks")
		}
		time.Sleep(3 * time.Second) // the scenario: users write on through the outage
	}
	time.Sleep(time.Until(down.Add(10 * time.Second))) // the outage lasts ten seconds
	pg.Start()

	env.TG.WaitFor(t, 3*time.Minute, allAnswered(env, users, sent))
	created := env.TG.WaitMessageAfter(t, boss.ID(), order.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "created: plumbing, Riga")
	})
	require.Contains(t, created.Text, "Order")

	// Count once no duplicate can still be coming.
	env.TG.WaitUpdatesConsumed(t)
	pool := db(t, env)
	quiet(t, pool)
	for _, u := range users {
		got := mentorReplies(env, u.ID())
		for _, m := range sent[u.ID()] {
			require.Equal(t, 1, got[m.MessageID], "user %d's message %q is answered exactly once", u.ID(), m.Text)
		}
		requireNoErrorReplies(t, env, u.ID())
	}
	requireNoErrorReplies(t, env, boss.ID())
	n := 0
	for _, m := range env.TG.Messages(boss.ID()) {
		if strings.Contains(m.Text, "created: plumbing, Riga") {
			n++
		}
	}
	require.Equal(t, 1, n, "the order is confirmed once")

	require.EqualValues(t, 1, scalar[int64](t, pool, `SELECT count(*) FROM orders WHERE city = 'Riga'`), "the order is created once")
	require.Zero(t, scalar[int64](t, pool, `SELECT count(*) FROM inbox WHERE state <> 'done'`), "every update handled")
	require.False(t, p.HasLog(`"msg":"handler failed"`), "no user was told to try again")
}

// kill -9 of the replica holding the polling lease while five users' messages
// are in flight (fetched, some handling): the survivor takes the inbox over
// and every message is answered, its answer written once. An update whose
// handler committed just before the kill, with its done-mark not yet
// written, runs again on the survivor, and its capture, keyed by the
// message, is found done.
func TestInboxLosesNothingWhenThePollingReplicaIsKilled(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithRedis())
	scriptMemory(env)
	over := map[string]string{"INBOX_LEASE": "5s"}
	first, _ := env.StartPair(over)

	const perUser = 12
	users := make([]*tgfake.Person, 5)
	for i := range users {
		users[i] = env.TG.User(int64(7700+i), fmt.Sprintf("User%d", i), "en")
	}
	var mu sync.Mutex
	sent := map[int64][]tgfake.Message{}
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < perUser; k++ {
				m := u.SendText(u.ID(), fmt.Sprintf("user %d, message %d", i, k))
				mu.Lock()
				sent[u.ID()] = append(sent[u.ID()], m)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Kill while the backlog is being handled: some updates handled, the
	// rest fetched (acknowledged, for the old poller) and waiting.
	env.TG.WaitFor(t, time.Minute, func() bool { return len(env.TG.CallsTo("sendChatAction")) >= 3 })
	first.Kill()

	env.TG.WaitFor(t, 4*time.Minute, allAnswered(env, users, sent))
	pool := db(t, env)
	quiet(t, pool) // a duplicate still coming would be counted
	// Each answer is written once, where its handler writes it (the
	// outbox), however many times its update ran. Telegram may have it
	// twice only from the sender's own window: a send in flight when its
	// replica was killed, which Telegram took and nobody marked, so the
	// row was claimed again (attempts ≥ 2) and sent again. No key of ours
	// can close that window (README "Delivery"): the Bot API has no
	// idempotency key.
	for _, u := range users {
		got := mentorReplies(env, u.ID())
		for _, m := range sent[u.ID()] {
			var rows, attempts int
			require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*), COALESCE(max(attempts), 0) FROM outbox
WHERE chat_id = $1 AND NOT edit AND body->>'text' = $2`, u.ID(), "Mentor says: "+m.Text).Scan(&rows, &attempts))
			require.Equal(t, 1, rows, "user %d: %q answered once, even if its update ran twice", u.ID(), m.Text)
			require.Positive(t, got[m.MessageID], "user %d: %q delivered", u.ID(), m.Text)
			if got[m.MessageID] > 1 {
				require.Equal(t, 2, got[m.MessageID], "user %d: %q delivered twice at most", u.ID(), m.Text)
				require.GreaterOrEqual(t, attempts, 2, "user %d: %q delivered twice only by a send in flight at the kill", u.ID(), m.Text)
			}
		}
		requireNoErrorReplies(t, env, u.ID())
	}
}

// quiet waits until nothing can make the bot write again: no update left in
// the inbox (a claim of a killed replica lapses and its update runs again
// first), no memory-chat run unanswered, no message left in the outbox.
func quiet(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	eventually(t, 2*time.Minute, func() bool {
		return scalar[int](t, pool, `SELECT (SELECT count(*) FROM inbox WHERE state = 'pending')
     + (SELECT count(*) FROM pipeline_runs WHERE status NOT IN ('COMPLETED', 'FAILED') OR delivered_at IS NULL)
     + (SELECT count(*) FROM outbox WHERE state = 'pending')`) == 0
	}, func() string { return "the inbox, the memory chat or the outbox still has work" })
}

// allAnswered: every message each user sent has an answer.
func allAnswered(env *e2e.Env, users []*tgfake.Person, sent map[int64][]tgfake.Message) func() bool {
	return func() bool {
		for _, u := range users {
			got := mentorReplies(env, u.ID())
			for _, m := range sent[u.ID()] {
				if got[m.MessageID] == 0 {
					return false
				}
			}
		}
		return true
	}
}

const tooFast = "You are sending messages too fast"

func countBot(env *e2e.Env, chatID int64, substr string) int {
	n := 0
	for _, m := range env.TG.Messages(chatID) {
		if strings.Contains(m.Text, substr) {
			n++
		}
	}
	return n
}

// The flood limiter (defaults: 1 a second, a burst of 20) judges when a user
// wrote, not when the bot got round to it. Both users write while no
// replica polls (as during an outage or a failover), and the bot then
// fetches everything at once: Ann's forty messages, dated over forty
// seconds, are all answered; Bob's forty, dated within one second, are a
// flood and are cut after the burst, with one warning.
func TestFloodControlJudgesTheUserNotTheBacklog(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	ann := env.TG.User(701, "Ann", "en")
	bob := env.TG.User(702, "Bob", "en")

	now := time.Now()
	wrote := now.Add(-50 * time.Second)
	for i := range 40 {
		ann.SendTextAt(ann.ID(), "/help", wrote.Add(time.Duration(i)*time.Second))
	}
	burst := now.Add(-5 * time.Second)
	for range 40 {
		bob.SendTextAt(bob.ID(), "/help", burst)
	}

	p := env.Start(nil)
	// Every update handled, answered or cut, is logged once: after eighty,
	// no more answers are coming and the counts are final.
	require.Eventually(t, func() bool {
		return strings.Count(p.Logs(), `"msg":"update handled"`) >= 80
	}, 2*time.Minute, 100*time.Millisecond, "the bot handles all eighty updates")
	// Answers go out through the outbox: once no row is pending, every
	// answer the handlers committed has been delivered.
	conn, err := pgx.Connect(context.Background(), env.DatabaseURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var pending int
		err := conn.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state = 'pending'`).Scan(&pending)
		return err == nil && pending == 0
	}, 2*time.Minute, 100*time.Millisecond, "the outbox delivers every answer")
	const help = "What I can do"
	require.Equal(t, 40, countBot(env, ann.ID(), help), "every message of the backlog answered")
	require.Zero(t, countBot(env, ann.ID(), tooFast), "no flood warning for a backlog")
	require.Equal(t, 20, countBot(env, bob.ID(), help), "a real flood is cut after the burst")
	require.Equal(t, 1, countBot(env, bob.ID(), tooFast), "and told once")
}

// The scenario: the polling replica stops answering (frozen, then
// killed) while a user writes forty messages over forty seconds; the
// survivor takes the lease and fetches the whole backlog at once, and every
// message is answered: the flood limit reads when each was written.
func TestBacklogAfterAFailoverIsAnsweredInFull(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithRedis())
	first := env.Start(nil)
	first.WaitLog("polling lease acquired", 30*time.Second)
	second := env.Start(nil)
	second.WaitLog("standing by", 30*time.Second)

	// Frozen, the holder keeps its lock but reads nothing: updates pile up
	// at Telegram.
	first.Signal(syscall.SIGSTOP)
	ann := env.TG.User(703, "Ann", "en")
	wrote := time.Now().Add(-45 * time.Second)
	for i := range 40 {
		ann.SendTextAt(ann.ID(), "/help", wrote.Add(time.Duration(i)*time.Second))
	}
	first.Kill()

	env.TG.WaitFor(t, 2*time.Minute, func() bool { return countBot(env, ann.ID(), "What I can do") == 40 })
	require.Zero(t, countBot(env, ann.ID(), tooFast), "a backlog is not a flood")
}

// Webhook mode, as behind a load balancer: three replicas, Telegram pushing
// to one URL that hands requests to them in turn. 10 chats × 50 messages:
// each chat's answers come in its order, none lost, none doubled, and every
// replica took its share of the intake.
func TestWebhookReplicasAnswerEachChatInOrder(t *testing.T) {
	t.Parallel()
	const chats, perChat = 10, 50
	env := e2e.New(t, e2e.WithRedis())
	front := e2e.NewFront(t)
	var replicas []*e2e.Process
	for i := range 3 {
		replicas = append(replicas, env.Spawn(fmt.Sprintf("replica-%d", i+1), front.WebhookEnv("e2e-webhook_secret")))
	}
	for _, p := range replicas {
		front.Add(p)
	}
	for _, p := range replicas {
		p.WaitLog("webhook set", 60*time.Second)
	}
	hook, _ := env.TG.Webhook()
	require.Equal(t, front.URL, hook)

	// Each user wrote their 50 messages a second apart over the last
	// minute (so the per-user flood limit, which reads Telegram's dates,
	// lets them all through); Telegram delivers them now.
	people := make([]*tgfake.Person, chats)
	start := time.Now().Add(-time.Duration(perChat+5) * time.Second)
	for c := range people {
		people[c] = env.TG.User(int64(7900+c), fmt.Sprintf("User%d", c), "en")
	}
	for m := 0; m < perChat; m++ {
		for _, p := range people {
			p.SendTextAt(p.ID(), "/lang m"+strconv.Itoa(m), start.Add(time.Duration(m)*time.Second))
		}
	}
	echo := regexp.MustCompile(`“m(\d+)”`)
	env.TG.WaitFor(t, 5*time.Minute, func() bool {
		for _, p := range people {
			if len(env.TG.Messages(p.ID())) < perChat {
				return false
			}
		}
		return true
	})
	env.TG.WaitUpdatesConsumed(t)
	for _, p := range people {
		var got []int
		for _, msg := range env.TG.Messages(p.ID()) {
			require.NotContains(t, msg.Text, "too fast", "chat %d", p.ID())
			m := echo.FindStringSubmatch(msg.Text)
			require.NotNil(t, m, "chat %d: %q", p.ID(), msg.Text)
			n, _ := strconv.Atoi(m[1])
			got = append(got, n)
		}
		want := make([]int, perChat)
		for i := range want {
			want[i] = i
		}
		require.Equal(t, want, got, "chat %d: every message answered once, in order", p.ID())
	}
	for i, n := range front.Hits() {
		require.Positive(t, n, "replica %d took no update: intake did not scale out", i+1)
	}
	for _, p := range replicas {
		require.False(t, strings.Contains(p.Logs(), "polling lease"), "no replica polls in webhook mode")
	}
}

// A replica killed while it handles users' button presses: each of those
// chats' next message is answered within seconds, once the survivor sees the
// dead replica's liveness lock gone, not after the claims' lease
// (INBOX_LEASE, ten minutes here, past this test's bound). The killed
// replica is the poller, which handles nearly every update itself (it stores
// them and wakes its own workers; the other hears by NOTIFY), held inside
// its handlers: Telegram's replies to its answerCallbackQuery calls are held
// back, so a press it claimed stays claimed until the kill. The survivor
// then takes the polling lease as well.
func TestInboxKilledReplicasChatsGoOnWithinSeconds(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithRedis())
	held := newHeldTelegram(t, env.TG.URL(), 10*time.Minute, "answerCallbackQuery")
	victim := env.Start(map[string]string{"INBOX_LEASE": "10m", "TELEGRAM_API_URL": held.srv.URL})
	victim.WaitLog("polling lease acquired", 60*time.Second)
	survivor := env.Start(map[string]string{"INBOX_LEASE": "10m"})
	survivor.WaitLog("standing by", 60*time.Second)

	users := make([]*tgfake.Person, 6)
	settings := make([]tgfake.BotMessage, len(users))
	for i := range users {
		users[i] = env.TG.User(int64(7800+i), fmt.Sprintf("User%d", i), "en")
		settings[i] = openSettings(t, env, users[i])
	}
	// Everyone presses the digest button (marked ✓ once chosen) whenever
	// their last press has been answered, until the held replica has
	// claimed a press (the survivor may claim some). Pressing only then
	// keeps every chat's queue short: a chat behind a backlog of presses
	// would answer /help only after working through it.
	eventually(t, 60*time.Second, func() bool {
		for i, u := range users {
			if slices.ContainsFunc(env.TG.Callbacks(u.ID()), func(c tgfake.Callback) bool { return !c.Answered }) {
				continue
			}
			m := current(t, env, u.ID(), settings[i].MessageID)
			k := slices.IndexFunc(m.ReplyMarkup.Labels(), func(l string) bool { return strings.HasSuffix(l, "Digest") })
			require.GreaterOrEqual(t, k, 0, "the settings offer a digest: %v", m.ReplyMarkup.Labels())
			_, err := u.PressButton(m, m.ReplyMarkup.Labels()[k])
			require.NoError(t, err)
		}
		return held.held.Load() > 0
	})
	stuck := held.held.Load()
	victim.Kill()

	killed := time.Now()
	asked := make([]tgfake.Message, len(users))
	for i, u := range users {
		asked[i] = u.SendText(u.ID(), "/help")
	}
	env.TG.WaitFor(t, 2*time.Minute, func() bool {
		for i, u := range users {
			if countAfter(env, u.ID(), asked[i].MessageID, "What I can do") == 0 {
				return false
			}
		}
		return true
	})
	t.Logf("killed %s inside %d handlers; every chat answered %s after the kill", victim.Name, stuck,
		time.Since(killed).Round(100*time.Millisecond))
	require.True(t, survivor.HasLog(`"msg":"gave back the claims of replicas that are gone"`),
		"the survivor gave the dead replica's claims back")
}

// countAfter counts the bot's messages in a chat after afterID that contain substr.
func countAfter(env *e2e.Env, chatID int64, afterID int, substr string) int {
	n := 0
	for _, m := range env.TG.Messages(chatID) {
		if m.MessageID > afterID && strings.Contains(m.Text, substr) {
			n++
		}
	}
	return n
}

// kill -9 of the replica handling updates, ten times over, while users write
// to the memory chat and send commands and an admin creates orders; a fresh
// replica joins after each kill, and each round is answered before the next. Each handler's writes are keyed by its
// update (the memory chat's capture by chat and message, an order by its
// /order message, every reply by the update and its place), so an update
// the dead replica had half done runs again and changes and sends nothing
// twice: every message is answered exactly once, every order created and
// confirmed once, nothing lost.
func TestKilledTenTimesAnswersEveryUpdateOnce(t *testing.T) {
	t.Parallel()
	const kills = 10
	env := e2e.New(t, e2e.WithRedis())
	scriptMemory(env)
	// Three pooled connections a replica: a killed replica's sessions end
	// a moment after it, and with two live replicas beside two other e2e
	// tests and another package's, six each came past PostgreSQL's default
	// 100 connections.
	over := map[string]string{"INBOX_LEASE": "5s", "DATABASE_URL": withConns(env.DatabaseURL, 3)}
	poller, standby := env.StartPair(over)
	live := []*e2e.Process{poller, standby}
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	users := make([]*tgfake.Person, 4)
	for i := range users {
		users[i] = env.TG.User(int64(7800+i), fmt.Sprintf("User%d", i), "en")
	}
	sent := map[int64][]tgfake.Message{}
	tokens := map[int64][]string{}
	holder := func() *e2e.Process {
		var h *e2e.Process
		env.TG.WaitFor(t, time.Minute, func() bool {
			for _, p := range live {
				if p.HasLog("polling lease acquired") {
					h = p
					return true
				}
			}
			return false
		})
		return h
	}
	for round := 0; round < kills; round++ {
		typing := len(env.TG.CallsTo("sendChatAction"))
		for i, u := range users {
			sent[u.ID()] = append(sent[u.ID()], u.SendText(u.ID(), fmt.Sprintf("user %d, round %d", i, round)))
			tok := fmt.Sprintf("u%dr%d", i, round)
			tokens[u.ID()] = append(tokens[u.ID()], tok)
			u.SendText(u.ID(), "/lang "+tok)
		}
		boss.SendText(boss.ID(), fmt.Sprintf("/order Riga Center plumbing 900 Job %d", round))
		// Kill once handlers are at work on this round's updates.
		env.TG.WaitFor(t, time.Minute, func() bool { return len(env.TG.CallsTo("sendChatAction")) > typing })
		h := holder()
		h.Kill()
		var rest []*e2e.Process
		for _, p := range live {
			if p != h {
				rest = append(rest, p)
			}
		}
		live = append(rest, env.Start(over))
		// The round's messages answered before the next kill: a memory run
		// cut by three kills in a row is failed as a run that kills its
		// replicas (the reaper's bound), which is not what this test is about.
		env.TG.WaitFor(t, 2*time.Minute, allAnswered(env, users, sent))
	}

	env.TG.WaitFor(t, 4*time.Minute, allAnswered(env, users, sent))
	pool := db(t, env)
	quiet(t, pool)
	// Counted where the handlers write them, the outbox: a kill between
	// Telegram's answer to a send and its delivery mark still delivers
	// that one message twice (the sender's own window, README "Delivery"),
	// which no key of the handler's can close.
	written := func(chat int64, like string) int {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE chat_id = $1 AND NOT edit AND body->>'text' LIKE $2`, chat, like)
	}
	for i, u := range users {
		for r := range kills {
			require.Equal(t, 1, written(u.ID(), fmt.Sprintf("%%Mentor says: user %d, round %d%%", i, r)),
				"user %d's message of round %d answered exactly once", u.ID(), r)
		}
		for _, tok := range tokens[u.ID()] {
			require.Equal(t, 1, written(u.ID(), "%“"+tok+"”%"), "user %d's /lang %s answered exactly once", u.ID(), tok)
			require.Positive(t, countBot(env, u.ID(), "“"+tok+"”"), "and delivered")
		}
		requireNoErrorReplies(t, env, u.ID())
	}
	require.Equal(t, kills, written(boss.ID(), "%created: plumbing, Riga%"), "each order confirmed once")
	require.GreaterOrEqual(t, countBot(env, boss.ID(), "created: plumbing, Riga"), kills, "and delivered")
	rerun := scalar[int64](t, pool, `SELECT count(*) FROM inbox WHERE attempts > 1`)
	require.Positive(t, rerun, "the kills cut updates mid-way, or this test shows nothing")
	t.Logf("updates run more than once after the kills: %d; memory messages among them captured before: %d",
		rerun, capturedBefore(append(live, poller, standby)))
	require.EqualValues(t, kills, scalar[int64](t, pool, `SELECT count(*) FROM orders WHERE city = 'Riga'`), "each order created once")
	requireNoErrorReplies(t, env, boss.ID())
}

// capturedBefore counts the memory-chat messages run again whose capture
// had committed (the key that keeps them answered once did its work).
func capturedBefore(ps []*e2e.Process) int {
	n := 0
	for _, p := range ps {
		n += strings.Count(p.Logs(), "message captured before, not again")
	}
	return n
}

// withConns is a database URL whose pool holds at most n connections.
func withConns(url string, n int) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "pool_max_conns=" + strconv.Itoa(n)
}
