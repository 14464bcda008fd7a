-- +goose Up
-- The time zone a user chose with /timezone: an IANA name or a fixed
-- offset written "UTC+03:00" (locales.ParseZone's names). NULL: not
-- chosen; the bot infers one (a master's city, else the language).
ALTER TABLE users
    ADD COLUMN time_zone text CHECK (time_zone <> '' AND length(time_zone) <= 64);

-- +goose Down
ALTER TABLE users DROP COLUMN time_zone;
