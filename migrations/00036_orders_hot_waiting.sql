-- +goose Up
-- orders.waiting flips on every expiry and decline and back at the step
-- that follows; with orders_waiting's predicate naming it, no such update
-- could be HOT, and each wrote a new entry into every index of orders.
-- The waiting-orders recheck reads the SEARCHING orders (orders_searching)
-- and checks the flag on the row instead. Room on each page for the new
-- versions of its rows keeps the updates on the page.
DROP INDEX orders_waiting;
ALTER TABLE orders SET (fillfactor = 70);

-- +goose Down
ALTER TABLE orders RESET (fillfactor);
CREATE INDEX orders_waiting ON orders (id) WHERE state = 'SEARCHING' AND waiting;
