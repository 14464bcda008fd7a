-- +goose Up
-- The customer's /start message that last opened the order's link: that
-- message handled again (its replica died before the update's done-mark)
-- tells nobody a second time, while a new /start shows the status anew.
ALTER TABLE orders ADD COLUMN customer_joined_by bigint;

-- +goose Down
ALTER TABLE orders DROP COLUMN customer_joined_by;
