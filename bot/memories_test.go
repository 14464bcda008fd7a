package bot_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e/tgfake"
)

// pressed presses the button labelled label on msg and waits for the
// message to be edited to a text that starts with prefix.
func (env memEnv) pressed(t *testing.T, who *tgfake.Person, msg tgfake.BotMessage, label, prefix string) tgfake.BotMessage {
	t.Helper()
	q, err := who.PressButton(msg, label)
	require.NoError(t, err)
	a := answer(t, env.srv, q)
	require.False(t, a.ShowAlert, a.Text)
	var now tgfake.BotMessage
	env.srv.WaitFor(t, 5*time.Second, func() bool {
		now, _ = env.srv.MessageByID(msg.Chat.ID, msg.MessageID)
		return strings.HasPrefix(now.Text, prefix)
	})
	return now
}

// annWithMemories registers Ann by her talking to the bot once (it only
// shows "typing") and gives her n memories of one week with tags:
// summary(1) to summary(n), the last the newest. It returns Ann and Bob.
func (env memEnv) annWithMemories(t *testing.T, tags []string, n int, summary func(i int) string) (ann, bob *tgfake.Person) {
	t.Helper()
	ann, bob = env.annAndBob()
	ann.SendText(ann.ID(), "remember me")
	env.srv.WaitChatAction(t, 42, "typing")
	for i := 1; i <= n; i++ {
		insertSummary(t, env.st, 42, "2025-03-03T00:00:00Z", tags, summary(i))
	}
	return ann, bob
}

// /memory pages: five memories a page, numbered across pages, a row of
// buttons each and ‹ › to turn; Delete asks in place, then deletes and
// shows the page again; a press by someone else, or on a memory gone,
// changes nothing.
func TestMemoryPagesDeleteAndStalePresses(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	ann, bob := env.annWithMemories(t, []string{}, 7, func(i int) string { return fmt.Sprintf("Memory number %d.", i) })
	page := env.ask(t, ann, "/memory")
	require.True(t, strings.HasPrefix(page.Text, "What I remember about you, newest first (1–5 of 7):\n\n1. "), page.Text)
	require.Contains(t, page.Text, "Memory number 7.")
	require.NotContains(t, page.Text, "Memory number 2.")
	require.Equal(t, []string{"🗑 Delete 1", "✏️ Correct 1", "🗑 Delete 2", "✏️ Correct 2", "🗑 Delete 3", "✏️ Correct 3",
		"🗑 Delete 4", "✏️ Correct 4", "🗑 Delete 5", "✏️ Correct 5", "›"}, page.ReplyMarkup.Labels())
	for _, b := range page.ReplyMarkup.Buttons() {
		require.LessOrEqual(t, len(b.CallbackData), 64)
	}

	next := env.pressed(t, ann, page, "›", "What I remember about you, newest first (6–7 of 7):")
	require.Contains(t, next.Text, "6. ")
	require.Contains(t, next.Text, "Memory number 1.")
	require.Equal(t, []string{"🗑 Delete 6", "✏️ Correct 6", "🗑 Delete 7", "✏️ Correct 7", "‹"}, next.ReplyMarkup.Labels())

	// Bob presses Ann's buttons on his own message: refused.
	bobMsg := env.ask(t, bob, "/memory")
	for _, b := range next.ReplyMarkup.Buttons() {
		a := pressRaw(t, env.srv, bob, bobMsg, b.CallbackData)
		require.Equal(t, "This button is not for you.", a.Text)
	}

	confirm := env.pressed(t, ann, next, "🗑 Delete 7", "Delete this memory?")
	require.Equal(t, "Delete this memory?\n\nMemory number 1.\n\nI will also delete the conversations it was made from "+
		"(your message and my answer) and every copy of its text that I keep. The messages in this chat stay as they are. "+
		"This cannot be undone.", confirm.Text)
	require.Equal(t, []string{"Delete", "Cancel"}, confirm.ReplyMarkup.Labels())
	back := env.pressed(t, ann, confirm, "Cancel", "What I remember about you, newest first (6–7 of 7):")
	confirm = env.pressed(t, ann, back, "🗑 Delete 7", "Delete this memory?")
	yes := confirm.ReplyMarkup.Buttons()[0].CallbackData
	done := env.pressed(t, ann, confirm, "Delete", "Deleted:")
	require.Equal(t, "Deleted: memory versions: 1, conversations: 0.\n\nWhat I remember about you, newest first (6–6 of 6):\n\n6. ", done.Text[:strings.Index(done.Text, "6. ")+3])
	require.Zero(t, count(t, env.st, `SELECT count(*) FROM lsm_storage WHERE summary = 'Memory number 1.'`))

	a := pressRaw(t, env.srv, ann, confirm, yes)
	requireAlert(t, a, "This memory is no longer here: it was deleted or replaced. Send /memory for the current list.")
	require.Equal(t, 6, count(t, env.st, `SELECT count(*) FROM lsm_storage`))
	require.Empty(t, env.srv.UnansweredCallbacks())
}

