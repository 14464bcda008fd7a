package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/hh/hhtest"
)

// reply sends text and waits for the bot's answer that contains part
// (a note from the outbox may come first).
func reply(t *testing.T, env *e2e.Env, who *tgfake.Person, text, part string) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(who.ID(), text)
	return env.TG.WaitMessageAfter(t, who.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, part)
	})
}

// searchesFor are the fake HH's search requests whose text is text.
func searchesFor(env *e2e.Env, text string) []hhtest.Request {
	var out []hhtest.Request
	for _, r := range env.HH.Requests() {
		if r.Endpoint == hhtest.SearchEndpoint && r.Query.Get("text") == text {
			out = append(out, r)
		}
	}
	return out
}

// The link: a search copied from hh.ru is saved with every filter
// HH's API understands, which reach HH as they were, and the reply names
// what it left out.
func TestSearchFromAnHHLinkKeepsItsFilters(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	env.HH.Add(golangVacancies(2, 8000)...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})
	ann := env.TG.User(651, "Ann", "en")

	link := "https://hh.ru/search/vacancy?text=golang&area=1&area=2&experience=between1And3&search_period=7" +
		"&salary=&currency_code=RUR&hhtmFrom=main&enable_snippets=true&items_on_page=20&page=3"
	saved := reply(t, env, ann, "/search "+link, "Saved")
	require.Contains(t, saved.Text, "Saved: golang area=1 area=2 experience=between1And3 period=7")
	require.Contains(t, saved.Text, "Left out of the link: enable_snippets, hhtmFrom, items_on_page, page.")
	require.Contains(t, reply(t, env, ann, "/searches", "Your searches").Text,
		"1. golang area=1 area=2 experience=between1And3 period=7")

	eventually(t, 30*time.Second, func() bool { return len(searchesFor(env, "golang")) > 0 })
	q := searchesFor(env, "golang")[0].Query
	require.Equal(t, []string{"1", "2"}, q["area"])
	require.Equal(t, "between1And3", q.Get("experience"))
	require.Equal(t, "7", q.Get("period"))
	require.Equal(t, "publication_time", q.Get("order_by"), "discovery reads newest first")
	for _, dropped := range []string{"hhtmFrom", "enable_snippets", "items_on_page", "search_period", "salary", "currency_code"} {
		require.NotContains(t, q, dropped)
	}

	// The same search typed out is the same search.
	require.Contains(t, reply(t, env, ann, "/search golang area=2,1 experience=between1And3 period=7", "this search").Text,
		"You already have this search")
}

// Anything that is not an HH search is refused with the reason and not
// saved.
func TestSearchRefusesLinksThatAreNotHHSearches(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})
	ann := env.TG.User(652, "Ann", "en")

	for in, want := range map[string]string{
		"https://example.com/jobs/golang-remote":    "example.com is not HeadHunter: I take searches only from hh.ru, hh.kz and rabota.by",
		"ftp://hh.ru/search/vacancy?text=go":        "ftp: links are not web pages.",
		"https://hh.ru/vacancy/12345678":            "/vacancy/12345678 on hh.ru is not a vacancy search.",
		"https://hh.ru/search/vacancy?text=go junk": "Send the link alone",
	} {
		got := reply(t, env, ann, "/search "+in, "")
		require.Contains(t, got.Text, want, in)
		require.NotContains(t, got.Text, "Saved", in)
	}
	require.Equal(t, "You have no searches. Add one: /search golang developer area=1",
		reply(t, env, ann, "/searches", "searches").Text)
	require.Empty(t, env.HH.Requests(), "nothing was searched")
}

// A new search whose vacancies were already sent for another search says
// so, once: "nothing new yet, the search is watched".
func TestNewSearchWithNothingNewSaysSoOnce(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	env.HH.Add(golangVacancies(3, 8100)...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1s"})
	ann := env.TG.User(653, "Ann", "en")
	subscribe(t, env, ann, "golang")
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 3 })

	reply(t, env, ann, "/search golang developer", "Saved: golang developer")
	note := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Nothing new yet") })
	require.Equal(t, "Nothing new yet for golang developer: the vacancies hh.ru has for it now were already sent to you "+
		"or did not pass your filters. I'm watching this search and will write when something comes.", note.Text)

	// Later fetches of the search tell nothing again.
	seen := len(searchesFor(env, "golang developer"))
	eventually(t, 30*time.Second, func() bool { return len(searchesFor(env, "golang developer")) >= seen+2 })
	notes := slices.DeleteFunc(env.TG.Messages(ann.ID()), func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "Nothing new yet")
	})
	require.Len(t, notes, 1)
	require.Len(t, vacancyMessages(env, ann.ID()), 3, "no card twice")
}

