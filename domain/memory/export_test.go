package memory_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Runs taken in while incognito is on are answered in their turn, told to
// the renderer as incognito, summarised by nobody, and closed with nothing
// of them left in the tables; the runs between them go on as ever, and no
// later draft sees an incognito exchange.
func TestIncognitoRunsLeaveNoMemoryAndKeepOrder(t *testing.T) {
	t.Parallel()
	b := scripted(t, 1)
	b.llm.SetLatency(10 * time.Millisecond)
	incognito := func(msg int, on bool) {
		t.Helper()
		st, err := b.svc.SetIncognito(b.ctx, 1, msg, &on)
		require.NoError(t, err)
		require.Equal(t, on, st.On)
	}
	// Taken in before the orchestrator runs: each run's mark is fixed at
	// intake, whatever the setting is when it is worked on.
	for i := range 4 {
		incognito(1000+i, i%2 == 0)
		_, _, err := b.svc.Submit(b.ctx, 1, 1, 100+i, fmt.Sprintf("message %d secret-%d", i, i%2))
		require.NoError(t, err)
	}
	b.start(t, b.svc)
	b.waitArchived(t, 4, 20*time.Second)

	var order []string
	for _, a := range b.answers(t) {
		order = append(order, strings.TrimPrefix(a.Text, "answer: Answer to: "))
	}
	require.Equal(t, []string{"message 0 secret-0", "message 1 secret-1", "message 2 secret-0", "message 3 secret-1"}, order,
		"answered in order")
	b.chat.mu.Lock()
	for _, r := range b.chat.rendered {
		require.Equal(t, strings.Contains(r.Query, "secret-0"), r.Incognito, r.Query)
	}
	b.chat.mu.Unlock()

	require.Equal(t, 2, b.llm.Calls("archivist"), "only the remembered exchanges are summarised")
	sums, err := b.svc.Memory(b.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, sums, 2)
	var leftovers int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT
    (SELECT count(*) FROM raw_logs WHERE log_data::text LIKE '%secret-0%')
  + (SELECT count(*) FROM lsm_storage WHERE summary LIKE '%secret-0%')
  + (SELECT count(*) FROM pipeline_runs WHERE concat(user_query, draft_context, final_context_payload, final_answer, analysis_result::text) LIKE '%secret-0%')
  + (SELECT count(*) FROM pipeline_runs WHERE incognito AND (archived_at IS NULL OR closed_at IS NULL OR claimed_until IS NOT NULL))`).Scan(&leftovers))
	require.Zero(t, leftovers, "nothing of the incognito exchanges is left but their outbox rows, which go once delivered")

	for _, p := range append(b.prompts("analyzer"), b.prompts("assembler")...) {
		if strings.Contains(p, "message 3") {
			require.NotContains(t, p, "message 0", "a later run never sees an incognito exchange")
			require.NotContains(t, p, "message 2")
		}
	}
	drafts := b.prompts("assembler")
	require.Contains(t, drafts[len(drafts)-1], "User: message 1 secret-1", "while it sees the remembered one")
}
