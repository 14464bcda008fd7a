package storage

import (
	"context"
	"log/slog"
	"time"
)

// Heartbeats is this replica's row in the replicas table, refreshed every
// beat, and the replicas that count as live: those seen within three
// beats (one missed beat is a hiccup, three a replica gone).
type Heartbeats struct {
	store             *Store
	instance, version string
	every             time.Duration
	log               *slog.Logger
}

// Heartbeats returns instance's heartbeat every HEARTBEAT_INTERVAL.
func (s *Store) Heartbeats(instance, version string, every time.Duration, log *slog.Logger) *Heartbeats {
	return &Heartbeats{store: s, instance: instance, version: version, every: every, log: log}
}

// Run records the replica at start and every beat until ctx ends, on
// every replica (not a locked job: each must report itself), so /status
// can tell live replicas from gone ones.
func (h *Heartbeats) Run(ctx context.Context) {
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
