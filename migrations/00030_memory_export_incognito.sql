-- +goose Up
-- The memory chat's per-user privacy state. No row is the default:
-- incognito off, never exported.
--
-- incognito: a message taken in while it is on makes an incognito run
-- (pipeline_runs.incognito), which leaves no memory. The message ids name
-- the /incognito and /export commands a change was made for, so a command
-- handled twice (the inbox's duplicate bound) changes nothing the second
-- time. exported_at is the last export's request, for the rate limit.
CREATE TABLE memory_settings (
    user_id               bigint      PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    incognito             boolean     NOT NULL DEFAULT false,
    incognito_message_id  integer,
    exported_at           timestamptz,
    export_message_id     integer,
    updated_at            timestamptz NOT NULL DEFAULT now()
);

-- Fixed at intake, so turning incognito on or off while a run is under way
-- changes nothing for that run.
ALTER TABLE pipeline_runs ADD COLUMN incognito boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE pipeline_runs DROP COLUMN incognito;
DROP TABLE memory_settings;
