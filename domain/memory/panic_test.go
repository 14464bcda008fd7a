package memory_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/domaintest"
	"switchboard/domain/memory"
)

// One run whose answer the renderer panics on, among others, on the real
// orchestrator: that run fails at its stage as a failing model's does (the
// user told once, in reply to it), the other users' runs are answered, and
// the orchestrator goes on working: the same user's next message, sent
// after the failure, is answered too. Before the panic was contained, it
// killed the test binary as it killed the process, and after every
// restart the run, captured again, killed it again.
func TestPanicOnOneRunFailsItAndTheOthersGoOn(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1, 2, 3)
	b.chat.panicOn = "boom"
	b.start(t, b.svc)

	bad := b.submit(t, b.svc, 2, "boom")
	b.submit(t, b.svc, 1, "hello")
	b.submit(t, b.svc, 3, "hi")
	b.waitArchived(t, 3, 20*time.Second)

	got := b.run(t, bad.ID)
	require.Equal(t, memory.Failed, got.Status)
	require.True(t, strings.HasPrefix(got.ErrorMessage, "responder: panic: a renderer's bug"), got.ErrorMessage)
	require.False(t, got.DeliveredAt.IsZero(), "closed, so the user's next run may start")
	require.Len(t, b.chat.failures(), 1, "the notice is rendered once")

	after := b.submit(t, b.svc, 2, "and now?")
	b.waitArchived(t, 4, 20*time.Second)
	require.False(t, b.run(t, after.ID).ArchivedAt.IsZero(), "the orchestrator still works, for the same user too")
	require.Equal(t, map[memory.Status]int{memory.Completed: 3, memory.Failed: 1}, b.statuses(t))

	var told []string
	for _, a := range b.answers(t) {
		told = append(told, a.Text)
	}
	require.ElementsMatch(t, []string{"answer: Answer to: hello", "answer: Answer to: hi", "answer: Answer to: and now?"}, told)
	require.Equal(t, 1.0, domaintest.Counter(t, b.reg, "panics_total", "memory_stage"))
	require.Equal(t, 1.0, domaintest.Counter(t, b.reg, "memory_runs_failed_total", "responder"))
}
