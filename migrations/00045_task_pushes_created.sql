-- +goose Up
-- What each push made in its tracker that the tracker's content limits
-- count (GitHub: the issue, and a priority label made first): the pusher
-- paces its next filing by the creations of the last hour, read here so
-- that the pace holds across replicas and restarts. A push recorded
-- before this column made its issue, as far as anyone can tell now.
ALTER TABLE task_pushes ADD COLUMN created smallint NOT NULL DEFAULT 0 CHECK (created >= 0);
UPDATE task_pushes SET created = 1 WHERE state = 'pushed' AND number IS NOT NULL;
-- The pacer's read: a kind's creations, newest first.
CREATE INDEX task_pushes_created ON task_pushes (kind, pushed_at DESC) WHERE created > 0;

-- +goose Down
DROP INDEX task_pushes_created;
ALTER TABLE task_pushes DROP COLUMN created;
