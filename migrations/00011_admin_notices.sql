-- +goose Up
-- Conditions the admin chat has been told about (the LLM refusing its
-- model or key, say), so that several replicas noticing the same thing
-- tell it once, and its end once.
CREATE TABLE admin_notices (
    key    text        PRIMARY KEY,
    text   text        NOT NULL DEFAULT '',
    since  timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE admin_notices;
