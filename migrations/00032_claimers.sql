-- +goose Up
-- Who holds an outbox row or a pipeline run's stage, as the inbox already
-- records it for an update: a replica's claimer name ends in the key of the
-- liveness lock it holds, so its peers give a dead replica's claims back
-- once that lock is gone rather than when the claim's lease runs out
-- (ARCHITECTURE "Replica liveness").
ALTER TABLE outbox ADD COLUMN claimed_by text;
ALTER TABLE pipeline_runs ADD COLUMN claimed_by text;

-- +goose Down
ALTER TABLE pipeline_runs DROP COLUMN claimed_by;
ALTER TABLE outbox DROP COLUMN claimed_by;
