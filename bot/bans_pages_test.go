package bot_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/vacancy"
	"switchboard/e2e/tgfake"
)

// The lists whose buttons edit them in place (/bans, /memory and its
// History) are one message each, however long what they list: a press
// edits the pressed message, and Telegram refuses an edit longer than a
// message, which left the press doing nothing while its pop-up said it
// had worked.

// requireEditsAccepted asserts that Telegram took every edit of text the
// bot made so far.
func requireEditsAccepted(t *testing.T, srv *tgfake.Server) {
	t.Helper()
	calls := srv.CallsTo("editMessageText")
	require.NotEmpty(t, calls)
	for _, c := range calls {
		require.Nil(t, c.Err, "editMessageText refused (%d characters)", len([]rune(c.Params["text"])))
	}
}

// requireOneMessage asserts that msg is all the bot answered after the
// user's message sent, within Telegram's limit.
func requireOneMessage(t *testing.T, srv *tgfake.Server, chat int64, sent int, msg tgfake.BotMessage) {
	t.Helper()
	require.LessOrEqual(t, len(utf16.Encode([]rune(msg.Text))), bot.MaxMessageLen)
	// A split reply's parts are queued together, so a second part would
	// be there by the time the first is.
	time.Sleep(200 * time.Millisecond)
	after := botMessagesAfter(srv.Messages(chat), sent)
	require.Len(t, after, 1, "the list is one message")
	require.Equal(t, msg.MessageID, after[0].MessageID)
}

// pressedUntil presses the button labelled label on msg and waits for the
// message to be edited to a text that starts with prefix.
func pressedUntil(t *testing.T, srv *tgfake.Server, who *tgfake.Person, msg tgfake.BotMessage, label, prefix string) tgfake.BotMessage {
	t.Helper()
	q, err := who.PressButton(msg, label)
	require.NoError(t, err)
	a := answer(t, srv, q)
	require.False(t, a.ShowAlert, a.Text)
	var now tgfake.BotMessage
	srv.WaitFor(t, 5*time.Second, func() bool {
		now, _ = srv.MessageByID(msg.Chat.ID, msg.MessageID)
		return strings.HasPrefix(now.Text, prefix)
	})
	return now
}

// bansPageLine matches the first line of a page of /bans.
var bansPageLine = regexp.MustCompile(`^Ban words and hidden employers — page (\d+) of (\d+)\n\n`)

// bansPageOf is the page and pages a page of /bans says it is.
func bansPageOf(t *testing.T, text string) (page, pages int) {
	t.Helper()
	m := bansPageLine.FindStringSubmatch(text)
	require.NotNil(t, m, text)
	page, _ = strconv.Atoi(m[1])
	pages, _ = strconv.Atoi(m[2])
	return page, pages
}

