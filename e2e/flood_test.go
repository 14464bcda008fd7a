package e2e_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
)

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
