-- +goose Up
-- Telegram is the only identity provider, so the Telegram user id is the key.
CREATE TABLE users (
    id          bigint      PRIMARY KEY,
    username    text        NOT NULL DEFAULT '',
    first_name  text        NOT NULL DEFAULT '',
    -- language chosen with /lang; empty means "follow Telegram's language_code".
    language    text        NOT NULL DEFAULT '' CHECK (language IN ('', 'en', 'ru', 'uk')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Jobs record their runs here so /status and tests see every replica's work.
CREATE TABLE job_runs (
    name         text        PRIMARY KEY,
    replica      text        NOT NULL,
    started_at   timestamptz NOT NULL,
    duration_ms  bigint      NOT NULL DEFAULT 0,
    error        text        NOT NULL DEFAULT '',
    runs         bigint      NOT NULL DEFAULT 0,
    failures     bigint      NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE job_runs;
DROP TABLE users;
