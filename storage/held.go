package storage

import (
	"context"
	"fmt"
	"time"
)

// HeldWork counts work still claimed after its claim's lease ran out: a
// worker that died, or one whose save the database refused and that could
// not give the claim back. Each is taken over only when the reaper or the
// next claim gets to it, so a count that stays up means users wait.
type HeldWork struct {
	PipelineRuns   int64 `json:"pipeline_runs"`   // memory-chat stages (or finished runs) past MEMORY_LEASE
	VacancyMatches int64 `json:"vacancy_matches"` // matches past VACANCY_CLAIM_LEASE
	OutboxRows     int64 `json:"outbox_rows"`     // outgoing messages past the sender's lease
	InboxUpdates   int64 `json:"inbox_updates"`   // incoming updates past INBOX_LEASE: their chat waits
}

// HeldPastLease counts HeldWork. vacancyLease is VACANCY_CLAIM_LEASE: a
// match's claim sets claimed_until to updated_at plus it in one statement,
// which tells a lapsed claim from one a dead replica's peers gave back
// (storage.Liveness: claimed_until now, the token kept). A match put back
// (Matches.PutBack, Matches.Fail) holds no token.
func (s *Store) HeldPastLease(ctx context.Context, vacancyLease time.Duration) (HeldWork, error) {
	var h HeldWork
	err := s.pool.QueryRow(ctx, `
SELECT
  -- Only a capture (a stage) or a claim of a finished run sets
  -- claimed_until; every hand-back and release clears it.
  (SELECT count(*) FROM pipeline_runs WHERE closed_at IS NULL AND claimed_until < now()),
  (SELECT count(*) FROM vacancy_matches
   WHERE status IN ('QUEUED', 'ANALYZED') AND claim_token IS NOT NULL AND claimed_until < now()
     AND claimed_until - updated_at = $1 * interval '1 microsecond'),
  (SELECT count(*) FROM outbox WHERE state = 'pending' AND claim_token IS NOT NULL AND claimed_until < now()),
  -- A retry or a settle clears the claim; a pending row still claimed
  -- past its lease is a dead or stalled handler's.
  (SELECT count(*) FROM inbox WHERE state = 'pending' AND claim_token IS NOT NULL AND claimed_until < now())`,
		micros(vacancyLease)).Scan(&h.PipelineRuns, &h.VacancyMatches, &h.OutboxRows, &h.InboxUpdates)
	if err != nil {
		return HeldWork{}, fmt.Errorf("work held past its lease: %w", err)
	}
	return h, nil
}
