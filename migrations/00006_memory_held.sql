-- +goose Up
-- The notification says whether somebody holds the run (claimed_until in
-- the future): a capture, a worker going straight on to the next stage, or
-- the finishing claim of a COMPLETED or FAILED run. Orchestrators skip those
-- (whoever holds the run carries it on) and act on the rest: a new run, a
-- stage handed back, the reaper's returns.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pipeline_runs_notify() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status
       OR (NEW.archived_at IS NOT NULL AND OLD.archived_at IS NULL) THEN
        PERFORM pg_notify('pipeline_events', json_build_object(
            'id', NEW.id, 'user_id', NEW.user_id, 'status', NEW.status,
            'operation', CASE WHEN TG_OP = 'INSERT' THEN 'INSERT'
                              WHEN NEW.status IS DISTINCT FROM OLD.status THEN 'UPDATE'
                              ELSE 'ARCHIVED' END,
            'held', COALESCE(NEW.claimed_until > now(), false))::text);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pipeline_runs_notify() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status
       OR (NEW.archived_at IS NOT NULL AND OLD.archived_at IS NULL) THEN
        PERFORM pg_notify('pipeline_events', json_build_object(
            'id', NEW.id, 'user_id', NEW.user_id, 'status', NEW.status,
            'operation', CASE WHEN TG_OP = 'INSERT' THEN 'INSERT'
                              WHEN NEW.status IS DISTINCT FROM OLD.status THEN 'UPDATE'
                              ELSE 'ARCHIVED' END)::text);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
-- +goose StatementEnd
