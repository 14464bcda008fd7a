-- +goose Up
-- Each private chat's workflow topics (Bot API 9.3, 9.4): the thread the
-- bot created for a workflow ("vacancies", "memory", …) in a user's chat,
-- kept so every replica sends into the same one; forgotten when the user
-- deletes it (Telegram: "message thread not found"), created again then.
CREATE TABLE chat_topics (
    chat_id    bigint      NOT NULL,
    topic      text        NOT NULL CHECK (topic <> '' AND length(topic) <= 32),
    thread_id  integer     NOT NULL CHECK (thread_id > 0),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat_id, topic)
);

-- +goose Down
DROP TABLE chat_topics;
