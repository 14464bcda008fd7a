-- +goose Up
-- A run that waits for the model (the provider refuses the model or key, or
-- the breaker turns its calls away) tells its user so once, with the wait's
-- first hand-back: this marks that the notice is queued, so the hand-backs
-- every few seconds that follow, on whichever replica, do not repeat it.
ALTER TABLE pipeline_runs ADD COLUMN wait_told boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE pipeline_runs DROP COLUMN wait_told;
