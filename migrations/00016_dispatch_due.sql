-- +goose Up
-- orders.waiting becomes the durable record that an order is owed a
-- distribution step. It was set only when a round waited for a busy
-- master, so an order whose step was skipped (another transaction held its
-- row) or rolled back (its chosen master was taken meanwhile) was found
-- again only by the DISTRIBUTION_INTERVAL pass. Now every change that
-- leaves a SEARCHING order without an open offer sets it in the same
-- transaction (creation, an offer's expiry or decline, an order given
-- back), a change that may give an unassignable order a candidate sets it
-- (a master registered, moved, resumed or unblocked), and only the
-- distribution step that settles the order clears it: with an offer, or
-- with the unassignable report. The per-second recheck of every replica
-- reads it through orders_waiting.
COMMENT ON COLUMN orders.waiting IS 'owed a distribution step: set with every change that leaves a SEARCHING order without an open offer, cleared by the step that offers it or reports it unassignable';

-- Orders that were between steps when the replicas stopped.
UPDATE orders o SET waiting = true
WHERE o.state = 'SEARCHING' AND NOT o.waiting AND o.unassignable_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ('SENT', 'VIEWED'));

-- +goose Down
COMMENT ON COLUMN orders.waiting IS NULL;
