package storage

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// walFlusher makes asynchronously committed transactions durable, many at
// a time. A caller whose transaction has committed asks for a flush and
// waits for one that starts after it asked; that flush is a synchronous
// commit, which waits until the WAL is on disk up to its own commit record,
// and so up to every commit before it. One flush runs at a time and serves
// everyone who asked while the previous one ran (group commit, done here
// rather than by PostgreSQL, for transactions that must not wait for the
// disk themselves: see PipelineRuns.Submit). So a slow disk holds at most one pool
// connection, not one per waiting caller: were every caller to hold its own
// connection through the wait, a stall of a few hundred milliseconds would
// let waiting intakes take the whole pool, and the pipeline's workers would
// stop for want of a connection.
type walFlusher struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	running bool
	waiting []chan error // for the next flush to start
	flushes atomic.Int64 // flushes made, for tests
}

// flushTimeout bounds one flush; every caller waiting for it fails with it.
const flushTimeout = 30 * time.Second

// flush returns once everything committed before it was called is on disk.
func (f *walFlusher) flush(ctx context.Context) error {
	done := make(chan error, 1)
	f.mu.Lock()
	f.waiting = append(f.waiting, done)
	if !f.running {
		f.running = true
		go f.loop()
	}
	f.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop flushes for whoever is waiting until nobody is.
func (f *walFlusher) loop() {
	for {
		f.mu.Lock()
		batch := f.waiting
		f.waiting = nil
		if len(batch) == 0 {
			f.running = false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		err := f.once()
		for _, done := range batch {
			done <- err
		}
	}
}

// once is one flush: a transactional WAL message gives the transaction an
// id and a record, so its commit waits for the disk (a commit that wrote
// nothing would not), with no table touched and nothing notified.
func (f *walFlusher) once() error {
	f.flushes.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if _, err := f.pool.Exec(ctx, `SELECT pg_logical_emit_message(true, 'switchboard.flush', '')`); err != nil {
		return fmt.Errorf("flush WAL: %w", err)
	}
	return nil
}

// asyncCommit is joined into a statement to make its transaction's commit
// asynchronous: set_config with is_local lasts until the transaction ends,
// and synchronous_commit is read at commit. Every pipeline write after
// intake commits so (memory.Step says why that is safe).
const asyncCommit = `(SELECT set_config('synchronous_commit', 'off', true)) AS async_commit`

// setAsyncCommit is asyncCommit as a statement of its own, for a batch or
// a transaction.
const setAsyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// asyncFrom is asyncCommit as an UPDATE's FROM clause.
const asyncFrom = `FROM ` + asyncCommit
