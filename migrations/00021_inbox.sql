-- +goose Up
-- The inbox (ARCHITECTURE "Telegram intake and the inbox"): every Telegram
-- update is stored here before Telegram is told it arrived (the poller's next
-- offset), de-duplicated by update_id, and handled from here in each chat's
-- order by any replica. chat_id is the chat the update must stay in order
-- with (NULL: nothing to keep it in order with, e.g. an inline query).
CREATE TABLE inbox (
    update_id       bigint PRIMARY KEY,
    chat_id         bigint,
    body            jsonb NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
    attempts        int NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_by      text,
    claim_token     uuid,
    claimed_until   timestamptz,
    last_error      text,
    received_at     timestamptz NOT NULL DEFAULT now(),
    done_at         timestamptz
);
-- The oldest pending update of each chat: the claim's "nothing earlier of
-- this chat is still pending" and its scan in update order.
CREATE INDEX inbox_pending_chat ON inbox (chat_id, update_id) WHERE state = 'pending';
CREATE INDEX inbox_pending ON inbox (update_id) WHERE state = 'pending';
-- The prune job deletes ended rows by age.
CREATE INDEX inbox_ended ON inbox (done_at) WHERE state <> 'pending';

-- +goose Down
DROP TABLE inbox;
