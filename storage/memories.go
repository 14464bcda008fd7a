package storage

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"switchboard/domain/memory"
)

const summaryColumns = `id, time_bucket_start, time_bucket_end, tags, summary, source_run_ids, created_at`

func collectSummaries(rows pgx.Rows, err error) ([]memory.Summary, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (memory.Summary, error) {
		var m memory.Summary
		err := row.Scan(&m.ID, &m.BucketStart, &m.BucketEnd, &m.Tags, &m.Summary, &m.SourceRunIDs, &m.CreatedAt)
		return m, err
	})
}

// MemorySummaries lists a user's long-term memory, newest first.
func (s *Store) MemorySummaries(ctx context.Context, userID int64, limit int) ([]memory.Summary, error) {
	out, err := collectSummaries(s.pool.Query(ctx, `SELECT `+summaryColumns+`
FROM lsm_storage WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit))
	if err != nil {
		return nil, fmt.Errorf("summaries of user %d: %w", userID, err)
	}
	return out, nil
}
