-- +goose Up
-- A push that looks like an open task of its destination waits for the
-- admins (state 'held'): they link the proposal to that task, or file it
-- anyway. like_* name the task it looks like.
ALTER TABLE task_pushes DROP CONSTRAINT task_pushes_state_check;
ALTER TABLE task_pushes ADD CONSTRAINT task_pushes_state_check CHECK (state IN ('pending', 'held', 'pushed'));
ALTER TABLE task_pushes
    ADD COLUMN like_number integer,
    ADD COLUMN like_url    text,
    ADD COLUMN like_title  text,
    -- an admin chose: file it although it looked like like_number
    ADD COLUMN file_anyway boolean NOT NULL DEFAULT false,
    -- an admin chose: it is like_number, nothing filed (number is that)
    ADD COLUMN linked      boolean NOT NULL DEFAULT false,
    ADD COLUMN decided_by  bigint;

-- +goose Down
UPDATE task_pushes SET state = 'pending' WHERE state = 'held';
ALTER TABLE task_pushes DROP CONSTRAINT task_pushes_state_check;
ALTER TABLE task_pushes ADD CONSTRAINT task_pushes_state_check CHECK (state IN ('pending', 'pushed'));
ALTER TABLE task_pushes
    DROP COLUMN like_number, DROP COLUMN like_url, DROP COLUMN like_title,
    DROP COLUMN file_anyway, DROP COLUMN linked, DROP COLUMN decided_by;
