package domain_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/domaintest"
	"switchboard/internal/testkit"
)

// Contain returns nil for an item handled, and for one that panicked a
// *PanicError with the value and the stack, logged at error level with
// where and the item, and counted under where.
func TestContainKeepsAPanicToItsItem(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := domain.NewPanics(domain.NewRegistrar(reg))
	var out testkit.SyncBuffer
	log := slog.New(slog.NewJSONHandler(&out, nil))

	ran := false
	require.NoError(t, p.Contain(log, "things", 1, func() { ran = true }))
	require.True(t, ran)
	require.Empty(t, out.String())

	err := p.Contain(log, "things", int64(42), func() {
		var m map[string]int
		m["x"] = 1 // a nil map: the kind of bug one odd item trips
	})
	var pe *domain.PanicError
	require.True(t, errors.As(err, &pe))
	require.Contains(t, pe.Error(), "panic: assignment to entry in nil map")
	require.Contains(t, string(pe.Stack), "panics_test.go")
	logged := out.String()
	require.Contains(t, logged, `"level":"ERROR"`)
	require.Contains(t, logged, `"where":"things"`)
	require.Contains(t, logged, `"item":42`)
	require.Contains(t, logged, `"stack":"goroutine`)

	require.Error(t, domain.Panics{}.Contain(nil, "uncounted", nil, func() { panic(nil) }), "panic(nil) too")
	require.Equal(t, 1.0, domaintest.Counter(t, reg, "panics_total", "things"))

	// A second package's registration shares the series.
	again := domain.NewPanics(domain.NewRegistrar(reg))
	require.Error(t, again.Contain(log, "things", 2, func() { panic("again") }))
	require.Equal(t, 2.0, domaintest.Counter(t, reg, "panics_total", "things"))
}

// A Next that panics (past its own item's handling) is contained: the
// loop backs off as after a failing claim, counts it under the queue's
// name, and goes on taking the work.
func TestWorkersGoOnPastAPanic(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var queued, done, panics atomic.Int32
	panics.Store(1)
	w := &domain.Workers{Name: "test queue", Sweep: time.Hour, Log: slog.New(slog.DiscardHandler),
		Panics: domain.NewPanics(domain.NewRegistrar(reg)),
		Next: func(context.Context) (bool, error) {
			if queued.Load() > done.Load() {
				if panics.Add(-1) >= 0 {
					panic("a bug in the failure path")
				}
				done.Add(1)
				return true, nil
			}
			return false, nil
		}}
	run(t, w)

	queued.Add(3)
	w.Wake()
	require.Eventually(t, func() bool { return done.Load() == 3 }, 30*time.Second, 5*time.Millisecond,
		"past the panic (retried after a second), every item taken")
	require.Equal(t, 1.0, domaintest.Counter(t, reg, "panics_total", "test queue"))
}
