-- +goose Up
-- Two more of the memory chat's writes keyed by the message that asked for
-- them (ARCHITECTURE "Answered once"), so that message handled again (its
-- replica died before the update's done-mark) changes nothing it changed.

-- Each admin's /prompt that set a role's prompt, and the version it left
-- active: a new one, or the active one when it had the same text. Without
-- it the message handled again after another admin's newer /prompt made its
-- own older text active once more, undoing theirs. Few rows, kept with the
-- versions.
CREATE TABLE system_prompt_sets (
    chat_id    bigint  NOT NULL,
    message_id int     NOT NULL,
    role_name  text    NOT NULL,
    version    integer NOT NULL,
    PRIMARY KEY (chat_id, message_id),
    FOREIGN KEY (role_name, version) REFERENCES system_prompts (role_name, version) ON DELETE CASCADE
);

-- The private message that asked to forget what it names: the same message
-- again finds its request, whose id the confirmation's buttons carry,
-- instead of leaving a second one nobody answers.
ALTER TABLE memory_requests ADD COLUMN source_message_id bigint;
CREATE UNIQUE INDEX memory_requests_source ON memory_requests (user_id, source_message_id) WHERE source_message_id IS NOT NULL;

-- +goose Down
DROP INDEX memory_requests_source;
ALTER TABLE memory_requests DROP COLUMN source_message_id;
DROP TABLE system_prompt_sets;
