package e2e_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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
// and every message is answered. The bound on duplicates: an update whose
// handler committed just before the kill, with its done-mark not yet
// written, runs again once its claim lapses (INBOX_LEASE), so at most one
// message per chat that was being handled at the kill (each chat runs one
// update at a time) is answered twice; none more, and none lost.
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
	quiet(t, db(t, env)) // a duplicate still coming would be counted
	doubled := 0
	for _, u := range users {
		got := mentorReplies(env, u.ID())
		twice := 0
		for _, m := range sent[u.ID()] {
			require.LessOrEqual(t, got[m.MessageID], 2, "message %q", m.Text)
			if got[m.MessageID] == 2 {
				twice++
			}
		}
		require.LessOrEqual(t, twice, 1, "user %d: at most the one message in flight at the kill runs twice", u.ID())
		doubled += twice
		requireNoErrorReplies(t, env, u.ID())
	}
	t.Logf("messages answered twice (the named bound): %d of %d", doubled, len(users)*perUser)
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
