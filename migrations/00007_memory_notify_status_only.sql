-- +goose Up
-- pipeline_events is sent on insert and on status changes only, as
-- DESIGN.md says. Archiving used to notify too ('ARCHIVED'), which nobody
-- acts on (the worker that archives starts the user's next run itself),
-- and it cost more than the message: PostgreSQL serialises the commits of
-- every transaction that notifies with one database-wide lock held until
-- the commit is flushed, so each notifying commit queues behind the others.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pipeline_runs_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('pipeline_events', json_build_object(
        'id', NEW.id, 'user_id', NEW.user_id, 'status', NEW.status,
        'operation', TG_OP,
        'held', COALESCE(NEW.claimed_until > now(), false))::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
DROP TRIGGER pipeline_runs_notify_update ON pipeline_runs;
CREATE TRIGGER pipeline_runs_notify_update AFTER UPDATE ON pipeline_runs
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status)
    EXECUTE FUNCTION pipeline_runs_notify();

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pipeline_runs_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('pipeline_events', json_build_object(
        'id', NEW.id, 'user_id', NEW.user_id, 'status', NEW.status,
        'operation', CASE WHEN TG_OP = 'INSERT' THEN 'INSERT'
                          WHEN NEW.status IS DISTINCT FROM OLD.status THEN 'UPDATE'
                          ELSE 'ARCHIVED' END,
        'held', COALESCE(NEW.claimed_until > now(), false))::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
DROP TRIGGER pipeline_runs_notify_update ON pipeline_runs;
CREATE TRIGGER pipeline_runs_notify_update AFTER UPDATE ON pipeline_runs
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status
                       OR (NEW.archived_at IS NOT NULL AND OLD.archived_at IS NULL))
    EXECUTE FUNCTION pipeline_runs_notify();
