-- +goose Up
-- When the user stopped the answer being written (a draft's stop button):
-- set while the run is RESPONDING, it tells the replica writing the answer
-- to cut the model's call short (its NOTIFY), and the archivist that the
-- answer it reads was cut short. An answer stopped before its first word
-- completes the run with none.
ALTER TABLE pipeline_runs ADD COLUMN stop_requested_at timestamptz;
ALTER TABLE pipeline_runs DROP CONSTRAINT pipeline_runs_check;
ALTER TABLE pipeline_runs ADD CONSTRAINT pipeline_runs_check
    CHECK (status <> 'COMPLETED' OR final_answer IS NOT NULL OR stop_requested_at IS NOT NULL);

-- +goose Down
UPDATE pipeline_runs SET final_answer = '' WHERE status = 'COMPLETED' AND final_answer IS NULL;
ALTER TABLE pipeline_runs DROP CONSTRAINT pipeline_runs_check;
ALTER TABLE pipeline_runs ADD CONSTRAINT pipeline_runs_check CHECK (status <> 'COMPLETED' OR final_answer IS NOT NULL);
ALTER TABLE pipeline_runs DROP COLUMN stop_requested_at;
