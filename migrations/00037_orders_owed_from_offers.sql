-- +goose Up
-- Whether an order is owed a distribution step is read from its offers:
-- a SEARCHING order with no open offer is owed one unless it was reported
-- unassignable since its last offer ended. An expiry or a decline no
-- longer marks the order, so the dispatch's hottest writes touch no row
-- of orders. What is left of the mark is the exception, renamed for what
-- it means now: an order parked, owed a step that the end of its own
-- offers will not bring (a step found a master busy with another order's
-- offer; or, after the unassignable report, a master who may take it came
-- or a step found its city closed). Those are few, and the pass after
-- every expiry sweep reads them through orders_parked; the marks are set
-- and cleared seldom enough that the index's non-HOT updates cost nothing.
ALTER TABLE orders RENAME COLUMN waiting TO parked;
UPDATE orders SET parked = false WHERE parked AND unassignable_at IS NULL;
COMMENT ON COLUMN orders.parked IS 'owed a distribution step that the end of its own offers will not bring: a master it waits for was busy, or after the unassignable report a master came or its city was closed; cleared by the step that offers the order or reports it unassignable';
CREATE INDEX orders_parked ON orders (id) WHERE state = 'SEARCHING' AND parked;
-- The claimer (REPLICA_NAME#n) that expired an offer and is taking its
-- order's follow-up step: other replicas' rechecks leave the order to it
-- while its liveness lock is held. Written by the expiry's own UPDATE.
ALTER TABLE offers ADD COLUMN ended_by text;

-- +goose Down
ALTER TABLE offers DROP COLUMN ended_by;
DROP INDEX orders_parked;
COMMENT ON COLUMN orders.parked IS NULL;
ALTER TABLE orders RENAME COLUMN parked TO waiting;
UPDATE orders o SET waiting = true
WHERE o.state = 'SEARCHING' AND NOT o.waiting AND o.unassignable_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM offers f WHERE f.order_id = o.id AND f.state IN ('SENT', 'VIEWED'));
