package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pollingLockID keys the session advisory lock whose holder alone polls
// Telegram. Advisory locks are per database, so deployments on different
// databases never meet; every replica of one deployment shares its database.
const pollingLockID int64 = 0x5377_6974_6368_506f // "SwitchPo"

const (
	// lockCheckEvery is how often a holder proves its session alive and
	// a standby retries the lock: a dead holder is replaced within about this.
	lockCheckEvery = time.Second
	// lockOpTimeout bounds one connect or query: a holder that cannot
	// hear from the server this long gives up the lock (closes its
	// connection) rather than act without knowing it still holds it.
	lockOpTimeout = 2 * time.Second
	// lockSilence is how long the server keeps the session of a client it
	// no longer hears from (a network partition, a frozen host): after it, the
	// session ends and the lock passes. It must exceed check + op timeout, by
	// which the holder has already stopped on its own.
	lockSilence = 6 * time.Second
)

// SessionLock is a PostgreSQL session advisory lock held on a connection of
// its own (outside the pool, so the lock lives exactly as long as that
// connection). When the holder's process dies its kernel closes the socket
// and the server drops the lock at once, so whoever watches for it (a standby
// retrying every second, a peer reading pg_locks) sees it gone within about a
// second; a stopping replica unlocks explicitly. When the server stops
// hearing from a live holder (a partition), keepalives and
// idle_session_timeout end the session within lockSilence, by which time the
// holder, whose checks fail, has already stopped on its own. Two locks use
// it: the Telegram polling lock (it implements bot.PollingLock) and each
// replica's liveness lock (Liveness). Its methods are called from one
// goroutine; the mutex only guards Close racing them at shutdown.
type SessionLock struct {
	cfg  *pgx.ConnConfig
	key  int64
	name string
	log  *slog.Logger

	mu   sync.Mutex
	conn *pgx.Conn
	held atomic.Bool
}

// PollingLock returns the polling lock for this store's database; no connection
// is made until Acquire.
func (s *Store) PollingLock() *SessionLock {
	return NewPollingLock(s.pool.Config().ConnConfig.Copy(), s.log)
}

// NewPollingLock returns the polling lock for the database cfg names (tests
// point it through a proxy to cut the network); cfg is used as is, not copied.
func NewPollingLock(cfg *pgx.ConnConfig, log *slog.Logger) *SessionLock {
	return newSessionLock(cfg, pollingLockID, "polling lease", log)
}

// newSessionLock returns the lock key names, which its connection and
// errors call name.
func newSessionLock(cfg *pgx.ConnConfig, key int64, name string, log *slog.Logger) *SessionLock {
	if log == nil {
		log = slog.Default()
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = "switchboard " + name
	// The server's keepalives notice a vanished client in 2+3×1 s even where
	// idle_session_timeout (PostgreSQL 14+) is missing; tcp_user_timeout does
	// the same for data the server sent and never saw acknowledged. All are
	// ignored on a Unix socket, where a dead peer is seen at once anyway.
	cfg.RuntimeParams["tcp_keepalives_idle"] = "2"
	cfg.RuntimeParams["tcp_keepalives_interval"] = "1"
	cfg.RuntimeParams["tcp_keepalives_count"] = "3"
	cfg.RuntimeParams["tcp_user_timeout"] = fmt.Sprint(lockSilence.Milliseconds())
	return &SessionLock{cfg: cfg, key: key, name: name, log: log}
}

// TTL is three check intervals: the holder renews (checks) every TTL/3 and a
// standby retries as often.
func (l *SessionLock) TTL() time.Duration { return 3 * lockCheckEvery }

// Held reports whether this replica held the lock at its last check.
func (l *SessionLock) Held() bool { return l.held.Load() }

// Acquire takes the lock if no other session holds it, connecting first when
// there is no live connection.
func (l *SessionLock) Acquire(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held.Load() {
		// Asking again would stack a second lock level on the same session.
		return l.checkLocked(ctx)
	}
	if l.conn == nil || l.conn.IsClosed() {
		if err := l.connectLocked(ctx); err != nil {
			return false, err
		}
	}
	qctx, cancel := context.WithTimeout(ctx, lockOpTimeout)
	defer cancel()
	var ok bool
	if err := l.conn.QueryRow(qctx, `SELECT pg_try_advisory_lock($1)`, l.key).Scan(&ok); err != nil {
		// The lock may have been granted with the answer lost: dropping the
		// connection gives it back.
		l.dropLocked()
		return false, fmt.Errorf("%s: try lock: %w", l.name, err)
	}
	l.held.Store(ok)
	return ok, nil
}

// Renew checks that this session is alive and still holds the lock. Any
// failure closes the connection — which releases the lock on the server, now
// or when it notices — and reports the lease lost, so the poller stops at once
// instead of acting on a lock it may no longer have.
func (l *SessionLock) Renew(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Load() {
		return false, nil
	}
	return l.checkLocked(ctx)
}

func (l *SessionLock) checkLocked(ctx context.Context) (bool, error) {
	if l.conn == nil || l.conn.IsClosed() {
		l.held.Store(false)
		return false, nil
	}
	qctx, cancel := context.WithTimeout(ctx, lockOpTimeout)
	defer cancel()
	// A bigint key shows in pg_locks as classid (high half), objid (low
	// half) and objsubid 1.
	var still bool
	err := l.conn.QueryRow(qctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
		  AND classid = ($1::bigint >> 32)::oid AND objid = ($1::bigint & 4294967295)::oid AND objsubid = 1)`,
		l.key).Scan(&still)
	if err != nil {
		l.dropLocked()
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		l.log.Warn(l.name+" connection failed: the lock went with it", "err", err)
		return false, nil
	}
	if !still {
		l.log.Warn(l.name + ": the lock is no longer held by this session")
		l.held.Store(false)
	}
	return still, nil
}

// Release unlocks and closes the connection so a peer takes over at once
// (closing alone would release it too; unlocking first says so plainly).
func (l *SessionLock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	var err error
	if l.held.Load() && !l.conn.IsClosed() {
		if _, uerr := l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, l.key); uerr != nil {
			err = fmt.Errorf("%s: unlock: %w", l.name, uerr)
		}
	}
	l.held.Store(false)
	if cerr := l.conn.Close(ctx); cerr != nil && err == nil {
		err = fmt.Errorf("%s: close: %w", l.name, cerr)
	}
	l.conn = nil
	return err
}

// Close releases the lock if it is still open (a standby's connection, or a
// holder that did not get to release); safe to call twice, and on nil.
func (l *SessionLock) Close() {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), lockOpTimeout)
	defer cancel()
	_ = l.Release(ctx)
}

func (l *SessionLock) connectLocked(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, lockOpTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg.Copy())
	if err != nil {
		return fmt.Errorf("%s: connect: %w", l.name, err)
	}
	// The server ends a session it has not heard from in lockSilence
	// (the holder checks every second), whatever TCP thinks. PostgreSQL 13
	// lacks the setting and relies on the keepalives alone.
	_, err = conn.Exec(cctx, fmt.Sprintf(`SET idle_session_timeout = %d`, lockSilence.Milliseconds()))
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42704") { // undefined_object
		_ = conn.Close(context.WithoutCancel(cctx))
		return fmt.Errorf("%s: set idle_session_timeout: %w", l.name, err)
	}
	l.conn = conn
	return nil
}

// dropLocked closes the connection without waiting on a server that may be
// unreachable; the lock goes with the session.
func (l *SessionLock) dropLocked() {
	l.held.Store(false)
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = l.conn.Close(ctx)
		cancel()
		l.conn = nil
	}
}
