package memory_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/internal/testkit"
	"switchboard/llm/llmtest"
)

var rememberedLine = regexp.MustCompile(`(?m)^- (\d+): .*$`)

// remembered parses the archivist's list of current memories: id → line.
func remembered(prompt string) map[string]string {
	_, list, _ := strings.Cut(prompt, "## Remembered about the user now (id: memory)\n")
	out := map[string]string{}
	for _, m := range rememberedLine.FindAllStringSubmatch(list, -1) {
		out[m[1]] = m[0]
	}
	return out
}

// A contradiction: the archivist is shown the user's current memories
// with their ids and names the one the exchange contradicts; the ids it
// forges (another user's memory, one that does not exist) are ignored.
// The next run reads the new fact only.
func TestArchivistSupersedesOnlyWhatItWasShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var bobs int64
	b.llm.On(llmtest.SystemContains("You summarise one exchange"), llmtest.PromptContains("moved from Kyiv")).Named("contradiction").
		ReplyFunc(func(r llmtest.Request) string {
			var ids []string
			for id, line := range remembered(r.Prompt) {
				if strings.Contains(line, "Kyiv") {
					ids = append(ids, id)
				}
			}
			return fmt.Sprintf(`{"summary": "The user moved to Lviv", "tags": ["home"], "supersedes": [%s, %d, 424242]}`,
				strings.Join(ids, ", "), bobs)
		})
	b.script()
	b.start(t, b.svc)
	b.user(t, 1)
	b.user(t, 2)

	b.submit(t, b.svc, 2, "I live in Kyiv as well")
	b.waitArchived(t, 1, 10*time.Second)
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT id FROM lsm_storage WHERE user_id = 2`).Scan(&bobs))
	b.submit(t, b.svc, 1, "I live in Kyiv")
	b.waitArchived(t, 2, 10*time.Second)
	b.submit(t, b.svc, 1, "I moved from Kyiv to Lviv")
	b.waitArchived(t, 3, 10*time.Second)

	shown := remembered(b.prompts("contradiction")[0])
	require.Len(t, shown, 1, "only the user's own current memory is offered")
	for _, line := range shown {
		require.Contains(t, line, "Summary of I live in Kyiv")
	}
	cur, err := b.store.Memories().Summaries(b.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, cur, 1)
	require.Equal(t, "The user moved to Lviv", cur[0].Summary)
	h, err := b.store.Memories().History(b.ctx, 1, cur[0].ID)
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Equal(t, "Summary of I live in Kyiv", h[1].Summary)
	require.Equal(t, cur[0].ID, h[1].SupersededBy)
	bob, err := b.store.Memories().Summaries(b.ctx, 2, 10)
	require.NoError(t, err)
	require.Len(t, bob, 1, "Bob's memory is current still")

	b.submit(t, b.svc, 1, "Where do I live?")
	b.waitArchived(t, 4, 10*time.Second)
	for _, rule := range []string{"analyzer", "responder"} {
		p := b.prompts(rule)
		last := p[len(p)-1]
		require.Contains(t, last, "The user moved to Lviv", rule)
		require.NotContains(t, last, "Summary of I live in Kyiv", rule)
	}
}

// An archivist answer without supersedes (an admin's own prompt) keeps
// every memory; invalid JSON twice archives without a summary, as before.
func TestArchivistWithoutSupersedes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.llm.On(llmtest.SystemContains("You summarise one exchange"), llmtest.PromptContains("garbled")).Named("garbled").
		Reply(`{"summary": `)
	b.script()
	b.start(t, b.svc)
	b.user(t, 1)
	b.submit(t, b.svc, 1, "I live in Kyiv")
	b.waitArchived(t, 1, 10*time.Second)
	b.submit(t, b.svc, 1, "I like Lviv")
	b.waitArchived(t, 2, 10*time.Second)
	b.submit(t, b.svc, 1, "garbled")
	b.waitArchived(t, 3, 10*time.Second)
	require.Len(t, b.llm.RequestsFor("garbled"), 2, "retried once")
	cur, err := b.store.Memories().Summaries(b.ctx, 1, 10)
	require.NoError(t, err)
	require.Len(t, cur, 2)
	require.Contains(t, b.prompts("archivist")[1], "Summary of I live in Kyiv", "offered")
}

func TestForgetTopicIsStrict(t *testing.T) {
	t.Parallel()
	testkit.Recognizes(t, memory.ForgetTopic, map[string]string{
		"forget what I told you about Kyiv":                    "kyiv",
		"Please forget everything I've told you about my job.": "my job",
		"Forget all that I said about the marathon!":           "the marathon",
		"can you forget what I told you about Kyiv?":           "kyiv",
		"забудь, что я говорил про Киев":                       "киев",
		"Забудь всё, что я тебе рассказывала о работе":         "работе",
		"забудьте, пожалуйста, что я говорила про мою собаку":  "мою собаку",
		"забудь, що я казав про Київ":                          "київ",
		"Забудь, що я казала про роботу, будь ласка":           "роботу",
	}, []string{
		"I forget what you told me about Kyiv",
		"Don't forget what I told you about Kyiv",
		"forget it, tell me about Go",
		"forget what I told you about Python, and tell me about Rust",
		"forget what I told you about the one time in the summer camp when it rained",
		"How do I forget what I told you about?",
		"Я забыл, что говорил про Киев",
		"забудь про Киев и расскажи о Львове",
		"forget what I told you about Kyiv\nand what about Lviv",
		"forget",
	})
}

// "Forget what I told you about X" finds current and superseded memories
// by their words (case-folded, endings aside) and deletes them only once
// confirmed by their user; a correction waits for the next text.
func TestForgetAboutAndCorrect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, 1)
	b.user(t, 2)
	insert := func(user int64, text string, tags ...string) int64 {
		var id int64
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary)
VALUES ($1, '2026-11-23', '2026-11-30', $2, $3) RETURNING id`, user, append([]string{}, tags...), text).Scan(&id))
		return id
	}
	kyiv := insert(1, "Живёт в Киеве с семьёй")
	insert(1, "Любит чай", "напитки")
	work := insert(1, "Работает программистом", "работа")
	insert(2, "Тоже живёт в Киеве")
	b.exec(t, `UPDATE lsm_storage SET invalid_at = now(), superseded_by = $2 WHERE id = $1`, kyiv, work)

	topic, ok := memory.ForgetTopic("забудь, что я говорил про Киев")
	require.True(t, ok)
	req, found, err := b.svc.ForgetAbout(b.ctx, 1, 0, topic)
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, kyiv, found[0].ID)
	require.False(t, found[0].Current(), "superseded memories are found too")

	_, ok, err = b.svc.ConfirmForget(b.ctx, 2, req)
	require.NoError(t, err)
	require.False(t, ok, "not Bob's request")
	e, ok, err := b.svc.ConfirmForget(b.ctx, 1, req)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 2, e.Memories, "the superseded memory and the one that replaced it")

	req, found, err = b.svc.ForgetAbout(b.ctx, 1, 0, "напитки")
	require.NoError(t, err)
	require.Len(t, found, 1, "tags count")
	ok, err = b.svc.KeepMemories(b.ctx, 1, req)
	require.NoError(t, err)
	require.True(t, ok)
	req, found, err = b.svc.ForgetAbout(b.ctx, 1, 0, "марафон")
	require.NoError(t, err)
	require.Zero(t, req)
	require.Empty(t, found)

	// Correction: a text too long is refused while one waits, and goes
	// to the chat when none does.
	tea := insert(1, "Любит зелёный чай")
	c, err := b.svc.TakeCorrection(b.ctx, 1, 0, strings.Repeat("я", memory.MaxMemory+1))
	require.NoError(t, err)
	require.Equal(t, memory.CorrectionNone, c.Outcome)
	_, ok, err = b.svc.AskCorrection(b.ctx, 1, tea)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.svc.TakeCorrection(b.ctx, 1, 0, strings.Repeat("я", memory.MaxMemory+1))
	var ie *domain.InputError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "memories.correct_too_long", ie.Key)
	c, err = b.svc.TakeCorrection(b.ctx, 1, 0, "  Любит чёрный чай  ")
	require.NoError(t, err)
	require.Equal(t, memory.CorrectionSaved, c.Outcome)
	require.Equal(t, "Любит чёрный чай", c.New.Summary)
	h, err := b.svc.MemoryHistory(b.ctx, 1, c.New.ID)
	require.NoError(t, err)
	require.Len(t, h, 2)
	_, err = b.svc.MemoryHistory(b.ctx, 2, c.New.ID)
	require.ErrorIs(t, err, domain.ErrNotFound)

	page, err := b.svc.Memories(b.ctx, 1, 7)
	require.NoError(t, err)
	require.Equal(t, memory.MemoryPage{Items: page.Items, Page: 0, Pages: 1, Total: 2}, page, "a page past the end shows the last")
	require.Equal(t, []int64{tea}, page.Items[0].Supersedes)
}

