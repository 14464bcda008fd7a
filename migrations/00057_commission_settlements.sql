-- +goose Up
-- Each admin's /paid message that settled a master's commission, and when
-- (the orders it settled have that commission_paid_at): the message
-- handled again (its replica died before the update's done-mark) answers
-- with what it settled then instead of settling what fell due since, which
-- the admin was not paid for. Kept with the master record, as its orders'
-- commission is.
CREATE TABLE commission_settlements (
    chat_id    bigint      NOT NULL,
    message_id int         NOT NULL,
    master_id  bigint      NOT NULL REFERENCES masters (user_id) ON DELETE CASCADE,
    settled_at timestamptz NOT NULL,
    PRIMARY KEY (chat_id, message_id)
);
CREATE INDEX commission_settlements_master ON commission_settlements (master_id);

-- +goose Down
DROP TABLE commission_settlements;
