-- +goose Up
-- A search HH refuses for its own parameters (400 bad_argument: a currency
-- code it does not know, say) is not an outage to retry on every tick: it
-- is set aside (state 'refused', HH's argument names in refused_args), left
-- out of discovery and first news, and its user is told once. Saving the
-- same search again brings it back to 'active' (ARCHITECTURE "Vacancies").
ALTER TABLE searches
    ADD COLUMN state        text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'refused')),
    ADD COLUMN refused_args text[],
    ADD COLUMN refused_at   timestamptz;

-- +goose Down
ALTER TABLE searches DROP COLUMN refused_at, DROP COLUMN refused_args, DROP COLUMN state;
