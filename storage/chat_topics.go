package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ChatTopics is the chats' workflow topics aggregate (chat_topics): the
// thread the bot created for each workflow in a private chat, which every
// replica's sender reads (it is bot/delivery's Topics; app.go wires it).
type ChatTopics struct{ *db }

// ChatTopics is the store of the chats' workflow topics.
func (s *Store) ChatTopics() *ChatTopics { return &ChatTopics{s.db} }

// Thread is chat's thread for topic; 0 when none is kept.
func (s *ChatTopics) Thread(ctx context.Context, chatID int64, topic string) (int, error) {
	var thread int
	err := s.pool.QueryRow(ctx, `SELECT thread_id FROM chat_topics WHERE chat_id = $1 AND topic = $2`, chatID, topic).Scan(&thread)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("topic %q of chat %d: %w", topic, chatID, err)
	}
	return thread, nil
}

// KeepThread keeps thread as chat's topic unless one is kept already (a
// replica that created it at the same moment); the thread kept.
func (s *ChatTopics) KeepThread(ctx context.Context, chatID int64, topic string, thread int) (int, error) {
	var kept int
	err := s.pool.QueryRow(ctx, `
WITH ins AS (
    INSERT INTO chat_topics (chat_id, topic, thread_id) VALUES ($1, $2, $3)
    ON CONFLICT (chat_id, topic) DO NOTHING
    RETURNING thread_id
)
SELECT thread_id FROM ins
UNION ALL
SELECT thread_id FROM chat_topics WHERE chat_id = $1 AND topic = $2 AND NOT EXISTS (SELECT 1 FROM ins)`,
		chatID, topic, thread).Scan(&kept)
	if err != nil {
		return 0, fmt.Errorf("keep topic %q of chat %d: %w", topic, chatID, err)
	}
	return kept, nil
}

// ForgetThread forgets chat's topic if it is still thread (the user
// deleted it), so the next message creates it again; a newer one another
// replica kept meanwhile stays.
func (s *ChatTopics) ForgetThread(ctx context.Context, chatID int64, topic string, thread int) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM chat_topics WHERE chat_id = $1 AND topic = $2 AND thread_id = $3`,
		chatID, topic, thread); err != nil {
		return fmt.Errorf("forget topic %q of chat %d: %w", topic, chatID, err)
	}
	return nil
}

// TopicAt is the topic chat keeps as thread; "" for none (a topic the
// user made, or one forgotten).
func (s *ChatTopics) TopicAt(ctx context.Context, chatID int64, thread int) (string, error) {
	var topic string
	err := s.pool.QueryRow(ctx, `SELECT topic FROM chat_topics WHERE chat_id = $1 AND thread_id = $2`, chatID, thread).Scan(&topic)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("topic at thread %d of chat %d: %w", thread, chatID, err)
	}
	return topic, nil
}
