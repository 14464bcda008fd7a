-- +goose Up
-- One GET /vacancies/{id} per vacancy however many users' matches point at
-- it: a worker takes this short lease on the vacancy before asking HH, and
-- the claim passes over matches whose vacancy is being fetched.
ALTER TABLE vacancies ADD COLUMN detail_fetching_until timestamptz;

-- +goose Down
ALTER TABLE vacancies DROP COLUMN detail_fetching_until;
