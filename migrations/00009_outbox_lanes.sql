-- +goose Up
-- Lanes let a chat's messages that need no order among the others go
-- their own way, so a message waiting out its pace does not hold the
-- chat's queue: a progress message's edits (lane = its key) and the
-- dispatch live log (lane 'live_log'). Rows of one lane still go out in
-- the order written; the main lane is ''.
ALTER TABLE outbox
    ADD COLUMN lane       text    NOT NULL DEFAULT '',
    -- at least this long between two deliveries of the lane: edits of a
    -- progress message coalesce to one per interval, live-log lines that
    -- burst are gathered into one message.
    ADD COLUMN spacing_ms integer NOT NULL DEFAULT 0 CHECK (spacing_ms >= 0),
    -- consecutive pending rows of the lane with merge set are delivered
    -- as one message, their texts one line each (the live log).
    ADD COLUMN merge      boolean NOT NULL DEFAULT false;

-- The claim reads the head (lowest id) of each chat's lanes.
DROP INDEX outbox_pending;
CREATE INDEX outbox_pending ON outbox (chat_id, lane, id) WHERE state = 'pending';
-- A merged delivery is settled by its claim token, which its rows share.
CREATE INDEX outbox_claim ON outbox (claim_token) WHERE state = 'pending';
-- A paced lane's last delivery.
CREATE INDEX outbox_lane_sent ON outbox (chat_id, lane, done_at) WHERE state = 'sent' AND spacing_ms > 0;

-- +goose Down
DROP INDEX outbox_lane_sent;
DROP INDEX outbox_claim;
DROP INDEX outbox_pending;
CREATE INDEX outbox_pending ON outbox (chat_id, id) WHERE state = 'pending';
ALTER TABLE outbox DROP COLUMN merge, DROP COLUMN spacing_ms, DROP COLUMN lane;
