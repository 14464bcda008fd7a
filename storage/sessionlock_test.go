package storage_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// holderPID is the backend holding an advisory lock in this test's database
// (only the polling lease takes session advisory locks there), or 0.
func holderPID(t *testing.T, st *storage.Store) int {
	t.Helper()
	var pid int
	err := st.Pool().QueryRow(context.Background(), `SELECT coalesce(max(l.pid), 0) FROM pg_locks l
		JOIN pg_database d ON d.oid = l.database
		WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted`).Scan(&pid)
	require.NoError(t, err)
	return pid
}

// waitAcquire retries Acquire as the poller does until it succeeds; the
// bound is only "this cannot be a healthy system".
func waitAcquire(t *testing.T, l *storage.SessionLock) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 60*time.Second {
		ok, _ := l.Acquire(context.Background())
		if ok {
			return time.Since(start)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the lease was never acquired")
	return 0
}

// requireLease requires call (a lease's Acquire or Renew) to succeed and
// to say want.
func requireLease(t *testing.T, ctx context.Context, call func(context.Context) (bool, error), want bool, msgAndArgs ...any) {
	t.Helper()
	ok, err := call(ctx)
	require.NoError(t, err, msgAndArgs...)
	require.Equal(t, want, ok, msgAndArgs...)
}

// heldByA is two replicas' polling leases over st: a acquired it, and b,
// asking after, did not.
func heldByA(t *testing.T, st *storage.Store) (a, b *storage.SessionLock) {
	t.Helper()
	ctx := context.Background()
	a, b = st.PollingLock(), st.PollingLock()
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	requireLease(t, ctx, a.Acquire, true)
	requireLease(t, ctx, b.Acquire, false, "a second replica does not get the lease")
	return a, b
}

func TestPollingLeaseOneHolderAtATime(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx := context.Background()
	a, b := heldByA(t, st)
	require.False(t, b.Held())

	// Asking again while holding neither fails nor stacks a lock level that
	// Release would leave behind.
	requireLease(t, ctx, a.Acquire, true)
	requireLease(t, ctx, a.Renew, true)
	require.True(t, a.Held())
	requireLease(t, ctx, b.Renew, false, "a standby has nothing to renew")

	require.NoError(t, a.Release(ctx))
	requireLease(t, ctx, b.Acquire, true, "an explicit release hands over at once")
	require.False(t, a.Held())
}

// A holder whose process dies looks to the server like a session whose
// connection ended; pg_terminate_backend does exactly that. The standby gets
// the lock on its next try, and the old holder, still alive here, learns it
// lost the lock at its next check, reconnects and stands by.
func TestPollingLeaseDeadHolderHandsOver(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx := context.Background()
	a, b := heldByA(t, st)

	pid := holderPID(t, st)
	require.NotZero(t, pid)
	_, err := st.Pool().Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	took := waitAcquire(t, b)
	t.Logf("standby took the lease %s after the holder's session ended", took.Round(time.Millisecond))

	requireLease(t, ctx, a.Renew, false, "the holder whose connection broke has lost the lease")
	require.False(t, a.Held())
	ok, err := a.Acquire(ctx)
	require.NoError(t, err, "the old holder reconnects")
	require.False(t, ok, "and stands by behind the new one")
}

// freezer is a TCP proxy that can stop forwarding without closing anything:
// a network partition as both ends see it.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &freezer{ln: ln, target: target}
	t.Cleanup(func() {
		_ = ln.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, s)
			f.mu.Unlock()
			go f.pipe(c, s)
			go f.pipe(s, c)
		}
	}()
	return f
}

func (f *freezer) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for f.isFrozen() { // hold the bytes: the peer hears nothing
				time.Sleep(50 * time.Millisecond)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) isFrozen() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frozen
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// A partition the server has not noticed: the holder's checks time out, so
// it reports the lease lost (and stops polling) on its own, and the server,
// hearing nothing from the session, ends it, so the standby gets the lock.
func TestPollingLeasePartitionedHolderStopsAndIsReplaced(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	ctx := context.Background()
	cfg := st.Pool().Config().ConnConfig.Copy()
	f := newFreezer(t, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	proxied := cfg.Copy()
	addr := f.ln.Addr().(*net.TCPAddr)
	proxied.Host, proxied.Port, proxied.Fallbacks = addr.IP.String(), uint16(addr.Port), nil
	a := storage.NewPollingLock(proxied, slog.New(slog.DiscardHandler))
	b := st.PollingLock()
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)

	requireLease(t, ctx, a.Acquire, true)
	requireLease(t, ctx, a.Renew, true)

	f.freeze()
	requireLease(t, ctx, a.Renew, false, "a holder that cannot hear the server gives the lease up")
	require.False(t, a.Held())
	took := waitAcquire(t, b)
	t.Logf("standby took the lease %s after the partitioned holder's check failed", took.Round(time.Millisecond))
}
