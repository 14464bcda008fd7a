// Package redistest runs a private redis-server for tests that stop Redis:
// the shared one on 6379 belongs to every test on the machine.
package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
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
	// exited is closed once cmd has exited (its Wait returned).
	exited chan struct{}
}

// Start runs a private redis-server (skipping the test when the binary is
// missing) and stops it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed")
	}
	s := &Server{t: t}
	t.Cleanup(s.Stop)
	// A free port found by listening on :0 is free only until it is
	// closed: another test's server, or any client's outbound connection,
	// may take it before redis-server binds, and then redis-server exits
	// while the dial reaches the other process. Such a start tries
	// another port.
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.Port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		err = s.start()
		if err == nil {
			return s
		}
		if try == 4 {
			t.Fatal(err)
		}
	}
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
	<-s.exited
	s.cmd = nil
}

// Resume starts the server again on the same port (empty: no persistence)
// and waits until it accepts connections.
func (s *Server) Resume() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatal(err)
	}
}

// start runs redis-server on s.Port and waits until it answers as the
// process it started, not whatever else listens there. An error if
// it exits first (the port is taken) or never answers.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on %d exited at start (port taken?)", s.Port)
		default:
		}
		err := ours(s.Addr(), cmd.Process.Pid)
		if err == nil {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exited
			return fmt.Errorf("redis-server on %d never answered: %w", s.Port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ours asks the server on addr for its process id (INFO server) and says
// whether it is pid: a PONG alone would also come from another test's
// redis-server that took the port while this one was still starting.
func ours(addr string, pid int) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("INFO server\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if !strings.HasPrefix(head, "$") || err != nil {
		return fmt.Errorf("not redis: %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("another redis-server answers on %s", addr)
	}
	return nil
}
