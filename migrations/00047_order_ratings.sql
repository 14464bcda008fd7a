-- +goose Up
-- A customer's rating of a finished order, one per order, of the master
-- who did it. It carries no customer id: who the customer is is contact
-- data that retention clears, while the rating keeps counting for the
-- master (dispatch.RankOf orders candidates by it).
CREATE TABLE order_ratings (
    order_id   bigint      PRIMARY KEY REFERENCES orders(id) ON DELETE CASCADE,
    master_id  bigint      NOT NULL REFERENCES masters(user_id) ON DELETE CASCADE,
    stars      smallint    NOT NULL CHECK (stars BETWEEN 1 AND 5),
    -- NULL: none given
    comment    text        CHECK (comment <> '' AND length(comment) <= 1000),
    rated_at   timestamptz NOT NULL DEFAULT now()
);
-- A master's ratings of the last 90 days (dispatch.RatingWindow), read for
-- every candidate of a distribution step: the stars ride along so the index
-- alone answers.
CREATE INDEX order_ratings_master ON order_ratings (master_id, rated_at) INCLUDE (stars);

-- +goose Down
DROP TABLE order_ratings;
