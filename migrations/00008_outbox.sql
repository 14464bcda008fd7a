-- +goose Up
-- Every message the bot sends on its own initiative is a row here, written
-- in the same transaction as the state change that causes it. Senders on
-- every replica claim the oldest pending row of each chat (so a chat's rows
-- go out in the order they were written), deliver it under Telegram's
-- limits, and mark it sent only when Telegram said ok.
CREATE TABLE outbox (
    id             bigserial   PRIMARY KEY,
    chat_id        bigint      NOT NULL,
    -- what the row is (vacancy, offer, offer_close, proposal, progress,
    -- run_event, live_log, note, memory_answer, …): metrics, and the
    -- bookkeeping done when it is delivered (see storage/outbox.go).
    kind           text        NOT NULL,
    -- the workflow row it belongs to (match, offer, proposal, run); 0 for none.
    ref            bigint      NOT NULL DEFAULT 0,
    -- names the message so later rows can edit it: a delivered send with a
    -- key records the message id; an edit row names the key it edits.
    msg_key        text        NOT NULL DEFAULT '',
    edit           boolean     NOT NULL DEFAULT false,
    -- text (HTML), buttons, reply_to, if_gone: what the Bot API call needs.
    body           jsonb       NOT NULL,
    state          text        NOT NULL DEFAULT 'pending'
                   CHECK (state IN ('pending', 'sent', 'dropped', 'failed')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    not_before     timestamptz NOT NULL DEFAULT now(),
    claimed_until  timestamptz,
    claim_token    uuid,
    attempts       int         NOT NULL DEFAULT 0,
    message_id     bigint,
    done_at        timestamptz,
    -- why a row was retried last, dropped or failed (Telegram's description).
    last_error     text        NOT NULL DEFAULT '',
    CHECK (state <> 'sent' OR done_at IS NOT NULL)
);
-- The claim reads the head (lowest id) of each chat's pending rows.
CREATE INDEX outbox_pending ON outbox (chat_id, id) WHERE state = 'pending';
-- Edits find the message their key names.
CREATE INDEX outbox_key ON outbox (chat_id, msg_key, id) WHERE msg_key <> '' AND message_id IS NOT NULL;
-- Pruning delivered rows walks them by age.
CREATE INDEX outbox_done ON outbox (done_at) WHERE state <> 'pending';

-- A recipient Telegram refuses for good (blocked the bot, deactivated, the
-- bot kicked from the group): nothing more is sent until they write again.
-- Not the masters' commission block (masters.blocked_at): a different thing.
CREATE TABLE unreachable_chats (
    chat_id     bigint      PRIMARY KEY,
    since       timestamptz NOT NULL DEFAULT now(),
    reason      text        NOT NULL DEFAULT '',
    dropped     bigint      NOT NULL DEFAULT 0
);

-- 429 answers, kept a day, so /status counts the last hour's across replicas.
CREATE TABLE outbox_throttles (
    at              timestamptz NOT NULL DEFAULT now(),
    chat_id         bigint      NOT NULL,
    retry_after_ms  bigint      NOT NULL
);
CREATE INDEX outbox_throttles_at ON outbox_throttles (at);

-- +goose Down
DROP TABLE outbox_throttles;
DROP TABLE unreachable_chats;
DROP TABLE outbox;
