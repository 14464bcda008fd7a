-- +goose Up
-- An ended notice keeps its row (ended_at), and each new start of the
-- same condition counts a generation. A replica whose own refusal began
-- before another replica told the end then does not tell it anew, and a
-- replica started after a crash finds the outage whose end it has to tell.
ALTER TABLE admin_notices
    ADD COLUMN generation bigint NOT NULL DEFAULT 1,
    ADD COLUMN ended_at   timestamptz;

-- +goose Down
DELETE FROM admin_notices WHERE ended_at IS NOT NULL;
ALTER TABLE admin_notices DROP COLUMN ended_at, DROP COLUMN generation;
