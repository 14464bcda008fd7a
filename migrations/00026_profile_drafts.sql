-- +goose Up
-- A profile drafted from a résumé the user sent (domain/resume): one per
-- user, the newest file replacing an older draft. The file and its text are
-- never stored: file_id is Telegram's handle for downloading it, kept only
-- while the draft is being read and cleared with the draft's text; draft is
-- the LLM's condensed profile the user confirms, edits or cancels.
-- (chat_id, message_id) is the document's message: a second delivery of its
-- update finds its draft and adds nothing.
CREATE TABLE profile_drafts (
    id            bigserial PRIMARY KEY,
    user_id       bigint NOT NULL UNIQUE REFERENCES users (id) ON DELETE CASCADE,
    chat_id       bigint NOT NULL,
    message_id    int NOT NULL,
    lang          text NOT NULL,
    state         text NOT NULL DEFAULT 'reading' CHECK (state IN ('reading', 'ready', 'editing')),
    -- revision grows with every change the buttons must see, so a button of
    -- an earlier message of the draft is stale.
    revision      int NOT NULL DEFAULT 1,
    file_id       text,
    file_name     text NOT NULL DEFAULT '',
    format        text NOT NULL CHECK (format IN ('pdf', 'docx', 'text')),
    draft         text,
    attempts      int NOT NULL DEFAULT 0,
    claim_token   uuid,
    claimed_until timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'reading') = (draft IS NULL)),
    CHECK (state = 'reading' OR file_id IS NULL)
);
-- The readers' claim: drafts being read whose claim is free or lapsed.
CREATE INDEX profile_drafts_reading ON profile_drafts (claimed_until NULLS FIRST, id) WHERE state = 'reading';
-- The prune job deletes drafts nobody finished by age.
CREATE INDEX profile_drafts_updated ON profile_drafts (updated_at);

-- +goose Down
DROP TABLE profile_drafts;