// The promise when a new search's vacancies all miss: the LLM
// judges every one not relevant, and the user hears "nothing new yet"
// once, from two replicas whose fetches and first-news sweeps keep
// running.
func TestNewSearchWhoseVacanciesAllMissSaysNothingNewOnce(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithRedis())
	screening(env).
		ReplyJSON(map[string]any{"is_relevant": false, "score": 9, "reasons": []string{"PHP, not Go"}, "matched_skills": []string{}})
	env.HH.Add(golangVacancies(4, 8300)...)
	over := map[string]string{"FETCH_INTERVAL": "1s", "FIRST_NEWS_INTERVAL": "1s"}
	env.Start(over)
	env.Start(over)
	ann := env.TG.User(655, "Ann", "en")
	subscribe(t, env, ann, "golang")

	isNote := func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Nothing new yet") }
	// Judging four vacancies on a loaded machine may outlast WaitMessage's
	// five seconds.
	env.TG.WaitFor(t, 30*time.Second, func() bool { return slices.ContainsFunc(env.TG.Messages(ann.ID()), isNote) })
	note := env.TG.WaitMessage(t, ann.ID(), isNote)
	require.Equal(t, "Nothing new yet for golang: the vacancies hh.ru has for it now were already sent to you "+
		"or did not pass your filters. I'm watching this search and will write when something comes.", note.Text)
	pool := db(t, env)
	require.Equal(t, map[string]int{"NOT_SUITABLE": 4}, statuses(t, pool), "told once every vacancy was judged")
	require.Equal(t, 4, env.LLM.Calls("relevance"))

	// More fetches and sweeps on both replicas tell nothing again.
	seen := len(searchesFor(env, "golang"))
	eventually(t, 30*time.Second, func() bool { return len(searchesFor(env, "golang")) >= seen+3 })
	// A whole first-news tick after the last fetch: two more recorded runs
	// (the first may have begun before it).
	firstNews := func() int64 {
		return scalar[int64](t, pool, `SELECT COALESCE(sum(runs), 0) FROM job_runs WHERE name = 'vacancy-first-news'`)
	}
	ticks := firstNews()
	eventually(t, 30*time.Second, func() bool { return firstNews() >= ticks+2 })
	notes := slices.DeleteFunc(env.TG.Messages(ann.ID()), func(m tgfake.BotMessage) bool { return !isNote(m) })
	require.Len(t, notes, 1)
	require.Empty(t, vacancyMessages(env, ann.ID()))
}

// Russian: experience and schedule in words, a salary as Russians write
// it, labels that fit anyone, and /vacancies without breaker jargon.
func TestSearchWordsCardAndStatusInRussian(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	vs := golangVacancies(1, 8200)
	vs[0].Schedule = hhtest.Remote
	vs[0].Salary = hhtest.NewSalary(250_000, 300_000, "RUR", false)
	env.HH.Add(vs...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})
	ivan := env.TG.User(654, "Иван", "ru")

	usage := reply(t, env, ivan, "/search", "experience").Text
	require.Contains(t, usage, "experience — без опыта, 1–3 года, 3–6 лет, более 6 лет")
	require.Contains(t, usage, "schedule — удалённо, полный день, сменный график, гибкий график, вахтовый метод")
	reply(t, env, ivan, "/profile Go-разработчик", "Профиль сохранён")
	saved := reply(t, env, ivan, `/search golang schedule=удалённо experience="1–3 года"`, "Сохранено")
	require.Contains(t, saved.Text, "Сохранено: golang experience=between1And3 schedule=remote")

	card := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Оценка: ") })
	require.Contains(t, card.Text, "250\u00a0000 – 300\u00a0000\u00a0₽ на руки")
	require.NotContains(t, card.Text, "RUR")
	require.Contains(t, describe(card), "✅ Отклик отправлен")
	q := searchesFor(env, "golang")[0].Query
	require.Equal(t, "remote", q.Get("schedule"))
	require.Equal(t, "between1And3", q.Get("experience"))

	stats := reply(t, env, ivan, "/vacancies", "Ваши вакансии").Text
	require.Contains(t, stats, "ИИ-модель отвечает.")
	require.NotContains(t, stats, "замкнут")
	require.NotContains(t, stats, "Очередь")
	require.NotContains(t, stats, "LLM")
}
