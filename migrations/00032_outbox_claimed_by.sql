-- +goose Up
-- Who holds an outbox claim, as the inbox already records it: a replica's
-- claimer name ends in the key of the liveness lock it holds, so its peers
-- give a dead replica's rows back once that lock is gone rather than when
-- the claim's lease runs out (ARCHITECTURE "Replica liveness").
ALTER TABLE outbox ADD COLUMN claimed_by text;

-- +goose Down
ALTER TABLE outbox DROP COLUMN claimed_by;
