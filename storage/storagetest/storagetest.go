// Package storagetest gives each test its own real PostgreSQL database,
// cloned from a migrated template so that a test pays milliseconds, not a
// migration run. Point it elsewhere with TEST_DATABASE_URL (default: the
// local server, user postgres).
package storagetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx", which goose drives
	"github.com/pressly/goose/v3"

	"switchboard/migrations"
	"switchboard/storage"
)

// DefaultURL is the server tests use unless TEST_DATABASE_URL says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// ServerURL returns the maintenance URL of the test server.
func ServerURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// URLFor returns the URL of database name on the test server.
func URLFor(name string) string {
	u, err := url.Parse(ServerURL())
	if err != nil {
		panic(fmt.Sprintf("storagetest: bad TEST_DATABASE_URL: %v", err))
	}
	u.Path = "/" + name
	return u.String()
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// templateDB returns a migrated template database whose name is derived from
// the migrations' contents, so a schema change builds a fresh template and
// parallel test binaries share one otherwise.
func templateDB(ctx context.Context) (string, error) {
	templateOnce.Do(func() {
		h := fnv.New64a()
		err := fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(migrations.FS, p)
			h.Write([]byte(p))
			h.Write(b)
			return err
		})
		if err != nil {
			templateErr = err
			return
		}
		for _, m := range migrations.Go() {
			fmt.Fprint(h, m.Version)
		}
		templateName = fmt.Sprintf("sbtest_tpl_%x", h.Sum64())
		templateErr = withAdmin(ctx, func(conn *pgx.Conn) error {
			var exists bool
			if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)`, templateName).Scan(&exists); err != nil {
				return err
			}
			if exists {
				return nil
			}
			building := templateName + "_build_" + randomSuffix()
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
				return err
			}
			st, err := storage.Open(ctx, URLFor(building), slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			err = st.Migrate(ctx)
			st.Close()
			if err != nil {
				return err
			}
			// Another test binary may have finished first; either template is fine.
			_, err = conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{templateName}.Sanitize())
			if err != nil {
				_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize())
				return nil
			}
			_, err = conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{templateName}.Sanitize()+" IS_TEMPLATE true")
			return err
		})
	})
	return templateName, templateErr
}

// withAdmin runs fn on a connection to the maintenance database while holding
// an advisory lock, because CREATE DATABASE … TEMPLATE fails if another
// session is copying the same template at that moment.
func withAdmin(ctx context.Context, fn func(*pgx.Conn) error) error {
	conn, err := connectAdmin(ctx)
	if err != nil {
		return fmt.Errorf("storagetest: connect to %s: %w (is PostgreSQL running?)", ServerURL(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(727274)`); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(727274)`) //nolint:errcheck
	return fn(conn)
}

// connectAdmin connects to the maintenance database, waiting while the
// server has no connection slot free: the e2e tests' replicas run beside
// these tests and give their connections back as they stop.
func connectAdmin(ctx context.Context) (*pgx.Conn, error) {
	for {
		conn, err := pgx.Connect(ctx, ServerURL())
		if !tooMany(err) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// tooMany: the server refused a connection for want of a free slot.
func tooMany(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}

// newName names a test database after the test binary that owns it
// (sbtest_e2e_…, sbtest_storage_…), so that pg_stat_activity during a CI run
// tells which package holds the server's connections.
func newName() string {
	owner := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, owner)
	if len(clean) > 20 {
		clean = clean[:20]
	}
	return "sbtest_" + clean + "_" + randomSuffix()
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewDatabase creates an empty (unmigrated) database, dropped when the test
// ends, and returns its URL. For tests of migrations and of database creation.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := newName()
	err := withAdmin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		return err
	})
	if err != nil {
		t.Fatalf("storagetest: create database: %v", err)
	}
	t.Cleanup(func() { Drop(t, name) })
	return URLFor(name)
}

// Migrator is an empty database (NewDatabase) and a goose provider over it
// knowing every migration, SQL and Go, none applied: for tests that take
// the schema to one version, write rows as a build of that time would, and
// look at what the later migrations make of them. db is closed before the
// database is dropped.
func Migrator(t testing.TB) (url string, db *sql.DB, p *goose.Provider) {
	t.Helper()
	url = NewDatabase(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatalf("storagetest: open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	p, err = goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithDisableGlobalRegistry(true), goose.WithGoMigrations(migrations.Go()...))
	if err != nil {
		t.Fatalf("storagetest: migration provider: %v", err)
	}
	return url, db, p
}

// NewURL returns the URL of a fresh migrated database dropped when the test
// ends (for starting the binary or several Stores against one database).
func NewURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tpl, err := templateDB(ctx)
	if err != nil {
		t.Fatalf("storagetest: template database: %v", err)
	}
	name := newName()
	err = withAdmin(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize())
		return err
	})
	if err != nil {
		t.Fatalf("storagetest: create database from template: %v", err)
	}
	t.Cleanup(func() { Drop(t, name) })
	return URLFor(name)
}

// New returns a Store over a fresh migrated database, closed and dropped when
// the test ends.
func New(t testing.TB) *storage.Store {
	t.Helper()
	u := NewURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := storage.Open(ctx, u, slog.New(slog.DiscardHandler))
	for tooMany(err) && ctx.Err() == nil { // see connectAdmin
		time.Sleep(200 * time.Millisecond)
		st, err = storage.Open(ctx, u, slog.New(slog.DiscardHandler))
	}
	if err != nil {
		t.Fatalf("storagetest: open: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

// Drop removes a test database, disconnecting whatever still holds it.
func Drop(t testing.TB, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := connectAdmin(ctx)
	if err != nil {
		t.Logf("storagetest: drop %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Logf("storagetest: drop %s: %v", name, err)
	}
}