// Correct: the next private text is the memory's new version, not a chat
// message; History shows both, in the reader's language and zone. In
// Ukrainian, "forget what I told you about" finds it; Keep keeps it.
func TestMemoryCorrectionHistoryAndForgetAbout(t *testing.T) {
	t.Parallel()
	env := setupMemory(t, false)
	olena := env.srv.User(44, "Олена", "uk")
	olena.SendText(olena.ID(), "привіт")
	env.srv.WaitChatAction(t, 44, "typing")
	insertSummary(t, env.st, 44, "2025-03-03T00:00:00Z", []string{"чай"}, "Любить зелений <чай> & мед.")
	exec(t, env.st, `UPDATE lsm_storage SET created_at = '2025-03-04T09:30:00Z'`)
	runs := func() int { return count(t, env.st, `SELECT count(*) FROM pipeline_runs WHERE user_id = 44`) }
	require.Equal(t, 1, runs())

	page := env.ask(t, olena, "/memory")
	require.Equal(t, "Що я про вас пам'ятаю, спочатку нове (1–1 з 1):\n\n1. 4 бер. 2025, 11:30 (Київ) · чай\nЛюбить зелений <чай> & мед.\n\n"+
		"Видалити чи виправити запис можна кнопками з його номером. Ще можна написати «забудь, що я казав(-ла) про …»; /forget видаляє все.", page.Text)
	q, err := olena.PressButton(page, "✏️ Виправити 1")
	require.NoError(t, err)
	answer(t, env.srv, q)
	askFix := env.srv.WaitMessageAfter(t, 44, page.MessageID, nil)
	require.Equal(t, "Надішліть виправлений текст цього запису наступним повідомленням (не більше 1000 символів):\n\n"+
		"Любить зелений <чай> & мед.\n\nСтарий текст залишиться в історії запису. Чекаю півгодини.", askFix.Text)
	require.Equal(t, []string{"Скасувати"}, askFix.ReplyMarkup.Labels())

	fixed := env.ask(t, olena, "Любить чорний чай без цукру")
	require.Equal(t, "Виправлено. Тепер я пам'ятаю:\n\nЛюбить чорний чай без цукру\n\nСтарий текст — в історії запису (/memory).", fixed.Text)
	require.Equal(t, 1, runs(), "the correction is no chat message")
	// The request's Cancel, pressed after the correction was made, says so
	// and goes.
	stale := pressRaw(t, env.srv, olena, askFix, askFix.ReplyMarkup.Buttons()[0].CallbackData)
	require.Equal(t, "Я більше не чекаю на це виправлення: його вже внесено, скасовано або час минув.", stale.Text)
	env.srv.WaitMessage(t, 44, func(m tgfake.BotMessage) bool {
		return m.MessageID == askFix.MessageID && len(m.ReplyMarkup.Buttons()) == 0
	})

	page = env.ask(t, olena, "/memory")
	require.Equal(t, []string{"🗑 Видалити 1", "✏️ Виправити 1", "🕘 Історія 1"}, page.ReplyMarkup.Labels())
	history := env.pressed(t, olena, page, "🕘 Історія 1", "Історія запису")
	require.Regexp(t, `^Історія запису, спочатку нове:\n\nЗараз, з .+ \(Київ\):\nЛюбить чорний чай без цукру\n\n`+
		`З 4 бер\. 2025, 11:30 \(Київ\) до .+ \(Київ\):\nЛюбить зелений <чай> & мед\.$`, history.Text)

	found := env.ask(t, olena, "Забудь, що я казала про чай, будь ласка")
	require.True(t, strings.HasPrefix(found.Text, "Знайшов відповідні записи: 2.\n\n1. "), found.Text)
	require.Contains(t, found.Text, "(неактуальний з ")
	require.Equal(t, []string{"Видалити (2)", "Залишити"}, found.ReplyMarkup.Labels())
	require.Equal(t, 1, runs(), "the request is no chat message")
	kept := env.pressed(t, olena, found, "Залишити", "Залишив")
	require.Empty(t, kept.ReplyMarkup.Buttons())
	a := pressRaw(t, env.srv, olena, found, found.ReplyMarkup.Buttons()[0].CallbackData)
	require.Equal(t, "Це питання вже закрите. Попросіть ще раз, якщо все ще хочете, щоб я це забув.", a.Text)
	require.Equal(t, 2, count(t, env.st, `SELECT count(*) FROM lsm_storage WHERE user_id = 44`))

	// An ordinary message is a chat message again.
	olena.SendText(olena.ID(), "Що порадиш до чаю?")
	require.Eventually(t, func() bool { return runs() == 2 }, 5*time.Second, 20*time.Millisecond)
}
