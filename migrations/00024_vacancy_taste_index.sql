-- +goose Up
-- Every claim reads the user's taste: their latest APPLIED and NOT_INTERESTED
-- matches, newest first; pruning reads the same to keep them. Here that read
-- is one index range in the order it wants.
CREATE INDEX vacancy_matches_taste ON vacancy_matches (user_id, status, updated_at DESC)
    WHERE status IN ('APPLIED', 'NOT_INTERESTED');

-- The prune walk's index holds every match. As a partial index over the
-- prunable states it was, to a planner whose statistics still described a
-- young table, an empty index that also answers "this user's APPLIED
-- matches": every claim then walked it end to end past every card sent so
-- far, and the claim slowed as the bot ran. The walk skips the few QUEUED
-- and ANALYZED matches it now meets.
DROP INDEX vacancy_matches_prune;
CREATE INDEX vacancy_matches_prune ON vacancy_matches (created_at, id);

-- +goose Down
DROP INDEX vacancy_matches_prune;
CREATE INDEX vacancy_matches_prune ON vacancy_matches (created_at, id)
    WHERE status IN ('NOT_SUITABLE', 'IN_ARCHIVE', 'APPLIED', 'NOT_INTERESTED', 'SENT_TO_USER', 'SKIPPED');
DROP INDEX vacancy_matches_taste;
