-- +goose Up
-- The person an order's work is for (domain/dispatch): the link an admin
-- forwards to them carries customer_token; the first Telegram user to open
-- it becomes customer_id. customer_id is contact data: retention clears it
-- with the address, and a customer's /forget unlinks them.
ALTER TABLE orders
    ADD COLUMN customer_token     text UNIQUE CHECK (customer_token ~ '^[A-Za-z0-9_-]{22,43}$'),
    ADD COLUMN customer_id        bigint,
    ADD COLUMN customer_joined_at timestamptz,
    -- the assigned master's estimate of their arrival, set with On my way
    ADD COLUMN eta_at             timestamptz,
    -- when the admins were told the master had not arrived by the end of
    -- the visit window (once per order)
    ADD COLUMN late_told_at       timestamptz;
CREATE INDEX orders_customer ON orders (customer_id) WHERE customer_id IS NOT NULL;

-- The bot's messages in a customer's chat about an order (its status
-- message and notes), recorded as the outbox delivers them: a reply to one
-- is about that order.
CREATE TABLE order_messages (
    chat_id    bigint      NOT NULL,
    message_id bigint      NOT NULL,
    order_id   bigint      NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    sent_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, message_id)
);
CREATE INDEX order_messages_order ON order_messages (order_id);

-- The texts the customer and the assigned master sent each other through
-- the bot (until Done), for the admins to read; sender_id is contact data
-- for a customer's, gone with the contacts.
CREATE TABLE order_relays (
    id          bigserial   PRIMARY KEY,
    order_id    bigint      NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    from_master boolean     NOT NULL,
    sender_id   bigint      NOT NULL,
    -- the sender's message: a retried update relays it once
    source_chat bigint      NOT NULL,
    source_id   bigint      NOT NULL,
    text        text        NOT NULL CHECK (length(text) <= 4096),
    sent_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_chat, source_id)
);
CREATE INDEX order_relays_order ON order_relays (order_id, id);

-- +goose Down
DROP TABLE order_relays;
DROP TABLE order_messages;
DROP INDEX orders_customer;
ALTER TABLE orders DROP COLUMN late_told_at, DROP COLUMN eta_at, DROP COLUMN customer_joined_at, DROP COLUMN customer_id, DROP COLUMN customer_token;
