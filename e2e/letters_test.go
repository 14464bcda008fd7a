package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
)

// The scripted model's letters: a draft, another version, a shorter one.
const (
	letterDraft   = "Dear ACME team,\n\nI have written **Go** for five years, mostly services on PostgreSQL, which is what this role asks for.\n\nI would be glad to talk.\n\nAnn"
	letterAnother = "Hello,\n\nGo services on PostgreSQL have been my work for five years; your vacancy asks for exactly that.\n\nLet us talk.\n\nAnn"
	letterShort   = "Hello,\n\nFive years of Go and PostgreSQL, as your vacancy asks. Happy to talk.\n\nAnn"
)

// writer scripts the letter rule: its answer follows the task the prompt
// asks for, as a model's would.
func writer(env *e2e.Env) *llmtest.Rule {
	return env.LLM.On(llmtest.SystemContains("cover letter")).Named("letter").ReplyFunc(func(r llmtest.Request) string {
		switch {
		case strings.Contains(r.Prompt, "half its length"):
			return letterShort
		case strings.Contains(r.Prompt, "new version"):
			return letterAnother
		}
		return letterDraft
	})
}

// letterMessage waits for the letter message that arrives after afterID.
func letterMessage(t *testing.T, env *e2e.Env, chatID int64, afterID int, text string) tgfake.BotMessage {
	t.Helper()
	return env.TG.WaitMessageAfter(t, chatID, afterID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Cover letter") && strings.Contains(m.Text, text)
	})
}

func hasPre(m tgfake.BotMessage, text string) bool {
	for _, e := range m.Entities {
		if e.Type == "pre" && strings.Contains(utf16Slice(m.Text, e.Offset, e.Length), text) {
			return true
		}
	}
	return false
}

// The letter scenario through the built binary: the card says the
// employer requires a letter and carries the apply link; a press drafts a
// letter that arrives in a copyable block with the apply link, Another
// version and Shorter redraft it; a direct vacancy's letter links the
// employer's site. Each letter's tokens are stored with it.
func TestCoverLetterDraftedRegeneratedAndShortened(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	writer(env)
	vs := golangVacancies(2, 7800)
	vs[0].ResponseLetterRequired, vs[0].HasTest = true, false
	vs[1].ResponseLetterRequired, vs[1].HasTest = false, false
	vs[1].ResponseURL = "https://jobs.example.com/apply/7801"
	env.HH.Add(vs...)
	pool := startHourly(t, env)

	ann := seeker(t, env, 801)
	card := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "developer 7800") })
	direct := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "developer 7801") })
	require.Contains(t, card.Text, "📝 The employer requires a cover letter.")
	require.NotContains(t, direct.Text, "requires")
	require.Contains(t, describe(card), "📨 Apply on hh.ru→https://hh.ru/applicant/vacancy_response?vacancyId=7800")
	require.Contains(t, describe(direct), "📨 Apply on employer's site→https://jobs.example.com/apply/7801")

	ans := ann.PressAndWait(t, card, "✍️ Cover letter")
	require.False(t, ans.ShowAlert)
	require.Equal(t, "✍️ Writing your cover letter… It will arrive in this chat shortly.", ans.Text)
	first := letterMessage(t, env, ann.ID(), direct.MessageID, "five years, mostly services")
	require.True(t, hasPre(first, "I have written Go for five years"), "the letter is one <pre> block, Markdown made plain")
	require.True(t, strings.HasPrefix(first.Text, "✍️ Cover letter: Golang developer 7800"), first.Text)
	require.Contains(t, describe(first), "📨 Apply on hh.ru→https://hh.ru/applicant/vacancy_response?vacancyId=7800")

	require.False(t, ann.PressAndWait(t, first, "🔄 Another version").ShowAlert)
	second := letterMessage(t, env, ann.ID(), first.MessageID, "version 2")
	require.True(t, hasPre(second, "have been my work for five years"))
	req := env.LLM.RequestsFor("letter")[1]
	require.Contains(t, req.Prompt, "I have written **Go** for five years", "another version starts from the first")

	require.False(t, ann.PressAndWait(t, second, "✂️ Shorter").ShowAlert)
	third := letterMessage(t, env, ann.ID(), second.MessageID, "version 3")
	require.True(t, hasPre(third, "Five years of Go and PostgreSQL, as your vacancy asks."))

	ann.PressAndWait(t, direct, "✍️ Cover letter")
	fourth := letterMessage(t, env, ann.ID(), third.MessageID, "developer 7801")
	require.Contains(t, describe(fourth), "📨 Apply on employer's site→https://jobs.example.com/apply/7801")

	var n, in, out int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*), min(tokens_in), min(tokens_out)
FROM cover_letters WHERE state = 'ready'`).Scan(&n, &in, &out))
	require.Equal(t, 4, n)
	require.Positive(t, in)
	require.Positive(t, out)
	rows, err := pool.Query(context.Background(), `SELECT style, tokens_in, tokens_out FROM cover_letters ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var style string
		require.NoError(t, rows.Scan(&style, &in, &out))
		t.Logf("letter %s: %d prompt tokens, %d answer tokens (scripted model)", style, in, out)
	}
	require.NoError(t, rows.Err())
}

// Over the daily limit a press is answered with the limit and when the next
// letter is possible, and writes nothing; another user's forged press on
// the card's data is refused; the model failing is told with a button that
// drafts it when pressed again.
func TestCoverLetterLimitForgeryAndFailure(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	rule := writer(env).Fault(llmtest.ServerError())
	env.HH.Add(golangVacancies(2, 7900)...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h", "COVER_LETTERS_PER_DAY": "1"})
	pool := db(t, env)
	letters := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM cover_letters`).Scan(&n))
		return n
	}

	ann := seeker(t, env, 811)
	one := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "developer 7900") })
	two := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "developer 7901") })
	last := max(one.MessageID, two.MessageID)

	// The model fails: the user is told, and the failure is not charged.
	ann.PressAndWait(t, one, "✍️ Cover letter")
	failed := env.TG.WaitMessageAfter(t, ann.ID(), last, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "could not write") })
	require.Contains(t, failed.Text, "the AI model is not answering right now")
	rule.Fault(llmtest.Fault{})
	require.False(t, ann.PressAndWait(t, failed, "🔁 Try again").ShowAlert)
	letterMessage(t, env, ann.ID(), failed.MessageID, "five years, mostly services")

	// The one letter of the day is used.
	ans := ann.PressAndWait(t, two, "✍️ Cover letter")
	require.True(t, ans.ShowAlert)
	require.Contains(t, ans.Text, "You have reached the daily limit of cover letters: 1 in 24 hours. The next one can be written from ")
	require.Equal(t, 2, letters(), "the failed letter and the ready one; the refused press wrote nothing")

	// Bob forges Ann's letter button.
	data := ""
	for _, b := range two.ReplyMarkup.Buttons() {
		if b.Text == "✍️ Cover letter" {
			data = b.CallbackData
		}
	}
	require.NotEmpty(t, data)
	bob := env.TG.User(812, "Bob", "en")
	hello := ask(t, env, bob, bob.ID(), "/profile Go developer")
	forged := bob.PressRaw(hello, data)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)
	stale := bob.PressRaw(hello, "vl:zzzz")
	require.Equal(t, "This button is no longer valid.", env.TG.WaitCallbackAnswer(t, stale.ID).Text)
	require.Equal(t, 2, letters())
}
