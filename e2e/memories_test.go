package e2e_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
)

// noID is an id no row has: holding then looks for the marker alone.
const noID = 987_654_321_987

var rememberedID = regexp.MustCompile(`(?m)^- (\d+): (.*)$`)

// scriptContradiction makes the archivist supersede, when the user says
// they moved, the remembered memories that mention Kyiv: it reads their
// ids from the list it is shown, as a model would.
func scriptContradiction(env *e2e.Env) {
	env.LLM.On(llmtest.SystemContains("You summarise one exchange"), llmtest.PromptContains("I moved")).Named("contradiction").
		ReplyFunc(func(r llmtest.Request) string {
			_, list, _ := strings.Cut(r.Prompt, "## Remembered about the user now")
			var ids []string
			for _, m := range rememberedID.FindAllStringSubmatch(list, -1) {
				if strings.Contains(m[2], "Kyiv") {
					ids = append(ids, m[1])
				}
			}
			return fmt.Sprintf(`{"summary": "The user now lives in Lviv", "tags": ["home"], "supersedes": [%s]}`, strings.Join(ids, ", "))
		})
}

// chatWith has who write text to the bot and waits for the answer.
func chatWith(t *testing.T, env *e2e.Env, who *tgfake.Person, text string) tgfake.BotMessage {
	t.Helper()
	q := who.SendText(who.ID(), text)
	return env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
}

