-- +goose Up
-- Proposals are reviewed on the run's board, one message edited in place,
-- a page of them at a time: each proposal's number in its run orders the
-- pages, and the run keeps the page shown and a pending "approve all"
-- confirmation, so every replica renders the same board.
ALTER TABLE analysis_proposals ADD COLUMN ordinal integer;
UPDATE analysis_proposals p SET ordinal = n.ordinal
FROM (SELECT id, row_number() OVER (PARTITION BY run_id ORDER BY id) AS ordinal FROM analysis_proposals) n
WHERE n.id = p.id;
ALTER TABLE analysis_proposals ALTER COLUMN ordinal SET NOT NULL,
    ADD CONSTRAINT analysis_proposals_ordinal CHECK (ordinal >= 1);
CREATE UNIQUE INDEX analysis_proposals_run_ordinal ON analysis_proposals (run_id, ordinal);

ALTER TABLE analysis_runs
    ADD COLUMN review_page    integer NOT NULL DEFAULT 0 CHECK (review_page >= 0),
    ADD COLUMN review_confirm boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE analysis_runs DROP COLUMN review_confirm, DROP COLUMN review_page;
DROP INDEX analysis_proposals_run_ordinal;
ALTER TABLE analysis_proposals DROP COLUMN ordinal;