// A user at the ban-word limit, each word near the longest, with every
// employer they may hide hidden, each with a name longer than a list
// shows: /bans is one message, a page of them with ◀ ▶; every page turn is
// an edit Telegram takes; the pages together list every word and every
// employer once, each employer with its button on its page; *Show … again*
// on a later page shows that employer again, not another, and leaves the
// user on that page. A button of the list as it was before it had pages
// still works.
func TestBansPagesFitAndShowAgainActsOnItsPage(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	env.ask(t, ann, "/start")
	word := func(i int) string { return strings.Repeat("щ", 97) + fmt.Sprintf("%03d", i) }
	employer := func(i int) string {
		return fmt.Sprintf("ООО «Компания %02d» ", i) + strings.Repeat("я", 300)
	}
	for i := 1; i <= vacancy.MaxBanWords; i++ {
		exec(t, env.st, `INSERT INTO ban_words (user_id, word) VALUES (42, $1)`, word(i))
	}
	for i := 1; i <= vacancy.MaxHiddenEmployers; i++ {
		exec(t, env.st, `INSERT INTO hidden_employers (user_id, employer) VALUES (42, $1)`, employer(i))
	}
	require.Equal(t, 100, len([]rune(word(1))), "vacancy.MaxBanWordLen")

	sent := ann.SendText(ann.ID(), "/bans")
	list := env.srv.WaitMessageAfter(t, 42, sent.MessageID, nil)
	requireOneMessage(t, env.srv, 42, sent.MessageID, list)
	page, pages := bansPageOf(t, list.Text)
	require.Equal(t, 1, page)
	require.Greater(t, pages, 6, "200 words of 100 characters take five pages, 50 employers five more buttons' worth")
	require.True(t, strings.HasPrefix(list.Text, "Ban words and hidden employers — page 1 of "+strconv.Itoa(pages)+"\n\nYour ban words (200):\n• "+word(1)+"\n"), list.Text)
	require.Equal(t, []string{"Next ▶"}, list.ReplyMarkup.Labels())

	// Every page, by Next ▶.
	words, employers := map[string]int{}, map[string]int{}
	employerPage := map[int]int{} // employer number → its page
	item := regexp.MustCompile(`^• (.*)$`)
	for p := 1; ; p++ {
		got, of := bansPageOf(t, list.Text)
		require.Equal(t, []int{p, pages}, []int{got, of})
		require.LessOrEqual(t, len(utf16.Encode([]rune(list.Text))), bot.MaxMessageLen)
		inEmployers := false
		var shown []string
		for _, line := range strings.Split(list.Text, "\n") {
			if strings.HasPrefix(line, "Hidden employers (50):") {
				inEmployers = true
			}
			m := item.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if !inEmployers {
				words[m[1]]++
				continue
			}
			require.True(t, strings.HasSuffix(m[1], "…"), "a long name is clipped: %q", m[1])
			employers[m[1]]++
			shown = append(shown, m[1])
			n, err := strconv.Atoi(strings.TrimPrefix(m[1], "ООО «Компания ")[:2])
			require.NoError(t, err)
			employerPage[n] = p
		}
		// A button per employer shown, in its order, then the page turns.
		var labels []string
		for _, name := range shown {
			labels = append(labels, "👁 Show "+name[:strings.Index(name, "»")+len("»")])
		}
		var nav []string
		if p > 1 {
			nav = append(nav, "◀ Previous")
		}
		if p < pages {
			nav = append(nav, "Next ▶")
		}
		got2 := list.ReplyMarkup.Labels()
		require.Len(t, got2, len(shown)+len(nav), "page %d: %v", p, got2)
		require.LessOrEqual(t, len(shown), 10, "at most ten employers' buttons a page")
		for i, l := range labels {
			require.True(t, strings.HasPrefix(got2[i], l), "page %d: %q for %q", p, got2[i], l)
		}
		require.Equal(t, nav, got2[len(shown):])
		for _, b := range list.ReplyMarkup.Buttons() {
			require.LessOrEqual(t, len(b.CallbackData), bot.MaxCallbackData)
		}
		if p == pages {
			break
		}
		list = pressedUntil(t, env.srv, ann, list, "Next ▶", fmt.Sprintf("Ban words and hidden employers — page %d of", p+1))
	}
	require.Len(t, words, vacancy.MaxBanWords)
	for w, n := range words {
		require.Equal(t, 1, n, w)
	}
	require.Len(t, employers, vacancy.MaxHiddenEmployers)
	for e, n := range employers {
		require.Equal(t, 1, n, e)
	}
	requireEditsAccepted(t, env.srv)

	// Back one page, then show employer 42 again from its page.
	on := employerPage[42]
	require.Greater(t, on, 1)
	for p := pages; p > on; p-- {
		list = pressedUntil(t, env.srv, ann, list, "◀ Previous", fmt.Sprintf("Ban words and hidden employers — page %d of", p-1))
	}
	var show string
	for _, b := range list.ReplyMarkup.Buttons() {
		if strings.HasPrefix(b.Text, "👁 Show ООО «Компания 42» ") {
			show = b.CallbackData
		}
	}
	require.NotEmpty(t, show, list.ReplyMarkup.Labels())
	a := press(t, env.srv, ann, list, show)
	require.False(t, a.ShowAlert)
	require.True(t, strings.HasPrefix(a.Text, "Vacancies from ООО «Компания 42» "), a.Text)
	require.Equal(t, 0, count(t, env.st, `SELECT count(*) FROM hidden_employers WHERE user_id = 42 AND employer = $1`, employer(42)))
	require.Equal(t, vacancy.MaxHiddenEmployers-1, count(t, env.st, `SELECT count(*) FROM hidden_employers WHERE user_id = 42`))
	var edited tgfake.BotMessage
	env.srv.WaitFor(t, 5*time.Second, func() bool {
		edited, _ = env.srv.MessageByID(42, list.MessageID)
		return strings.Contains(edited.Text, "Hidden employers (49):")
	})
	page, _ = bansPageOf(t, edited.Text)
	require.Equal(t, on, page, "the list stays on the page pressed")
	require.NotContains(t, edited.Text, "ООО «Компания 42»")
	require.Contains(t, edited.Text, "ООО «Компания 41»")
	require.NotContains(t, strings.Join(edited.ReplyMarkup.Labels(), "\n"), "Компания 42")
	requireEditsAccepted(t, env.srv)

	// The button of a list shown before /bans had pages names no page:
	// the first page.
	var id int64
	require.NoError(t, env.st.Pool().QueryRow(t.Context(), `SELECT id FROM hidden_employers WHERE user_id = 42 AND employer = $1`, employer(7)).Scan(&id))
	a = pressRaw(t, env.srv, ann, edited, data(t, "ve", id))
	require.True(t, strings.HasPrefix(a.Text, "Vacancies from ООО «Компания 07» "), a.Text)
	env.srv.WaitFor(t, 5*time.Second, func() bool {
		edited, _ = env.srv.MessageByID(42, list.MessageID)
		return strings.HasPrefix(edited.Text, "Ban words and hidden employers — page 1 of")
	})
	requireEditsAccepted(t, env.srv)
	require.Empty(t, env.srv.UnansweredCallbacks())
}

