-- +goose Up
-- Writing an edit coalesces with the pending rows of its message (its
-- chat and key): without this index that lookup read every pending row of
-- the table, 35 ms an insert at 25 000 pending rows (a live log held back
-- by its group's pace), which took dispatch's expiry lag to seconds.
CREATE INDEX outbox_pending_key ON outbox (chat_id, msg_key) WHERE state = 'pending' AND msg_key <> '';

-- +goose Down
DROP INDEX outbox_pending_key;
