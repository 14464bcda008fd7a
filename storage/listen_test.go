package storage_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A notification reaches the listener; after its connection is killed the
// listener reconnects, calls onConnect again (the caller's sweep) and keeps
// receiving.
func TestListenReconnectsAndResweeps(t *testing.T) {
	t.Parallel()
	f := setup(t)
	st := f.st
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	connects := make(chan struct{}, 10)
	got := make(chan string, 10)
	done := make(chan struct{})
	go func() {
		st.Listen(ctx, []string{"test_events"}, func() { connects <- struct{}{} }, func(ch, payload string) { got <- ch + ":" + payload })
		close(done)
	}()
	<-connects
	f.exec(`SELECT pg_notify('test_events', 'one')`)
	require.Equal(t, "test_events:one", <-got)

	f.exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
	select {
	case <-connects:
	case <-time.After(10 * time.Second):
		t.Fatal("listener did not reconnect")
	}
	f.exec(`SELECT pg_notify('test_events', 'two')`)
	require.Equal(t, "test_events:two", <-got)
	cancel()
	<-done
}

// listens counts the database's connections that LISTEN (their last
// statement was a LISTEN).
func (b *testBundle) listens() int {
	return b.count(`SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
}

// eventually polls cond until it holds, failing after a wait no healthy
// system needs.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Three Listens of a replica, one started after the others with a channel
// the connection lacks, share one connection: each hears its own channels
// only, the late one's channel is listened to once it comes (its onConnect
// says so) while the others keep hearing theirs, a Listen whose callback is
// stuck holds up no other, and when the last one ends no connection is left.
func TestListensShareOneConnection(t *testing.T) {
	t.Parallel()
	f := setup(t)
	type heard struct {
		connects chan struct{}
		got      chan string
	}
	listen := func(ctx context.Context, channels ...string) (heard, chan struct{}) {
		h := heard{connects: make(chan struct{}, 10), got: make(chan string, 10)}
		done := make(chan struct{})
		go func() {
			defer close(done)
			f.st.Listen(ctx, channels, func() { h.connects <- struct{}{} }, func(ch, payload string) { h.got <- ch + ":" + payload })
		}()
		return h, done
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	a, aDone := listen(ctx, "ch_a")
	b, bDone := listen(ctx, "ch_b", "ch_shared")
	<-a.connects
	<-b.connects
	// A connection a Listen had of its own would make two.
	eventually(t, func() bool { return f.listens() == 1 }, "the Listens do not share one connection")

	f.exec(`SELECT pg_notify('ch_a', '1'), pg_notify('ch_shared', '2')`)
	require.Equal(t, "ch_a:1", notified(t, a.got))
	require.Equal(t, "ch_shared:2", notified(t, b.got))

	// A stuck callback (the late listener's) holds up nobody else's.
	stuck := make(chan struct{})
	lateCtx, lateCancel := context.WithCancel(ctx)
	lateDone := make(chan struct{})
	lateConnects := make(chan struct{}, 10)
	go func() {
		defer close(lateDone)
		f.st.Listen(lateCtx, []string{"ch_late", "ch_shared"}, func() { lateConnects <- struct{}{} }, func(string, string) { <-stuck })
	}()
	select {
	case <-lateConnects:
	case <-time.After(10 * time.Second):
		t.Fatal("the late listener's channel was not listened to")
	}
	eventually(t, func() bool { return f.listens() == 1 }, "the late Listen has a connection of its own")
	f.exec(`SELECT pg_notify('ch_late', 'x'), pg_notify('ch_shared', '3'), pg_notify('ch_a', '4')`)
	require.Equal(t, "ch_shared:3", notified(t, b.got))
	require.Equal(t, "ch_a:4", notified(t, a.got))
	require.Empty(t, a.got, "ch_a's listener heard another channel")

	close(stuck)
	lateCancel()
	<-lateDone
	cancel()
	<-aDone
	<-bDone
	eventually(t, func() bool { return f.listens() == 0 }, "a LISTEN connection outlived every Listen")
}
