-- +goose Up
-- A first discovery that queued matches for the user is not news yet: its
-- matches may all be judged not relevant, dropped by a ban word or
-- archived, and then the user must hear "nothing new yet" (ARCHITECTURE
-- "Vacancies", first news). Such a search is 'waiting' with the ids of
-- those matches in first_matches until a card of one is delivered (told,
-- no note) or every one ended without a card (told, with the note).
ALTER TABLE searches DROP CONSTRAINT searches_first_news_check;
ALTER TABLE searches ADD CONSTRAINT searches_first_news_check
    CHECK (first_news IN ('pending', 'retrying', 'waiting', 'told'));
ALTER TABLE searches ADD COLUMN first_matches bigint[];
-- The first-news sweep reads the few searches not told yet every
-- FIRST_NEWS_INTERVAL.
CREATE INDEX searches_first_news ON searches (search_key) WHERE first_news <> 'told';

-- +goose Down
DROP INDEX searches_first_news;
UPDATE searches SET first_news = 'pending' WHERE first_news = 'waiting';
ALTER TABLE searches DROP COLUMN first_matches;
ALTER TABLE searches DROP CONSTRAINT searches_first_news_check;
ALTER TABLE searches ADD CONSTRAINT searches_first_news_check
    CHECK (first_news IN ('pending', 'retrying', 'told'));
