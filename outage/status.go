package outage

import (
	"context"
	"time"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/hh"
	"switchboard/llm"
	"switchboard/storage"
)

// Status feeds /status: the store's rows, read with this
// configuration's windows, and this replica's LLM and HH clients.
type Status struct {
	Store *storage.Store
	Beats *storage.Heartbeats
	LLM   *llm.Client
	HH    *hh.Client
	// VacancyClaimLease tells a lapsed match claim from a put-back one (Held).
	VacancyClaimLease time.Duration
	// VacancyRecoveryWindow is how far back recovery retries SKIPPED
	// matches (VacancyQueue counts those).
	VacancyRecoveryWindow time.Duration
}

// InboxStats is the inbox for /status (bot.InboxSource).
func (s Status) InboxStats(ctx context.Context) (storage.InboxStats, error) {
	return s.Store.Inbox().Stats(ctx)
}

// OutboxStats is the outbox for /status (bot.OutboxSource).
func (s Status) OutboxStats(ctx context.Context) (storage.OutboxStats, error) {
	return s.Store.Outbox().Stats(ctx)
}

// JobRuns is every job's latest run, for /status.
func (s Status) JobRuns(ctx context.Context) ([]domain.JobRunSummary, error) {
	return s.Store.Jobs().Runs(ctx)
}

// Replicas lists the live replicas.
func (s Status) Replicas(ctx context.Context) ([]storage.Replica, error) {
	return s.Beats.Live(ctx)
}

// Held feeds /status's line of work held past its lease.
func (s Status) Held(ctx context.Context) (storage.HeldWork, error) {
	return s.Store.HeldPastLease(ctx, s.VacancyClaimLease)
}

// VacancyQueue feeds /status's line of the vacancy queue
// (bot.VacancyQueueSource).
func (s Status) VacancyQueue(ctx context.Context) (storage.MatchQueue, error) {
	return s.Store.Matches().QueueStats(ctx, s.VacancyRecoveryWindow)
}

// Storage feeds /status's data section: the six largest tables and the
// prune job's last run per kind.
func (s Status) Storage(ctx context.Context) (bot.StorageStatus, error) {
	tables, err := s.Store.Jobs().TableSizes(ctx, 6)
	if err != nil {
		return bot.StorageStatus{}, err
	}
	runs, err := s.Store.Jobs().PruneRuns(ctx)
	if err != nil {
		return bot.StorageStatus{}, err
	}
	return bot.StorageStatus{Tables: tables, Prune: runs}, nil
}

// LLMReason feeds /status's LLM line: why this replica's client refuses
// or fails calls, or "" while it answers.
func (s Status) LLMReason() string { return s.LLM.Health().Reason }

// HHReason feeds /status's HH line: how HH blocks this replica's
// requests, or "" while it answers.
func (s Status) HHReason() string {
	if r := s.HH.Block(); r != nil {
		return r.Describe()
	}
	return ""
}
