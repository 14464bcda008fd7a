package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"switchboard/domain/analysis"
)

// GroupChats is the group chats aggregate: the groups the bot is in and
// the messages it read there, which an analysis run's window reads. It
// implements analysis.Chats.
type GroupChats struct{ *db }

// GroupChats is the store of the group chats and their messages.
func (s *Store) GroupChats() *GroupChats { return &GroupChats{s.db} }

var _ analysis.Chats = (*GroupChats)(nil)

// SaveMessage stores a group message; the same message again (an edit)
// updates its text and edited_at. A group not tracked yet is added, so
// that /chats lists it.
func (s *GroupChats) SaveMessage(ctx context.Context, m analysis.GroupMessage) error {
	_, err := s.pool.Exec(ctx, `
WITH chat AS (
    INSERT INTO group_chats (id) VALUES ($1) ON CONFLICT (id) DO NOTHING
)
INSERT INTO group_messages AS g (`+groupMessageColumns+`) VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (chat_id, message_id) DO UPDATE SET text = EXCLUDED.text, edited_at = now()
WHERE g.text IS DISTINCT FROM EXCLUDED.text`, m.ChatID, m.MessageID, m.AuthorID, m.Author, m.Text, m.Date)
	if err != nil {
		return fmt.Errorf("save message %d/%d: %w", m.ChatID, m.MessageID, err)
	}
	return nil
}

// EditMessage updates a stored message's text; false if it is not stored.
func (s *GroupChats) EditMessage(ctx context.Context, chatID, messageID int64, text string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE group_messages SET text = $3, edited_at = now()
WHERE chat_id = $1 AND message_id = $2`, chatID, messageID, text)
	if err != nil {
		return false, fmt.Errorf("edit message %d/%d: %w", chatID, messageID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Track records a group the bot is in, with its title and whether the
// bot can read ordinary messages there.
func (s *GroupChats) Track(ctx context.Context, id int64, title string, canRead bool) error {
	_, err := s.pool.Exec(ctx, `
INSERT INTO group_chats (id, title, can_read) VALUES ($1, $2, $3)
ON CONFLICT (id) DO UPDATE SET title = EXCLUDED.title, can_read = EXCLUDED.can_read, updated_at = now()`,
		id, title, canRead)
	if err != nil {
		return fmt.Errorf("track chat %d: %w", id, err)
	}
	return nil
}

// List lists the tracked groups with their message counts and last
// message dates, the most recently active first (groups without messages
// last, by id).
func (s *GroupChats) List(ctx context.Context) ([]analysis.Chat, error) {
	rows, err := s.pool.Query(ctx, `
SELECT c.id, c.title, c.can_read, COALESCE(m.n, 0), m.last_at
FROM group_chats c
LEFT JOIN (SELECT chat_id, count(*) AS n, max(date) AS last_at FROM group_messages GROUP BY chat_id) m
    ON m.chat_id = c.id
ORDER BY m.last_at DESC NULLS LAST, c.id`)
	if err != nil {
		return nil, fmt.Errorf("chats: %w", err)
	}
	var c analysis.Chat
	var last pgtype.Timestamptz
	var out []analysis.Chat
	_, err = pgx.ForEachRow(rows, []any{&c.ID, &c.Title, &c.CanRead, &c.Messages, &last}, func() error {
		c.LastAt = tsValue(last)
		out = append(out, c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chats: %w", err)
	}
	return out, nil
}

// Window returns the messages dated in [from, to) (of one chat if
// chatID is not 0) oldest first, leaving out those a proposal of another
// run cites.
func (s *GroupChats) Window(ctx context.Context, runID int64, from, to time.Time, chatID int64) ([]analysis.GroupMessage, error) {
	chat := ``
	args := []any{runID, from, to}
	if chatID != 0 {
		chat = ` AND m.chat_id = $4`
		args = append(args, chatID)
	}
	rows, err := s.pool.Query(ctx, `
SELECT `+prefixed("m", groupMessageColumns)+`
FROM group_messages m
WHERE m.date >= $2 AND m.date < $3`+chat+`
  AND NOT EXISTS (SELECT 1 FROM analysis_proposal_sources s
                  WHERE s.chat_id = m.chat_id AND s.message_id = m.message_id AND s.run_id <> $1)
ORDER BY m.date, m.chat_id, m.message_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("window messages of run %d: %w", runID, err)
	}
	var m analysis.GroupMessage
	var out []analysis.GroupMessage
	_, err = pgx.ForEachRow(rows, []any{&m.ChatID, &m.MessageID, &m.AuthorID, &m.Author, &m.Text, &m.Date}, func() error {
		m.Date = m.Date.UTC()
		out = append(out, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("window messages of run %d: %w", runID, err)
	}
	return out, nil
}
