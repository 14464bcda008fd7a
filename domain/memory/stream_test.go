package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/domain/domaintest"
	"switchboard/domain/memory"
	"switchboard/llm/llmtest"
)

// drafts records the drafts shown, as Telegram would; refuse makes it
// answer as a server without sendMessageDraft.
type drafts struct {
	mu     sync.Mutex
	shown  []string
	runs   map[int64]bool
	refuse bool
}

func (d *drafts) Draft(_ context.Context, r memory.PipelineRun, text string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.refuse {
		return fmt.Errorf("telegram: 404 Not Found: %w", memory.ErrDraftsRefused)
	}
	if d.runs == nil {
		d.runs = map[int64]bool{}
	}
	d.runs[r.ID] = true
	d.shown = append(d.shown, text)
	return nil
}

func (d *drafts) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.shown...)
}

// slowAnswer is twenty words the scripted responder streams one at a time.
var slowAnswer = strings.TrimSpace(strings.Repeat("word ", 19) + "end.")

// streaming is a world whose responder writes slowAnswer a word every
// chunk, shown every 30 ms.
func streaming(t *testing.T, d *drafts, chunk time.Duration) *bundle {
	t.Helper()
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, StreamEvery: 30 * time.Millisecond}), withDrafts(d))
	// The first rule that matches answers: this one before script's.
	b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").Reply(slowAnswer).ChunkDelay(chunk)
	b.script()
	b.user(t, 1)
	b.start(t, b.svc)
	return b
}

func TestAnswerStreamsAsDraftsThenIsSentOnce(t *testing.T) {
	d := &drafts{}
	b := streaming(t, d, 10*time.Millisecond)
	_, got := b.answered(t, 1, "tell me", 20*time.Second)
	require.Equal(t, memory.Completed, got.Status)

	shown := d.all()
	require.GreaterOrEqual(t, len(shown), 2, "a 200 ms answer shown every 30 ms is shown several times: %q", shown)
	for i := 1; i < len(shown); i++ {
		assert.True(t, strings.HasPrefix(shown[i], shown[i-1]) && shown[i] != shown[i-1], "drafts grow: %q then %q", shown[i-1], shown[i])
	}
	assert.NotEqual(t, slowAnswer, shown[0], "the first draft came while the model wrote")
	assert.False(t, got.Placeholder)
	answers := b.answers(t)
	require.Len(t, answers, 1, "the final answer is sent once")
	assert.Equal(t, "answer: "+slowAnswer, answers[0].Text)
	assert.Equal(t, []int{0}, domaintest.Column[int](t, b.ctx, b.store.Pool(), `SELECT count(*)::int FROM outbox WHERE kind = 'memory_draft'`),
		"drafts never touch the outbox")
}

func TestAnswerStreamsIntoAPlaceholderWhereDraftsAreRefused(t *testing.T) {
	// A placeholder's edits go at most once a second: a 3 s answer.
	b := streaming(t, &drafts{refuse: true}, 150*time.Millisecond)
	_, got := b.answered(t, 1, "tell me", 20*time.Second)
	require.Equal(t, memory.Completed, got.Status)
	assert.True(t, got.Placeholder)

	type row struct {
		Key    string
		Edit   bool
		Text   string
		IfGone string
	}
	rows := domaintest.Rows[row](t, b.ctx, b.store.Pool(), `SELECT msg_key, edit, body->>'text', COALESCE(body->>'if_gone', '')
FROM outbox WHERE ref = $1 ORDER BY id`, got.ID)
	require.GreaterOrEqual(t, len(rows), 4, "placeholder, at least one edit, the answer in two parts: %+v", rows)
	key := fmt.Sprint("answer:", got.ID)
	assert.Equal(t, row{Key: key, Edit: false, Text: rows[0].Text}, rows[0], "the placeholder is sent first")
	assert.True(t, strings.HasPrefix(rows[0].Text, "so far: word"))
	for _, r := range rows[1 : len(rows)-2] {
		assert.True(t, r.Edit && r.Key == key && strings.HasPrefix(r.Text, "so far: "), "then edited: %+v", r)
	}
	last := rows[len(rows)-2] // then "(end)", the answer's second part
	assert.Equal(t, row{Key: key, Edit: true, Text: "answer: " + slowAnswer, IfGone: "send"}, last,
		"the answer replaces the placeholder, or is sent anew if it is gone")
	assert.Len(t, b.answers(t), 1, "one answer")
}

func TestFastAnswerIsNotStreamed(t *testing.T) {
	d := &drafts{}
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, StreamEvery: time.Hour}), withDrafts(d))
	b.script()
	b.user(t, 1)
	b.start(t, b.svc)
	_, got := b.answered(t, 1, "quick", 20*time.Second)
	require.Equal(t, memory.Completed, got.Status)
	assert.Empty(t, d.all(), "an answer written within StreamEvery is only sent")
	assert.Len(t, b.answers(t), 1)
}

func TestFailureNoticeReplacesThePlaceholder(t *testing.T) {
	b := setup(t, withConfig(memory.Config{Workers: 2, StageLease: 30 * time.Second, Backoff: 10 * time.Millisecond,
		SweepInterval: time.Hour, StreamEvery: 30 * time.Millisecond, Attempts: 1}), withDrafts(&drafts{refuse: true}))
	b.llm.On(llmtest.SystemContains("patient, practical mentor")).Named("responder").Reply(slowAnswer).
		ChunkDelay(10 * time.Millisecond).Fault(llmtest.StreamCut())
	b.script()
	b.user(t, 1)
	b.start(t, b.svc)
	_, got := b.answered(t, 1, "tell me", 20*time.Second)
	require.Equal(t, memory.Failed, got.Status)
	assert.True(t, got.Placeholder, "half the answer was shown before the model broke off")
	var edit bool
	var ifGone, text string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT edit, COALESCE(body->>'if_gone', ''), body->>'text'
FROM outbox WHERE ref = $1 AND kind = 'memory_answer'`, got.ID).Scan(&edit, &ifGone, &text))
	assert.Equal(t, "failed", text)
	assert.True(t, edit, "the notice takes the half answer's place")
	assert.Equal(t, "send", ifGone)
}
