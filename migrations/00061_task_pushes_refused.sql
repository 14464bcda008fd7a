-- +goose Up
-- A push whose tracker refused the task for what it holds (GitHub's 400 or
-- 422) waits as 'refused', the tracker's words in last_error, instead of
-- being retried with backoff for ever: the same request would be refused
-- again. An admin sends it again from /tasks (pending once more).
ALTER TABLE task_pushes DROP CONSTRAINT task_pushes_state_check;
ALTER TABLE task_pushes ADD CONSTRAINT task_pushes_state_check CHECK (state IN ('pending', 'held', 'refused', 'pushed'));

-- +goose Down
UPDATE task_pushes SET state = 'pending' WHERE state = 'refused';
ALTER TABLE task_pushes DROP CONSTRAINT task_pushes_state_check;
ALTER TABLE task_pushes ADD CONSTRAINT task_pushes_state_check CHECK (state IN ('pending', 'held', 'pushed'));
