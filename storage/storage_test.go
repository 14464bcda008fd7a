package storage_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/internal/testkit"
	"switchboard/migrations"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// The tests here mostly wait on PostgreSQL (a database cloned for each,
// leases run out): at eight at once the package took 29 s alone on a
// 2-vCPU host (78 s at go test's default of two there) with at most 32
// connections to the server.
func TestMain(m *testing.M) {
	testkit.DefaultParallel(8)
	os.Exit(m.Run())
}

var quiet = slog.New(slog.DiscardHandler)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testBundle is what a storage test starts from: a database of its own
// (storagetest.New), a context that ends with the test, and the raw
// statements a test checks rows with. Each workflow's fixture embeds it.
type testBundle struct {
	t   testing.TB
	ctx context.Context
	st  *storage.Store
}

func setup(t *testing.T) *testBundle {
	return &testBundle{t: t, ctx: ctxT(t), st: storagetest.New(t)}
}

// exec runs a statement and returns the rows it touched.
func (b *testBundle) exec(sql string, args ...any) int64 {
	b.t.Helper()
	tag, err := b.st.Pool().Exec(b.ctx, sql, args...)
	require.NoError(b.t, err, sql)
	return tag.RowsAffected()
}

// count runs a query of one integer.
func (b *testBundle) count(sql string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.st.Pool().QueryRow(b.ctx, sql, args...).Scan(&n), sql)
	return n
}

// users makes a user row for each of ids, like like but for its ID: the
// rows most tests write belong to a user.
func (b *testBundle) users(like domain.User, ids ...int64) {
	b.t.Helper()
	for _, id := range ids {
		like.ID = id
		_, err := b.st.Users().Upsert(b.ctx, like)
		require.NoError(b.t, err)
	}
}

// listening listens on channels for the rest of the test and returns once
// LISTEN is in place; each notification arrives as "channel payload".
func listening(t *testing.T, st *storage.Store, channels ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	connected := make(chan struct{}, 1)
	got := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		st.Listen(ctx, channels, func() {
			select {
			case connected <- struct{}{}:
			default:
			}
		}, func(ch, payload string) {
			select {
			case got <- ch + " " + payload:
			case <-ctx.Done():
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the listener did not connect")
	}
	return got
}

// notified is the next notification listening hands over.
func notified(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case n := <-got:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no notification")
		return ""
	}
}

// advisoryWaiters counts the sessions of st's database waiting for an
// advisory lock: how a test knows another caller is blocked on a lock it
// holds.
func advisoryWaiters(ctx context.Context, st *storage.Store) int {
	var waiting int
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&waiting)
	return waiting
}

// holding begins a transaction that runs sql and keeps the locks it took
// until the test commits or rolls it back, or ends: how a race test parks
// the caller under test behind a row or table another session holds.
func (b *testBundle) holding(sql string, args ...any) pgx.Tx {
	b.t.Helper()
	tx, err := b.st.Pool().Begin(b.ctx)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = tx.Rollback(context.WithoutCancel(b.ctx)) })
	_, err = tx.Exec(b.ctx, sql, args...)
	require.NoError(b.t, err, sql)
	return tx
}

// lockWaiters counts the sessions of st's database waiting for a row or
// table lock: how a race test knows the step under test is parked behind
// the transaction it holds open.
func lockWaiters(ctx context.Context, st *storage.Store) int {
	var waiting int
	_ = st.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
	return waiting
}

// atOnce runs f(0) … f(n-1) on goroutines released together, to race
// them, and waits for them all.
func atOnce(n int, f func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// raceAll is atOnce for races whose every caller's answer is checked: it
// returns what f(0) … f(n-1) returned, in order.
func raceAll[R any](n int, f func(i int) R) []R {
	out := make([]R, n)
	atOnce(n, func(i int) { out[i] = f(i) })
	return out
}

// int64s reads one bigint column.
func (b *testBundle) int64s(sql string, args ...any) []int64 {
	b.t.Helper()
	return column[int64](b, sql, args...)
}

// strings reads one text column.
func (b *testBundle) strings(sql string, args ...any) []string {
	b.t.Helper()
	return column[string](b, sql, args...)
}

// column reads the one column of every row sql returns.
func column[T any](b *testBundle, sql string, args ...any) []T {
	b.t.Helper()
	rows, err := b.st.Pool().Query(b.ctx, sql, args...)
	require.NoError(b.t, err, sql)
	out, err := pgx.CollectRows(rows, pgx.RowTo[T])
	require.NoError(b.t, err, sql)
	return out
}

func TestMigrateConcurrentlyOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	url := storagetest.NewDatabase(t)

	const replicas = 2
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := storage.Open(ctx, url, quiet)
			if err != nil {
				errs[i] = err
				return
			}
			defer st.Close()
			errs[i] = st.Migrate(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}

	st, err := storage.Open(ctx, url, quiet)
	require.NoError(t, err)
	defer st.Close()
	var applied int
	require.NoError(t, st.Pool().QueryRow(ctx,
		`SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`).Scan(&applied))
	entries, err := migrationsCount()
	require.NoError(t, err)
	require.Equal(t, entries, applied, "each migration recorded exactly once")

	// Re-applying is a no-op.
	require.NoError(t, st.Migrate(ctx))
	var after int
	require.NoError(t, st.Pool().QueryRow(ctx, `SELECT count(*) FROM goose_db_version`).Scan(&after))
	require.Equal(t, applied+1, after, "only the initial version-0 row besides the migrations")
	pending, err := st.MigrationsPending(ctx)
	require.NoError(t, err)
	require.False(t, pending)
}

