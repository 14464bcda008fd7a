-- +goose Up
-- The memory pipeline, reworked for throughput (docs/BENCHMARKS.md,
-- "Memory chat").
--
-- closed_at: the run needs nothing more (archived, or FAILED and the user
-- told). The partial indexes used to name status, archived_at and
-- delivered_at in their predicates, which made every status change a
-- non-HOT update: a new entry in every index, seven times per run. Now only
-- closed_at is in a predicate, so a status change is a HOT update when the
-- page has room, which the lower fillfactor leaves.
ALTER TABLE pipeline_runs ADD COLUMN closed_at timestamptz;
UPDATE pipeline_runs SET closed_at = COALESCE(archived_at, delivered_at, updated_at)
WHERE archived_at IS NOT NULL OR (status = 'FAILED' AND delivered_at IS NOT NULL);
ALTER TABLE pipeline_runs SET (fillfactor = 50);
DROP INDEX pipeline_runs_open;
DROP INDEX pipeline_runs_undelivered;
-- Runs with work left: the sweep, the reaper and the one-run-per-user rule.
CREATE INDEX pipeline_runs_live ON pipeline_runs (user_id, id) WHERE closed_at IS NULL;
-- /forget and the users cascade.
CREATE INDEX pipeline_runs_user ON pipeline_runs (user_id);

-- The notification says whether somebody holds the run (claimed_until in
-- the future): a capture, a worker going straight on to the next stage, or
-- the finishing claim of a COMPLETED or FAILED run. Orchestrators skip those
-- (whoever holds the run carries it on) and act on the rest: a new run, a
-- stage handed back, the reaper's returns. The trigger's WHEN keeps
-- plpgsql out of updates that notify nothing (delivery, claims).
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
DROP TRIGGER pipeline_runs_notify ON pipeline_runs;
CREATE TRIGGER pipeline_runs_notify AFTER INSERT ON pipeline_runs
    FOR EACH ROW EXECUTE FUNCTION pipeline_runs_notify();
CREATE TRIGGER pipeline_runs_notify_update AFTER UPDATE ON pipeline_runs
    FOR EACH ROW WHEN (NEW.status IS DISTINCT FROM OLD.status
                       OR (NEW.archived_at IS NOT NULL AND OLD.archived_at IS NULL))
    EXECUTE FUNCTION pipeline_runs_notify();

-- +goose Down
DROP TRIGGER pipeline_runs_notify_update ON pipeline_runs;
DROP TRIGGER pipeline_runs_notify ON pipeline_runs;
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
CREATE TRIGGER pipeline_runs_notify AFTER INSERT OR UPDATE ON pipeline_runs
    FOR EACH ROW EXECUTE FUNCTION pipeline_runs_notify();
DROP INDEX pipeline_runs_user;
DROP INDEX pipeline_runs_live;
CREATE INDEX pipeline_runs_open ON pipeline_runs (user_id, id)
    WHERE archived_at IS NULL AND status <> 'FAILED';
CREATE INDEX pipeline_runs_undelivered ON pipeline_runs (id)
    WHERE delivered_at IS NULL AND status IN ('COMPLETED', 'FAILED');
ALTER TABLE pipeline_runs RESET (fillfactor);
ALTER TABLE pipeline_runs DROP COLUMN closed_at;
