-- +goose Up
-- Data retention (README "Data retention"): the prune job deletes, in small
-- batches each under a short statement timeout, what is older than each
-- kind's retention (storage/prune.go). These are the indexes it walks, so
-- no batch reads more than its chunk. None names a column a hot path
-- updates, so claims, stage commits and edits stay HOT updates.

-- Memory chat: a finished run's draft and assembled context (up to 8000
-- tokens each) are cleared after RETAIN_RUN_CONTEXT; the row, its answer
-- and its summary stay. context_pruned_at marks a cleared run, so the index
-- holds closed runs not cleared yet. (An index whose predicate named the
-- context columns would make the assembler's commit a non-HOT update.)
ALTER TABLE pipeline_runs ADD COLUMN context_pruned_at timestamptz;
CREATE INDEX pipeline_runs_context ON pipeline_runs (closed_at)
    WHERE closed_at IS NOT NULL AND context_pruned_at IS NULL;

-- Vacancies: matches in a state pruning may delete, walked by creation
-- time (which never changes; updated_at does at every claim).
CREATE INDEX vacancy_matches_prune ON vacancy_matches (created_at, id)
    WHERE status IN ('NOT_SUITABLE', 'IN_ARCHIVE', 'APPLIED', 'NOT_INTERESTED', 'SENT_TO_USER', 'SKIPPED');
-- Vacancies no match points to any more.
CREATE INDEX vacancies_created ON vacancies (created_at, id);
-- Hits older than RETAIN_SEARCH_HITS.
CREATE INDEX search_hits_found ON search_hits (found_at);
-- Dedupe after pruning: the highest vacancy id among a search_key's pruned
-- hits. HH's ids grow with time, so discovery counts every id up to it as
-- seen (storage.Unseen): a vacancy seen long ago stays seen after its hit is
-- gone, even when HH republishes it with a new published_at.
ALTER TABLE discovery_state ADD COLUMN pruned_through_id bigint NOT NULL DEFAULT 0;

-- group_messages (group_messages_date), the outbox (outbox_done) and its
-- throttles (outbox_throttles_at) have the index pruning needs; raw_logs and
-- lsm_storage are walked by id, which grows with created_at.

-- The last prune run of each kind, for /status.
CREATE TABLE prune_runs (
    kind         text        PRIMARY KEY,
    at           timestamptz NOT NULL,
    -- rows deleted (or cleared) by that run
    rows         bigint      NOT NULL DEFAULT 0,
    -- batches that hit the statement timeout (the kind stopped there)
    timeouts     integer     NOT NULL DEFAULT 0,
    duration_ms  bigint      NOT NULL DEFAULT 0,
    error        text        NOT NULL DEFAULT '',
    -- rows deleted by every run so far
    total        bigint      NOT NULL DEFAULT 0
);

-- +goose Down
DROP TABLE prune_runs;
ALTER TABLE discovery_state DROP COLUMN pruned_through_id;
DROP INDEX search_hits_found;
DROP INDEX vacancies_created;
DROP INDEX vacancy_matches_prune;
DROP INDEX pipeline_runs_context;
ALTER TABLE pipeline_runs DROP COLUMN context_pruned_at;
