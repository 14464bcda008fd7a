package e2e_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/redisgate/redistest"
)

// TestRepliesFlowWhileRedisIsDown: two replicas share a private Redis,
// which is stopped for 30 s while users chat. Replies keep arriving during
// the outage — each one checked to have arrived while the redis-server
// process was stopped — paced in process at each replica's share, and
// after Redis returns everything is answered once, through Redis again.
//
// Messages are asked through the first 22 s of the 30 s outage (the polling
// lease lives in PostgreSQL, so intake does not notice Redis either); the
// last round ends well before Redis returns, so every reply counted here
// arrived while it was down.
func TestRepliesFlowWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	env := e2e.New(t)
	env.RedisURL, env.RedisPrefix = srv.URL(), "e2e:"
	first, second := env.StartPair(nil)

	var users []*tgfake.Person
	for i := range 4 {
		u := env.TG.User(int64(2401+i), fmt.Sprint("U", i), "en")
		users = append(users, u)
		require.Contains(t, ask(t, env, u, u.ID(), "/start").Text, "Hello")
	}

	srv.Stop()
	stopped := time.Now()
	resumed := make(chan struct{})
	go func() {
		defer close(resumed)
		time.Sleep(30 * time.Second) // the outage lasts 30 s
		srv.Resume()
	}()
	t.Cleanup(func() { <-resumed })

	asked := map[int64]int{}
	var mu sync.Mutex
	during := 0
	for time.Since(stopped) < 22*time.Second {
		var wg sync.WaitGroup
		for _, u := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reply := ask(t, env, u, u.ID(), "/help")
				// Redis was stopped before the ask; still stopped now, after
				// the reply arrived, so it arrived during the outage.
				assert.False(t, srv.Running(), "the reply to user %d waited for Redis", u.ID())
				assert.Contains(t, reply.Text, "What I can do")
				mu.Lock()
				asked[u.ID()]++
				during++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	t.Logf("%d replies arrived while Redis was down", during)
	require.NotZero(t, during)

	<-resumed
	// Back to Redis on the first call after the probe's wait, which grew
	// while Redis was down (up to 30 s): keep asking until the switch.
	back := func() bool {
		return strings.Contains(first.Logs()+second.Logs(), "back to the shared telegram limiter")
	}
	deadline := time.Now().Add(2 * time.Minute)
	for round := 0; round == 0 || !back(); round++ {
		require.True(t, time.Now().Before(deadline), "the limiter never went back to Redis")
		for _, u := range users {
			require.Contains(t, ask(t, env, u, u.ID(), "/help").Text, "What I can do")
			asked[u.ID()]++
		}
	}
	for _, u := range users {
		n := 0
		for _, m := range env.TG.Messages(u.ID()) {
			if strings.Contains(m.Text, "What I can do") {
				n++
			}
		}
		require.Equal(t, asked[u.ID()], n, "user %d: every /help answered once", u.ID())
	}
	require.Zero(t, env.TG.RateLimited(), "the replicas stayed under Telegram's limits")
	require.Zero(t, env.TG.EarlySends())
	falls := 0
	for _, p := range []*e2e.Process{first, second} {
		n := strings.Count(p.Logs(), "telegram limiter falls back")
		require.LessOrEqual(t, n, 1, "%s logs the switch once, not per message", p.Name)
		falls += n
	}
	require.NotZero(t, falls, "the delivering replica fell back to its own limiter")
	require.Contains(t, first.Logs()+second.Logs(), "back to the shared telegram limiter")
}
