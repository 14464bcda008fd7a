package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/storage/storagetest"
)

// Replicas rolled out together on a server that lacks their database all
// create it at once; the losers must count it as created (PostgreSQL says
// 42P04 or 23505), not die with the error hidden behind a nil dereference.
// A few rounds, since which replica loses, and how, is a matter of timing.
func TestTwoReplicasStartTogetherOnAFreshDatabase(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		env := e2e.New(t, e2e.WithRedis())
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		name := "sbtest_fresh_" + hex.EncodeToString(b)
		t.Cleanup(func() { storagetest.Drop(t, name) })
		fresh := map[string]string{"DATABASE_URL": storagetest.URLFor(name)}

		// Spawned back to back, without waiting for either.
		replicas := []*e2e.Process{
			env.Spawn(fmt.Sprintf("round-%d-a", round), fresh),
			env.Spawn(fmt.Sprintf("round-%d-b", round), fresh),
		}
		for _, p := range replicas {
			p.WaitLog(`"msg":"bot started"`, 60*time.Second)
		}
		ann := env.TG.User(601, "Ann", "en")
		require.Contains(t, ask(t, env, ann, ann.ID(), "/start").Text, "Hello, Ann!")
		for _, p := range replicas {
			resp, err := http.Get("http://" + p.HTTPAddr() + "/readyz")
			require.NoError(t, err, "%s serves", p.Name)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s is ready", p.Name)
			require.False(t, p.HasLog("panic"), "%s did not panic", p.Name)
			require.False(t, p.HasLog("start failed"), "%s started", p.Name)
		}
		for _, p := range replicas {
			p.Signal(syscall.SIGTERM)
		}
		for _, p := range replicas {
			require.Zero(t, p.Wait(30*time.Second), "%s stops cleanly", p.Name)
		}
	}
}

// A replica that starts before its database server waits for it, saying so,
// and serves once it is up — instead of a panic that hid the connect error.
func TestReplicaWaitsForAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	pg := e2e.PrivatePostgres(t) // prepared, not started: nothing listens yet
	env := e2e.New(t)
	p := env.Spawn("early", map[string]string{"DATABASE_URL": pg.URL("switchboard")})
	p.WaitLog(`"attempt":3`, 60*time.Second)
	require.Contains(t, p.Logs(), "database not reachable at start, retrying")
	pg.Start()
	p.WaitLog("database reachable", 60*time.Second)
	p.WaitLog(`"msg":"bot started"`, 60*time.Second)
	ann := env.TG.User(602, "Ann", "en")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/start").Text, "Hello, Ann!")
	require.False(t, p.HasLog("panic"))
}
