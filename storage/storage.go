// Package storage is Switchboard's PostgreSQL layer: the pgx pool, the
// embedded goose migrations applied under an advisory lock, the WithTx helper,
// and one repository file per aggregate (users.go, job_runs.go, …). It
// implements the small interfaces the domain packages declare; nothing above
// it writes SQL.
package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"switchboard/domain"
	"switchboard/migrations"
)

// Store is one PostgreSQL database: its pool, migrations and
// transactions, and the way to each aggregate's store (Inbox, Outbox, …),
// which share its pool.
type Store struct{ *db }

// db is what every aggregate's store shares. It has no exported methods, so
// embedding it adds none to a store: each store's method set is its own.
type db struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	flush *walFlusher

	listenOnce sync.Once
	hub        *listenHub // every Listen's one connection (listen.go)
}

// DefaultMaxConns is the pool size unless DATABASE_URL sets pool_max_conns.
const DefaultMaxConns = 20

// Open connects to databaseURL, creating the database first when the server
// lacks it, so a newcomer needs no manual SQL.
func Open(ctx context.Context, databaseURL string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := EnsureDatabase(ctx, databaseURL, log); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if !strings.Contains(databaseURL, "pool_max_conns") {
		// pgx's default, max(4, CPUs), starves the workers of a small
		// machine: each match is several short statements. The URL's
		// pool_max_conns wins.
		cfg.MaxConns = DefaultMaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return &Store{&db{pool: pool, log: log, flush: &walFlusher{pool: pool}}}, nil
}

// Pool exposes the pool to the few places that need raw access
// (the LISTEN connection, tests, benchmarks).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Close closes the pool; it waits for acquired connections to be released.
func (s *Store) Close() { s.pool.Close() }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// EnsureDatabase creates the database named in databaseURL when the server
// does not have it. Replicas may race here: "already exists" is success.
func EnsureDatabase(ctx context.Context, databaseURL string, log *slog.Logger) error {
	// Parsed as the pool parses it, so pool settings in the URL
	// (pool_max_conns…) are not sent to the server as parameters.
	pcfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	cfg := pcfg.ConnConfig
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("connect to database: %w", err)
	}
	name := cfg.Database
	admin := cfg.Copy()
	admin.Database = "postgres"
	aconn, err := pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return fmt.Errorf("connect to maintenance database to create %q: %w", name, err)
	}
	defer aconn.Close(context.WithoutCancel(ctx))
	_, err = aconn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	switch {
	case err == nil:
		log.Info("database created", "database", name)
	case errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505"):
		// A replica that started with us created it first. PostgreSQL
		// says so as duplicate_database when the peer had committed, or as
		// a unique violation on pg_database_datname_index when both
		// inserted the catalog row at once.
		log.Info("database created by another replica", "database", name)
	default:
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

// Unavailable reports whether err from Open means the server cannot be
// reached or cannot take us yet — refused, unresolved, timed out, starting
// up or shutting down, out of connections — so waiting may fix it. A wrong
// password, a malformed URL or a refused CREATE DATABASE are not: waiting
// only hides them.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection_exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient_resources: too_many_connections…
			pgErr.Code == "57P01",               // admin_shutdown
			pgErr.Code == "57P02",               // crash_shutdown
			pgErr.Code == "57P03":               // cannot_connect_now: starting up, in recovery
			return true
		}
		return false
	}
	var parseErr *pgconn.ParseConfigError
	if errors.As(err, &parseErr) {
		return false
	}
	// No answer from a server at all: a network error, EOF, a timeout.
	return true
}

// migrationLockID keys the session advisory lock goose holds while migrating,
// so replicas that start together apply each migration exactly once.
const migrationLockID = 0x5377_6974_6368 // "Switch"

func (s *Store) provider() (*goose.Provider, *sql.DB, error) {
	locker, err := lock.NewPostgresSessionLocker(
		lock.WithLockID(migrationLockID),
		// Poll every second for up to five minutes: a peer's migration is short.
		lock.WithLockTimeout(1, 300),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("migration locker: %w", err)
	}
	db := stdlib.OpenDBFromPool(s.pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(migrations.Go()...),
	)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, db, nil
}

// Migrate applies every pending migration, each in its own transaction.
func (s *Store) Migrate(ctx context.Context) error {
	p, db, err := s.provider()
	if err != nil {
		return err
	}
	defer db.Close()
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		s.log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	return nil
}

// MigrationsPending reports whether the database lags the embedded schema
// (for /readyz: a replica on a newer build must not serve an old schema).
func (s *Store) MigrationsPending(ctx context.Context) (bool, error) {
	p, db, err := s.provider()
	if err != nil {
		return false, err
	}
	defer db.Close()
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("check migrations: %w", err)
	}
	return pending, nil
}

// WithTx runs fn in a transaction, committing when fn returns nil. The
// rollback uses a context that outlives cancellation, so a cancelled request
// never leaves a transaction open on a pooled connection.
func (s *Store) WithTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return s.withTx(ctx, fn)
}

func (s *db) withTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx) // a no-op after commit
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// interpretError is the one place pgx's "no rows" becomes domain.ErrNotFound.
func interpretError(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return domain.ErrNotFound
	}
	return err
}
