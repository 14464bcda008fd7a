-- +goose Up
-- A match's turns are told apart. One that ran and failed (the model's
-- error or invalid answer, HH's error for the vacancy) counts in failures,
-- which the worker bounds (vacancy.Config.MaxFailures: then SKIPPED, for
-- recovery). One given back unjudged (the model's breaker or rate limit, HH
-- blocking us, a shutdown, a claim whose lease was lost) counts in waits,
-- which bound nothing: a match waits as long as its cause lasts. attempts
-- keeps counting what it always did, the claims, so a replica of the build
-- before works on beside one of this build during a rollout.
ALTER TABLE vacancy_matches
    ADD COLUMN failures int NOT NULL DEFAULT 0,
    ADD COLUMN failure_reason text NOT NULL DEFAULT '',
    ADD COLUMN waits int NOT NULL DEFAULT 0,
    ADD COLUMN wait_reason text NOT NULL DEFAULT '';
COMMENT ON COLUMN vacancy_matches.attempts IS 'claims of the match, a worker''s or a pasted link''s: turns of any end, not a retry count';
COMMENT ON COLUMN vacancy_matches.failures IS 'turns that ran and failed (llm_error, invalid_json, hh_unavailable, panic); at the worker''s bound the match is SKIPPED';
COMMENT ON COLUMN vacancy_matches.failure_reason IS 'the latest failure''s reason';
COMMENT ON COLUMN vacancy_matches.waits IS 'turns given back unjudged (breaker_open, llm_busy, llm_refused, hh_blocked, detail_fetching, shutdown, lease_lost, unsaved); never bounded';
COMMENT ON COLUMN vacancy_matches.wait_reason IS 'the latest wait''s reason';
-- Of the turns before, only a SKIPPED match's last is known: its skip
-- reason says whether it failed or waited. A failed one keeps its one
-- failure, so recovery's return gives it the bound less one more tries.
UPDATE vacancy_matches SET failures = 1, failure_reason = skip_reason
WHERE status = 'SKIPPED' AND skip_reason IN ('llm_error', 'invalid_json', 'hh_unavailable');
UPDATE vacancy_matches SET waits = 1, wait_reason = skip_reason
WHERE status = 'SKIPPED' AND skip_reason IN ('breaker_open', 'shutdown');

-- +goose Down
COMMENT ON COLUMN vacancy_matches.attempts IS NULL;
ALTER TABLE vacancy_matches
    DROP COLUMN wait_reason,
    DROP COLUMN waits,
    DROP COLUMN failure_reason,
    DROP COLUMN failures;
