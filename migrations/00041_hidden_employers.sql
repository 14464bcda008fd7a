-- +goose Up
-- The employers whose vacancies a user hid from a card ("Hide this
-- employer"): discovery gives that user none of theirs and a queued match
-- of theirs is dropped when claimed. By name, as HH shows it: the id is the
-- handle of /bans' "show again" button.
CREATE TABLE hidden_employers (
    id        bigserial PRIMARY KEY,
    user_id   bigint NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    employer  text NOT NULL CHECK (employer <> '' AND length(employer) <= 500),
    hidden_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, employer)
);

-- +goose Down
DROP TABLE hidden_employers;
