-- +goose Up
-- Approved tasks past the bot's edge (domain/tasks): where each tracked
-- group's tasks go, the pushes waiting or done, and the members' GitHub
-- logins.

-- A group's destination: a GitHub repository ("owner/repo") or a webhook
-- URL. No row: its tasks stay in the bot, as before.
CREATE TABLE task_destinations (
    chat_id     bigint      PRIMARY KEY,
    kind        text        NOT NULL CHECK (kind IN ('github', 'webhook')),
    target      text        NOT NULL CHECK (target <> '' AND length(target) <= 2048),
    -- when a task goes: as it is approved, or when its run is closed
    push_on     text        NOT NULL DEFAULT 'approve' CHECK (push_on IN ('approve', 'close')),
    set_by      bigint      NOT NULL,
    set_at      timestamptz NOT NULL DEFAULT now()
);

-- One push of an approved proposal to the destination its first source's
-- group had when it was approved (or its run closed, for a destination
-- that waits for that) (kind and target copied: a later change
-- of destination does not move a push under way). Written in the
-- approval's transaction; one per proposal.
CREATE TABLE task_pushes (
    id             bigserial   PRIMARY KEY,
    proposal_id    bigint      NOT NULL UNIQUE REFERENCES analysis_proposals (id) ON DELETE CASCADE,
    chat_id        bigint      NOT NULL,
    kind           text        NOT NULL CHECK (kind IN ('github', 'webhook')),
    target         text        NOT NULL,
    state          text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'pushed')),
    attempts       integer     NOT NULL DEFAULT 0,
    not_before     timestamptz NOT NULL DEFAULT now(),
    claimed_until  timestamptz,
    claim_token    uuid,
    claimed_by     text,
    -- what the tracker answered: its number and link (a webhook: none)
    number         integer,
    url            text,
    issue_state    text,
    assignee_dropped boolean   NOT NULL DEFAULT false,
    -- the issue as last read (GitHub's ETag: a 304 costs no rate limit),
    -- and whether its closing was told in the admin chat
    etag           text,
    synced_at      timestamptz,
    closed_told    boolean     NOT NULL DEFAULT false,
    last_error     text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    pushed_at      timestamptz
);
-- The worker's claim: the due pending pushes, oldest first.
CREATE INDEX task_pushes_due ON task_pushes (not_before, id) WHERE state = 'pending';

-- A tracker's "not before": a kind's ("github": its rate limits, our
-- token refused) or one destination's ("github:owner/repo", gone). No push
-- in its scope is claimed before until, on any replica.
CREATE TABLE task_pauses (
    scope       text        PRIMARY KEY,
    until       timestamptz NOT NULL,
    reason      text        NOT NULL DEFAULT ''
);

-- A member's GitHub login (/github), the assignee a mention of them maps to.
CREATE TABLE github_logins (
    user_id     bigint      PRIMARY KEY,
    login       text        NOT NULL CHECK (login ~ '^[A-Za-z0-9][A-Za-z0-9-]{0,38}$'),
    set_at      timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE github_logins;
DROP TABLE task_pauses;
DROP TABLE task_pushes;
DROP TABLE task_destinations;
