package storage

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// Callers waiting at the same time share flushes: fifty of them need only a
// few, and each returns after a flush that began after it asked.
func TestWALFlusherSharesFlushes(t *testing.T) {
	t.Parallel()
	// storagetest.ServerURL, which this package's own tests cannot import
	// (storagetest imports storage); the flush touches no table, so the
	// maintenance database will do.
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	f := &walFlusher{pool: pool}

	// Alone, a caller gets a flush of its own.
	require.NoError(t, f.flush(ctx))
	require.EqualValues(t, 1, f.flushes.Load())

	const callers = 50
	start := make(chan struct{})
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var asked string
			if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&asked); err != nil {
				errs <- err
				return
			}
			if err := f.flush(ctx); err != nil {
				errs <- err
				return
			}
			// Everything written before the caller asked is on disk.
			var flushed bool
			err := pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn`, asked).Scan(&flushed)
			if err == nil && !flushed {
				err = fmt.Errorf("WAL not flushed up to %s, written before the flush was asked for", asked)
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n := f.flushes.Load() - 1
	require.Less(t, n, int64(callers/2), "%d flushes for %d callers", n, callers)
	require.Positive(t, n)
}
