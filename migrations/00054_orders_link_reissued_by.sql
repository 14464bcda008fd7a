-- +goose Up
-- The admin's Reissue press (its callback query id) that gave the order its
-- current link: that press handled again (its replica died before the
-- update's done-mark) keeps the link the first run gave, which the admin
-- was shown, instead of issuing another that leaves it dead.
ALTER TABLE orders ADD COLUMN link_reissued_by text;

-- +goose Down
ALTER TABLE orders DROP COLUMN link_reissued_by;
