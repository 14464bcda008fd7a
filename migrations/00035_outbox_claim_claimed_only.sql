-- +goose Up
-- outbox_claim finds a claim's rows by their token; only claimed rows
-- have one. Every pending row used to be in it too, with a NULL token, so
-- each message written added an entry at the index's right edge, one more
-- page that every writer of the outbox (a dispatch step's live-log line,
-- a memory answer, a vacancy card) locked in turn. Lookups by token and
-- the liveness and held counts (claim_token IS NOT NULL) read it as before.
DROP INDEX outbox_claim;
CREATE INDEX outbox_claim ON outbox (claim_token) WHERE state = 'pending' AND claim_token IS NOT NULL;

-- +goose Down
DROP INDEX outbox_claim;
CREATE INDEX outbox_claim ON outbox (claim_token) WHERE state = 'pending';
