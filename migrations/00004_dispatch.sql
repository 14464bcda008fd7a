-- +goose Up
-- Dispatch: masters, orders, offers (DESIGN.md "Dispatch"), and the
-- replicas' heartbeat that /status shows.

CREATE TABLE masters (
    user_id         bigint      PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
    city            text        NOT NULL CHECK (city <> '' AND length(city) <= 100),
    district        text        NOT NULL CHECK (district <> '' AND length(district) <= 100),
    -- lower-case; matched against orders.skill
    skills          text[]      NOT NULL CHECK (cardinality(skills) BETWEEN 1 AND 10),
    active          boolean     NOT NULL DEFAULT true,
    -- set by the commission watchdog, cleared by /paid
    blocked_at      timestamptz,
    -- "idle longest first": when the master was last offered anything
    last_offer_at   timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
-- City and district match case-insensitively.
CREATE INDEX masters_place ON masters (lower(city), lower(district)) WHERE active AND blocked_at IS NULL;

CREATE TABLE orders (
    id                  bigserial   PRIMARY KEY,
    created_by          bigint      NOT NULL,
    city                text        NOT NULL CHECK (city <> '' AND length(city) <= 100),
    district            text        NOT NULL CHECK (district <> '' AND length(district) <= 100),
    skill               text        NOT NULL CHECK (skill <> '' AND length(skill) <= 50),
    -- whole currency units
    price               bigint      NOT NULL CHECK (price > 0),
    description         text        NOT NULL CHECK (length(description) <= 2000),
    state               text        NOT NULL DEFAULT 'SEARCHING'
                        CHECK (state IN ('SEARCHING', 'ASSIGNED', 'DONE', 'CLOSED', 'CANCELLED')),
    -- distribution round (1 or 2): a master is offered an order at most once per round
    round               int         NOT NULL DEFAULT 1 CHECK (round IN (1, 2)),
    -- set when no candidate was left, so admins are told once
    unassignable_at     timestamptz,
    -- the round waits for a matching master busy with another offer; a
    -- master's offer ending looks only at these orders
    waiting             boolean     NOT NULL DEFAULT false,
    master_id           bigint      REFERENCES masters(user_id),
    assigned_at         timestamptz,
    done_at             timestamptz,
    closed_at           timestamptz,
    cancelled_at        timestamptz,
    commission          bigint      CHECK (commission >= 0),
    commission_due_at   timestamptz,
    commission_paid_at  timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CHECK (state = 'SEARCHING' OR state = 'CANCELLED' OR master_id IS NOT NULL)
);
CREATE INDEX orders_searching ON orders (id) WHERE state = 'SEARCHING';
CREATE INDEX orders_waiting ON orders (id) WHERE state = 'SEARCHING' AND waiting;
CREATE INDEX orders_done ON orders (done_at) WHERE state = 'DONE';
CREATE INDEX orders_commission_due ON orders (master_id, commission_due_at)
    WHERE commission_paid_at IS NULL AND commission IS NOT NULL;

CREATE TABLE offers (
    id            bigserial   PRIMARY KEY,
    order_id      bigint      NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    master_id     bigint      NOT NULL REFERENCES masters(user_id) ON DELETE CASCADE,
    round         int         NOT NULL CHECK (round IN (1, 2)),
    -- WITHDRAWN: the order was cancelled while the offer was open
    state         text        NOT NULL DEFAULT 'SENT'
                  CHECK (state IN ('SENT', 'VIEWED', 'ACCEPTED', 'DECLINED', 'EXPIRED', 'WITHDRAWN')),
    sent_at       timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    viewed_at     timestamptz,
    responded_at  timestamptz,
    -- the master's offer message, edited when the offer ends
    chat_id       bigint,
    message_id    bigint
);
-- Never two open offers for one order, nor for one master: the database
-- holds the rule even when two replicas distribute at once.
CREATE UNIQUE INDEX offers_open_order ON offers (order_id) WHERE state IN ('SENT', 'VIEWED');
CREATE UNIQUE INDEX offers_open_master ON offers (master_id) WHERE state IN ('SENT', 'VIEWED');
-- The watchdog's statement and the timer's next deadline.
CREATE INDEX offers_due ON offers (expires_at) WHERE state IN ('SENT', 'VIEWED');
CREATE INDEX offers_order_master ON offers (order_id, master_id, round);

-- A new offer re-arms every replica's expiry timer.
-- +goose StatementBegin
CREATE FUNCTION offers_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('dispatch_offers', (extract(epoch FROM NEW.expires_at) * 1000)::bigint::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER offers_notify AFTER INSERT ON offers FOR EACH ROW EXECUTE FUNCTION offers_notify();

-- Each replica's heartbeat (HEARTBEAT_INTERVAL), for /status.
CREATE TABLE replicas (
    instance    text        PRIMARY KEY,
    version     text        NOT NULL DEFAULT '',
    started_at  timestamptz NOT NULL DEFAULT now(),
    seen_at     timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE replicas;
DROP TABLE offers;
DROP FUNCTION offers_notify();
DROP TABLE orders;
DROP TABLE masters;
