-- +goose Up
-- A job seeker's rhythm: how their relevant vacancies reach them. No row is
-- the default: a card per vacancy as soon as it is judged, at any hour,
-- without a cap. Times of day are minutes after local midnight in the
-- user's zone (the one the bot writes their times in).
CREATE TABLE vacancy_settings (
    user_id      bigint      PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    mode         text        NOT NULL DEFAULT 'instant' CHECK (mode IN ('instant', 'digest')),
    digest_times smallint[]  NOT NULL DEFAULT '{540,1080}'
        CHECK (cardinality(digest_times) BETWEEN 1 AND 8 AND 0 <= ALL (digest_times) AND 1440 > ALL (digest_times)),
    digest_size  smallint    NOT NULL DEFAULT 5 CHECK (digest_size BETWEEN 1 AND 20),
    -- Quiet hours [quiet_from, quiet_to), crossing midnight when from > to;
    -- both NULL: off.
    quiet_from   smallint    CHECK (quiet_from BETWEEN 0 AND 1439),
    quiet_to     smallint    CHECK (quiet_to BETWEEN 0 AND 1439),
    -- Cards per local day; NULL: no cap.
    daily_cap    smallint    CHECK (daily_cap > 0),
    -- The latest digest slot handled: a slot is written once, whoever runs it.
    digest_slot  timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((quiet_from IS NULL) = (quiet_to IS NULL)),
    CHECK (quiet_from IS DISTINCT FROM quiet_to OR quiet_from IS NULL)
);

-- One message listing the relevant vacancies that waited for a digest slot.
CREATE TABLE vacancy_digests (
    id         bigserial   PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    slot       timestamptz NOT NULL,
    matches    integer     NOT NULL CHECK (matches > 0),
    -- Vacancies per page, as the user's digest size was when it was written.
    page_size  smallint    NOT NULL CHECK (page_size > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Set by the digest's delivery.
    sent_at    timestamptz,
    message_id integer,
    UNIQUE (user_id, slot)
);

-- Where an ANALYZED match's card is: 'outbox' (written with the match's
-- move to ANALYZED, at once or held until card_at), 'digest' (no card: the
-- match waits for the user's next digest slot, judged at card_at),
-- 'listed' (in a digest, no card yet), 'opened' (in a digest, its card
-- written on the user's press). card_at of 'outbox' cards is what the
-- daily cap counts.
ALTER TABLE vacancy_matches
    ADD COLUMN card      text        NOT NULL DEFAULT 'outbox' CHECK (card IN ('outbox', 'digest', 'listed', 'opened')),
    ADD COLUMN card_at   timestamptz,
    ADD COLUMN digest_id bigint      REFERENCES vacancy_digests (id) ON DELETE SET NULL;
-- The daily cap counts a user's cards by when they go.
CREATE INDEX vacancy_matches_card_at ON vacancy_matches (user_id, card_at) WHERE card = 'outbox' AND card_at IS NOT NULL;
-- The digest job finds the users with matches waiting for a digest.
CREATE INDEX vacancy_matches_digest_waiting ON vacancy_matches (user_id, card_at) WHERE status = 'ANALYZED' AND card = 'digest';
-- A digest's pages.
CREATE INDEX vacancy_matches_digest ON vacancy_matches (digest_id) WHERE digest_id IS NOT NULL;

-- +goose Down
DROP INDEX vacancy_matches_digest;
DROP INDEX vacancy_matches_digest_waiting;
DROP INDEX vacancy_matches_card_at;
ALTER TABLE vacancy_matches DROP COLUMN digest_id, DROP COLUMN card_at, DROP COLUMN card;
DROP TABLE vacancy_digests;
DROP TABLE vacancy_settings;