func waitArchived(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE archived_at IS NOT NULL`) == n
	})
}

// edited waits until the message's text satisfies ok and returns it.
func edited(t *testing.T, env *e2e.Env, chat int64, id int, ok func(string) bool) tgfake.BotMessage {
	t.Helper()
	var m tgfake.BotMessage
	env.TG.WaitFor(t, 20*time.Second, func() bool {
		m, _ = env.TG.MessageByID(chat, id)
		return ok(m.Text)
	})
	return m
}

// A memory deleted with its button is gone from every table, together
// with the exchange it was made from and the copies a later run's context
// made of it; the other memory stays. Bob cannot press Ann's buttons; a
// second press finds the memory gone.
func TestMemoryDeletedByButtonLeavesNoCopy(t *testing.T) {
	t.Parallel()
	const marker = "walrus-quartz-7400"
	env := e2e.New(t)
	scriptMemory(env)
	env.Start(nil)
	pool := db(t, env)
	ann := env.TG.User(7_400_001, "Ann", "en")
	bob := env.TG.User(7_400_002, "Bob", "en")

	chatWith(t, env, ann, "I live in Kyiv by the river "+marker)
	waitArchived(t, pool, 1)
	chatWith(t, env, ann, "I train for a marathon")
	waitArchived(t, pool, 2)
	require.Positive(t, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE strpos(draft_context, $1) > 0`, marker),
		"the second run's context quoted the first exchange")

	page := ask(t, env, ann, ann.ID(), "/memory")
	t.Logf("page: %q buttons %v", page.Text, page.ReplyMarkup.Buttons())
	require.Contains(t, page.Text, "1. ")
	require.Contains(t, page.Text, "2. ")
	require.Contains(t, page.Text, "The user said: I live in Kyiv by the river "+marker)

	// Bob forges Ann's delete on his own /memory message.
	var data string
	for _, b := range page.ReplyMarkup.Buttons() {
		if b.Text == "🗑 Delete 2" {
			data = b.CallbackData
		}
	}
	require.NotEmpty(t, data)
	bobPage := ask(t, env, bob, bob.ID(), "/memory")
	require.Equal(t, "I remember nothing about you yet.", bobPage.Text)
	forged := bob.PressRaw(bobPage, data)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)

	q, err := ann.PressButton(page, "🗑 Delete 2")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	confirm := edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "Delete this memory?") })
	t.Logf("confirmation: %q", confirm.Text)
	require.Contains(t, confirm.Text, "The user said: I live in Kyiv by the river "+marker)
	require.Contains(t, confirm.Text, "the conversations it was made from (your message and my answer)")
	q, err = ann.PressButton(confirm, "Delete")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert)
	after := edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "Deleted:") })
	t.Logf("after: %q", after.Text)
	require.True(t, strings.HasPrefix(after.Text, "Deleted: memory versions: 1, conversations: 1.\n\nWhat I remember about you, newest first (1–1 of 1):"), after.Text)
	require.Contains(t, after.Text, "The user said: I train for a marathon")
	require.NotContains(t, after.Text, marker)

	// The same press again: the memory is gone.
	again := ann.PressRaw(confirm, confirm.ReplyMarkup.Buttons()[0].CallbackData)
	a := env.TG.WaitCallbackAnswer(t, again.ID)
	require.True(t, a.ShowAlert)
	require.Equal(t, "This memory is no longer here: it was deleted or replaced. Send /memory for the current list.", a.Text)

	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, noID), "no table holds the deleted memory, its exchange or a copy")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`))
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`), "the marathon exchange stays")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM raw_logs`))
}

// "Forget what I told you about X", in Russian: the message is no chat
// message (no run, nothing logged); the bot lists what matches and
// deletes it once confirmed, leaving no copy anywhere. A topic it knows
// nothing of is said so; an ordinary sentence with "забудь" is chatted with.
func TestMemoryForgottenByPlainWords(t *testing.T) {
	t.Parallel()
	const marker = "зебра-кварц-7400"
	env := e2e.New(t)
	scriptMemory(env)
	env.Start(nil)
	pool := db(t, env)
	ivan := env.TG.User(7_400_011, "Иван", "ru")

	chatWith(t, env, ivan, "Я живу в Киеве, "+marker)
	waitArchived(t, pool, 1)
	chatWith(t, env, ivan, "Я пью чай по утрам")
	waitArchived(t, pool, 2)

	none := ask(t, env, ivan, ivan.ID(), "Забудь, что я говорил про Марс")
	t.Logf("none: %q", none.Text)
	require.Equal(t, "В том, что я о вас помню, ничего такого нет — забывать нечего.", none.Text)
	found := ask(t, env, ivan, ivan.ID(), "забудь, пожалуйста, что я говорил про Киев")
	t.Logf("found: %q buttons %v", found.Text, found.ReplyMarkup.Buttons())
	require.True(t, strings.HasPrefix(found.Text, "Нашёл подходящие записи: 1."), found.Text)
	require.Contains(t, found.Text, "The user said: Я живу в Киеве, "+marker)
	require.Contains(t, found.Text, "разговорами, из которых составлена (ваши сообщения и мои ответы)")
	require.NotContains(t, found.Text, "Киев\n", "the topic itself is not repeated")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`), "neither request became a run")
	require.Equal(t, 4, scalar[int](t, pool, `SELECT count(*) FROM raw_logs`))

	q, err := ivan.PressButton(found, "Удалить (1)")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, q.ID).ShowAlert)
	done := edited(t, env, ivan.ID(), found.MessageID, func(s string) bool { return strings.HasPrefix(s, "Забыто.") })
	t.Logf("done: %q", done.Text)
	require.Equal(t, "Забыто. Удалено: версий записей — 1, разговоров — 1.", done.Text)
	require.Empty(t, done.ReplyMarkup.Buttons())

	// "Забудь" in an ordinary sentence goes to the chat.
	chatWith(t, env, ivan, "Не забудь напомнить мне про Киев")
	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, noID), "no table holds the forgotten memory, its exchange or a copy")
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`))
}

// A contradiction: "I moved from Kyiv to Lviv" makes the archivist
// supersede the memory about Kyiv, which stays as history; the next
// answer's prompt has Lviv as what is remembered and no longer Kyiv.
// /memory shows the history with when each version was true, and a
// correction (the user's next text after Correct) supersedes again
// without becoming a chat message.
func TestContradictionSupersedesAndCorrection(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	scriptContradiction(env)
	scriptMemory(env)
	env.Start(nil)
	pool := db(t, env)
	ann := env.TG.User(7_400_021, "Ann", "en")

	chatWith(t, env, ann, "I live in Kyiv")
	waitArchived(t, pool, 1)
	chatWith(t, env, ann, "I moved from Kyiv to Lviv")
	waitArchived(t, pool, 2)
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage WHERE invalid_at IS NOT NULL
AND summary = 'The user said: I live in Kyiv' AND superseded_by = (SELECT id FROM lsm_storage WHERE summary = 'The user now lives in Lviv')`))
	chatWith(t, env, ann, "Where should I go running?")
	prompts := env.LLM.RequestsFor("responder")
	last := prompts[len(prompts)-1].Prompt
	require.Contains(t, last, "The user now lives in Lviv")
	require.NotContains(t, last, "The user said: I live in Kyiv", "the superseded memory is not current")
	waitArchived(t, pool, 3)

	page := ask(t, env, ann, ann.ID(), "/memory")
	t.Logf("page: %q buttons %v", page.Text, page.ReplyMarkup.Buttons())
	require.NotContains(t, page.Text, "The user said: I live in Kyiv")
	q, err := ann.PressButton(page, "🕘 History 2")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	history := edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "History of this memory") })
	t.Logf("history: %q", history.Text)
	require.Regexp(t, `Now, since \d+ \w+, \d\d:\d\d \(UTC\):\nThe user now lives in Lviv\n\nFrom \d+ \w+, \d\d:\d\d \(UTC\) until \d+ \w+, \d\d:\d\d \(UTC\):\nThe user said: I live in Kyiv`, history.Text)
	q, err = ann.PressButton(history, "‹ Back")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	page = edited(t, env, ann.ID(), page.MessageID, func(s string) bool { return strings.HasPrefix(s, "What I remember") })

	q, err = ann.PressButton(page, "✏️ Correct 2")
	require.NoError(t, err)
	env.TG.WaitCallbackAnswer(t, q.ID)
	askFix := env.TG.WaitMessageAfter(t, ann.ID(), page.MessageID, func(m tgfake.BotMessage) bool {
		return strings.HasPrefix(m.Text, "Send me the corrected text")
	})
	t.Logf("ask: %q", askFix.Text)
	fixed := ask(t, env, ann, ann.ID(), "Ann lives in Lviv, near Rynok Square")
	t.Logf("fixed: %q", fixed.Text)
	require.Equal(t, "Corrected. I remember now:\n\nAnn lives in Lviv, near Rynok Square\n\nThe old text is in the memory's history (/memory).", fixed.Text)
	require.Equal(t, 3, scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs`), "the correction is no chat message")
	require.Equal(t, []string{"Ann lives in Lviv, near Rynok Square", "The user said: Where should I go running?"},
		strings.Split(scalar[string](t, pool, `SELECT string_agg(summary, '|' ORDER BY summary) FROM lsm_storage WHERE invalid_at IS NULL`), "|"))
	require.Equal(t, 4, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`), "Kyiv and the first Lviv kept as history")
	// Its Cancel, pressed late, changes nothing.
	late := ann.PressRaw(askFix, askFix.ReplyMarkup.Buttons()[0].CallbackData)
	require.Equal(t, "This correction is no longer waiting: it was made, cancelled or timed out.", env.TG.WaitCallbackAnswer(t, late.ID).Text)
}
