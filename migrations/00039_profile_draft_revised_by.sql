-- +goose Up
-- The private message whose text revised a draft: handled again (its
-- replica died before the update's done-mark), it finds its revision made
-- instead of being taken as a question for the memory chat.
ALTER TABLE profile_drafts ADD COLUMN revised_by bigint;

-- +goose Down
ALTER TABLE profile_drafts DROP COLUMN revised_by;
