-- +goose Up
-- HH's application token (client_credentials), one per HH application
-- (client id), shared by every replica and kept across restarts: HH
-- revokes the previous token whenever it issues a new one, and issues one
-- at most every five minutes, so replicas must not each obtain their own.
-- refused_at marks the token HH refused (revoked, expired, unknown), the one
-- the next caller replaces; expires_at is NULL for HH's default, a token
-- that does not expire.
CREATE TABLE hh_app_tokens (
    client_id   text        PRIMARY KEY,
    token       text        NOT NULL CHECK (token <> ''),
    obtained_at timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz,
    refused_at  timestamptz
);

-- +goose Down
DROP TABLE hh_app_tokens;
