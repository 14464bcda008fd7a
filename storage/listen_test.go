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
