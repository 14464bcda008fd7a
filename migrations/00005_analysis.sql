-- +goose Up
-- Analysis runs (DESIGN.md "Analysis runs"): group-chat messages in, task
-- proposals out, reviewed by admins.

-- The groups the bot is in. A message from a group not seen yet adds a row
-- (title unknown until the bot tracks it), so /chats lists every group.
CREATE TABLE group_chats (
    id          bigint      PRIMARY KEY,
    title       text        NOT NULL DEFAULT '',
    -- false when privacy mode hides ordinary messages from the bot
    can_read    boolean     NOT NULL DEFAULT true,
    added_at    timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- No foreign key to group_chats: storing a message is one cheap statement.
CREATE TABLE group_messages (
    chat_id     bigint      NOT NULL,
    message_id  bigint      NOT NULL,
    author_id   bigint      NOT NULL DEFAULT 0,
    -- display name (first name, or @username)
    author      text        NOT NULL DEFAULT '',
    text        text        NOT NULL,
    date        timestamptz NOT NULL,
    edited_at   timestamptz,
    PRIMARY KEY (chat_id, message_id)
);
-- A run's window.
CREATE INDEX group_messages_date ON group_messages (date);

CREATE TABLE analysis_runs (
    id                   bigserial   PRIMARY KEY,
    state                text        NOT NULL DEFAULT 'pending'
                         CHECK (state IN ('pending', 'running', 'completed', 'reviewed', 'closed', 'failed', 'cancelled')),
    created_by           bigint      NOT NULL,
    -- analysis.Filters: window, chat, keywords, min_len, mentions
    filters              jsonb       NOT NULL DEFAULT '{}',
    window_from          timestamptz NOT NULL,
    window_to            timestamptz NOT NULL,
    -- similar approved proposals of earlier runs as LLM context
    rag                  boolean     NOT NULL DEFAULT false,
    started_at           timestamptz,
    completed_at         timestamptz,
    closed_at            timestamptz,
    failed_at            timestamptz,
    -- {"step", "batch", "error"} of a failed run
    error_log            jsonb,
    -- Kept by the statements that change proposals (SaveBatch, Decide).
    proposals_total      integer     NOT NULL DEFAULT 0 CHECK (proposals_total >= 0),
    proposals_pending    integer     NOT NULL DEFAULT 0 CHECK (proposals_pending >= 0),
    proposals_approved   integer     NOT NULL DEFAULT 0 CHECK (proposals_approved >= 0),
    proposals_rejected   integer     NOT NULL DEFAULT 0 CHECK (proposals_rejected >= 0),
    -- Progress: fetched in the window, left after the prefilter, batches,
    -- batches saved, messages in the saved batches.
    messages             integer     NOT NULL DEFAULT 0 CHECK (messages >= 0),
    filtered             integer     NOT NULL DEFAULT 0 CHECK (filtered >= 0),
    batches              integer     NOT NULL DEFAULT 0 CHECK (batches >= 0),
    batches_done         integer     NOT NULL DEFAULT 0 CHECK (batches_done >= 0),
    processed            integer     NOT NULL DEFAULT 0 CHECK (processed >= 0),
    -- the admin-chat message the progress is edited into
    progress_message_id  bigint,
    -- {"proposals_total", "approval_rate", "rejection_rate"}, set at close
    accuracy_metrics     jsonb,
    -- the executor's lease while running
    claimed_until        timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (window_from <= window_to),
    CHECK (proposals_pending + proposals_approved + proposals_rejected = proposals_total),
    CHECK (state <> 'failed' OR error_log IS NOT NULL),
    CHECK (state <> 'closed' OR (proposals_pending = 0 AND accuracy_metrics IS NOT NULL))
);
-- At most one unclosed run: two /run_new at once, on any replicas, cannot
-- both insert.
CREATE UNIQUE INDEX analysis_runs_one_unclosed ON analysis_runs ((true))
    WHERE state IN ('pending', 'running', 'completed', 'reviewed');

CREATE TABLE analysis_proposals (
    id           bigserial   PRIMARY KEY,
    run_id       bigint      NOT NULL REFERENCES analysis_runs (id) ON DELETE CASCADE,
    -- 1-based batch of the run
    batch        integer     NOT NULL CHECK (batch >= 1),
    title        text        NOT NULL CHECK (title <> ''),
    description  text        NOT NULL DEFAULT '',
    priority     text        NOT NULL CHECK (priority IN ('low', 'medium', 'high')),
    assignee     text        NOT NULL DEFAULT '',
    deadline     text        NOT NULL DEFAULT '' CHECK (deadline = '' OR deadline ~ '^\d{4}-\d{2}-\d{2}$'),
    decision     text        NOT NULL DEFAULT 'pending' CHECK (decision IN ('pending', 'approved', 'rejected')),
    decided_by   bigint,
    decided_at   timestamptz,
    -- the admin-chat message with Approve / Reject
    message_id   bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CHECK ((decision = 'pending') = (decided_at IS NULL))
);
CREATE INDEX analysis_proposals_run ON analysis_proposals (run_id, id);
CREATE INDEX analysis_proposals_approved ON analysis_proposals (run_id) WHERE decision = 'approved';

-- The messages a proposal was made from. A message cited by one run's
-- proposal is left out of later runs' windows. No foreign key to
-- group_messages: a citation is kept as the LLM gave it.
CREATE TABLE analysis_proposal_sources (
    proposal_id  bigint NOT NULL REFERENCES analysis_proposals (id) ON DELETE CASCADE,
    run_id       bigint NOT NULL REFERENCES analysis_runs (id) ON DELETE CASCADE,
    chat_id      bigint NOT NULL,
    message_id   bigint NOT NULL,
    PRIMARY KEY (proposal_id, chat_id, message_id)
);
-- WindowMessages' "cited by another run" probe, answered from the index alone.
CREATE INDEX analysis_proposal_sources_message ON analysis_proposal_sources (chat_id, message_id, run_id);

-- Approved proposals' embeddings, for the RAG context of later runs.
CREATE TABLE analysis_embeddings (
    proposal_id  bigint      PRIMARY KEY REFERENCES analysis_proposals (id) ON DELETE CASCADE,
    embedding    real[]      NOT NULL CHECK (cardinality(embedding) > 0),
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- pgvector is not available everywhere: cosine similarity in plain SQL.
-- NULL when the dimensions differ (another embedding model) or a vector
-- is zero.
-- +goose StatementBegin
CREATE FUNCTION cosine_similarity(a real[], b real[]) RETURNS double precision
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
    SELECT CASE WHEN cardinality(a) = cardinality(b) THEN
               sum(x::float8 * y) / NULLIF(sqrt(sum(x::float8 * x)) * sqrt(sum(y::float8 * y)), 0)
           END
    FROM unnest(a, b) AS t (x, y)
$$;
-- +goose StatementEnd

-- Run events are published by the workflow itself (analysis.Publisher:
-- pg_notify('analysis_runs', …)), so no trigger here.

-- +goose Down
DROP FUNCTION cosine_similarity(real[], real[]);
DROP TABLE analysis_embeddings;
DROP TABLE analysis_proposal_sources;
DROP TABLE analysis_proposals;
DROP TABLE analysis_runs;
DROP TABLE group_messages;
DROP TABLE group_chats;
