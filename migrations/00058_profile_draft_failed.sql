-- +goose Up
-- A draft whose file could not be read is kept as 'failed', holding nothing
-- of the file, instead of deleted: the document's message handled again
-- (its replica died before the update's done-mark, and the file was read
-- and refused meanwhile) finds its draft and neither reads the file again
-- nor tells the user twice. A newer document replaces it, and the prune job
-- deletes it by age, as any draft.
ALTER TABLE profile_drafts
    DROP CONSTRAINT profile_drafts_state_check,
    ADD CONSTRAINT profile_drafts_state_check CHECK (state IN ('reading', 'ready', 'editing', 'failed')),
    DROP CONSTRAINT profile_drafts_check,
    ADD CONSTRAINT profile_drafts_check CHECK ((state IN ('reading', 'failed')) = (draft IS NULL));

-- +goose Down
DELETE FROM profile_drafts WHERE state = 'failed';
ALTER TABLE profile_drafts
    DROP CONSTRAINT profile_drafts_state_check,
    ADD CONSTRAINT profile_drafts_state_check CHECK (state IN ('reading', 'ready', 'editing')),
    DROP CONSTRAINT profile_drafts_check,
    ADD CONSTRAINT profile_drafts_check CHECK ((state = 'reading') = (draft IS NULL));
