package bot_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/e2e/tgfake"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// stubLLM stands in for the model: the bot's commands only ask it whether
// its breaker is open, and a test that runs the workers sets the verdict.
type stubLLM struct {
	open    atomic.Bool
	verdict atomic.Pointer[vacancy.Verdict]
}

func (l *stubLLM) JSON(_ context.Context, _, _ string, out any) error {
	v := l.verdict.Load()
	if v == nil {
		return errors.New("stub LLM: no verdict scripted")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func (l *stubLLM) Open() bool { return l.open.Load() }

// Refused and Health: the stub's breaker opens only as a test says, and
// never for a refused model.
func (l *stubLLM) Refused() bool { return false }

func (l *stubLLM) Health() (bool, string) {
	if l.open.Load() {
		return false, "circuit breaker open after repeated failures"
	}
	return false, ""
}

// stubSource stands in for HH.ru, which the bot's commands never call.
type stubSource struct{}

func (stubSource) Search(context.Context, vacancy.Params, int, int) (vacancy.Page, error) {
	return vacancy.Page{}, vacancy.ErrUnavailable
}

func (stubSource) Vacancy(context.Context, int64) (vacancy.Vacancy, error) {
	return vacancy.Vacancy{}, vacancy.ErrUnavailable
}

func (stubSource) Blocked() (bool, string) { return false, "" }
func (stubSource) Holding() bool           { return false }

type vacEnv struct {
	bundle
	st  *storage.Store
	svc *vacancy.Service
	llm *stubLLM
}

// setupVacancies is setup with the vacancy workflow over the bot's own
// database; the rate limit is lifted because these tests chat a lot.
func setupVacancies(t *testing.T) vacEnv {
	t.Helper()
	st := storagetest.New(t)
	llm := &stubLLM{}
	svc, err := vacancy.NewService(vacancy.Config{}, vacancy.Deps{
		Matches: st.Matches(), Profiles: st.Users(), Searches: st.Searches(), Applications: st.Applications(),
		Source: stubSource{}, LLM: llm, Notifier: testRenderer(bot.RenderConfig{}), Log: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	tb := setupDeps(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, st, bot.Deps{Vacancies: svc}, nil)
	return vacEnv{bundle: tb, st: st, svc: svc, llm: llm}
}

func data(t *testing.T, action string, ids ...int64) string {
	t.Helper()
	d, err := bot.Encode(bot.Action{Name: action, IDs: len(ids)}, ids...)
	require.NoError(t, err)
	return d
}

func answer(t *testing.T, srv *tgfake.Server, q tgfake.CallbackQuery) tgfake.CallbackAnswer {
	t.Helper()
	return srv.WaitCallbackAnswer(t, q.ID)
}

func TestVacancyCommandsInMenu(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	help := env.ask(t, ann, "/help").Text
	require.Contains(t, help, "/search — save a vacancy search on hh.ru")
	def := env.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "profile", "search", "searches", "ban", "unban", "bans", "vacancies", "skills", "applications"},
		commandNames(def))

	// Registered after the admin's /status, the workflow's commands still
	// come before the admin section.
	admin := env.srv.User(adminID, "Boss", "en")
	help = env.ask(t, admin, "/help").Text
	require.Equal(t, 1, strings.Count(help, "Admin"), help)
	require.True(t, strings.HasSuffix(help, "Admin · system\n/status — replicas, jobs and queues"), help)
	adm := env.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: adminID}, "")
	require.Equal(t, []string{"start", "help", "lang", "timezone", "profile", "search", "searches", "ban", "unban", "bans", "vacancies", "skills", "applications", "status"},
		commandNames(adm))
}