// migrationsCount is the SQL files and the Go migrations.
func migrationsCount() (int, error) {
	n := len(migrations.Go())
	entries, err := migrationsDir()
	for _, e := range entries {
		if strings.HasSuffix(e, ".sql") {
			n++
		}
	}
	return n, err
}

func TestOpenCreatesMissingDatabase(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	name := "sbtest_create_" + strings.ReplaceAll(t.Name(), "/", "_")
	name = strings.ToLower(name)
	storagetest.Drop(t, name)
	t.Cleanup(func() { storagetest.Drop(t, name) })

	st, err := storage.Open(ctx, storagetest.URLFor(name), quiet)
	require.NoError(t, err)
	defer st.Close()
	pending, err := st.MigrationsPending(ctx)
	require.NoError(t, err)
	require.True(t, pending, "a new database has the whole schema pending")
	require.NoError(t, st.Migrate(ctx))

	require.EqualValues(t, storage.DefaultMaxConns, st.Pool().Config().MaxConns)

	// Opening again finds it and does not fail; pool settings in the URL
	// are the pool's, not parameters sent to the server.
	url := storagetest.URLFor(name)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	st2, err := storage.Open(ctx, url+sep+"pool_max_conns=3", quiet)
	require.NoError(t, err)
	require.EqualValues(t, 3, st2.Pool().Config().MaxConns)
	st2.Close()
}

// Replicas that start together on a fresh server all try CREATE DATABASE;
// the losers see 42P04 or, when both insert the catalog row at once, 23505
// on pg_database_datname_index. Either way the database exists: success.
func TestOpenConcurrentlyCreatesMissingDatabaseOnce(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	for round := range 5 {
		name := strings.ToLower(fmt.Sprintf("sbtest_race_%s_%d", t.Name(), round))
		storagetest.Drop(t, name)
		t.Cleanup(func() { storagetest.Drop(t, name) })
		const replicas = 6
		errs := raceAll(replicas, func(int) error {
			st, err := storage.Open(ctx, storagetest.URLFor(name), quiet)
			if err == nil {
				st.Close()
			}
			return err
		})
		for i, err := range errs {
			require.NoError(t, err, "round %d, replica %d", round, i)
		}
	}
}

func TestUnavailable(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	// Nothing listens on a port just released.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = storage.Open(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable&connect_timeout=2", quiet)
	require.Error(t, err)
	require.True(t, storage.Unavailable(err), "refused: %v", err)

	_, err = storage.Open(ctx, "postgres://postgres@127.0.0.1:notaport/x", quiet)
	require.Error(t, err)
	require.False(t, storage.Unavailable(err), "malformed URL: %v", err)

	for code, want := range map[string]bool{"57P03": true, "53300": true, "08006": true, "28P01": false, "42501": false} {
		err := fmt.Errorf("connect: %w", &pgconn.PgError{Code: code})
		require.Equal(t, want, storage.Unavailable(err), code)
	}
	require.False(t, storage.Unavailable(context.Canceled))
}

