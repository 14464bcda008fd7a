package outage

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// notices is admin_notices in memory: a key is told once until it ends.
type notices struct {
	mu   sync.Mutex
	open map[string]bool
	told []string // "start: reason" and "end", in order
	fail bool
}

func (n *notices) Once(_ context.Context, key, text string, _ domain.Render[string]) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail {
		return false, context.DeadlineExceeded
	}
	if n.open[key] {
		return false, nil
	}
	n.open[key] = true
	n.told = append(n.told, "start: "+text)
	return true, nil
}

func (n *notices) End(_ context.Context, key string, _ domain.Render[string]) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail {
		return false, context.DeadlineExceeded
	}
	if !n.open[key] {
		return false, nil
	}
	delete(n.open, key)
	n.told = append(n.told, "end")
	return true, nil
}

func (n *notices) list() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.told...)
}

// The admin chat hears a refusal once however long it lasts, its end once
// the end is certain, and the outbox is woken for each; ended runs then.
func TestWatchTellsStartAndEndOnce(t *testing.T) {
	t.Parallel()
	n := &notices{open: map[string]bool{}}
	var reason atomic.Value
	reason.Store("")
	var over, wakes, ended, polls atomic.Int32
	// afterPolls waits until the watch has read the state n more times.
	afterPolls := func(n int32) {
		from := polls.Load()
		require.Eventually(t, func() bool { return polls.Load() >= from+n }, 5*time.Second, time.Millisecond)
	}
	w := &Watch{
		deps: Deps{Notices: n, Wake: func() { wakes.Add(1) }, Log: slog.New(slog.DiscardHandler)},
		key:  "k", what: "refused", back: "back",
		reason: func() (string, string) { polls.Add(1); return reason.Load().(string), "" },
		over:   func() bool { return over.Load() == 1 },
		notice: func(string, string) []domain.Message { return nil },
		ended:  func() { ended.Add(1) },
		every:  5 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	reason.Store("key refused")
	require.Eventually(t, func() bool { return wakes.Load() >= 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{"start: key refused"}, n.list(), "told once, however many polls see it")

	reason.Store("")
	afterPolls(3) // probing, not yet over
	require.Equal(t, []string{"start: key refused"}, n.list(), "no end while it is not certain")
	over.Store(1)
	require.Eventually(t, func() bool { return ended.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Equal(t, []string{"start: key refused", "end"}, n.list())
	afterPolls(3)
	require.EqualValues(t, 1, ended.Load(), "the end is told once")
}

// An end the store could not record is told again at the next poll.
func TestWatchRetriesAnEndNotRecorded(t *testing.T) {
	t.Parallel()
	n := &notices{open: map[string]bool{"k": true}, fail: true}
	w := &Watch{
		deps: Deps{Notices: n, Wake: func() {}, Log: slog.New(slog.DiscardHandler)},
		key:  "k", notice: func(string, string) []domain.Message { return nil },
	}
	require.False(t, w.tellEnd(context.Background()))
	n.mu.Lock()
	n.fail = false
	n.mu.Unlock()
	require.True(t, w.tellEnd(context.Background()))
	require.Equal(t, []string{"end"}, n.list())
}
