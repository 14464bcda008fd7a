package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"switchboard/storage"
)

// Start-up waits for the database with backoff rather than crashing: in a
// Kubernetes-style deployment the bot, PostgreSQL and Redis start in any
// order, and a crash loop only adds its own backoff and hides the reason.
const (
	startRetryFirst = 500 * time.Millisecond
	startRetryMax   = 10 * time.Second
	// migrateWaitLimit bounds `switchboard migrate`'s wait: it is a one-shot
	// step (an init container, a deploy script) whose runner wants an answer.
	// The server itself waits for ever, until SIGTERM.
	migrateWaitLimit = 2 * time.Minute
)

// openStore opens the database, retrying while the server is unreachable
// (refused, starting up, too many connections) with a delay doubling from
// 0.5 s to 10 s and a log line per attempt. Errors that waiting cannot fix —
// a malformed URL, a wrong password, no right to create the database — are
// returned at once. limit 0 waits until ctx ends.
func openStore(ctx context.Context, url string, log *slog.Logger, limit time.Duration) (*storage.Store, error) {
	start := time.Now()
	delay := startRetryFirst
	for attempt := 1; ; attempt++ {
		st, err := storage.Open(ctx, url, log)
		if err == nil {
			if attempt > 1 {
				log.Info("database reachable", "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond))
			}
			return st, nil
		}
		if !storage.Unavailable(err) || ctx.Err() != nil {
			return nil, err
		}
		if limit > 0 && time.Since(start)+delay > limit {
			return nil, fmt.Errorf("database not reachable within %s: %w", limit, err)
		}
		log.Warn("database not reachable at start, retrying", "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("stopped while waiting for the database: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, startRetryMax)
	}
}

// followRedisAtStart logs, with the same backoff, while Redis is not yet
// reachable, and once when it answers. The replica does not wait for it:
// without Redis it still serves (jobs skip their ticks, the poller's lease
// waits), and go-redis reconnects on its own; the log says why nothing polls.
func followRedisAtStart(ctx context.Context, rdb *redis.Client, log *slog.Logger, firstErr error) {
	start := time.Now()
	delay := startRetryFirst
	err := firstErr
	for attempt := 1; ; attempt++ {
		log.Warn("redis not reachable at start, retrying", "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, startRetryMax)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = rdb.Ping(pctx).Err()
		cancel()
		switch {
		case err == nil:
			log.Info("redis reachable", "waited", time.Since(start).Round(time.Millisecond))
			return
		case errors.Is(err, redis.ErrClosed) || ctx.Err() != nil:
			return // the replica is stopping
		}
	}
}
