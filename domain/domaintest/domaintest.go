// Package domaintest holds what the workflows' tests share over a real
// database and a scripted LLM: the LLM client, a service's loop run until
// the test ends, the store's LISTEN adapted as main adapts it, query
// results read into counts by a key such as status, structs or a column,
// and the lists the stand-ins for the bot record across goroutines.
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

// Counts reads a query of (key, count) rows, such as a table's rows
// counted by status, into a map.
func Counts[K ~string](t testing.TB, ctx context.Context, q Querier, query string, args ...any) map[K]int {
	t.Helper()
	rows, err := q.Query(ctx, query, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := map[K]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		out[K(k)] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// Rows reads a query's rows into T, a struct whose fields take the
// columns in order.
func Rows[T any](t testing.TB, ctx context.Context, q Querier, query string, args ...any) []T {
	t.Helper()
	return collect(t, ctx, q, pgx.RowToStructByPos[T], query, args...)
}

// Column reads a query's one column.
func Column[T any](t testing.TB, ctx context.Context, q Querier, query string, args ...any) []T {
	t.Helper()
	return collect(t, ctx, q, pgx.RowTo[T], query, args...)
}

func collect[T any](t testing.TB, ctx context.Context, q Querier, row pgx.RowToFunc[T], query string, args ...any) []T {
	t.Helper()
	rows, err := q.Query(ctx, query, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, row)
	require.NoError(t, err)
	return out
}
