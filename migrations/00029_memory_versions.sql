-- +goose Up
-- Memories that can be corrected and superseded (ARCHITECTURE "Memory
-- chat", "Memories the user sees"). A memory stops being true when a later
-- one supersedes it: the archivist's, when an exchange contradicts it, or
-- the user's correction. It is kept, as history, with the time it stopped
-- being true (invalid_at) and the memory that replaced it (superseded_by);
-- only current ones (invalid_at IS NULL) are read for answers. Deleting a
-- memory deletes the chain behind it: the cascade follows superseded_by.
ALTER TABLE lsm_storage
    ADD COLUMN invalid_at    timestamptz,
    ADD COLUMN superseded_by bigint REFERENCES lsm_storage (id) ON DELETE CASCADE,
    ADD CONSTRAINT lsm_storage_superseded CHECK ((invalid_at IS NULL) = (superseded_by IS NULL)),
    ADD CONSTRAINT lsm_storage_not_itself CHECK (superseded_by <> id);
-- The user's current memories: the pipeline's recall and /memory's pages.
CREATE INDEX lsm_storage_current ON lsm_storage (user_id, id DESC) WHERE invalid_at IS NULL;
-- A memory's history, and the cascade that deletes it.
CREATE INDEX lsm_storage_superseded_by ON lsm_storage (superseded_by) WHERE superseded_by IS NOT NULL;

-- A question the bot asked about the user's memories and waits for the
-- answer to: a correction (the user's next private text is the memory's
-- new text) or the confirmation of "forget what I told you about X" (the
-- memories it found). Only ids are kept; a request past expires_at is
-- void, and the user's next text clears an expired correction.
CREATE TABLE memory_requests (
    id          bigserial   PRIMARY KEY,
    user_id     bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind        text        NOT NULL CHECK (kind IN ('correct', 'forget')),
    memory_ids  bigint[]    NOT NULL CHECK (cardinality(memory_ids) > 0),
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK (kind <> 'correct' OR cardinality(memory_ids) = 1)
);
-- One correction waits per user: a new Correct press replaces it.
CREATE UNIQUE INDEX memory_requests_one_correction ON memory_requests (user_id) WHERE kind = 'correct';
CREATE INDEX memory_requests_user ON memory_requests (user_id);

-- The archivist now sees the user's current memories and may supersede
-- them. Its prompt changes only where it is still the one shipped: an
-- admin's own version (/prompt archivist) stays active as it is.
WITH shipped AS (
    UPDATE system_prompts SET is_active = false, updated_at = now()
    WHERE role_name = 'archivist' AND is_active AND prompt_template = 'You summarise one exchange between a user and their mentor for long-term memory.
Answer with one JSON object and nothing else:
{"summary": "two or three sentences: what the user asked or said about themselves, and the advice given",
 "tags": ["topic", ...]}
Write the summary in the user''s language. Use at most five short lowercase tags.'
    RETURNING role_name
)
INSERT INTO system_prompts (role_name, prompt_template, version)
SELECT 'archivist', 'You summarise one exchange between a user and their mentor for long-term memory.
You are also given what is remembered about the user now, each memory with its id.
Answer with one JSON object and nothing else:
{"summary": "two or three sentences: what the user asked or said about themselves, and the advice given",
 "tags": ["topic", ...],
 "supersedes": [id, ...]}
supersedes lists the ids of remembered memories that this exchange shows are no longer true (the user
moved, changed jobs, changed their mind); the summary then says what is true now. Leave it empty when the
exchange contradicts nothing remembered. Use only ids from the list given.
Write the summary in the user''s language. Use at most five short lowercase tags.',
       (SELECT max(version) + 1 FROM system_prompts WHERE role_name = 'archivist')
FROM shipped;

-- +goose Down
-- The shipped prompt comes back where ours is still active; memories that
-- were superseded go, since before this migration every memory counted as
-- true.
WITH ours AS (
    DELETE FROM system_prompts
    WHERE role_name = 'archivist' AND is_active AND prompt_template LIKE '%"supersedes": [id, ...]%'
    RETURNING version
)
UPDATE system_prompts SET is_active = true, updated_at = now()
WHERE role_name = 'archivist' AND version = (SELECT max(p.version) FROM system_prompts p, ours
                                             WHERE p.role_name = 'archivist' AND p.version < ours.version);
DROP TABLE memory_requests;
DELETE FROM lsm_storage WHERE invalid_at IS NOT NULL;
DROP INDEX lsm_storage_superseded_by;
DROP INDEX lsm_storage_current;
ALTER TABLE lsm_storage
    DROP CONSTRAINT lsm_storage_not_itself,
    DROP CONSTRAINT lsm_storage_superseded,
    DROP COLUMN superseded_by,
    DROP COLUMN invalid_at;
