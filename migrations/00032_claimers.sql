-- +goose Up
-- Who holds a claim, as the inbox already records it for an update: a
-- replica's claimer name ends in the key of the liveness lock it holds, so
-- its peers give a dead replica's claims back once that lock is gone rather
-- than when the claim's lease runs out (ARCHITECTURE "Replica liveness").
ALTER TABLE outbox ADD COLUMN claimed_by text;
ALTER TABLE pipeline_runs ADD COLUMN claimed_by text;
ALTER TABLE vacancy_matches ADD COLUMN claimed_by text;
ALTER TABLE cover_letters ADD COLUMN claimed_by text;
ALTER TABLE profile_drafts ADD COLUMN claimed_by text;

-- +goose Down
ALTER TABLE profile_drafts DROP COLUMN claimed_by;
ALTER TABLE cover_letters DROP COLUMN claimed_by;
ALTER TABLE vacancy_matches DROP COLUMN claimed_by;
ALTER TABLE pipeline_runs DROP COLUMN claimed_by;
ALTER TABLE outbox DROP COLUMN claimed_by;
