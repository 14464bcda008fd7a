package storage

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Replica is one running instance as its heartbeat last reported it.
type Replica struct {
	Instance, Version string
	StartedAt, SeenAt time.Time
}

// Heartbeat records that instance is alive now (seen_at = now(), the
// database's clock, so replicas with skewed clocks compare fairly), with its
// version and start time.
func (s *Store) Heartbeat(ctx context.Context, instance, version string, startedAt time.Time) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO replicas (instance, version, started_at, seen_at) VALUES ($1, $2, $3, now())
ON CONFLICT (instance) DO UPDATE SET
    version = EXCLUDED.version, started_at = EXCLUDED.started_at, seen_at = now()`,
		instance, version, startedAt.UTC())
	if err != nil {
		return fmt.Errorf("heartbeat of %s: %w", instance, err)
	}
	return nil
}

// Replicas lists the instances seen within since, most recently seen first.
func (s *Store) Replicas(ctx context.Context, since time.Duration) ([]Replica, error) {
	rows, err := s.pool.Query(ctx, `
SELECT instance, version, started_at, seen_at FROM replicas
WHERE seen_at >= now() - $1 * interval '1 microsecond'
ORDER BY seen_at DESC, instance`, micros(since))
	if err != nil {
		return nil, fmt.Errorf("replicas: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Replica, error) {
		var r Replica
		err := row.Scan(&r.Instance, &r.Version, &r.StartedAt, &r.SeenAt)
		r.StartedAt, r.SeenAt = r.StartedAt.UTC(), r.SeenAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("replicas: %w", err)
	}
	return out, nil
}

// Heartbeats is this replica's row in the replicas table, refreshed every
// beat, and the replicas that count as live: those seen within three
// beats (one missed beat is a hiccup, three a replica gone).
// It also runs the replica's Liveness, the lock whose loss gives its
// claims to its peers within seconds.
type Heartbeats struct {
	store             *Store
	instance, version string
	every             time.Duration
	log               *slog.Logger
	live              *Liveness
}

// Heartbeats returns instance's heartbeat every HEARTBEAT_INTERVAL.
func (s *Store) Heartbeats(instance, version string, every time.Duration, log *slog.Logger) *Heartbeats {
	return &Heartbeats{store: s, instance: instance, version: version, every: every, log: log, live: s.Liveness(instance)}
}

// Claimer is the name this replica's inbox and outbox claims carry.
func (h *Heartbeats) Claimer() string { return h.live.Claimer() }

// Close gives up the liveness lock, once nothing of the replica's holds a
// claim any more; safe on nil.
func (h *Heartbeats) Close() {
	if h != nil {
		h.live.Close()
	}
}

// Run records the replica at start and every beat until ctx ends, on
// every replica (not a locked job: each must report itself), so /status
// can tell live replicas from gone ones; beside it, the liveness lock.
func (h *Heartbeats) Run(ctx context.Context) {
	live := make(chan struct{})
	go func() {
		defer close(live)
		h.live.Run(ctx)
	}()
	defer func() { <-live }()
	started := time.Now()
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		if err := h.store.Heartbeat(ctx, h.instance, h.version, started); err != nil && ctx.Err() == nil {
			h.log.Warn("heartbeat", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Live lists the live replicas, most recently seen first.
func (h *Heartbeats) Live(ctx context.Context) ([]Replica, error) {
	return h.store.Replicas(ctx, 3*h.every)
}

// LiveCount counts the live replicas: the share of a budget each takes
// while Redis cannot share it.
func (h *Heartbeats) LiveCount(ctx context.Context) (int, error) {
	list, err := h.Live(ctx)
	return len(list), err
}
