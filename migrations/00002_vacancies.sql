-- +goose Up
-- Jobs write to users in their language, so the client's language is kept too.
ALTER TABLE users
    ADD COLUMN telegram_language text NOT NULL DEFAULT '' CHECK (telegram_language IN ('', 'en', 'ru', 'uk')),
    -- The profile the LLM judges vacancies against (/profile).
    ADD COLUMN profile text NOT NULL DEFAULT '';

-- One row per HH vacancy; the id is HH's, which grows with time.
CREATE TABLE vacancies (
    id                bigint      PRIMARY KEY,
    title             text        NOT NULL,
    employer          text        NOT NULL DEFAULT '',
    url               text        NOT NULL DEFAULT '',
    area              text        NOT NULL DEFAULT '',
    salary_from       integer,
    salary_to         integer,
    salary_currency   text        NOT NULL DEFAULT '',
    salary_gross      boolean,
    experience        text        NOT NULL DEFAULT '',
    schedule          text        NOT NULL DEFAULT '',
    published_at      timestamptz NOT NULL,
    snippet           text        NOT NULL DEFAULT '',
    description       text        NOT NULL DEFAULT '',
    key_skills        text[]      NOT NULL DEFAULT '{}',
    raw               jsonb,
    detail_fetched_at timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE searches (
    id          bigserial   PRIMARY KEY,
    user_id     bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    params      jsonb       NOT NULL,
    -- SHA-256 of the sorted parameters: users with equal searches share one discovery.
    search_key  text        NOT NULL CHECK (search_key ~ '^[0-9a-f]{64}$'),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, search_key)
);
CREATE INDEX searches_search_key ON searches (search_key);

CREATE TABLE ban_words (
    user_id     bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    word        text        NOT NULL CHECK (word <> ''),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, word)
);

-- How far each search_key has been swept (DESIGN.md "Vacancies").
CREATE TABLE discovery_state (
    search_key                     text        PRIMARY KEY,
    last_seen_max_id               bigint      NOT NULL DEFAULT 0,
    last_complete_sweep_before_id  bigint      NOT NULL DEFAULT 0,
    updated_at                     timestamptz NOT NULL DEFAULT now()
);

-- Every vacancy a search_key has collected. Discovery counts what is not
-- here as unseen. No foreign key: a vacancy deleted for a ban word must stay
-- seen, or the next run would collect it again.
CREATE TABLE search_hits (
    search_key  text        NOT NULL,
    vacancy_id  bigint      NOT NULL,
    found_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (search_key, vacancy_id)
);

-- The state machine, one row per (user, vacancy).
CREATE TABLE vacancy_matches (
    id             bigserial   PRIMARY KEY,
    user_id        bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    vacancy_id     bigint      NOT NULL REFERENCES vacancies (id) ON DELETE CASCADE,
    status         text        NOT NULL CHECK (status IN ('NEW', 'QUEUED', 'ANALYZED', 'SENT_TO_USER', 'SKIPPED',
                                                         'NOT_SUITABLE', 'IN_ARCHIVE', 'APPLIED', 'NOT_INTERESTED')),
    -- The vacancy's, copied so the queue is ordered by one index.
    published_at   timestamptz NOT NULL,
    is_relevant    boolean,
    score          smallint    CHECK (score BETWEEN 0 AND 100),
    analysis       jsonb,
    skip_reason    text        NOT NULL DEFAULT '',
    attempts       integer     NOT NULL DEFAULT 0,
    claimed_until  timestamptz,
    claim_token    uuid,
    chat_id        bigint,
    message_id     bigint,
    sent_at        timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, vacancy_id),
    CHECK (status <> 'SENT_TO_USER' OR (sent_at IS NOT NULL AND message_id IS NOT NULL)),
    CHECK (status NOT IN ('ANALYZED', 'NOT_SUITABLE') OR is_relevant IS NOT NULL)
);
-- The queue: claimable work, newest published first.
CREATE INDEX vacancy_matches_queue ON vacancy_matches (published_at DESC, id)
    WHERE status IN ('QUEUED', 'ANALYZED');
CREATE INDEX vacancy_matches_skipped ON vacancy_matches (id) WHERE status = 'SKIPPED';
CREATE INDEX vacancy_matches_user ON vacancy_matches (user_id, status);
CREATE INDEX vacancy_matches_vacancy ON vacancy_matches (vacancy_id);

-- +goose Down
DROP TABLE vacancy_matches;
DROP TABLE search_hits;
DROP TABLE discovery_state;
DROP TABLE ban_words;
DROP TABLE searches;
DROP TABLE vacancies;
ALTER TABLE users DROP COLUMN profile, DROP COLUMN telegram_language;