// "Forget what I told you about X" asked again by the same message (its
// update handled again) returns the request it made, with the memories
// that request names though another matches by now: those are what its
// buttons delete.
func TestForgetAboutAgainShowsItsRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(t, 1)
	insert := func(text string) int64 {
		var id int64
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, `INSERT INTO lsm_storage (user_id, time_bucket_start, time_bucket_end, tags, summary)
VALUES (1, '2026-11-23', '2026-11-30', '{}', $1) RETURNING id`, text).Scan(&id))
		return id
	}
	kyiv := insert("Живёт в Киеве")
	req, found, err := b.svc.ForgetAbout(b.ctx, 1, 5, "Киев")
	require.NoError(t, err)
	require.Len(t, found, 1)
	insert("Работает в Киеве")

	again, found, err := b.svc.ForgetAbout(b.ctx, 1, 5, "Киев")
	require.NoError(t, err)
	require.Equal(t, req, again)
	require.Len(t, found, 1)
	require.Equal(t, kyiv, found[0].ID)
	var n int
	require.NoError(t, b.store.Pool().QueryRow(b.ctx, `SELECT count(*) FROM memory_requests`).Scan(&n))
	require.Equal(t, 1, n)

	other, found, err := b.svc.ForgetAbout(b.ctx, 1, 6, "Киев")
	require.NoError(t, err)
	require.NotEqual(t, req, other)
	require.Len(t, found, 2, "a new message asks anew")
}
