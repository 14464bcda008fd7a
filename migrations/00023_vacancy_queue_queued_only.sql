-- +goose Up
-- The queue is the QUEUED matches alone: an ANALYZED match's card is in the
-- outbox and nobody claims the match, and while cards wait for Telegram's
-- pace the ANALYZED rows outnumber the claimable ones, each of them walked
-- past by every claim through an index that held both.
DROP INDEX vacancy_matches_queue;
CREATE INDEX vacancy_matches_queue ON vacancy_matches (published_at DESC, id) WHERE status = 'QUEUED';

-- +goose Down
DROP INDEX vacancy_matches_queue;
CREATE INDEX vacancy_matches_queue ON vacancy_matches (published_at DESC, id)
    WHERE status IN ('QUEUED', 'ANALYZED');
