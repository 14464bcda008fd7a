-- +goose Up
-- Every ANALYZED match has its card in the outbox, written in the
-- transaction that made it ANALYZED, and no claim. A match still holding a
-- claim token in ANALYZED never had its card written (judged before the
-- outbox existed, or while no renderer was set): it goes back to the queue,
-- where it is judged again and its card written the usual way.
UPDATE vacancy_matches
SET status = 'QUEUED', claimed_until = NULL, claim_token = NULL, updated_at = now()
WHERE status = 'ANALYZED' AND claim_token IS NOT NULL;

-- +goose Down
-- Nothing to undo: a queued match is what every version expects.
SELECT 1;
