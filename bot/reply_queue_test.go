package bot_test

import (
	"context"
	"fmt"
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

// helpAfterARefusal has Ann ask /help while the outbox refuses its next
// write, the inbox giving an update attempts runs; it checks that the
// reply reached her once and returns how many runs /help took and how
// many outbox rows its reply has.
func helpAfterARefusal(t *testing.T, attempts int) (runs, queued int) {
	t.Helper()
	st := storagetest.New(t)
	q := &refusingQueue{Queue: st.Outbox()}
	tb := setupDeps(t, bot.Config{InboxAttempts: attempts}, st, bot.Deps{Queue: q}, nil)
	ann := tb.srv.User(42, "Ann", "en")
	tb.ask(t, ann, "/start")
	q.refuse.Store(1)

	help := tb.ask(t, ann, "/help")
	require.Contains(t, help.Text, "/help")

	// /start's update and /help's, both done; a done row keeps neither
	// its chat nor its body, only its id and attempts.
	ctx := context.Background()
	require.Eventually(t, func() bool {
		var done, all int
		require.NoError(t, st.Pool().QueryRow(ctx,
			`SELECT count(*) FILTER (WHERE state = 'done'), count(*) FROM inbox`).Scan(&done, &all))
		return done == 2 && all == 2
	}, time.Minute, 10*time.Millisecond, "/help's update is done")
	var update int64
	require.NoError(t, st.Pool().QueryRow(ctx,
		`SELECT update_id, attempts FROM inbox ORDER BY update_id DESC LIMIT 1`).Scan(&update, &runs))
	require.NoError(t, st.Pool().QueryRow(ctx,
		`SELECT count(*) FROM outbox WHERE chat_id = $1 AND origin = $2`, ann.ID(), fmt.Sprintf("%d.1", update)).Scan(&queued))

	// Nothing more comes: with both runs done and the outbox drained,
	// the reply was sent once.
	tb.settle(t)
	n := 0
	for _, m := range tb.srv.Messages(ann.ID()) {
		if m.Text == help.Text {
			n++
		}
	}
	require.Equal(t, 1, n)
	return runs, queued
}

// A reply the outbox refuses for a passing reason is not sent at once
// while the inbox will run its update again: the rerun writes it under
// its origin, so a third run (this one's done-mark lost as well) could not
// send it twice.
func TestAReplyTheOutboxRefusesWaitsForTheRerun(t *testing.T) {
	t.Parallel()
	runs, queued := helpAfterARefusal(t, 3)
	require.Equal(t, 2, runs, "the first run failed and was retried")
	require.Equal(t, 1, queued, "the reply went through the outbox")
}

// On the update's last attempt the reply is sent at once: a failure then
// would tell the user the command was not carried out.
func TestAReplyTheOutboxRefusesOnTheLastAttemptGoesAtOnce(t *testing.T) {
	t.Parallel()
	runs, queued := helpAfterARefusal(t, 1)
	require.Equal(t, 1, runs)
	require.Zero(t, queued, "sent at once")
}
