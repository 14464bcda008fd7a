package bot_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/storage/storagetest"
)

// refusingQueue refuses its first enqueues with a passing error (a
// deadline), as an outbox whose database went away for a moment does.
type refusingQueue struct {
	bot.Queue
	refuse atomic.Int32
}

func (q *refusingQueue) Enqueue(ctx context.Context, msgs ...domain.Message) error {
	if q.refuse.Add(-1) >= 0 {
		return fmt.Errorf("enqueue: %w", context.DeadlineExceeded)
	}
	return q.Queue.Enqueue(ctx, msgs...)
}

// A reply the outbox refuses for a passing reason is not sent at once
// while the inbox will run its update again: the rerun writes it under
// its origin, so a third run (this one's done-mark lost as well) could not
// send it twice. On the update's last attempt it is sent at once, since a
// failure then would tell the user the command was not carried out.
func TestAReplyTheOutboxRefusesWaitsForTheRerun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		attempts int
		// queued: the reply went through the outbox, on the second run.
		queued bool
	}{
		{name: "retried", attempts: 3, queued: true},
		{name: "last attempt", attempts: 1, queued: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := storagetest.New(t)
			q := &refusingQueue{Queue: st.Outbox()}
			tb := setupDeps(t, bot.Config{InboxAttempts: tc.attempts}, st, bot.Deps{Queue: q}, nil)
			ann := tb.srv.User(42, "Ann", "en")
			tb.ask(t, ann, "/start")
			q.refuse.Store(1)

			sent := ann.SendText(ann.ID(), "/help")
			help := tb.srv.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
			require.Contains(t, help.Text, "/help")

			ctx := context.Background()
			// /start's update and /help's, both done; a done row keeps
			// neither its chat nor its body, only its id and attempts.
			require.Eventually(t, func() bool {
				var done, all int
				require.NoError(t, st.Pool().QueryRow(ctx,
					`SELECT count(*) FILTER (WHERE state = 'done'), count(*) FROM inbox`).Scan(&done, &all))
				return done == 2 && all == 2
			}, time.Minute, 10*time.Millisecond, "/help's update is done")
			var update int64
			var attempts int
			require.NoError(t, st.Pool().QueryRow(ctx,
				`SELECT update_id, attempts FROM inbox ORDER BY update_id DESC LIMIT 1`).Scan(&update, &attempts))
			var queued int
			require.NoError(t, st.Pool().QueryRow(ctx,
				`SELECT count(*) FROM outbox WHERE chat_id = $1 AND origin = $2`, ann.ID(), fmt.Sprintf("%d.1", update)).Scan(&queued))
			if tc.queued {
				require.Equal(t, 2, attempts, "the first run failed and was retried")
				require.Equal(t, 1, queued, "the reply went through the outbox")
			} else {
				require.Equal(t, 1, attempts)
				require.Zero(t, queued, "sent at once")
			}
			// Nothing more comes: the reply was sent once.
			time.Sleep(300 * time.Millisecond)
			n := 0
			for _, m := range tb.srv.Messages(ann.ID()) {
				if m.Text == help.Text && strings.Contains(m.Text, "/help") {
					n++
				}
			}
			require.Equal(t, 1, n)
		})
	}
}
