// Package e2e runs the built switchboard binary end to end: a strict fake
// Telegram (e2e/tgfake), a fake HH.ru (hh/hhtest), a scripted LLM
// (llm/llmtest), and a fresh PostgreSQL database per test, with Redis when a
// test runs several replicas. The harness builds the binary once (with the
// race detector), starts replicas as real processes, collects their JSON
// logs (printed when a test fails), and stops them so nothing leaks.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchboard/e2e/tgfake"
	"switchboard/hh/hhtest"
	"switchboard/llm/llmtest"
	"switchboard/storage/storagetest"
)

// AdminID is the Telegram id every Env lists in ADMIN_IDS.
const AdminID = 9001

var (
	buildOnce sync.Once
	buildDir  string
	binPath   string
	buildErr  error
)

// Binary builds switchboard once per test process and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "switchboard-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "switchboard")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Dir(filepath.Dir(file))
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("e2e: %v", buildErr)
	}
	return binPath
}

// Cleanup removes the built binary; call it from TestMain.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Env is one test's world: the fakes and a database every replica shares.
type Env struct {
	t           testing.TB
	TG          *tgfake.Server
	HH          *hhtest.Server
	LLM         *llmtest.Server
	DatabaseURL string
	// RedisURL and RedisPrefix are set by WithRedis.
	RedisURL, RedisPrefix string
	// AdminGroup is the admin chat WithAdminGroup made (zero without).
	AdminGroup tgfake.Chat
	replicas   int
}

// Option adjusts an Env.
type Option func(*Env)

// WithRedis makes replicas share the local Redis under a prefix of their own.
func WithRedis() Option {
	return func(e *Env) {
		addr := os.Getenv("TEST_REDIS_ADDR")
		if addr == "" {
			addr = "127.0.0.1:6379"
		}
		e.RedisURL = "redis://" + addr + "/0"
		e.RedisPrefix = "e2e:" + randomHex(6) + ":"
	}
}

// WithAdminGroup makes a supergroup "Admins" with this id and gives it to
// every replica as its admin chat (ADMIN_CHAT_ID).
func WithAdminGroup(chatID int64) Option {
	return func(e *Env) { e.AdminGroup = e.TG.Supergroup(chatID, "Admins", "") }
}

// WithAdminForum makes chatID the admin chat (ADMIN_CHAT_ID), a forum
// supergroup: its messages go into topics.
func WithAdminForum(chatID int64) Option {
	return func(e *Env) { e.AdminGroup = e.TG.ForumSupergroup(chatID, "Admins") }
}

// New starts the fakes and creates the database.
func New(t testing.TB, opts ...Option) *Env {
	t.Helper()
	// A reply waited for is bounded by what no healthy bot takes, not by
	// what it takes on an idle machine: a built binary under -race beside
	// other tests' binaries on two CPUs can take seconds for one message.
	tg := tgfake.New(t, tgfake.WithInsecureWebhooks(), tgfake.WithWaitTimeout(30*time.Second))
	e := &Env{t: t, TG: tg, HH: hhtest.Start(t), LLM: llmtest.Start(t), DatabaseURL: storagetest.NewURL(t)}
	// The models the bot is configured with (config/config.go's defaults) are
	// "pulled": the bot asks at start and logs an error for a missing one.
	e.LLM.ServeModels("qwen2.5:7b", "nomic-embed-text")
	for _, o := range opts {
		o(e)
	}
	return e
}

// Process is one running switchboard replica.
type Process struct {
	t    testing.TB
	Name string
	// Env is the environment the process was started with.
	Env  map[string]string
	cmd  *exec.Cmd
	logs *logBuffer
	done chan struct{}
	err  error
}

