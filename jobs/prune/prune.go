// Package prune is the prune job: every PRUNE_INTERVAL, once across
// replicas, it deletes what is past each kind's retention (storage.Prune),
// logs and counts the rows per kind, and records the run in prune_runs,
// which /status shows.
package prune

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchboard/config"
	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/storage"
)

// Job is the prune job; Run is one tick of it.
type Job struct {
	store *storage.Jobs
	ret   storage.Retention
	opts  storage.PruneOptions
	log   *slog.Logger
	now   func() time.Time

	rows     *prometheus.CounterVec
	timeouts *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration prometheus.Gauge
}

// inboxRetention keeps handled updates a day: the inbox dedupes by
// update_id, and Telegram resends an update it was not told arrived for
// 24 hours at most.
const inboxRetention = 24 * time.Hour

// pruneBatchPause lets live load in between two prune batches.
const pruneBatchPause = 50 * time.Millisecond

// Settings are what the job prunes and how, from the RETAIN_*,
// OUTBOX_RETENTION and PRUNE_* settings (the bench reads the defaults here).
func Settings(cfg config.Config) (storage.Retention, storage.PruneOptions) {
	return storage.Retention{
			GroupMessages: cfg.RetainGroupMessages, RunContext: cfg.RetainRunContext, Memory: cfg.RetainMemory,
			VacancyMatches: cfg.RetainVacancyMatches, SearchHits: cfg.RetainSearchHits, Outbox: cfg.OutboxRetention,
			Inbox:          inboxRetention,
			OrderContacts:  cfg.RetainOrderContacts,
			RecoveryWindow: cfg.VacancyRecoveryWindow, TasteExamples: vacancy.DefaultTasteExamples,
		},
		storage.PruneOptions{Batch: cfg.PruneBatch, StatementTimeout: cfg.PruneStatementTimeout, Pause: pruneBatchPause}
}

// New builds the job from the RETAIN_*, OUTBOX_RETENTION and PRUNE_*
// settings and registers its metrics on reg.
func New(cfg config.Config, store *storage.Jobs, log *slog.Logger, reg prometheus.Registerer) (*Job, error) {
	ret, opts := Settings(cfg)
	p, err := domain.NewMetrics(reg, "prune", func(r *domain.Registrar) *Job {
		return &Job{
			store: store, log: log, now: time.Now, ret: ret, opts: opts,
			rows:     r.CounterVec("prune_rows_total", "Rows the prune job deleted (run_context, order_contacts: cleared) on this replica, by kind.", "kind"),
			timeouts: r.CounterVec("prune_timeouts_total", "Prune batches cancelled by PRUNE_STATEMENT_TIMEOUT, by kind.", "kind"),
			errors:   r.CounterVec("prune_errors_total", "Prune runs of a kind that failed, by kind.", "kind"),
			duration: r.Gauge("prune_last_run_duration_seconds", "How long this replica's last prune run took."),
		}
	})
	if err != nil {
		return nil, err
	}
	for _, k := range storage.PruneKinds() {
		p.rows.WithLabelValues(k)
		p.timeouts.WithLabelValues(k)
		p.errors.WithLabelValues(k)
	}
	return p, nil
}

// Run is one tick of the job. A kind that times out is logged, counted and
// left to the next tick; a kind that fails fails the run, after the other
// kinds ran.
func (p *Job) Run(ctx context.Context) error {
	start := p.now()
	results := p.store.Prune(ctx, start, p.ret, p.opts)
	var errs []error
	for _, r := range results {
		if r.Off {
			continue
		}
		p.rows.WithLabelValues(r.Kind).Add(float64(r.Rows))
		p.timeouts.WithLabelValues(r.Kind).Add(float64(r.Timeouts))
		attrs := []any{"kind", r.Kind, "rows", r.Rows, "batches", r.Batches, "duration", r.Duration.Round(time.Millisecond)}
		switch {
		case r.Err != nil:
			p.errors.WithLabelValues(r.Kind).Inc()
			errs = append(errs, r.Err)
			p.log.Error("prune failed", append(attrs, "err", r.Err)...)
		case r.Timeouts > 0:
			p.log.Warn("prune batch hit the statement timeout; the rest waits for the next run", attrs...)
		default:
			p.log.Info("pruned", attrs...)
		}
	}
	p.duration.Set(time.Since(start).Seconds())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := p.store.RecordPrune(rctx, start, results); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
