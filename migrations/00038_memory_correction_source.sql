-- +goose Up
-- A memory saved from a correction names the private message it came from:
-- that message handled again (its replica died before the update's
-- done-mark) finds the correction it made instead of taking the text as a
-- question for the memory chat.
ALTER TABLE lsm_storage ADD COLUMN source_message_id bigint;
CREATE UNIQUE INDEX lsm_storage_source ON lsm_storage (user_id, source_message_id) WHERE source_message_id IS NOT NULL;

-- +goose Down
DROP INDEX lsm_storage_source;
ALTER TABLE lsm_storage DROP COLUMN source_message_id;