func TestProfileSetAndShow(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")

	require.Contains(t, env.ask(t, ann, "/profile").Text, "You have no profile yet.")

	profile := "<b>Go</b> & Rust developer\nremote only"
	require.Equal(t, "Profile saved. New vacancies will be judged against it.", env.ask(t, ann, "/profile "+profile).Text)
	got, err := env.st.Users().Profile(context.Background(), 42)
	require.NoError(t, err)
	require.Equal(t, profile, got, "every line is kept, not only the first")

	reply := env.ask(t, ann, "/profile")
	require.Contains(t, reply.Text, "Your profile\n\n"+profile+"\n\n", "shown literally")
	for _, e := range reply.Entities {
		require.NotEqual(t, "Go", utf16Slice(reply.Text, e.Offset, e.Length), "no markup was injected")
	}

	// Written on the line after the command, as Telegram clients allow.
	require.Equal(t, "Profile saved. New vacancies will be judged against it.", env.ask(t, ann, "/profile\nPython\nDjango").Text)
	got, err = env.st.Users().Profile(context.Background(), 42)
	require.NoError(t, err)
	require.Equal(t, "Python\nDjango", got)

	require.Equal(t, "The profile is too long: at most 4000 characters, please.",
		env.ask(t, ann, "/profile "+strings.Repeat("я", vacancy.MaxProfile+1)).Text)
	got, err = env.st.Users().Profile(context.Background(), 42)
	require.NoError(t, err)
	require.Equal(t, "Python\nDjango", got, "a refused profile changes nothing")
}

func utf16Slice(s string, off, n int) string {
	u := utf16.Encode([]rune(s))
	return string(utf16.Decode(u[off : off+n]))
}

func TestSearchSavesAndRefusesMalformedParameters(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")

	usage := env.ask(t, ann, "/search").Text
	require.Contains(t, usage, "/search https://hh.ru/search/vacancy?text=golang&area=1")
	require.Contains(t, usage, "experience — no experience, 1–3 years, 3–6 years, more than 6 years")
	require.Contains(t, usage, "schedule — remote, full day, shift, flexible, rotation")
	require.NotContains(t, usage, "between1And3", "human words, not HH's ids")

	reply := env.ask(t, ann, "/search golang developer area=1 salary=200000 schedule=remote").Text
	require.Contains(t, reply, "Saved: golang developer area=1 salary=200000 schedule=remote")
	require.Contains(t, reply, "Tip: tell me about yourself with /profile", "no profile yet")

	reply = env.ask(t, ann, "/search schedule=remote Golang   DEVELOPER salary=200000 area=1").Text
	require.Contains(t, reply, "You already have this search: golang developer area=1 salary=200000 schedule=remote")
	reply = env.ask(t, ann, `/search golang developer area=1 salary=200000 schedule="Remote"`).Text
	require.Contains(t, reply, "You already have this search", "a human word is its id")

	for in, want := range map[string]string{
		"/search go color=red":                         "color=red: I don't know the filter color.",
		"/search go salary=lots":                       "salary=lots: salary is a whole number from 1 to 100,000,000, e.g. salary=150000.",
		"/search go salary=-5":                         "salary=-5: salary is a whole number from 1 to 100,000,000",
		"/search go experience=ancient":                "experience=ancient: experience is one of: no experience, 1–3 years, 3–6 years, more than 6 years; e.g. experience=1-3.",
		"/search go schedule=nights":                   "schedule=nights: schedule is one of: remote, full day, shift, flexible, rotation; e.g. schedule=remote.",
		"/search go area=moscow":                       "area=moscow: area is an hh.ru region number, e.g. area=1 (Moscow)",
		"/search go salary=1 SALARY=2":                 "SALARY=2: salary takes one value",
		"/search area=1 salary=100":                    "Give some words to search for, not only filters, e.g. /search golang area=1.",
		"/search <b>x</b> junk=<i>&amp;</i>":           "junk=<i>&amp;</i>: I don't know the filter junk.",
		"/search " + strings.Repeat("go ", 100):        "The search text is too long: at most 200 characters; yours begins go go go",
		"/search go color=" + strings.Repeat("r", 500): "color=rrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrrr…: I don't know",
	} {
		reply := env.ask(t, ann, in).Text
		require.True(t, strings.HasPrefix(reply, want), "%s\ngot: %s", in, reply)
		require.NotContains(t, reply, "Filters", "the refusal is not the whole usage")
	}

	env.ask(t, ann, "/profile Go developer")
	reply = env.ask(t, ann, "/search rust").Text
	require.Equal(t, "Saved: rust\nI'm checking hh.ru now: within a minute you'll get the first vacancies or a word that there is nothing new yet.",
		reply, "no hint once a profile is set")

	list, err := env.svc.Searches(context.Background(), 42)
	require.NoError(t, err)
	require.Len(t, list, 2, "refused searches were not saved")
}

