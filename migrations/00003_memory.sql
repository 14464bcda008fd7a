-- +goose Up
-- Memory chat (DESIGN.md "Memory chat"): one run per private message.
CREATE TABLE pipeline_runs (
    id                     bigserial   PRIMARY KEY,
    user_id                bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    chat_id                bigint      NOT NULL,
    message_id             bigint      NOT NULL,
    user_query             text        NOT NULL,
    status                 text        NOT NULL DEFAULT 'NEW' CHECK (status IN ('NEW', 'ANALYZING', 'ANALYZED',
                                           'ASSEMBLING', 'READY', 'RESPONDING', 'COMPLETED', 'FAILED')),
    analysis_result        jsonb,
    draft_context          text,
    final_context_payload  text,
    final_answer           text,
    error_message          text,
    -- Times the reaper returned this run from a stage whose worker died.
    attempts               integer     NOT NULL DEFAULT 0,
    claimed_until          timestamptz,
    -- The answer (or the failure notice) reached the user.
    delivered_at           timestamptz,
    archived_at            timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CHECK (status <> 'COMPLETED' OR final_answer IS NOT NULL),
    CHECK (status <> 'FAILED' OR error_message IS NOT NULL)
);
-- Unfinished runs: the sweep, the reaper and the one-run-per-user rule read these.
CREATE INDEX pipeline_runs_open ON pipeline_runs (user_id, id)
    WHERE archived_at IS NULL AND status <> 'FAILED';
CREATE INDEX pipeline_runs_undelivered ON pipeline_runs (id)
    WHERE delivered_at IS NULL AND status IN ('COMPLETED', 'FAILED');

CREATE TABLE raw_logs (
    id          bigserial   PRIMARY KEY,
    user_id     bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    log_type    text        NOT NULL CHECK (log_type IN ('query', 'answer')),
    log_data    jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX raw_logs_user ON raw_logs (user_id, id DESC);

-- Long-term memory: the archivist's summaries, bucketed by ISO week.
CREATE TABLE lsm_storage (
    id                 bigserial   PRIMARY KEY,
    user_id            bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    time_bucket_start  timestamptz NOT NULL,
    time_bucket_end    timestamptz NOT NULL,
    tags               text[]      NOT NULL DEFAULT '{}',
    summary            text        NOT NULL,
    source_run_ids     bigint[]    NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    CHECK (time_bucket_end > time_bucket_start)
);
CREATE INDEX lsm_storage_user ON lsm_storage (user_id, id DESC);

CREATE TABLE system_prompts (
    id               bigserial   PRIMARY KEY,
    role_name        text        NOT NULL CHECK (role_name IN ('analyzer', 'assembler', 'mentor', 'archivist')),
    prompt_template  text        NOT NULL CHECK (prompt_template <> ''),
    is_active        boolean     NOT NULL DEFAULT true,
    version          integer     NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (role_name, version)
);
CREATE UNIQUE INDEX system_prompts_one_active ON system_prompts (role_name) WHERE is_active;

-- NOTIFY carries ids only; the orchestrator reads the row. It fires on
-- insert, on every status change, and when a run is archived (which lets the
-- same user's next run start).
-- +goose StatementBegin
CREATE FUNCTION pipeline_runs_notify() RETURNS trigger AS $$
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

INSERT INTO system_prompts (role_name, prompt_template, version) VALUES
('analyzer', 'You read a user''s new message and a list of summaries of their earlier conversations.
Decide whether answering needs that memory. Answer with one JSON object and nothing else:
{"needs_context": true|false, "context_type": "facts|preferences|history|none",
 "time_scope": "recent|all|none", "search_keywords": ["word", ...], "context_found": true|false}
search_keywords are a few words to find the relevant summaries; context_found says whether the
summaries given contain what is needed.', 1),
('assembler', 'You prepare the context for a mentor who will answer the user. From the material below
(the user''s recent messages and summaries of earlier conversations) keep only what helps answer the
new message: facts about the user, their goals, earlier advice and decisions. Write it as short plain
notes. Do not answer the message yourself. If nothing is relevant, write "No relevant memory."', 1),
('mentor', 'You are a patient, practical mentor who remembers the user''s earlier conversations.
Answer the user''s message directly and concretely, in the language they wrote in. Use the context
notes when they help; never invent memories that are not in them. Keep the answer focused.', 1),
('archivist', 'You summarise one exchange between a user and their mentor for long-term memory.
Answer with one JSON object and nothing else:
{"summary": "two or three sentences: what the user asked or said about themselves, and the advice given",
 "tags": ["topic", ...]}
Write the summary in the user''s language. Use at most five short lowercase tags.', 1);

-- +goose Down
DROP TRIGGER pipeline_runs_notify ON pipeline_runs;
DROP FUNCTION pipeline_runs_notify();
DROP TABLE system_prompts;
DROP TABLE lsm_storage;
DROP TABLE raw_logs;
DROP TABLE pipeline_runs;
