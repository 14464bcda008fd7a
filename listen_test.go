package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/storage/storagetest"
)

// A listener's callback that panics on one notification loses that one:
// the loop goes on to the next. Before the panic was contained it killed
// the test binary, as it killed the process.
func TestListenerGoesOnPastAPanickingNotification(t *testing.T) {
	t.Parallel()
	store := storagetest.New(t)
	reg := prometheus.NewRegistry()
	listen := listenContained(store, domain.NewPanics(domain.NewRegistrar(reg)), slog.New(slog.DiscardHandler))
	var mu sync.Mutex
	var got []string
	connected := make(chan struct{}, 1)
	domaintest.Run(t, context.Background(), func(ctx context.Context) {
		listen(ctx, "panic_events", func() {
			select {
			case connected <- struct{}{}:
			default:
			}
		}, func(payload string) {
			if payload == "boom" {
				panic("a handler's bug on " + payload)
			}
			mu.Lock()
			got = append(got, payload)
			mu.Unlock()
		})
	})
	select {
	case <-connected:
	case <-time.After(30 * time.Second):
		t.Fatal("not listening")
	}
	_, err := store.Pool().Exec(context.Background(), `SELECT pg_notify('panic_events', 'boom'), pg_notify('panic_events', 'after')`)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1 && got[0] == "after"
	}, 30*time.Second, 10*time.Millisecond)
	require.Equal(t, 1.0, domaintest.Counter(t, reg, "panics_total", "listen_panic_events"))
}
