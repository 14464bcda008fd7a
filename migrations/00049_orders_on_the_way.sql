-- +goose Up
-- The orders whose master is on the way and not there yet: each position a
-- master shares (a live location moves every few seconds) looks up theirs.
CREATE INDEX orders_on_the_way ON orders (master_id, en_route_at)
    WHERE state = 'ASSIGNED' AND en_route_at IS NOT NULL AND arrived_at IS NULL;

-- +goose Down
DROP INDEX orders_on_the_way;
