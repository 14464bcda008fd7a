-- +goose Up
-- What the user has heard of a search's first discovery (ARCHITECTURE
-- "Vacancies"): 'pending' until then; 'retrying' once told that the first
-- fetch failed and will be retried; 'told' once the first discovery was
-- saved, with its cards queued or "nothing new yet" written to the outbox
-- in the same transaction. One conditional UPDATE per step, so each search
-- hears each at most once whichever replica gets there. The searches saved
-- before this migration were discovered long ago.
ALTER TABLE searches
    ADD COLUMN first_news text NOT NULL DEFAULT 'told' CHECK (first_news IN ('pending', 'retrying', 'told'));
ALTER TABLE searches ALTER COLUMN first_news SET DEFAULT 'pending';

-- +goose Down
ALTER TABLE searches DROP COLUMN first_news;
