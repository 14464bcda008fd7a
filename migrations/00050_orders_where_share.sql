-- +goose Up
-- The master's share (their message id) whose position the order's customer
-- was last shown: the first position of a share the customer has not seen
-- starts it with words (a master may start sharing before On my way, when
-- nothing is relayed yet, and be relayed from a later move).
ALTER TABLE orders ADD COLUMN where_share integer;

-- +goose Down
ALTER TABLE orders DROP COLUMN where_share;
