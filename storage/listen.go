package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen holds one connection of its own (outside the pool, which would
// hand a LISTENing connection to other work) and calls onNotify for every
// notification on channels until ctx ends. NOTIFY is only a hint: it is
// lost while nobody listens, so onConnect runs after every (re)connect, once
// LISTEN is in place, for the caller to sweep its table. A lost connection
// is retried with backoff up to maxBackoff; Listen returns only when ctx ends.
func (s *Store) Listen(ctx context.Context, channels []string, onConnect func(), onNotify func(channel, payload string)) {
	const maxBackoff = 30 * time.Second
	backoff := 250 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channels, onConnect, onNotify)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("listen connection lost, reconnecting", "channels", channels, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (s *Store) listenOnce(ctx context.Context, channels []string, onConnect func(), onNotify func(string, string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	if onConnect != nil {
		onConnect()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		onNotify(n.Channel, n.Payload)
	}
}
