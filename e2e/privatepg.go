package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PrivatePG is a PostgreSQL server of one test's own, which the test may
// stop and start (an outage) without touching the shared server others
// test against.
type PrivatePG struct {
	t    testing.TB
	dir  string
	port int
	// URL is a database on it, created for the test.
	URL string
	run func(args ...string) ([]byte, error)
}

// PrivatePostgres initialises a fresh cluster in a temporary directory,
// starts it on a free port and creates a database; t.Cleanup stops it and
// removes it. The test is skipped when PostgreSQL's server binaries are
// not installed (PG_BIN, else /usr/lib/postgresql/15/bin).
func PrivatePostgres(t testing.TB) *PrivatePG {
	t.Helper()
	bin := os.Getenv("PG_BIN")
	if bin == "" {
		bin = "/usr/lib/postgresql/15/bin"
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		t.Skipf("e2e: no PostgreSQL server binaries in %s: %v", bin, err)
	}
	// A short path: the socket's name must fit in 107 bytes.
	dir, err := os.MkdirTemp("", "pg")
	if err != nil {
		t.Fatalf("e2e: private postgres: %v", err)
	}
	// initdb refuses to run as root: run the server as postgres then.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("e2e: running as root and no postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("e2e: private postgres: %v", err)
		}
	}
	p := &PrivatePG{t: t, dir: dir}
	p.run = func(args ...string) ([]byte, error) {
		cmd := exec.Command(filepath.Join(bin, args[0]), args[1:]...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd.CombinedOutput()
	}
	t.Cleanup(func() {
		_, _ = p.run("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	})
	if out, err := p.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "--no-sync"); err != nil {
		t.Fatalf("e2e: initdb: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("e2e: free port: %v", err)
	}
	p.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	p.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port))
	if err != nil {
		t.Fatalf("e2e: private postgres: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE switchboard"); err != nil {
		t.Fatalf("e2e: private postgres: %v", err)
	}
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/switchboard?sslmode=disable", p.port)
	return p
}

// Start starts the server and waits until it takes connections.
func (p *PrivatePG) Start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", p.port, p.dir)
	out, err := p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-o", opts,
		"-l", filepath.Join(p.dir, "log"), "-w", "-t", "60", "start")
	if err != nil {
		p.t.Fatalf("e2e: start private postgres: %v\n%s", err, out)
	}
}

// Stop stops the server at once (fast shutdown: sessions are cut, as an
// operator's restart or a crash of the database host would).
func (p *PrivatePG) Stop() {
	p.t.Helper()
	out, err := p.run("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "fast", "-w", "-t", "60", "stop")
	if err != nil {
		p.t.Fatalf("e2e: stop private postgres: %v\n%s", err, out)
	}
}
