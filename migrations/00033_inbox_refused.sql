-- +goose Up
-- An update whose body the database refuses for what it holds (a character
-- jsonb cannot store that cleaning missed) is kept as a skeleton of its ids:
-- refused says why, and its worker fails it at once, telling the sender once,
-- instead of intake retrying the refused insert for ever.
ALTER TABLE inbox ADD COLUMN refused text;

-- +goose Down
ALTER TABLE inbox DROP COLUMN refused;
