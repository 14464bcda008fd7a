-- +goose Up
-- The job seeker's pipeline (domain/vacancy/pipeline.go): after APPLIED the
-- person reports INVITED, OFFER, REJECTED or NO_ANSWER. The times are the
-- service's clock, written by the statements that move a match:
-- applied_at and invited_at when those were reported (the funnel counts
-- how far an application got from them), reported_at when its current
-- status was, and followed_up_at when the reminder of the current waiting
-- period was sent (cleared by every report, which starts a new period).
ALTER TABLE vacancy_matches
    ADD COLUMN applied_at     timestamptz,
    ADD COLUMN invited_at     timestamptz,
    ADD COLUMN reported_at    timestamptz,
    ADD COLUMN followed_up_at timestamptz;

-- Applications made before the pipeline existed start it where they are.
-- Those older than the default follow-up period count as reminded: a
-- deployment would otherwise greet every old applicant with reminders at
-- once; the recent ones get theirs when it is due.
UPDATE vacancy_matches SET applied_at = updated_at, reported_at = updated_at,
    followed_up_at = CASE WHEN updated_at < now() - interval '7 days' THEN now() END
WHERE status = 'APPLIED';

ALTER TABLE vacancy_matches
    DROP CONSTRAINT vacancy_matches_status_check,
    ADD CONSTRAINT vacancy_matches_status_check CHECK (status IN ('NEW', 'QUEUED', 'ANALYZED', 'SENT_TO_USER',
        'SKIPPED', 'NOT_SUITABLE', 'IN_ARCHIVE', 'APPLIED', 'NOT_INTERESTED', 'NO_ANSWER', 'INVITED', 'OFFER',
        'REJECTED')),
    ADD CONSTRAINT vacancy_matches_application_times CHECK (
        status NOT IN ('APPLIED', 'NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED')
        OR (applied_at IS NOT NULL AND reported_at IS NOT NULL)),
    ADD CONSTRAINT vacancy_matches_invited_at CHECK (status NOT IN ('INVITED', 'OFFER') OR invited_at IS NOT NULL);

-- The taste the claim reads (storage/applications.go tasteLiked): every
-- application, however far it got, and every vacancy turned down.
DROP INDEX vacancy_matches_taste;
CREATE INDEX vacancy_matches_taste ON vacancy_matches (user_id, status, updated_at DESC)
    WHERE status IN ('APPLIED', 'NOT_INTERESTED', 'NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED');

-- The follow-up job's walk: applications waiting without a reminder in
-- this period, the longest waiting first.
CREATE INDEX vacancy_matches_follow_up ON vacancy_matches (reported_at, id)
    WHERE status IN ('APPLIED', 'INVITED') AND followed_up_at IS NULL;

-- /applications: one user's applications of the last 30 days.
CREATE INDEX vacancy_matches_applied ON vacancy_matches (user_id, applied_at) WHERE applied_at IS NOT NULL;

-- +goose Down
DROP INDEX vacancy_matches_applied;
DROP INDEX vacancy_matches_follow_up;
DROP INDEX vacancy_matches_taste;
UPDATE vacancy_matches SET status = 'APPLIED' WHERE status IN ('NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED');
ALTER TABLE vacancy_matches
    DROP CONSTRAINT vacancy_matches_invited_at,
    DROP CONSTRAINT vacancy_matches_application_times,
    DROP CONSTRAINT vacancy_matches_status_check,
    ADD CONSTRAINT vacancy_matches_status_check CHECK (status IN ('NEW', 'QUEUED', 'ANALYZED', 'SENT_TO_USER',
        'SKIPPED', 'NOT_SUITABLE', 'IN_ARCHIVE', 'APPLIED', 'NOT_INTERESTED')),
    DROP COLUMN followed_up_at,
    DROP COLUMN reported_at,
    DROP COLUMN invited_at,
    DROP COLUMN applied_at;
CREATE INDEX vacancy_matches_taste ON vacancy_matches (user_id, status, updated_at DESC)
    WHERE status IN ('APPLIED', 'NOT_INTERESTED');
