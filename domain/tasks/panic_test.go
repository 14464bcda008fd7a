package tasks_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/domaintest"
	"switchboard/domain/tasks"
)

// panicking is a tracker whose filing of one task (the first it is asked
// to file) panics, as a tracker client's bug on one task's data would,
// until off.
type panicking struct {
	tasks.Tracker
	mu  sync.Mutex
	bad string
	off atomic.Bool
}

func (p *panicking) File(ctx context.Context, target string, t tasks.Task) (tasks.Filed, error) {
	p.mu.Lock()
	if p.bad == "" {
		p.bad = t.Title
	}
	bad := p.bad
	p.mu.Unlock()
	if t.Title == bad && !p.off.Load() {
		panic("a tracker's bug on " + t.Title)
	}
	return p.Tracker.File(ctx, target, t)
}

// A push whose filing panics is deferred with backoff, as one that failed,
// the panic in its last_error, and the run goes on to the pushes behind
// it; the retry files it. Before the panic was contained it ended the
// tick's run, leaving the push claimed until its lease ran out, to end a
// run again then, for ever.
func TestPanicInOnePushDefersItAndTheOthersGo(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	tr := &panicking{}
	w.tracker = func(gh tasks.Tracker) tasks.Tracker { tr.Tracker = gh; return tr }
	w.approve(3)
	s := w.service(w.store.Tasks(), time.Minute)
	ctx, cancel := context.WithTimeout(w.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, s.Push(ctx))
	require.Equal(t, 2, w.pushed(), "the pushes behind it are filed")

	var state, why string
	var claimed, later bool
	require.NoError(t, w.store.Pool().QueryRow(w.ctx,
		`SELECT state, last_error, claim_token IS NOT NULL, not_before > now() FROM task_pushes WHERE state <> 'pushed'`).
		Scan(&state, &why, &claimed, &later))
	require.Equal(t, "pending", state)
	require.False(t, claimed, "deferred, not left claimed")
	require.True(t, later, "with backoff")
	require.True(t, strings.HasPrefix(why, "panic: a tracker's bug on "), why)
	require.Equal(t, 1.0, domaintest.Counter(t, w.reg, "panics_total", "tasks_push"))

	tr.off.Store(true)
	_, err := w.store.Pool().Exec(w.ctx, `UPDATE task_pushes SET not_before = now() WHERE state = 'pending'`)
	require.NoError(t, err)
	w.until(s, 3)
}
