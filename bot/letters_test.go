package bot_test

import (
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/vacancy"
)

func letterData(text string) vacancy.LetterData {
	return vacancy.LetterData{
		Letter: vacancy.Letter{ID: 31, MatchID: 5, UserID: 42, Version: 1, Style: vacancy.StyleDraft, State: vacancy.LetterReady, Text: text},
		Vacancy: vacancy.Vacancy{ID: 1001, Title: "Go <developer>", Employer: "ACME & Co", URL: "https://hh.ru/vacancy/1001",
			ApplyURL: "https://hh.ru/applicant/vacancy_response?vacancyId=1001"},
		Lang: "en",
	}
}

func letterButtons(m domain.Message) []string {
	var out []string
	for _, row := range m.Buttons {
		for _, b := range row {
			if b.Copy != "" {
				out = append(out, b.Text+"⎘"+b.Copy)
				continue
			}
			out = append(out, b.Text+"→"+b.Data+b.URL)
		}
	}
	return out
}

// The letter arrives inside <pre> (Telegram's copy button) as the model's
// Markdown made plain and escaped, under the vacancy it is for, with the
// apply link and the buttons for another version.
func TestLetterMessage(t *testing.T) {
	t.Parallel()
	rd := testRenderer(bot.RenderConfig{})
	msgs := rd.Letter(letterData("Dear team,\n\nI have **five years** of Go & <b>SQL</b>.\n\nBest regards,\nAnn"))
	require.Len(t, msgs, 1)
	m := msgs[0]
	require.Equal(t, domain.KindCoverLetter, m.Kind)
	require.EqualValues(t, 31, m.Ref)
	require.EqualValues(t, 42, m.ChatID)
	require.True(t, strings.HasPrefix(m.Text, "✍️ <b>Cover letter</b>: <b>Go &lt;developer&gt;</b>, ACME &amp; Co\n\n<pre>"), m.Text)
	require.Contains(t, m.Text, "<pre>Dear team,\n\nI have five years of Go &amp; &lt;b&gt;SQL&lt;/b&gt;.\n\n")
	require.NotContains(t, m.Text, "**", "Markdown is made plain")
	require.Equal(t, []string{
		"📋 Copy the letter⎘Dear team,\n\nI have five years of Go & <b>SQL</b>.\n\nBest regards,\nAnn",
		"Open on hh.ru→https://hh.ru/vacancy/1001",
		"📨 Apply on hh.ru→https://hh.ru/applicant/vacancy_response?vacancyId=1001",
		"🔄 Another version→" + data(t, "la", 31), "✂️ Shorter→" + data(t, "ls", 31), "🎩 More formal→" + data(t, "lf", 31),
		"English→" + encoded(t, "ll", 31, 1), "Русский→" + encoded(t, "ll", 31, 2), "Українська→" + encoded(t, "ll", 31, 3),
	}, letterButtons(m))

	// A direct vacancy is applied to on the employer's site; a later
	// version says which it is.
	d := letterData("Dear team, I write Go.")
	d.Vacancy.ResponseURL = "https://jobs.example.com/1001"
	d.Letter.Version, d.Lang = 3, "ru"
	m = rd.Letter(d)[0]
	require.True(t, strings.HasPrefix(m.Text, "✍️ <b>Сопроводительное письмо</b>, вариант 3: "), m.Text)
	require.Contains(t, letterButtons(m), "📨 Откликнуться на сайте компании→https://jobs.example.com/1001")

	// Without a language chosen the letter says it took the vacancy's;
	// with one, its button is ticked and nothing needs saying.
	require.True(t, strings.HasSuffix(rd.Letter(letterData("Hi."))[0].Text,
		"\nWritten in the vacancy's language; the buttons below write it in another."))
	d = letterData("Привет.")
	d.Letter.Language = "ru"
	m = rd.Letter(d)[0]
	require.NotContains(t, m.Text, "vacancy's language")
	require.Contains(t, letterButtons(m), "✓ Русский→"+encoded(t, "ll", 31, 2))
	require.Contains(t, letterButtons(m), "English→"+encoded(t, "ll", 31, 1))
}

// However long the model's letter, the message stays within Telegram's
// 4096 characters and its <pre> is closed.
func TestLetterMessageFitsOneMessage(t *testing.T) {
	t.Parallel()
	rd := testRenderer(bot.RenderConfig{})
	huge := letterData(strings.Repeat("Я пишу на Go <&> ", 600))
	huge.Vacancy.Title, huge.Vacancy.Employer = strings.Repeat("T", 5000), strings.Repeat("E", 5000)
	m := rd.Letter(huge)[0]
	require.LessOrEqual(t, len(utf16.Encode([]rune(m.Text))), bot.MaxMessageLen)
	require.Contains(t, m.Text, "…</pre>", "cut, and the block closed")
	require.Equal(t, 1, strings.Count(m.Text, "<pre>"))
	require.NotContains(t, strings.Join(letterButtons(m), "\n"), "⎘", "a copy button holds 256 characters: the <pre> is copied instead")

	// 256 UTF-16 code units still fit a copy button; one more does not.
	for n, copies := range map[int]bool{128: true, 129: false} {
		m = rd.Letter(letterData(strings.Repeat("😀", n)))[0]
		require.Equal(t, copies, strings.HasPrefix(letterButtons(m)[0], "📋 Copy the letter⎘"), n)
	}
}

// A failure says why and offers to try again.
func TestLetterFailedMessage(t *testing.T) {
	t.Parallel()
	rd := testRenderer(bot.RenderConfig{})
	for failure, want := range map[string]string{
		vacancy.LetterFailedLLM:      "is not answering right now",
		vacancy.LetterFailedRefused:  "is unavailable at the moment",
		vacancy.LetterFailedInvalid:  "was not a usable cover letter",
		vacancy.LetterFailedAttempts: "was interrupted several times",
		vacancy.LetterFailedPanic:    "Something went wrong on my side",
	} {
		d := letterData("")
		d.Letter.State, d.Letter.Failure = vacancy.LetterFailed, failure
		m := rd.LetterFailed(d)[0]
		require.Contains(t, m.Text, want)
		require.Contains(t, m.Text, "<b>Go &lt;developer&gt;</b>, ACME &amp; Co")
		require.Equal(t, []string{"🔁 Try again→" + data(t, "lr", 31)}, letterButtons(m))
	}
}

// The card says what the employer requires, in one line.
func TestCardSaysWhatTheEmployerRequires(t *testing.T) {
	t.Parallel()
	rd := testRenderer(bot.RenderConfig{})
	card := func(lang string, v vacancy.Vacancy) string {
		return rd.Card(vacancy.CardData{MatchID: 1, UserID: 42, Lang: lang, Vacancy: v})[0].Text
	}
	v := vacancy.Vacancy{Title: "Go developer"}
	require.NotContains(t, card("en", v), "employer")
	v.LetterRequired = true
	require.Contains(t, card("en", v), "\n📝 The employer requires a cover letter.")
	v.HasTest = true
	require.Contains(t, card("uk", v), "\n📝 Роботодавець вимагає супровідний лист і просить пройти тест.")
	v.LetterRequired = false
	require.Contains(t, card("ru", v), "\n🧪 Работодатель просит пройти тест.")
}

func encoded(t *testing.T, action string, ids ...int64) string {
	t.Helper()
	d, err := bot.Encode(bot.Action{Name: action, IDs: len(ids)}, ids...)
	require.NoError(t, err)
	return d
}
