package vacancy

import (
	"github.com/prometheus/client_golang/prometheus"

	"switchboard/domain"
)

type metrics struct {
	transitions *prometheus.CounterVec
	processed   *prometheus.CounterVec
	skipped     *prometheus.CounterVec
	failures    *prometheus.CounterVec
	waits       *prometheus.CounterVec
	duration    prometheus.Histogram
	retries     prometheus.Counter
	discovered  prometheus.Counter
	queued      prometheus.Counter
	refused     prometheus.Counter
	held        prometheus.Counter
	digests     prometheus.Counter
	panics      domain.Panics

	recoveryAttempts, recoveryRecovered, recoveryDeleted, recoverySkipped prometheus.Counter
}

// newMetrics builds the workflow's metrics on r (domain.Prepare).
func newMetrics(r *domain.Registrar) *metrics {
	return &metrics{
		transitions: r.CounterVec("vacancy_transitions_total", "Vacancy match status changes.", "from", "to"),
		// Outcomes: queued (ANALYZED, its card written to the outbox;
		// its delivery is counted by the outbox's own metrics),
		// not_suitable, archived, deleted, retrying (a failure below
		// MaxFailures), skipped, waiting (given back unjudged), lost (the
		// claim ran out), error.
		processed: r.CounterVec("vacancy_matches_processed_total",
			"Claimed matches by outcome (queued: card written to the outbox; delivery is the outbox's metrics).", "outcome"),
		skipped: r.CounterVec("vacancy_matches_skipped_total", "Matches marked SKIPPED, by reason.", "reason"),
		// A failure counts towards a match's MaxFailures; a wait never
		// does, so a rate of waits is an outside cause (the model, HH,
		// replicas dying), not bad matches.
		failures: r.CounterVec("vacancy_match_failures_total",
			"Claimed matches whose turn ran and failed (retried, or SKIPPED at the bound), by reason.", "reason"),
		waits: r.CounterVec("vacancy_match_waits_total",
			"Claimed matches given back unjudged, which never counts towards SKIPPED, by reason.", "reason"),
		duration: r.Histogram("vacancy_match_processing_seconds",
			"Claim to the end of one processing (for a relevant match: its card queued).",
			prometheus.ExponentialBuckets(0.005, 2.5, 10)),
		retries:    r.Counter("vacancy_llm_retries_total", "Relevance answers retried after invalid JSON."),
		discovered: r.Counter("vacancies_discovered_total", "Vacancies new to a search_key."),
		queued:     r.Counter("vacancy_matches_queued_total", "Matches created in QUEUED by discovery."),
		refused:    r.Counter("vacancy_searches_refused_total", "Searches set aside because HH refused their parameters (400 bad_argument)."),
		held:       r.Counter("vacancy_cards_held_total", "Cards held for quiet hours or the daily cap."),
		digests:    r.Counter("vacancy_digests_total", "Digests written to the outbox."),
		panics:     domain.NewPanics(r),

		recoveryAttempts:  r.Counter("vacancies_recovery_attempts_total", "SKIPPED matches examined by recovery."),
		recoveryRecovered: r.Counter("vacancies_recovery_recovered_total", "SKIPPED matches returned to the queue."),
		recoveryDeleted:   r.Counter("vacancies_recovery_deleted_total", "SKIPPED matches deleted for a ban word."),
		recoverySkipped: r.Counter("vacancies_recovery_skipped_total",
			"SKIPPED matches left alone (judged not relevant)."),
	}
}
