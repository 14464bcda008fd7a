-- +goose Up
-- What HH says about applying to a vacancy: since HH closed its applicant
-- API the person applies on hh.ru (apply_url) or, for a "direct" vacancy,
-- on the employer's own site (response_url); the card says when the
-- employer requires a cover letter or a test.
ALTER TABLE vacancies
    ADD COLUMN apply_url       text    NOT NULL DEFAULT '',
    ADD COLUMN response_url    text    NOT NULL DEFAULT '',
    ADD COLUMN letter_required boolean NOT NULL DEFAULT false,
    ADD COLUMN has_test        boolean NOT NULL DEFAULT false;

-- Cover letters the LLM drafts for a match on its owner's press. A press
-- writes a pending row; a letter worker on any replica claims it under a
-- lease, asks the model, and makes it ready (its message in the outbox,
-- same transaction) or failed (a note saying the press can be repeated).
CREATE TABLE cover_letters (
    id            bigserial   PRIMARY KEY,
    match_id      bigint      NOT NULL REFERENCES vacancy_matches (id) ON DELETE CASCADE,
    user_id       bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- 1, 2, … per match, in the order they were asked for.
    version       integer     NOT NULL CHECK (version > 0),
    style         text        NOT NULL CHECK (style IN ('draft', 'another', 'shorter', 'formal')),
    -- The letter a rewrite starts from (NULL for a first draft).
    base_id       bigint      REFERENCES cover_letters (id) ON DELETE SET NULL,
    -- The language the user chose ('' = the vacancy's).
    language      text        NOT NULL DEFAULT '' CHECK (language IN ('', 'en', 'ru', 'uk')),
    state         text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'ready', 'failed')),
    -- The Telegram callback query of the press: one letter per press, however
    -- often the update is handled.
    press_id      text        NOT NULL UNIQUE,
    text          text        NOT NULL DEFAULT '',
    failure       text        NOT NULL DEFAULT '',
    tokens_in     integer     NOT NULL DEFAULT 0 CHECK (tokens_in >= 0),
    tokens_out    integer     NOT NULL DEFAULT 0 CHECK (tokens_out >= 0),
    attempts      integer     NOT NULL DEFAULT 0,
    claimed_until timestamptz,
    claim_token   uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    UNIQUE (match_id, version),
    CHECK (state <> 'ready' OR text <> ''),
    CHECK ((state = 'pending') = (finished_at IS NULL))
);
-- One letter in the works per match: a second press waits for the first.
CREATE UNIQUE INDEX cover_letters_pending ON cover_letters (match_id) WHERE state = 'pending';
-- The daily limit counts a user's letters of the last day.
CREATE INDEX cover_letters_user ON cover_letters (user_id, created_at);

-- +goose Down
DROP TABLE cover_letters;
ALTER TABLE vacancies DROP COLUMN apply_url, DROP COLUMN response_url, DROP COLUMN letter_required, DROP COLUMN has_test;
