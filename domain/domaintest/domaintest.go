// Package domaintest holds what the workflows' tests share over a real
// database: a service's loop run until the test ends, the store's LISTEN
// adapted as main adapts it, and a table's rows counted by status.
package domaintest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// Run runs loop in a goroutine until the test ends: its context is
// cancelled at cleanup, which waits for it to return.
func Run(t testing.TB, ctx context.Context, loop func(ctx context.Context)) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// Listener is the store's LISTEN on several channels.
type Listener interface {
	Listen(ctx context.Context, channels []string, onConnect func(), onNotify func(channel, payload string))
}

// Listen is l's LISTEN on one channel, the shape a workflow's Run takes.
func Listen(l Listener) domain.Listen {
	return func(ctx context.Context, ch string, onConnect func(), onNotify func(string)) {
		l.Listen(ctx, []string{ch}, onConnect, func(_, payload string) { onNotify(payload) })
	}
}

// Querier runs a query: the store's pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// CountByStatus counts table's rows by their status column.
func CountByStatus[S ~string](t testing.TB, ctx context.Context, q Querier, table string) map[S]int {
	t.Helper()
	rows, err := q.Query(ctx, `SELECT status, count(*) FROM `+table+` GROUP BY status`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[S]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[S(s)] = n
	}
	require.NoError(t, rows.Err())
	return out
}