// An update from a user stored as they are writes nothing: not even the
// row lock an upsert's ON CONFLICT takes (which left its locker in xmax
// and was WAL every update's commit waited to flush). One whose chat is
// marked unreachable, or whose names changed, is written.
func TestUsersUpsertOfAnUnchangedUserWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)
	ann := domain.User{ID: 7, Username: "ann", FirstName: "Ann", TelegramLanguage: "uk"}
	_, err := st.Users().Upsert(ctx, ann)
	require.NoError(t, err)
	touched := func() (locked bool, updatedAt time.Time) {
		var xmax string
		require.NoError(t, st.Pool().QueryRow(ctx, `SELECT xmax::text, updated_at FROM users WHERE id = 7`).Scan(&xmax, &updatedAt))
		return xmax != "0", updatedAt
	}
	_, before := touched()

	for range 3 {
		u, err := st.Users().Upsert(ctx, ann)
		require.NoError(t, err)
		require.Equal(t, "uk", u.TelegramLanguage)
	}
	locked, at := touched()
	require.False(t, locked, "the row was not locked")
	require.Equal(t, before, at)

	_, err = st.Pool().Exec(ctx, `INSERT INTO unreachable_chats (chat_id, reason) VALUES (7, 'blocked')`)
	require.NoError(t, err)
	_, err = st.Users().Upsert(ctx, ann)
	require.NoError(t, err)
	gone, err := st.Outbox().Unreachable(ctx, 7)
	require.NoError(t, err)
	require.False(t, gone, "writing to the bot clears the mark, the names unchanged")

	ann.FirstName = "Анна"
	u, err := st.Users().Upsert(ctx, ann)
	require.NoError(t, err)
	require.Equal(t, "Анна", u.FirstName)
	_, at = touched()
	require.True(t, at.After(before), "a new name is written")
}

func TestUsers(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)

	_, err := st.Users().Get(ctx, 7)
	require.ErrorIs(t, err, domain.ErrNotFound)

	u, err := st.Users().Upsert(ctx, domain.User{ID: 7, Username: "ann", FirstName: "Ann"})
	require.NoError(t, err)
	require.Equal(t, "ann", u.Username)
	require.Empty(t, u.Language)

	require.NoError(t, st.Users().SetLanguage(ctx, 7, "uk"))
	u, err = st.Users().Upsert(ctx, domain.User{ID: 7, Username: "ann", FirstName: "Ann"})
	require.NoError(t, err, "an unchanged upsert still returns the row")
	require.Equal(t, "uk", u.Language, "upsert keeps the chosen language")

	u, err = st.Users().Upsert(ctx, domain.User{ID: 7, Username: "ann2", FirstName: "Ann"})
	require.NoError(t, err)
	require.Equal(t, "ann2", u.Username)
	require.Equal(t, "uk", u.Language)

	require.ErrorIs(t, st.Users().SetLanguage(ctx, 8, "en"), domain.ErrNotFound)
	require.Error(t, st.Users().SetLanguage(ctx, 7, "de"), "the CHECK constraint refuses unknown languages")

	// The time zone: none until chosen, kept by upserts, forgotten with "".
	require.Empty(t, u.TimeZone)
	require.NoError(t, st.Users().SetTimeZone(ctx, 7, "Europe/Moscow"))
	u, err = st.Users().Upsert(ctx, domain.User{ID: 7, Username: "ann3", FirstName: "Ann"})
	require.NoError(t, err)
	require.Equal(t, "Europe/Moscow", u.TimeZone)
	require.NoError(t, st.Users().SetTimeZone(ctx, 7, ""))
	u, err = st.Users().Get(ctx, 7)
	require.NoError(t, err)
	require.Empty(t, u.TimeZone)
	require.ErrorIs(t, st.Users().SetTimeZone(ctx, 8, "UTC"), domain.ErrNotFound)

	// A master's user carries their city, on the upsert's both paths.
	require.Empty(t, u.MasterCity)
	_, err = st.Pool().Exec(ctx, `INSERT INTO masters (user_id, city, district, skills) VALUES (7, 'Moscow', 'Center', '{plumbing}')`)
	require.NoError(t, err)
	u, err = st.Users().Upsert(ctx, domain.User{ID: 7, Username: "ann3", FirstName: "Ann"})
	require.NoError(t, err)
	require.Equal(t, "Moscow", u.MasterCity, "unchanged: read back")
	u, err = st.Users().Upsert(ctx, domain.User{ID: 7, Username: "ann4", FirstName: "Ann"})
	require.NoError(t, err)
	require.Equal(t, "Moscow", u.MasterCity, "changed: returned by the upsert")
}

func TestWithTxRollsBackOnErrorAndCancel(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	st := storagetest.New(t)
	boom := errors.New("boom")

	err := st.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO users (id) VALUES (1)`)
		require.NoError(t, err)
		return boom
	})
	require.ErrorIs(t, err, boom)
	_, err = st.Users().Get(ctx, 1)
	require.ErrorIs(t, err, domain.ErrNotFound, "rolled back")

	cctx, cancel := context.WithCancel(ctx)
	err = st.WithTx(cctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(cctx, `INSERT INTO users (id) VALUES (2)`)
		require.NoError(t, err)
		cancel()
		return cctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	_, err = st.Users().Get(ctx, 2)
	require.ErrorIs(t, err, domain.ErrNotFound)
	// The pool is healthy afterwards: no connection was left mid-transaction.
	require.NoError(t, st.WithTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO users (id) VALUES (3)`)
		return err
	}))
	_, err = st.Users().Get(ctx, 3)
	require.NoError(t, err)
}