// The usage's words for experience and schedule, in every language, are
// words /search takes.
func TestSearchUsageWordsAreAccepted(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	for i, lang := range []string{"en", "ru", "uk"} {
		who := env.srv.User(int64(50+i), "U", lang)
		usage := env.ask(t, who, "/search").Text
		seen := 0
		for _, line := range strings.Split(usage, "\n") {
			name, list, ok := strings.Cut(strings.TrimPrefix(line, "• "), " — ")
			if !ok || name != "experience" && name != "schedule" {
				continue
			}
			seen++
			words := strings.Split(list, ", ")
			require.Len(t, words, 4+btoi(name == "schedule"), line)
			for _, w := range words {
				require.NotEmpty(t, vacancy.HumanID(name, w), "%s: %s %q", lang, name, w)
				p, err := vacancy.ParseParams("go " + name + `="` + w + `"`)
				require.NoError(t, err, w)
				require.Len(t, p.Values(name), 1)
			}
		}
		require.Equal(t, 2, seen, usage)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestSearchLimit(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	env.ask(t, ann, "/start")
	ctx := context.Background()
	for i := range bot.MaxSearches {
		_, _, err := env.svc.AddSearch(ctx, 42, vacancy.Params{Text: "job " + strconv.Itoa(i)})
		require.NoError(t, err)
	}
	require.Equal(t, "You already have 20 searches, the most I keep. Delete one in /searches first.",
		env.ask(t, ann, "/search one more").Text)
	require.Contains(t, env.ask(t, ann, "/search JOB 3").Text, "You already have this search: job 3",
		"a search the user has is not refused by the limit")
	list, err := env.svc.Searches(ctx, 42)
	require.NoError(t, err)
	require.Len(t, list, bot.MaxSearches)

	// The longest list still fits the one message the delete buttons edit.
	for i := range list {
		exec(t, env.st, `UPDATE searches SET params = jsonb_set(params, '{text}', to_jsonb($2::text)) WHERE id = $1`,
			list[i].ID, strings.Repeat(`"&<`, vacancy.MaxSearchText/3))
	}
	msg := env.ask(t, ann, "/searches")
	require.Len(t, msg.ReplyMarkup.Buttons(), bot.MaxSearches, "one message, all buttons under it")
	require.Contains(t, msg.Text, "20. \"&<")
}

func TestSearchesListAndDeleteButtons(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ctx := context.Background()
	ann, bob := env.annAndBob()

	require.Equal(t, "You have no searches. Add one: /search golang developer area=1", env.ask(t, ann, "/searches").Text)
	env.ask(t, ann, "/search go developer")
	env.ask(t, ann, "/search rust <developer> area=2")
	searches, err := env.svc.Searches(ctx, 42)
	require.NoError(t, err)
	require.Len(t, searches, 2)
	del1, del2 := data(t, "sd", searches[0].ID), data(t, "sd", searches[1].ID)

	list := env.ask(t, ann, "/searches")
	require.Equal(t, "Your searches\n1. go developer\n2. rust <developer> area=2\n\nPress ✖ N to delete search N.", list.Text)
	buttons := list.ReplyMarkup.Buttons()
	require.Len(t, buttons, 2)
	require.Equal(t, "✖ 1", buttons[0].Text)
	require.Equal(t, del1, buttons[0].CallbackData)
	require.Equal(t, del2, buttons[1].CallbackData)

	// Bob's client forges Ann's search id on a message of his own chat.
	bobMsg := env.ask(t, bob, "/searches")
	a := pressRaw(t, env.srv, bob, bobMsg, del1)
	requireAlert(t, a, "This search is already deleted.")
	still, err := env.svc.Searches(ctx, 42)
	require.NoError(t, err)
	require.Len(t, still, 2, "another user's press deletes nothing")
	bobNow, _ := env.srv.MessageByID(bob.ID(), bobMsg.MessageID)
	require.Empty(t, bobNow.Edits)

	q, err := ann.Press(list, del1)
	require.NoError(t, err)
	a = answer(t, env.srv, q)
	requireToast(t, a, "Search deleted.")
	edited, _ := env.srv.MessageByID(ann.ID(), list.MessageID)
	require.Equal(t, "Your searches\n1. rust <developer> area=2\n\nPress ✖ N to delete search N.", edited.Text)
	require.Len(t, edited.ReplyMarkup.Buttons(), 1)
	require.Equal(t, "✖ 1", edited.ReplyMarkup.Buttons()[0].Text)
	require.Equal(t, del2, edited.ReplyMarkup.Buttons()[0].CallbackData, "renumbered, same search")

	// A stale client still showing the old button.
	a = pressRaw(t, env.srv, ann, list, del1)
	requireAlert(t, a, "This search is already deleted.")

	q, err = ann.Press(list, del2)
	require.NoError(t, err)
	require.Equal(t, "Search deleted.", answer(t, env.srv, q).Text)
	edited, _ = env.srv.MessageByID(ann.ID(), list.MessageID)
	require.Equal(t, "You have no searches. Add one: /search golang developer area=1", edited.Text)
	require.Empty(t, edited.ReplyMarkup.Buttons())
}

func TestBanUnbanBans(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	ask := func(text string) string { return env.ask(t, ann, text).Text }

	require.Equal(t, "You have no ban words. Add one: /ban 1C", ask("/bans"))
	require.Contains(t, ask("/ban"), "Usage: /ban word or phrase")
	require.Equal(t, "Banned: битрикс. Vacancies that mention it will not be sent to you.", ask("/ban Битрикс"))
	require.Equal(t, "битрикс is already banned.", ask("/ban   БИТРИКС "))
	require.Equal(t, "Banned: 1с битрикс. Vacancies that mention it will not be sent to you.", ask("/ban 1С-Битрикс"))
	require.Equal(t, "Banned: b c b. Vacancies that mention it will not be sent to you.", ask("/ban <b>C</b>"))
	require.Equal(t, "A ban word needs at least one letter or digit.", ask("/ban --- !!!"))
	require.Equal(t, "A ban word or phrase may have at most 100 characters.", ask("/ban "+strings.Repeat("щ", 101)))

	bans := ask("/bans")
	require.True(t, strings.HasPrefix(bans, "Your ban words (3):\n"), bans)
	require.Contains(t, bans, "• битрикс")
	require.Contains(t, bans, "• 1с битрикс")

	require.Equal(t, "битрикс is no longer banned.", ask("/unban Битрикс"))
	require.Equal(t, "битрикс is not among your ban words; /bans lists them.", ask("/unban битрикс"))
	require.Contains(t, ask("/unban"), "Usage: /unban word or phrase")
	require.Equal(t, "A ban word needs at least one letter or digit.", ask("/unban ..."))
	require.NotContains(t, strings.Split(ask("/bans"), "\n"), "• битрикс")

	exec(t, env.st, `INSERT INTO ban_words (user_id, word) SELECT 42, 'w' || g FROM generate_series(1, $1) g`, vacancy.MaxBanWords)
	require.Equal(t, "You already have 200 ban words, the most I keep. Remove some with /unban first.", ask("/ban one more"))
}

// insertVacancy and insertMatch put rows where discovery and the workers
// would have.
func insertVacancy(t *testing.T, st *storage.Store, v vacancy.Vacancy) {
	t.Helper()
	exec(t, st, `
INSERT INTO vacancies (id, title, employer, url, area, salary_from, salary_to, salary_currency, published_at)
VALUES ($1, $2, $3, $4, $5, NULLIF($6, 0), NULLIF($7, 0), $8, now())`,
		v.ID, v.Title, v.Employer, v.URL, v.Area, v.Salary.From, v.Salary.To, v.Salary.Currency)
}

func insertMatch(t *testing.T, st *storage.Store, userID, vacancyID int64, status vacancy.Status, v *vacancy.Verdict) int64 {
	t.Helper()
	var analysis []byte
	var relevant *bool
	if v != nil {
		var err error
		analysis, err = json.Marshal(v)
		require.NoError(t, err)
		relevant = v.IsRelevant
	} else if status == vacancy.NotSuitable || status == vacancy.Analyzed {
		relevant = new(bool)
	}
	var id int64
	err := st.Pool().QueryRow(context.Background(), `
INSERT INTO vacancy_matches (user_id, vacancy_id, status, published_at, is_relevant, analysis, sent_at, message_id,
    applied_at, reported_at, invited_at)
VALUES ($1, $2, $3, now(), $4, $5, CASE WHEN $3 = 'SENT_TO_USER' THEN now() END, CASE WHEN $3 = 'SENT_TO_USER' THEN 1 END,
    CASE WHEN $3 IN ('APPLIED', 'NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED') THEN now() END,
    CASE WHEN $3 IN ('APPLIED', 'NO_ANSWER', 'INVITED', 'OFFER', 'REJECTED') THEN now() END,
    CASE WHEN $3 IN ('INVITED', 'OFFER') THEN now() END)
RETURNING id`, userID, vacancyID, string(status), relevant, analysis).Scan(&id)
	require.NoError(t, err)
	return id
}

func matchStatus(t *testing.T, st *storage.Store, id int64) string {
	t.Helper()
	return queryOne[string](t, st, `SELECT status FROM vacancy_matches WHERE id = $1`, id)
}

func TestVacanciesStats(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann, bob := env.annAndBob()
	env.ask(t, bob, "/start")

	require.Equal(t, "Your vacancies\nNone yet.\n\nLast check of hh.ru: never\nThe AI model is answering.\nhh.ru is answering.",
		env.ask(t, ann, "/vacancies").Text)

	for i, s := range []vacancy.Status{vacancy.Queued, vacancy.Queued, vacancy.Applied, vacancy.NotSuitable, vacancy.SentToUser} {
		id := int64(100 + i)
		insertVacancy(t, env.st, vacancy.Vacancy{ID: id, Title: "job"})
		insertMatch(t, env.st, 42, id, s, nil)
	}
	insertMatch(t, env.st, 43, 100, vacancy.Queued, nil)
	ctx := context.Background()
	sr, _, err := env.svc.AddSearch(ctx, 42, vacancy.Params{Text: "go"})
	require.NoError(t, err)
	exec(t, env.st, `INSERT INTO discovery_state (search_key, updated_at) VALUES ($1, '2025-03-04 05:06:07+03')`, sr.Key)
	env.llm.open.Store(true)

	require.Equal(t, "Your vacancies\n"+
		"Waiting for analysis: 2\nSent to you, awaiting your decision: 1\nNot suitable: 1\nApplied: 1\n\n"+
		"Last check of hh.ru: 4 Mar 2025, 02:06 (UTC)\n"+
		"The AI model is not answering; your vacancies will be checked when it is back.\nhh.ru is answering.", env.ask(t, ann, "/vacancies").Text)
}

// Salaries read as each language writes money, before or after tax when
// HH says.
func TestSalaryLine(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	yes, no := true, false
	for _, tc := range []struct {
		lang string
		s    vacancy.Salary
		want string
	}{
		{"ru", vacancy.Salary{From: 250000, Currency: "RUR"}, "от 250\u00a0000\u00a0₽"},
		{"en", vacancy.Salary{From: 250000, Currency: "RUR"}, "from 250,000\u00a0₽"},
		{"uk", vacancy.Salary{To: 300000, Currency: "RUR", Gross: &no}, "до 300\u00a0000\u00a0₽ на руки"},
		{"ru", vacancy.Salary{From: 250000, To: 300000, Currency: "RUR", Gross: &yes}, "250\u00a0000 – 300\u00a0000\u00a0₽ до вычета налогов"},
		{"en", vacancy.Salary{From: 3000, To: 5000, Currency: "USD"}, "$3,000 – $5,000"},
		{"en", vacancy.Salary{From: 4000, To: 4000, Currency: "EUR"}, "€4,000"},
		{"en", vacancy.Salary{}, ""},
	} {
		text := env.bot.RenderVacancy(tc.lang, vacancy.Vacancy{Title: "t", Salary: tc.s})
		lines := strings.Split(text, "\n")
		if tc.want == "" {
			require.Len(t, lines, 1, text)
			continue
		}
		require.Equal(t, tc.want, lines[1], tc.lang)
	}
}

func relevant() *bool { b := true; return &b }

func sampleCard(matchID int64) vacancy.CardData {
	return vacancy.CardData{
		MatchID: matchID, UserID: 42, Lang: "en",
		Vacancy: vacancy.Vacancy{
			ID: 1001, Title: "<b>Go & Rust</b>", Employer: "ACME <Ltd>", Area: "Москва",
			URL:    "https://hh.ru/vacancy/1001",
			Salary: vacancy.Salary{From: 200000, To: 300000, Currency: "RUR"},
		},
		Verdict: vacancy.Verdict{
			IsRelevant: relevant(), Score: 87,
			Reasons:       []string{"Uses <b>Go</b>", "Remote &\n flexible", "Senior level", "a fourth reason"},
			MatchedSkills: []string{"Go", "Rust"},
		},
	}
}

const sampleText = "<b>Go & Rust</b>\nACME <Ltd> · Москва\n200,000 – 300,000\u00a0₽\nScore: 87/100\n" +
	"• Uses <b>Go</b>\n• Remote & flexible\n• Senior level\nMatched skills: Go, Rust"

// queueVacancy stores v for the user as discovery would (its detail fresh,
// so the worker does not ask HH), scripts the LLM's verdict and runs the
// worker once: the match becomes ANALYZED with its card in the outbox. It
// returns the match id.
func (env vacEnv) queueVacancy(t *testing.T, userID int64, v vacancy.Vacancy, verdict vacancy.Verdict) int64 {
	t.Helper()
	insertVacancy(t, env.st, v)
	ctx := context.Background()
	exec(t, env.st, `UPDATE vacancies SET detail_fetched_at = now() WHERE id = $1`, v.ID)
	matchID := insertMatch(t, env.st, userID, v.ID, vacancy.Queued, nil)
	env.llm.verdict.Store(&verdict)
	n, err := env.svc.Drain(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return matchID
}

// cardRows counts the match's outbox rows of kind vacancy.
func cardRows(t *testing.T, st *storage.Store, matchID int64) int {
	t.Helper()
	return count(t, st, `SELECT count(*) FROM outbox WHERE kind = 'vacancy' AND ref = $1`, matchID)
}

// waitCard waits for the match's card in the fake Telegram and for the
// outbox to record its delivery: the match SENT_TO_USER with that message.
func (env vacEnv) waitCard(t *testing.T, chatID, matchID int64) tgfake.BotMessage {
	t.Helper()
	applied := data(t, "va", matchID)
	msg := env.srv.WaitMessage(t, chatID, func(m tgfake.BotMessage) bool {
		for _, b := range m.ReplyMarkup.Buttons() {
			if b.CallbackData == applied {
				return true
			}
		}
		return false
	})
	require.Eventually(t, func() bool { return matchStatus(t, env.st, matchID) == "SENT_TO_USER" }, 5*time.Second, 10*time.Millisecond)
	var chat, msgID int64
	require.NoError(t, env.st.Pool().QueryRow(context.Background(),
		`SELECT chat_id, message_id FROM vacancy_matches WHERE id = $1 AND sent_at IS NOT NULL`, matchID).Scan(&chat, &msgID))
	require.Equal(t, chatID, chat)
	require.EqualValues(t, msg.MessageID, msgID, "the match records the message its buttons are on")
	return msg
}

func TestDeliverAndDecide(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ctx := context.Background()
	ann, bob := env.annAndBob()
	env.ask(t, ann, "/start")
	d := sampleCard(0)
	d.MatchID = env.queueVacancy(t, 42, d.Vacancy, d.Verdict)
	applied, rejected := data(t, "va", d.MatchID), data(t, "vn", d.MatchID)
	require.Equal(t, 1, cardRows(t, env.st, d.MatchID), "the card was written with ANALYZED")

	msg := env.waitCard(t, 42, d.MatchID)
	require.Equal(t, sampleText, msg.Text, "HH's and the LLM's markup arrives as literal text")
	require.Len(t, msg.Entities, 1)
	require.Equal(t, "bold", msg.Entities[0].Type)
	require.Equal(t, "<b>Go & Rust</b>", utf16Slice(msg.Text, msg.Entities[0].Offset, msg.Entities[0].Length))
	require.Equal(t, "HTML", msg.ParseMode)
	kb := msg.ReplyMarkup.InlineKeyboard
	require.Len(t, kb, 3)
	require.Len(t, kb[0], 2)
	require.Equal(t, "✅ Applied", kb[0][0].Text)
	require.Equal(t, applied, kb[0][0].CallbackData)
	require.Equal(t, "🚫 Not interested", kb[0][1].Text)
	require.Equal(t, rejected, kb[0][1].CallbackData)
	require.Equal(t, "✍️ Cover letter", kb[1][0].Text)
	require.Equal(t, data(t, "vl", d.MatchID), kb[1][0].CallbackData)
	require.Len(t, kb[2], 1, "HH gave no apply page: only the link")
	require.Equal(t, "Open on hh.ru", kb[2][0].Text)
	require.Equal(t, "https://hh.ru/vacancy/1001", kb[2][0].URL)

	// A second worker pass sends nothing more.
	n, err := env.svc.Drain(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, 1, cardRows(t, env.st, d.MatchID))
	require.Len(t, env.srv.Messages(42), 2, "the answer to /start and one card")

	// Pressed before the outbox recorded the delivery (the press waits a
	// moment for it, then gives up).
	exec(t, env.st, `UPDATE vacancy_matches SET status = 'ANALYZED' WHERE id = $1`, d.MatchID)
	a := press(t, env.srv, ann, msg, applied)
	requireAlert(t, a, "This vacancy is not waiting for your answer right now. Try again in a minute.")
	require.Equal(t, "ANALYZED", matchStatus(t, env.st, d.MatchID))
	exec(t, env.st, `UPDATE vacancy_matches SET status = 'SENT_TO_USER' WHERE id = $1`, d.MatchID)

	// Bob's client forges Ann's match id on a message of his own chat.
	bobMsg := env.ask(t, bob, "/start")
	a = pressRaw(t, env.srv, bob, bobMsg, applied)
	requireAlert(t, a, "This button is not for you.")
	require.Equal(t, "SENT_TO_USER", matchStatus(t, env.st, d.MatchID))

	a = press(t, env.srv, ann, msg, applied)
	requireToast(t, a, "Marked as applied.")
	require.Equal(t, "APPLIED", matchStatus(t, env.st, d.MatchID))
	edited, _ := env.srv.MessageByID(42, msg.MessageID)
	require.Equal(t, sampleText+"\n\n✅ Applied", edited.Text, "edited in place")
	require.Len(t, edited.Edits, 1)
	require.Len(t, edited.ReplyMarkup.Buttons(), 4, "the decision buttons gave way to the application's steps")
	require.Equal(t, "https://hh.ru/vacancy/1001", edited.ReplyMarkup.Buttons()[3].URL, "the link stays")

	for _, again := range []string{applied, rejected} {
		a = pressRaw(t, env.srv, ann, msg, again)
		requireAlert(t, a, "You already marked this vacancy: Applied.")
	}
	require.Equal(t, "APPLIED", matchStatus(t, env.st, d.MatchID))
	edited, _ = env.srv.MessageByID(42, msg.MessageID)
	require.Len(t, edited.Edits, 1, "a refused press edits nothing")

	a = pressRaw(t, env.srv, ann, msg, data(t, "va", d.MatchID+1000))
	requireAlert(t, a, "This button is no longer valid.")
	require.Equal(t, 1, cardRows(t, env.st, d.MatchID), "nothing was queued by the presses")
}

func TestNotInterestedInUsersLanguage(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Анна", "ru")
	env.ask(t, ann, "/start")
	d := sampleCard(0)
	d.Vacancy.URL = "javascript:alert(1)" // not a web page: no link button
	d.MatchID = env.queueVacancy(t, 42, d.Vacancy, d.Verdict)

	msg := env.waitCard(t, 42, d.MatchID)
	require.Contains(t, msg.Text, "Оценка: 87/100", "the card follows the user's language")
	require.Len(t, msg.ReplyMarkup.InlineKeyboard, 2)
	require.Equal(t, "🚫 Не интересно", msg.ReplyMarkup.InlineKeyboard[0][1].Text)

	a := press(t, env.srv, ann, msg, data(t, "vn", d.MatchID))
	require.Equal(t, "Отмечено: не интересно.", a.Text)
	require.Equal(t, "NOT_INTERESTED", matchStatus(t, env.st, d.MatchID))
	edited, _ := env.srv.MessageByID(42, msg.MessageID)
	require.True(t, strings.HasSuffix(edited.Text, "\n\n🚫 Не интересно"), edited.Text)
	require.Equal(t, []string{"↩️ Вернуть"}, edited.ReplyMarkup.Labels(), "only Undo: no link to keep")
}

func TestDeliverOversizedVacancyIsOneMessage(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	env.ask(t, ann, "/start")
	before := len(env.srv.Messages(42))

	huge := strings.Repeat(`<&"> `, 3000)
	d := sampleCard(7)
	d.Vacancy.Title, d.Vacancy.Employer, d.Vacancy.Area = huge, huge, huge
	d.Verdict.Reasons = []string{huge, huge, huge, huge, huge}
	d.Verdict.MatchedSkills = strings.Split(huge, " ")
	card := env.bot.Card(d)
	require.Len(t, card, 1, "one message, so the decision edits the one the match records")
	require.Equal(t, domain.KindVacancy, card[0].Kind)
	require.EqualValues(t, 7, card[0].Ref)
	require.EqualValues(t, 42, card[0].ChatID)

	// Telegram accepts it as it is.
	require.NoError(t, env.st.Outbox().Enqueue(context.Background(), card...))
	env.srv.WaitFor(t, 5*time.Second, func() bool { return len(env.srv.Messages(42)) == before+1 })
	msg := env.srv.Messages(42)[before]
	require.LessOrEqual(t, len([]rune(msg.Text)), bot.MaxMessageLen)
	require.True(t, strings.HasPrefix(msg.Text, `<&"> <&">`), "escaped, then cut")
	require.Equal(t, 7, strings.Count(msg.Text, "…"), "title, employer, area, three reasons and the skills are marked as cut")
	require.Len(t, msg.ReplyMarkup.Buttons(), 5, "Applied, Not interested, Cover letter, Hide this employer, Open on hh.ru")
}

// Delivery failures are the outbox's: a card to a user Telegram refuses
// for good (never started the bot, blocked it) is dropped and the chat
// marked unreachable; the match stays ANALYZED, not sent, and no worker
// queues it again. A Telegram outage is retried until the card arrives.
func TestDeliverToUnreachableUser(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ctx := context.Background()
	d := sampleCard(0)

	env.srv.User(42, "Ghost", "en") // never wrote to the bot
	_, err := env.st.Users().Upsert(ctx, domain.User{ID: 42, FirstName: "Ghost"})
	require.NoError(t, err)
	ghost := env.queueVacancy(t, 42, d.Vacancy, d.Verdict)
	dropped := func(matchID int64) bool {
		return queryOne[string](t, env.st, `SELECT state FROM outbox WHERE kind = 'vacancy' AND ref = $1`, matchID) == "dropped"
	}
	require.Eventually(t, func() bool { return dropped(ghost) }, 5*time.Second, 10*time.Millisecond)
	unreachable, err := env.st.Outbox().Unreachable(ctx, 42)
	require.NoError(t, err)
	require.True(t, unreachable)
	require.Equal(t, "ANALYZED", matchStatus(t, env.st, ghost))

	ann := env.srv.User(43, "Ann", "en")
	env.ask(t, ann, "/start")
	ann.Block()
	d.Vacancy.ID = 1002
	blocked := env.queueVacancy(t, 43, d.Vacancy, d.Verdict)
	require.Eventually(t, func() bool { return dropped(blocked) }, 5*time.Second, 10*time.Millisecond)
	unreachable, err = env.st.Outbox().Unreachable(ctx, 43)
	require.NoError(t, err)
	require.True(t, unreachable)
	require.Equal(t, "ANALYZED", matchStatus(t, env.st, blocked))
	n, err := env.svc.Drain(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a dropped card is not queued again")
	require.Equal(t, 1, cardRows(t, env.st, blocked))

	bob := env.srv.User(44, "Bob", "en")
	env.ask(t, bob, "/start")
	env.srv.FailNextWith("sendMessage", 1, &tgfake.APIError{Code: 500, Description: "Internal Server Error"})
	d.Vacancy.ID = 1003
	retried := env.queueVacancy(t, 44, d.Vacancy, d.Verdict)
	env.waitCard(t, 44, retried)
	require.Equal(t, 1, cardRows(t, env.st, retried))
}
