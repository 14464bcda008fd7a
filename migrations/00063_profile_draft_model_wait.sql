-- +goose Up
-- A résumé draft whose model is not answering (the breaker turns its calls
-- away, the provider refuses the model or key, or rate-limits it) waits for
-- the model instead of spending its attempts. This is when that wait began:
-- its user is told once, when it is set, and a wait longer than the
-- workflow's bound asks them to send the file again instead.
ALTER TABLE profile_drafts ADD COLUMN model_wait_since timestamptz;

-- +goose Down
ALTER TABLE profile_drafts DROP COLUMN model_wait_since;
