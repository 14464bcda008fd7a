-- +goose Up
-- The messages whose photos an order counted: a photo's message handled
-- again (its replica died before the update's done-mark) is counted and
-- forwarded once.
ALTER TABLE orders ADD COLUMN photo_messages bigint[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE orders DROP COLUMN photo_messages;
