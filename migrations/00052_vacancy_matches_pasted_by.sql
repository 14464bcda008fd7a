-- +goose Up
-- The private message whose pasted link last wrote this match's card: that
-- message handled again (its replica died before the update's done-mark)
-- finds its card written instead of writing a second one, while a new
-- paste of the same link, another message, shows the card again.
ALTER TABLE vacancy_matches ADD COLUMN pasted_by bigint;

-- +goose Down
ALTER TABLE vacancy_matches DROP COLUMN pasted_by;