// Pid is the replica's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// BaseEnv is the environment a replica gets before a test's overrides.
func (e *Env) BaseEnv(name string) map[string]string {
	env := map[string]string{
		"TELEGRAM_TOKEN":   e.TG.Token(),
		"TELEGRAM_API_URL": e.TG.URL(),
		"DATABASE_URL":     withPool(e.DatabaseURL),
		"LLM_PROVIDER":     "ollama",
		"LLM_URL":          e.LLM.OllamaURL(),
		"HH_API_URL":       e.HH.URL(),
		// The fake HH takes any pace; the tests measure the bot, not the
		// courtesy owed to the real one (HH_RATE's own tests are in hh).
		"HH_RATE": "1000",
		// Tests run at any hour; working hours have tests of their own.
		"DISPATCH_HOURS": "24h",
		"ADMIN_IDS":      fmt.Sprint(AdminID),
		// Port 0: the kernel picks a free one as the replica binds it (a
		// port picked here and bound later could be taken meanwhile by
		// another test's process); HTTPAddr reads it from the log.
		"HTTP_ADDR":        "127.0.0.1:0",
		"LOG_LEVEL":        "debug",
		"REPLICA_NAME":     name,
		"SHUTDOWN_TIMEOUT": "10s",
	}
	if e.AdminGroup.ID != 0 {
		env["ADMIN_CHAT_ID"] = fmt.Sprint(e.AdminGroup.ID)
	}
	if e.RedisURL != "" {
		env["REDIS_URL"] = e.RedisURL
		env["REDIS_PREFIX"] = e.RedisPrefix
	}
	return env
}

// Start runs a replica with the base environment plus overrides (an empty
// value removes a variable) and waits until it serves Telegram or, with
// Redis, until it is up and competing for the polling lease.
func (e *Env) Start(overrides map[string]string, args ...string) *Process {
	e.t.Helper()
	e.replicas++
	name := fmt.Sprintf("replica-%d", e.replicas)
	p := e.Spawn(name, overrides, args...)
	p.WaitLog(`"msg":"bot started"`, 60*time.Second)
	return p
}

// StartPair starts two replicas with the same overrides and waits until the
// first holds the polling lease and the second waits for it.
func (e *Env) StartPair(overrides map[string]string) (poller, standby *Process) {
	e.t.Helper()
	poller = e.Start(overrides)
	poller.WaitLog("polling lease acquired", 30*time.Second)
	standby = e.Start(overrides)
	standby.WaitLog("polling lease held by another replica", 30*time.Second)
	return poller, standby
}

