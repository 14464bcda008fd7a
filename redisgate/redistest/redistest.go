// Package redistest runs a private redis-server for tests that stop Redis:
// the shared one on 6379 belongs to every test on the machine.
package redistest

import (
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server child process on a free port.
type Server struct {
	t    testing.TB
	Port int
	mu   sync.Mutex
	cmd  *exec.Cmd
}

// Start runs a private redis-server (skipping the test when the binary is
// missing) and stops it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	s := &Server{t: t, Port: port}
	s.Resume()
	t.Cleanup(s.Stop)
	return s
}

// Client is a client of the server as the tests that stop it want one: no
// retries and a short dial, so that a call to a stopped server fails at
// once. It is closed when the test ends.
func (s *Server) Client() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	s.t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is a REDIS_URL for it.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Running reports whether the process is up (started and not stopped).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Stop kills the server and waits for it to exit; the port is then closed.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Resume starts the server again on the same port (empty: no persistence)
// and waits until it accepts connections.
func (s *Server) Resume() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", s.Addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatal(fmt.Errorf("redis-server on %d never listened: %w", s.Port, err))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
