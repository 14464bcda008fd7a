package e2e_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// Webhook mode, as behind a load balancer: three replicas, Telegram pushing
// to one URL that hands requests to them in turn. 10 chats × 50 messages:
// each chat's answers come in its order, none lost, none doubled, and every
// replica took its share of the intake.
func TestWebhookReplicasAnswerEachChatInOrder(t *testing.T) {
	t.Parallel()
	const chats, perChat = 10, 50
	env := e2e.New(t, e2e.WithRedis())
	const secret = "e2e-webhook_secret"
	listen := []string{e2e.FreeAddr(t), e2e.FreeAddr(t), e2e.FreeAddr(t)}
	var turn atomic.Int64
	hits := make([]atomic.Int64, len(listen))
	backends := make([]*httputil.ReverseProxy, len(listen))
	for i, addr := range listen {
		backends[i] = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: addr})
	}
	lb := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(turn.Add(1)-1) % len(backends)
		hits[i].Add(1)
		backends[i].ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lbAddr := ln.Addr().String()
	go func() { _ = lb.Serve(ln) }()
	t.Cleanup(func() { _ = lb.Close() })

	var replicas []*e2e.Process
	for i, addr := range listen {
		replicas = append(replicas, env.Spawn(fmt.Sprintf("replica-%d", i+1), map[string]string{
			"TELEGRAM_WEBHOOK_URL": "http://" + lbAddr + "/telegram", "TELEGRAM_WEBHOOK_SECRET": secret,
			"TELEGRAM_WEBHOOK_LISTEN": addr,
		}))
	}
	for _, p := range replicas {
		p.WaitLog("webhook set", 60*time.Second)
	}
	hook, _ := env.TG.Webhook()
	require.Equal(t, "http://"+lbAddr+"/telegram", hook)

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
	for i := range hits {
		require.Positive(t, hits[i].Load(), "replica %d took no update: intake did not scale out", i+1)
	}
	for _, p := range replicas {
		require.False(t, strings.Contains(p.Logs(), "polling lease"), "no replica polls in webhook mode")
	}
}