// Spawn runs the binary without waiting for anything.
func (e *Env) Spawn(name string, overrides map[string]string, args ...string) *Process {
	e.t.Helper()
	env := e.BaseEnv(name)
	for k, v := range overrides {
		if v == "" {
			delete(env, k)
			continue
		}
		env[k] = v
	}
	cmd := exec.Command(Binary(e.t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &Process{t: e.t, Name: name, Env: env, cmd: cmd, logs: newLogBuffer(), done: make(chan struct{})}
	cmd.Stdout = p.logs
	cmd.Stderr = p.logs
	slot := takeReplicaSlot(e.t, name)
	if err := cmd.Start(); err != nil {
		slot()
		e.t.Fatalf("e2e: start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); p.logs.closeWith(); slot(); close(p.done) }()
	e.t.Cleanup(func() {
		p.Kill()
		if strings.Contains(p.logs.String(), e.TG.Token()) {
			e.t.Errorf("e2e: %s logged the bot token", name)
		}
		if e.t.Failed() {
			e.t.Logf("---- logs of %s ----\n%s", name, p.logs.String())
		}
	})
	return p
}

// WaitLog blocks until a log line contains s, failing the test at timeout.
func (p *Process) WaitLog(s string, timeout time.Duration) string {
	p.t.Helper()
	line, ok := p.logs.wait(func(l string) bool { return strings.Contains(l, s) }, timeout)
	if !ok {
		p.t.Fatalf("e2e: %s: no log line containing %q within %s\n%s", p.Name, s, timeout, p.logs.String())
	}
	return line
}

// HTTPAddr is the address the replica's HTTP server (health, metrics)
// listens on, as it logged it.
func (p *Process) HTTPAddr() string {
	p.t.Helper()
	return p.logAddr("http listening")
}

// logAddr is the addr of the replica's log line of message msg.
func (p *Process) logAddr(msg string) string {
	p.t.Helper()
	line := p.WaitLog(`"msg":"`+msg+`"`, 60*time.Second)
	var l struct {
		Addr string `json:"addr"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Addr == "" {
		p.t.Fatalf("e2e: %s: no address in %q: %v", p.Name, line, err)
	}
	return l.Addr
}

// HasLog reports whether some log line so far contains s.
func (p *Process) HasLog(s string) bool { return strings.Contains(p.logs.String(), s) }

// Logs returns everything the process printed so far.
func (p *Process) Logs() string { return p.logs.String() }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil && !strings.Contains(err.Error(), "finished") {
		p.t.Fatalf("e2e: signal %s: %v", p.Name, err)
	}
}

// Wait waits for the process to exit and returns its exit code.
func (p *Process) Wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("e2e: %s did not exit within %s", p.Name, timeout)
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

// Kill ends the process at once (as kill -9 would) if it still runs.
func (p *Process) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Run executes the binary to completion (for -help, migrate, bad config).
func (e *Env) Run(overrides map[string]string, args ...string) (string, int) {
	e.t.Helper()
	p := e.Spawn("oneshot", overrides, args...)
	code := p.Wait(60 * time.Second)
	return p.Logs(), code
}

// replicaSlots bounds the replicas alive at once across this package's
// tests: each holds up to eight PostgreSQL connections, and three tests of
// three replicas beside two other packages' tests came within three of
// PostgreSQL's stock limit of 100. Most tests run one replica, so the
// bound rarely makes one wait.
var replicaSlots = make(chan struct{}, 6)

// replicaSlotWait is the longest a replica waits for a slot before it
// starts anyway: a test holding two replicas and waiting for a third while
// the others do the same would otherwise wait for ever.
const replicaSlotWait = time.Minute

// takeReplicaSlot waits for a slot for a replica about to start and
// returns its release (once; a no-op when the wait ran out).
func takeReplicaSlot(t testing.TB, name string) func() {
	select {
	case replicaSlots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-replicaSlots }) }
	case <-time.After(replicaSlotWait):
		t.Logf("e2e: %s starts without a replica slot after %s", name, replicaSlotWait)
		return func() {}
	}
}

// withPool caps a replica's pool at four: go test runs e2e tests and two
// other packages' tests side by side, and a replica holds its LISTEN and
// leases' connections beside its pool. With six, two tests of three
// replicas each beside two packages reached PostgreSQL's stock
// max_connections of 100 (the CI run of 2026-11-30 08:30 peaked at 89 with
// smaller tests).
func withPool(url string) string {
	if strings.Contains(url, "pool_max_conns") {
		return url
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "pool_max_conns=4"
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logBuffer keeps a process's output and wakes waiters on every new line.
type logBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	lines  []string
	change chan struct{}
	closed bool
	pw     *io.PipeWriter
	// scanned closes when every written line has been split and stored.
	scanned chan struct{}
}

func newLogBuffer() *logBuffer {
	lb := &logBuffer{change: make(chan struct{}), scanned: make(chan struct{})}
	pr, pw := io.Pipe()
	lb.pw = pw
	go func() {
		defer close(lb.scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
		for sc.Scan() {
			lb.mu.Lock()
			lb.lines = append(lb.lines, sc.Text())
			lb.buf.WriteString(sc.Text() + "\n")
			close(lb.change)
			lb.change = make(chan struct{})
			lb.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return lb
}

func (lb *logBuffer) Write(b []byte) (int, error) { return lb.pw.Write(b) }

func (lb *logBuffer) closeWith() {
	_ = lb.pw.Close()
	<-lb.scanned
	lb.mu.Lock()
	lb.closed = true
	close(lb.change)
	lb.change = make(chan struct{})
	lb.mu.Unlock()
}

func (lb *logBuffer) String() string {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	return lb.buf.String()
}

func (lb *logBuffer) wait(match func(string) bool, timeout time.Duration) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	seen := 0
	for {
		lb.mu.Lock()
		for ; seen < len(lb.lines); seen++ {
			if match(lb.lines[seen]) {
				l := lb.lines[seen]
				lb.mu.Unlock()
				return l, true
			}
		}
		ch, closed := lb.change, lb.closed
		lb.mu.Unlock()
		if closed { // every line was stored before closed was set
			return "", false
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return "", false
		}
	}
}
