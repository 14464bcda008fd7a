package delivery_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/domain"
)

// A document row's file is built by its kind's hook when the row is sent,
// not when it is written, and uploaded with sendDocument, the row's text
// its caption and the first a reply; a hook that fails for a passing
// reason is retried, one with nothing to send drops its row; the chat's
// order holds throughout.
func TestSenderBuildsDocumentsWhenSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(7_400_001, "Ann")
	var content atomic.Value
	content.Store("written")
	var calls atomic.Int32
	s, err := delivery.NewSender(delivery.Config{Poll: 10 * time.Millisecond}, b.store.Outbox(),
		b.client(), delivery.NewMemoryLimiter(delivery.DefaultLimits()), nil, nil)
	require.NoError(t, err)
	s.OnDocument("export", func(_ context.Context, q domain.Queued) (delivery.Document, error) {
		switch n := calls.Add(1); {
		case q.Document == "gone":
			return delivery.Document{}, delivery.ErrNoDocument
		case n == 1:
			return delivery.Document{}, errors.New("database away")
		}
		return delivery.Document{Name: q.Document + ".txt", Data: []byte(content.Load().(string))}, nil
	})
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: ann.ID(), Kind: "export", Ref: ann.ID(), Text: "<b>first</b>", Document: "first", ReplyTo: 1},
		domain.Message{ChatID: ann.ID(), Kind: "export", Ref: ann.ID(), Text: "never", Document: "gone"},
		domain.Message{ChatID: ann.ID(), Kind: "export", Ref: ann.ID(), Text: "second", Document: "second"},
		domain.Message{ChatID: ann.ID(), Kind: domain.KindReply, Text: "after the files"},
	))
	content.Store("as sent")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	b.waitTexts(t, ann.ID(), 3)
	msgs := b.srv.Messages(ann.ID())
	require.Len(t, msgs, 3)
	require.Equal(t, "first", msgs[0].Caption)
	require.Equal(t, 1, msgs[0].ReplyToID())
	require.Equal(t, "first.txt", msgs[0].File.FileName)
	require.Equal(t, []byte("as sent"), msgs[0].File.Data, "built when sent")
	require.Equal(t, "second", msgs[1].Caption)
	require.Equal(t, "after the files", msgs[2].Text)
	require.Equal(t, "dropped", b.state(t, "never"))
	require.Equal(t, "sent", b.state(t, "<b>first</b>"))
	require.EqualValues(t, 4, calls.Load(), "the first build failed once and was retried")
}