// A list that fits one message is one page, as before pages: no page
// line, no page buttons; in Russian and Ukrainian the page line and the
// buttons of a long one read in the user's language.
func TestBansShortListHasNoPagesAndLongOneReadsInUsersLanguage(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	env.ask(t, ann, "/start")
	exec(t, env.st, `INSERT INTO ban_words (user_id, word) SELECT 42, 'word' || g FROM generate_series(1, $1) g`, vacancy.MaxBanWords)
	exec(t, env.st, `INSERT INTO hidden_employers (user_id, employer) SELECT 42, 'Employer ' || g FROM generate_series(1, 3) g`)
	list := env.ask(t, ann, "/bans")
	require.True(t, strings.HasPrefix(list.Text, "Your ban words (200):\n• word1\n"), list.Text)
	require.True(t, strings.HasSuffix(list.Text, "\n\nHidden employers (3):\n• Employer 1\n• Employer 2\n• Employer 3"), list.Text)
	require.Equal(t, []string{"👁 Show Employer 1 again", "👁 Show Employer 2 again", "👁 Show Employer 3 again"}, list.ReplyMarkup.Labels())

	for _, tc := range []struct {
		id               int64
		lang, head, next string
	}{
		{51, "ru", "Стоп-слова и скрытые работодатели — страница 1 из ", "Дальше ▶"},
		{52, "uk", "Стоп-слова й приховані роботодавці — сторінка 1 з ", "Далі ▶"},
	} {
		who := env.srv.User(tc.id, "Олена", tc.lang)
		env.ask(t, who, "/start")
		exec(t, env.st, `INSERT INTO ban_words (user_id, word) SELECT $1, repeat('щ', 97) || lpad(g::text, 3, '0') FROM generate_series(1, $2) g`, tc.id, vacancy.MaxBanWords)
		list := env.ask(t, who, "/bans")
		require.True(t, strings.HasPrefix(list.Text, tc.head), list.Text)
		require.Equal(t, []string{tc.next}, list.ReplyMarkup.Labels())
	}
}
