package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/internal/testkit"
)

func TestMain(m *testing.M) {
	// The tests here mostly wait for real ticks; let them wait side by side
	// even on a two-core machine, unless -parallel says otherwise.
	testkit.DefaultParallel(16)
	goleak.VerifyTestMain(m)
}

// redisAddr is the test Redis; TEST_REDIS_ADDR overrides it.
func redisAddr() string {
	if a := os.Getenv("TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// newRedis returns a client closed when the test ends. ContextTimeoutEnabled
// is what production should set too: it lets the locker's per-call timeout
// bound socket reads.
func newRedis(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testPrefix gives each test its own keys, so parallel tests never collide,
// and removes them when the test ends.
func testPrefix(t *testing.T, c *redis.Client) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "sbtest:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := c.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return prefix
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "condition not met in "+within.String(), msgAndArgs...)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBuffer collects JSON log lines for assertions.
type logBuffer struct{ testkit.SyncBuffer }

// lines returns the log lines containing every one of parts.
func (b *logBuffer) lines(parts ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func newLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// proxy is a TCP proxy to Redis that the test can take down and bring back,
// standing in for a Redis outage without touching the machine's Redis.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	stalled bool
	wg      sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	p := &proxy{t: t, target: target, conns: make(map[net.Conn]struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.pipe(c)
		}
	}()
}

func (p *proxy) pipe(client net.Conn) {
	p.mu.Lock()
	if p.stalled { // accept, then never answer: a Redis that hangs
		p.conns[client] = struct{}{}
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // went down meanwhile
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()
	p.wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer p.wg.Done()
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	go cp(server, client)
	go cp(client, server)
}

// down refuses new connections and cuts the open ones.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// up cuts whatever is open and forwards again, on the same address.
func (p *proxy) up() {
	p.down()
	p.listen(false)
}

// stall cuts the open connections, then accepts new ones and never answers:
// the outage only a timeout ends.
func (p *proxy) stall() {
	p.down()
	p.listen(true)
}

func (p *proxy) listen(stalled bool) {
	p.t.Helper()
	p.mu.Lock()
	p.stalled = stalled
	p.mu.Unlock()
	ln, err := net.Listen("tcp", p.addr)
	require.NoError(p.t, err)
	p.serve(ln)
}
