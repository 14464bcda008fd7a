package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
)

// PrivatePG is a PostgreSQL server of one test's own, for tests that need
// it absent, late or stopped: the shared server on 5432 serves every other
// test and is never stopped.
type PrivatePG struct {
	t       testing.TB
	bin     string
	dir     string
	port    int
	asUser  string // run as this OS user: PostgreSQL refuses to run as root
	running bool
}

// PrivatePostgres prepares a fresh cluster (initdb, trust, user postgres)
// on a free port without starting it; Start starts it. The test is skipped
// when the server binaries are not installed. Cleanup stops and removes it.
func PrivatePostgres(t testing.TB) *PrivatePG {
	t.Helper()
	bin := os.Getenv("TEST_PG_BIN")
	if bin == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		if len(matches) > 0 {
			bin = matches[len(matches)-1]
		}
	}
	if _, err := os.Stat(filepath.Join(bin, "initdb")); bin == "" || err != nil {
		t.Skip("e2e: PostgreSQL server binaries (initdb, pg_ctl) not found; set TEST_PG_BIN")
	}
	dir, err := os.MkdirTemp("", "sbpg-")
	if err != nil {
		t.Fatalf("e2e: private postgres dir: %v", err)
	}
	pg := &PrivatePG{t: t, bin: bin, dir: dir, port: freePort(t)}
	t.Cleanup(func() {
		pg.Stop()
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("e2e: running as root and there is no postgres user to run a private server as")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("e2e: chown private postgres dir: %v", err)
		}
		pg.asUser = "postgres"
	}
	pg.run("initdb", "-D", pg.data(), "-U", "postgres", "-A", "trust", "--no-sync")
	return pg
}

func (pg *PrivatePG) data() string { return filepath.Join(pg.dir, "data") }

// URL is the address of database name on this server (which need not exist:
// the bot creates its database).
func (pg *PrivatePG) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", pg.port, name)
}

// Start starts the server and waits until it accepts connections.
func (pg *PrivatePG) Start() {
	pg.t.Helper()
	pg.run("pg_ctl", "-D", pg.data(), "-w", "-l", filepath.Join(pg.dir, "log"),
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", pg.port, pg.dir), "start")
	pg.running = true
}

// Stop stops the server at once (immediate mode: as a crash would, for the
// clients) if it runs.
func (pg *PrivatePG) Stop() {
	if !pg.running {
		return
	}
	pg.running = false
	pg.run("pg_ctl", "-D", pg.data(), "-w", "-m", "immediate", "stop")
}

func (pg *PrivatePG) run(tool string, args ...string) {
	pg.t.Helper()
	name, argv := filepath.Join(pg.bin, tool), args
	if pg.asUser != "" {
		name, argv = "runuser", append([]string{"-u", pg.asUser, "--", filepath.Join(pg.bin, tool)}, args...)
	}
	out, err := exec.Command(name, argv...).CombinedOutput()
	if err != nil {
		pg.t.Fatalf("e2e: %s: %v\n%s", tool, err, out)
	}
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("e2e: free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
