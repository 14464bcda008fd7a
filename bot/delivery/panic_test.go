package delivery_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/domaintest"
)

// A row whose delivery panics (here its document hook, on one file) is
// failed at once as a bug, with the panic in last_error: the rows behind it
// in its chat's lane go out, other chats' too, and the sender goes on
// delivering what is written afterwards. Before the panic was contained, it
// killed the test binary as it killed the process, and the row, claimed
// again after every restart, killed it again.
func TestSenderSetsAsideARowWhoseDeliveryPanics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(7_400_011, "Ann")
	bob := b.user(7_400_012, "Bob")
	reg := prometheus.NewRegistry()
	s, err := delivery.NewSender(delivery.Config{Poll: 10 * time.Millisecond}, b.store.Outbox(),
		b.client(), delivery.NewMemoryLimiter(delivery.DefaultLimits()), slog.New(slog.DiscardHandler), reg)
	require.NoError(t, err)
	var builds atomic.Int32
	s.OnDocument("export", func(_ context.Context, q domain.Queued) (delivery.Document, error) {
		builds.Add(1)
		if q.Document == "boom" {
			var d *delivery.Document
			return *d, nil // a hook's bug on one file: a nil dereference
		}
		return delivery.Document{Name: q.Document + ".txt", Data: []byte("data")}, nil
	})
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: ann.ID(), Kind: "export", Ref: ann.ID(), Text: "the bad file", Document: "boom"},
		domain.Message{ChatID: ann.ID(), Kind: domain.KindReply, Text: "behind it"},
		note(bob.ID(), "bob's"),
	))
	start(t, s)

	require.Equal(t, []string{"behind it"}, b.waitTexts(t, ann.ID(), 1), "the chat's lane is not held")
	require.Equal(t, []string{"bob's"}, b.waitTexts(t, bob.ID(), 1))
	require.Equal(t, "failed", b.state(t, "the bad file"))
	var why string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT last_error FROM outbox WHERE state = 'failed'`).Scan(&why))
	require.Contains(t, why, "panic: runtime error: invalid memory address")

	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: ann.ID(), Kind: "export", Ref: ann.ID(), Text: "a good file", Document: "fine"}))
	b.waitTexts(t, ann.ID(), 2)
	require.Equal(t, "a good file", b.srv.Messages(ann.ID())[1].Caption, "the sender still works")
	require.EqualValues(t, 2, builds.Load(), "the bad row was never tried again")
	require.Equal(t, 1.0, domaintest.Counter(t, reg, "panics_total", "outbox_row"))
	require.Equal(t, 1.0, domaintest.Counter(t, reg, "outbox_failed_total", "export"))
}

// A drop hook that panics for one dropped row does not skip the hooks of
// the chat's other rows dropped with it.
func TestSenderDropHookPanicSkipsNoOtherHook(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(7_400_013, "Ann")
	ann.Block()
	var hooked atomic.Int64
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx,
		domain.Message{ChatID: ann.ID(), Kind: domain.KindOffer, Ref: 41, Text: "first offer"},
		domain.Message{ChatID: ann.ID(), Kind: domain.KindOffer, Ref: 42, Text: "second offer"}))
	s := b.sender(t, b.store.Outbox(), delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	s.OnDrop(domain.KindOffer, func(_ context.Context, ref int64) {
		if ref == 41 {
			panic("a drop hook's bug on offer 41")
		}
		hooked.Store(ref)
	})
	start(t, s)
	require.Eventually(t, func() bool { return hooked.Load() == 42 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, "dropped", b.state(t, "first offer"))
	require.Equal(t, "dropped", b.state(t, "second offer"))
}
