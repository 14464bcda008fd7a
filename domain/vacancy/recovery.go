package vacancy

import (
	"context"
	"fmt"
)

// RecoveryResult counts one recovery pass, as the seed's metrics do.
type RecoveryResult struct {
	Attempts  int // SKIPPED matches examined
	Recovered int // back in the queue
	Deleted   int // a ban word now matches
	Skipped   int // left alone: already judged not relevant, or refused by the database
}

// recoveryBatch bounds one read of SKIPPED matches.
const recoveryBatch = 500

// Recover returns SKIPPED matches created within RecoveryWindow to the
// queue (SKIPPED → NEW → QUEUED), except those already judged not
// relevant and those set aside as refused (ReasonRefused); matches a ban
// word now hits are deleted instead. Safe on several replicas at once:
// each move names the old status, so a match is recovered once. A move
// the database refuses for its data is logged and passed over, so one
// match cannot hold up the recovery of those after it.
func (s *Service) Recover(ctx context.Context) (RecoveryResult, error) {
	var res RecoveryResult
	since := s.deps.Clock.Now().Add(-s.cfg.RecoveryWindow)
	after := int64(0)
	for {
		batch, err := s.deps.Matches.Skipped(ctx, since, after, recoveryBatch)
		if err != nil {
			return res, fmt.Errorf("recover: list skipped: %w", err)
		}
		for _, sm := range batch {
			after = sm.Match.ID
			res.Attempts++
			s.m.recoveryAttempts.Inc()
			m := sm.Match
			switch {
			case m.Verdict != nil && m.Verdict.IsRelevant != nil && !*m.Verdict.IsRelevant,
				m.SkipReason == ReasonRefused:
				// Judged not relevant already, or its turn wrote what the
				// database refuses: judging it again ends the same way.
				res.Skipped++
				s.m.recoverySkipped.Inc()
			case sm.Exclusions.Excludes(sm.Vacancy) != "":
				// Excluded since it was skipped. It may be the last
				// match a new search's first news waits on: the delete
				// checks.
				ok, err := s.deps.Matches.Delete(ctx, m.ID, "", s.announce)
				if err != nil && s.aboutData(err) {
					s.log.Error("recover: delete match refused for its data", "match", m.ID, "err", err)
					continue
				}
				if err != nil {
					return res, fmt.Errorf("recover: delete match %d: %w", m.ID, err)
				}
				if ok {
					res.Deleted++
					s.m.recoveryDeleted.Inc()
				}
			default:
				ok, err := s.requeue(ctx, m)
				if err != nil && s.aboutData(err) {
					s.log.Error("recover: requeue refused for its data", "match", m.ID, "err", err)
					continue
				}
				if err != nil {
					return res, fmt.Errorf("recover: %w", err)
				}
				if ok {
					res.Recovered++
					s.m.recoveryRecovered.Inc()
				}
			}
		}
		if len(batch) < recoveryBatch {
			break
		}
	}
	if res.Recovered > 0 {
		s.Wake()
	}
	if res.Attempts > 0 {
		s.log.Info("vacancy recovery", "attempts", res.Attempts, "recovered", res.Recovered,
			"deleted", res.Deleted, "skipped", res.Skipped)
	}
	return res, nil
}

// requeue walks SKIPPED → NEW → QUEUED, each step through the table.
func (s *Service) requeue(ctx context.Context, m Match) (bool, error) {
	n, ok, err := s.transition(ctx, m, New, Change{})
	if err != nil || !ok {
		return false, err
	}
	_, ok, err = s.transition(ctx, n, Queued, Change{})
	return ok, err
}
