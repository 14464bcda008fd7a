-- +goose Up
-- Answered once (ARCHITECTURE "The duplicate bound"): a replica killed after a
-- handler committed and before its update's done-mark has the update run
-- again; each write a handler makes is keyed by the update, so the re-run
-- changes nothing and sends nothing again.

-- The memory chat's capture, by the message it answers. Runs captured twice
-- before this key existed stay as they are: the key covers the runs from here
-- on (its predicate names the last id before it), and the capture's ON
-- CONFLICT DO NOTHING names no index, so it serves either form.
-- +goose StatementBegin
DO $$
DECLARE last bigint;
BEGIN
    SELECT max(p.id) INTO last FROM pipeline_runs p
    WHERE EXISTS (SELECT 1 FROM pipeline_runs q
                  WHERE q.chat_id = p.chat_id AND q.message_id = p.message_id AND q.id <> p.id);
    IF last IS NULL THEN
        CREATE UNIQUE INDEX pipeline_runs_message ON pipeline_runs (chat_id, message_id);
    ELSE
        EXECUTE format('CREATE UNIQUE INDEX pipeline_runs_message ON pipeline_runs (chat_id, message_id) WHERE id > %s', last);
    END IF;
END $$;
-- +goose StatementEnd

-- A handler's replies, by the update and their place among its replies
-- ('<update_id>.<n>'): a re-run's replies are the ones already written.
ALTER TABLE outbox ADD COLUMN origin text;
CREATE UNIQUE INDEX outbox_origin ON outbox (origin) WHERE origin IS NOT NULL;

-- An order, by the admin's /order message (chat and message id).
ALTER TABLE orders ADD COLUMN source_chat_id bigint, ADD COLUMN source_message_id int;
CREATE UNIQUE INDEX orders_source ON orders (source_chat_id, source_message_id) WHERE source_chat_id IS NOT NULL;

-- +goose Down
DROP INDEX orders_source;
ALTER TABLE orders DROP COLUMN source_chat_id, DROP COLUMN source_message_id;
DROP INDEX outbox_origin;
ALTER TABLE outbox DROP COLUMN origin;
DROP INDEX pipeline_runs_message;
