-- +goose Up
-- A run whose answer streamed into a placeholder message (the Bot API
-- server refused message drafts): the final answer, or the failure notice,
-- edits that message instead of sending a new one, whichever replica ends
-- the run.
ALTER TABLE pipeline_runs ADD COLUMN placeholder boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE pipeline_runs DROP COLUMN placeholder;
