package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
	"switchboard/locales"
)

// A job seeker's week, as three people live it in the bot's three
// languages: Иван in Moscow, Ann (no zone of her own) and Олена in Kyiv.
// Day one: cards, a cover letter and its rewrites, the application
// pipeline, /applications, /skills, /settings (a daily cap, quiet hours,
// digests at set times). Later that day: a second search that waits for a
// digest, a résumé that becomes the profile, the memory chat (streamed
// answers, /memory's pages, Delete, Correct, "forget what I told you
// about …", /export, /incognito), and private commands typed in a group.
// A week later (the bot's clock moved on): the digest, a follow-up
// reminder, /applications, /vacancies, /memory and /help. Then every
// message each of them read, in every version, every button's answer and
// every streamed draft is read for what no reader should see. With
// TOUR_OUT set, the whole transcript is written there to be read by a
// person.
// weekTour skips a week-long tour unless TOURS or TOUR_OUT is set: each
// takes two to three minutes of waiting on the bot's timers, and together
// they would bring CI near its 15 minutes. The first hour's tour always
// runs.
func weekTour(t *testing.T) {
	t.Helper()
	if os.Getenv("TOURS") == "" && os.Getenv("TOUR_OUT") == "" {
		t.Skip("a week-long tour: set TOURS=1 (or TOUR_OUT=file) to run it")
	}
}

func TestJobSeekersWeekReadsRight(t *testing.T) {
	weekTour(t)
	bothWays(t, seekersWeek)
}

func seekersWeek(t *testing.T, mode tourMode) {
	begun := time.Now()
	env := mode.env(t, 0)
	team := env.TG.Supergroup(teamChat, "Team", "")
	scriptWeek(env)
	first := golangVacancies(5, 7500)
	first[0].ResponseLetterRequired = true
	for i, skills := range [][]string{
		{"Go", "PostgreSQL", "Docker"}, {"Go", "Kafka", "Kubernetes"}, {"Golang", "Docker"},
		{"Go", "gRPC", "Docker"}, {"PostgreSQL", "Redis"},
	} {
		first[i].KeySkills = skills
	}
	env.HH.Add(first...)
	seniors := golangVacancies(4, 7510)
	for i := range seniors {
		seniors[i].Name = "Senior Golang developer " + seniors[i].ID
	}

	// Day one starts at 11:00 in Moscow by the bot's calendar (digests,
	// quiet hours, applications' dates); a week later it is 12:30.
	dayOne, _ := moscowAt(t, 0, 11, 0, 0)
	weekLater, _ := moscowAt(t, 8, 12, 30, 0)
	over := map[string]string{
		"FETCH_INTERVAL": "1h", "DIGEST_INTERVAL": "1s", "APPLICATION_FOLLOW_UP_INTERVAL": "1s",
		"CLOCK_START": dayOne,
	}
	p := env.Start(over)
	pool := db(t, env)

	users := []*weekUser{
		{lang: "ru", id: 7_310_001, name: "Иван", zone: "/timezone Москва", words: weekRu, resume: "resume.pdf", mime: "application/pdf"},
		{lang: "en", id: 7_310_002, name: "Ann", words: weekEn, resume: "resume.txt", mime: "text/plain"},
		{lang: "uk", id: 7_310_003, name: "Олена", zone: "/timezone Київ", words: weekUk, resume: "resume.docx",
			mime: "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
	}
	for _, u := range users {
		u.who = env.TG.User(u.id, u.name, u.lang)
	}
	if out := mode.out(); out != "" {
		// Written even when the week stops half-way, to read what was sent.
		t.Cleanup(func() {
			var sb strings.Builder
			for _, u := range users {
				writeWeekChat(&sb, env, u.id, u.lang+", "+u.name)
			}
			writeWeekChat(&sb, env, team.ID, "group")
			_ = os.WriteFile(out, []byte(sb.String()), 0o644)
		})
	}
	each := func(phase string, do func(t *testing.T, u *weekUser)) {
		t.Helper()
		began := time.Now()
		t.Run(phase, func(t *testing.T) {
			for _, u := range users {
				t.Run(u.lang, func(t *testing.T) {
					t.Parallel()
					do(t, u)
				})
			}
		})
		t.Logf("%s: %s", phase, time.Since(began).Round(time.Second))
		if t.Failed() {
			t.FailNow()
		}
	}

	each("day one", func(t *testing.T, u *weekUser) { u.dayOne(t, env) })
	// HH lists new senior vacancies; each seeker, now on digests, saves a
	// search that finds them.
	env.HH.Add(seniors...)
	each("day one, later", func(t *testing.T, u *weekUser) { u.dayOneLater(t, env, pool) })
	// Private commands typed in a group with the team; the group's answer
	// points to the private chat with a link that runs the command there.
	for _, u := range users {
		for _, text := range []string{"/applications", "/memory", "/skills"} {
			ask(t, env, u.who, team.ID, text)
		}
		link := env.TG.Messages(team.ID)
		require.Equal(t, "https://t.me/tgfake_bot?start=skills", link[len(link)-1].ReplyMarkup.Buttons()[0].URL)
		reply(t, env, u.who, "/start skills", u.words.skillsHeader)
	}

	quiet(t, pool)
	p.Signal(syscall.SIGTERM)
	require.Zero(t, p.Wait(30*time.Second))
	over["CLOCK_START"] = weekLater
	env.Start(over)
	each("a week later", func(t *testing.T, u *weekUser) { u.weekLater(t, env) })

	// Everything sent has been handled and delivered.
	env.TG.WaitUpdatesConsumed(t)
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE state = 'pending'`) == 0
	})
	assert.Empty(t, env.TG.UnansweredCallbacks(), "a button left spinning")
	mode.everyMessageInItsTopic(t, env, pool, 0)
	for _, u := range users {
		timesToldIn(t, env, u.id, u.readerZone(t)) // a setting's daily times are in it
		for _, r := range weekReadables(env, u.id) {
			checkWeekText(t, u.lang, r)
		}
	}
	private := []string{"developer 75", "Kafka", "PostgreSQL"}
	for _, u := range users {
		private = append(private, u.words.chats[0], u.words.correction)
	}
	timesToldIn(t, env, team.ID, time.UTC)
	for _, r := range weekReadables(env, team.ID) {
		checkWeekText(t, "group", r)
		for _, p := range private {
			assert.NotContains(t, r.text, p, "a private thing shown in the group: %s", r.where)
		}
	}
	t.Logf("the week took %s", time.Since(begun).Round(time.Second))
}

// weekWords are what a seeker of one language reads and presses, as the
// catalog (locales/*.toml) writes it, and what they write.
type weekWords struct {
	zoneSet, profileSaved, searchSaved, vacanciesHeader, searchesHeader string
	letter, another, shorter, formal                                    string
	applied, notInterested, invited, offer, rejected, noAnswer          string
	appsHeader, skillsHeader                                            string
	settingsHeader, cap, digest, size                                   string
	reading, draft, use, used, profileHeader                            string
	memoriesHeader, deleteN, correctN, deleteYes, deleteConfirm         string
	deleted, correctAsk, corrected, aboutFound, aboutYes, aboutDeleted  string
	incognitoOff, help                                                  string
	historyN, historyHeader, back                                       string

	profile    string
	chats      []string // the memory chat's messages; [1] is forgotten by forget, [2] deleted, [0] corrected
	forget     string
	correction string
	incognito  string
}

var weekEn = weekWords{
	profileSaved: "Profile saved", searchSaved: "Saved:", vacanciesHeader: "Your vacancies", searchesHeader: "Your searches",
	letter: "✍️ Cover letter", another: "🔄 Another version", shorter: "✂️ Shorter", formal: "🎩 More formal",
	applied: "✅ Applied", notInterested: "🚫 Not interested", invited: "🎉 Invited", offer: "🏆 Offer", rejected: "❌ Rejected", noAnswer: "🔇 No answer",
	appsHeader: "Your applications", skillsHeader: "Skills asked for",
	settingsHeader: "How vacancies reach you", cap: "20 a day", digest: "Digest", size: "3 per page",
	reading: "Reading your résumé", draft: "Your profile, drafted from your résumé", use: "✅ Use this profile",
	used: "This is your profile now", profileHeader: "Your profile",
	memoriesHeader: "What I remember about you", deleteN: "🗑 Delete %d", correctN: "✏️ Correct %d", deleteYes: "Delete",
	deleteConfirm: "Delete this memory?", deleted: "Deleted:", correctAsk: "Send me the corrected text", corrected: "Corrected.",
	aboutFound: "I found memories matching that", aboutYes: "Delete (1)", aboutDeleted: "Forgotten.",
	incognitoOff: "Incognito is off", help: "What I can do for you",
	historyN: "🕘 History %d", historyHeader: "History of this memory", back: "‹ Back",

	profile: "Go developer, 5 years, PostgreSQL, Kafka, remote",
	chats: []string{"I run 5 km every morning before work", "I am learning Spanish twice a week", "My cat Tom wakes me at six",
		"I have an interview at Acme on Friday", "I drink green tea and never coffee", "I live in Berlin near the river"},
	forget:     "Please forget what I told you about Spanish",
	correction: "I run 10 km every morning before work",
	incognito:  "Between us: I am thinking of leaving my team",
}

var weekRu = weekWords{
	zoneSet: "✅ Часовой пояс", profileSaved: "Профиль сохранён", searchSaved: "Сохранено:", vacanciesHeader: "Ваши вакансии", searchesHeader: "Ваши поиски",
	letter: "✍️ Сопроводительное письмо", another: "🔄 Другой вариант", shorter: "✂️ Короче", formal: "🎩 Официальнее",
	applied: "✅ Отклик отправлен", notInterested: "🚫 Не интересно", invited: "🎉 Пригласили", offer: "🏆 Оффер", rejected: "❌ Отказ", noAnswer: "🔇 Нет ответа",
	appsHeader: "Ваши отклики", skillsHeader: "Навыки, которые требуются",
	settingsHeader: "Как приходят вакансии", cap: "20 в день", digest: "Подборкой", size: "По 3",
	reading: "Читаю ваше резюме", draft: "Ваш профиль, составленный по резюме", use: "✅ Сохранить профиль",
	used: "Теперь это ваш профиль", profileHeader: "Ваш профиль",
	memoriesHeader: "Что я о вас помню", deleteN: "🗑 Удалить %d", correctN: "✏️ Исправить %d", deleteYes: "Удалить",
	deleteConfirm: "Удалить эту запись?", deleted: "Удалено:", correctAsk: "Пришлите исправленный текст", corrected: "Исправлено.",
	aboutFound: "Нашёл подходящие записи", aboutYes: "Удалить (1)", aboutDeleted: "Забыто.",
	incognitoOff: "Режим инкогнито выключен", help: "Что я умею",
	historyN: "🕘 История %d", historyHeader: "История записи", back: "‹ Назад",

	profile: "Go-разработчик, 5 лет опыта, PostgreSQL, Kafka, удалённо",
	chats: []string{"Я бегаю 5 км каждое утро перед работой", "Я учу испанский два раза в неделю", "Мой кот Барсик будит меня в шесть",
		"В пятницу у меня собеседование в Acme", "Пью зелёный чай, кофе не пью", "Живу в Москве рядом с парком"},
	forget:     "Забудь, что я говорил про испанский",
	correction: "Я бегаю 10 км каждое утро перед работой",
	incognito:  "Между нами: думаю уйти из команды",
}

var weekUk = weekWords{
	zoneSet: "✅ Часовий пояс", profileSaved: "Профіль збережено", searchSaved: "Збережено:", vacanciesHeader: "Ваші вакансії", searchesHeader: "Ваші пошуки",
	letter: "✍️ Супровідний лист", another: "🔄 Інший варіант", shorter: "✂️ Коротше", formal: "🎩 Офіційніше",
	applied: "✅ Відгук надіслано", notInterested: "🚫 Не цікаво", invited: "🎉 Запросили", offer: "🏆 Офер", rejected: "❌ Відмова", noAnswer: "🔇 Немає відповіді",
	appsHeader: "Ваші відгуки", skillsHeader: "Навички, потрібні",
	settingsHeader: "Як надходять вакансії", cap: "20 на день", digest: "Добіркою", size: "По 3",
	reading: "Читаю ваше резюме", draft: "Ваш профіль, складений за резюме", use: "✅ Зберегти профіль",
	used: "Тепер це ваш профіль", profileHeader: "Ваш профіль",
	memoriesHeader: "Що я про вас пам'ятаю", deleteN: "🗑 Видалити %d", correctN: "✏️ Виправити %d", deleteYes: "Видалити",
	deleteConfirm: "Видалити цей запис?", deleted: "Видалено:", correctAsk: "Надішліть виправлений текст", corrected: "Виправлено.",
	aboutFound: "Знайшов відповідні записи", aboutYes: "Видалити (1)", aboutDeleted: "Забуто.",
	incognitoOff: "Режим інкогніто вимкнено", help: "Що я вмію",
	historyN: "🕘 Історія %d", historyHeader: "Історія запису", back: "‹ Назад",

	profile: "Go-розробниця, 5 років досвіду, PostgreSQL, Kafka, віддалено",
	chats: []string{"Я бігаю 5 км щоранку перед роботою", "Я вчу іспанську двічі на тиждень", "Мій кіт Мурчик будить мене о шостій",
		"У п'ятницю в мене співбесіда в Acme", "П'ю зелений чай і ніколи не п'ю каву", "Живу в Києві біля парку"},
	forget:     "Забудь, що я казала про іспанську",
	correction: "Я бігаю 10 км щоранку перед роботою",
	incognito:  "Між нами: думаю піти з команди",
}

// weekUser is one seeker of the week.
type weekUser struct {
	lang, name, zone string
	id               int64
	words            weekWords
	resume, mime     string
	who              *tgfake.Person
}

// readerZone is the zone the user's times are written in: the one they
// chose, else their language's.
func (u *weekUser) readerZone(t *testing.T) *time.Location {
	t.Helper()
	if u.zone == "" {
		return locales.LangZone(u.lang)
	}
	_, loc, err := locales.ParseZone(strings.TrimPrefix(u.zone, "/timezone "))
	require.NoError(t, err)
	return loc
}

// scriptLang is the language a text the scripted model reads is in, as a
// model would tell: Ukrainian by its letters, Russian by Cyrillic.
func scriptLang(s string) string {
	switch {
	case strings.ContainsAny(s, "іїєґІЇЄҐ"):
		return "uk"
	case strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Cyrillic, r) }):
		return "ru"
	}
	return "en"
}

// weekLetters are the scripted letters by language and task; each has a
// phrase of its own (the second) to find it by.
var weekLetters = map[string]map[string][2]string{
	"en": {
		"draft":   {letterDraft, "five years, mostly services"},
		"another": {letterAnother, "have been my work for five years"},
		"shorter": {letterShort, "as your vacancy asks"},
		"formal":  {"Dear Sir or Madam,\n\nPlease consider my application. For five years I have developed Go services on PostgreSQL, as this position requires.\n\nI would welcome the opportunity to discuss it.\n\nAnn", "Please consider my application"},
	},
	"ru": {
		"draft":   {"Здравствуйте!\n\nПять лет пишу на **Go**, в основном сервисы на PostgreSQL — то, что нужно в этой вакансии.\n\nБуду рад(а) поговорить.", "в основном сервисы"},
		"another": {"Добрый день!\n\nСервисы на Go и PostgreSQL — моя работа последние пять лет, и ваша вакансия как раз об этом.\n\nДавайте обсудим.", "моя работа последние"},
		"shorter": {"Здравствуйте!\n\nПять лет Go и PostgreSQL — как и нужно в вакансии. Готов(а) поговорить в любое время.", "как и нужно в вакансии"},
		"formal":  {"Уважаемые коллеги!\n\nПрошу рассмотреть мою кандидатуру. Пять лет я разрабатываю сервисы на Go и PostgreSQL, что соответствует требованиям вакансии.\n\nС уважением.", "Прошу рассмотреть"},
	},
	"uk": {
		"draft":   {"Доброго дня!\n\nП'ять років пишу на **Go**, переважно сервіси на PostgreSQL — саме те, що потрібно у вакансії.\n\nБуду рада поговорити.\n\nОлена", "переважно сервіси"},
		"another": {"Вітаю!\n\nСервіси на Go та PostgreSQL — моя робота останні п'ять років, і ваша вакансія саме про це.\n\nДавайте обговоримо.\n\nОлена", "моя робота останні"},
		"shorter": {"Доброго дня!\n\nП'ять років Go та PostgreSQL — як і потрібно у вакансії. Буду рада поговорити.\n\nОлена", "як і потрібно у вакансії"},
		"formal":  {"Шановні колеги!\n\nПрошу розглянути мою кандидатуру. П'ять років я розробляю сервіси на Go та PostgreSQL, що відповідає вимогам вакансії.\n\nЗ повагою,\nОлена", "Прошу розглянути"},
	},
}

// scriptWeek scripts the model as it would answer each seeker: in their
// language, in Markdown where a model writes it, the memory chat's
// answers streamed. Rules added first answer first, so the archivist's
// comes before scriptMemory's.
func scriptWeek(env *e2e.Env) {
	env.LLM.On(llmtest.SystemContains("You summarise one exchange")).Named("week archivist").
		ReplyFunc(func(r llmtest.Request) string {
			_, rest, _ := strings.Cut(r.Prompt, "## The user wrote\n")
			q, _, _ := strings.Cut(rest, "\n")
			lang := scriptLang(q)
			said := map[string]string{"en": "Ann said: ", "ru": "Иван рассказал: ", "uk": "Олена розповіла: "}[lang]
			tag := map[string]string{"en": "life", "ru": "жизнь", "uk": "життя"}[lang]
			b, _ := json.Marshal(map[string]any{"summary": said + q, "tags": []string{tag}})
			return string(b)
		})
	scriptMemory(env).ReplyFunc(func(r llmtest.Request) string {
		lines := strings.Split(strings.TrimSpace(r.Prompt), "\n")
		q := lines[len(lines)-1]
		switch scriptLang(q) {
		case "ru":
			return "**Понял.** Вы написали: *" + q + "*\n\n- Буду иметь это в виду\n- Спрашивайте, если что"
		case "uk":
			return "**Зрозумів.** Ви написали: *" + q + "*\n\n- Матиму це на увазі\n- Питайте, якщо що"
		}
		return "**Noted.** You wrote: *" + q + "*\n\n- I will keep it in mind\n- Ask me anything about it"
	}).ChunkDelay(60 * time.Millisecond)
	screening(env).ReplyFunc(func(r llmtest.Request) string {
		_, profile, _ := strings.Cut(r.Prompt, "## Seeker profile\n")
		profile, _, _ = strings.Cut(profile, "\n## ")
		reason := map[string]string{
			"en": "Go and PostgreSQL match the profile", "ru": "Go и PostgreSQL совпадают с профилем",
			"uk": "Go та PostgreSQL збігаються з профілем",
		}[scriptLang(profile)]
		b, _ := json.Marshal(map[string]any{"is_relevant": true, "score": 87, "reasons": []string{reason}, "matched_skills": []string{"Go", "PostgreSQL"}})
		return string(b)
	})
	writer(env).ReplyFunc(func(r llmtest.Request) string {
		// In the language chosen on the letter, else in the vacancy's.
		_, vacancy, _ := strings.Cut(r.Prompt, "## Vacancy\n")
		lang := scriptLang(vacancy)
		for code, name := range map[string]string{"en": "in English", "ru": "in Russian", "uk": "in Ukrainian"} {
			if strings.Contains(r.System, name) {
				lang = code
			}
		}
		style := "draft"
		switch {
		case strings.Contains(r.Prompt, "half its length"):
			style = "shorter"
		case strings.Contains(r.Prompt, "more formal"):
			style = "formal"
		case strings.Contains(r.Prompt, "new version"):
			style = "another"
		}
		return weekLetters[lang][style][0]
	})
	resumeRule(env).ReplyFunc(func(r llmtest.Request) string {
		profile := "Senior Go developer, 7 years: Go, PostgreSQL, Kafka, Redis, Kubernetes, gRPC. Looking for remote senior backend work."
		switch {
		case strings.Contains(r.Prompt, pdfPhrase):
			profile = "Senior Go-разработчик, 7 лет: Go, PostgreSQL, Kafka, Redis. Ищу удалённую работу, senior backend."
		case strings.Contains(r.Prompt, docxPhrase):
			profile = "Senior Go-розробниця, 7 років: Go, PostgreSQL, Kafka, Redis. Шукаю віддалену роботу, senior backend."
		}
		b, _ := json.Marshal(map[string]any{"profile": profile})
		return string(b)
	})
}

// shown waits until the bot's message shows a button labelled label and
// returns it as it is then.
func shown(t *testing.T, env *e2e.Env, chat int64, id int, label string) tgfake.BotMessage {
	t.Helper()
	var m tgfake.BotMessage
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		m, _ = env.TG.MessageByID(chat, id)
		return slices.Contains(m.ReplyMarkup.Labels(), label)
	})
	return m
}

// tap presses the button labelled label on the bot's message once it is
// shown, and checks the press was taken (no alert).
func tap(t *testing.T, env *e2e.Env, who *tgfake.Person, id int, label string) tgfake.CallbackAnswer {
	t.Helper()
	m := shown(t, env, who.ID(), id, label)
	ans := who.PressAndWait(t, m, label)
	require.False(t, ans.ShowAlert, "%q on %q was refused: %q", label, m.Text, ans.Text)
	return ans
}

// memoryNumber is the number /memory gives the memory whose text holds
// snippet ("N. time · tags" above the text).
func memoryNumber(t *testing.T, page, snippet string) int {
	t.Helper()
	lines := strings.Split(page, "\n")
	for i := 1; i < len(lines); i++ {
		if strings.Contains(lines[i], snippet) {
			n, _, ok := strings.Cut(lines[i-1], ".")
			if num, err := strconv.Atoi(n); ok && err == nil {
				return num
			}
		}
	}
	t.Fatalf("no memory %q on the page:\n%s", snippet, page)
	return 0
}

// card is the user's vacancy card of the vacancy with this id.
func card(t *testing.T, env *e2e.Env, chat int64, id string) tgfake.BotMessage {
	t.Helper()
	for _, m := range vacancyMessages(env, chat) {
		if strings.Contains(m.Text, "developer "+id) {
			return m
		}
	}
	t.Fatalf("no card of vacancy %s in chat %d", id, chat)
	return tgfake.BotMessage{}
}

// dayOne: the cards, a letter and its rewrites, the pipeline, the reports
// and /settings.
func (u *weekUser) dayOne(t *testing.T, env *e2e.Env) {
	w, who, chat := u.words, u.who, u.id
	ask(t, env, who, chat, "/start")
	if u.zone != "" {
		reply(t, env, who, u.zone, w.zoneSet)
	}
	reply(t, env, who, "/profile "+w.profile, w.profileSaved)
	reply(t, env, who, "/search golang", w.searchSaved)
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, chat)) == 5 })
	reply(t, env, who, "/vacancies", w.vacanciesHeader)

	// A cover letter (in the vacancy's language, Russian), then another
	// version of it (Ann and Олена ask for theirs with the letter's
	// language button), a shorter one and a more formal one, each a
	// message of its own.
	after := card(t, env, chat, "7500").MessageID
	ans := tap(t, env, who, after, w.letter)
	assert.NotEmpty(t, ans.Text, "the press says a letter is on its way")
	another := map[string]string{"ru": w.another, "en": "English", "uk": "Українська"}[u.lang]
	for _, step := range []struct{ press, lang, style string }{
		{"", "ru", "draft"}, {another, u.lang, "another"}, {w.shorter, u.lang, "shorter"}, {w.formal, u.lang, "formal"},
	} {
		if step.press != "" {
			tap(t, env, who, after, step.press)
		}
		after = env.TG.WaitMessageAfter(t, chat, after, func(m tgfake.BotMessage) bool {
			return hasPre(m, weekLetters[step.lang][step.style][1])
		}).MessageID
	}

	// The pipeline: one application to an offer, one rejected, one with no
	// answer, one left waiting; one vacancy not interesting.
	offered := card(t, env, chat, "7500").MessageID
	assert.NotEmpty(t, tap(t, env, who, offered, w.applied).Text)
	tap(t, env, who, offered, w.invited)
	tap(t, env, who, offered, w.offer)
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		m, _ := env.TG.MessageByID(chat, offered)
		return strings.Contains(m.Text, "🏆") && !slices.Contains(m.ReplyMarkup.Labels(), w.rejected)
	})
	for id, then := range map[string]string{"7501": w.rejected, "7502": w.noAnswer, "7503": ""} {
		c := card(t, env, chat, id).MessageID
		tap(t, env, who, c, w.applied)
		if then != "" {
			tap(t, env, who, c, then)
		}
	}
	tap(t, env, who, card(t, env, chat, "7504").MessageID, w.notInterested)
	reply(t, env, who, "/applications", w.appsHeader)
	reply(t, env, who, "/skills", w.skillsHeader)

	// /settings: a cap of 20 cards a day, quiet hours 23:00–07:00, then
	// digests of three at 09:00 and 13:00.
	settings := reply(t, env, who, "/settings", w.settingsHeader).MessageID
	for _, label := range []string{w.cap, "23:00–07:00", w.digest, "13:00", "✓ 18:00", w.size} {
		assert.NotEmpty(t, tap(t, env, who, settings, label).Text, "the press on %q says it is saved", label)
	}
	m, _ := env.TG.MessageByID(chat, settings)
	assert.Contains(t, m.Text, "09:00, 13:00")
	assert.Contains(t, m.Text, "23:00–07:00")
}

// dayOneLater: a second search whose vacancies wait for the digest, a
// résumé made the profile, and the memory chat.
func (u *weekUser) dayOneLater(t *testing.T, env *e2e.Env, pool *pgxpool.Pool) {
	w, who, chat := u.words, u.who, u.id
	reply(t, env, who, "/search golang senior", w.searchSaved)
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM vacancy_matches WHERE user_id = $1 AND status = 'ANALYZED' AND card = 'digest'`, u.id) == 4
	})
	reply(t, env, who, "/searches", w.searchesHeader)
	reply(t, env, who, "/vacancies", w.vacanciesHeader)

	sent := who.SendDocument(chat, "CV "+u.name+filepath.Ext(u.resume), u.mime, resumeFile(t, u.resume))
	env.TG.WaitMessageAfter(t, chat, sent.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, w.reading) })
	draft := env.TG.WaitMessageAfter(t, chat, sent.MessageID, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, w.draft) })
	tap(t, env, who, draft.MessageID, w.use)
	edited(t, env, chat, draft.MessageID, func(s string) bool { return strings.Contains(s, w.used) })
	reply(t, env, who, "/profile", w.profileHeader)

	// The memory chat: six messages, each answered as it is written.
	answered := scriptLangMarker[u.lang]
	for _, text := range w.chats {
		q := who.SendText(chat, text)
		env.TG.WaitMessage(t, chat, func(m tgfake.BotMessage) bool {
			return m.ReplyToID() == q.MessageID && strings.Contains(m.Text, answered)
		})
	}
	remembered := func() int {
		return scalar[int](t, pool, `SELECT count(*) FROM lsm_storage WHERE user_id = $1 AND invalid_at IS NULL`, u.id)
	}
	eventually(t, 60*time.Second, func() bool { return remembered() == len(w.chats) })
	assert.NotEmpty(t, env.TG.Drafts(chat), "the answers were shown as they were written")

	// /memory: five on a page, the sixth on the next; the oldest is
	// corrected there.
	page := reply(t, env, who, "/memory", w.memoriesHeader).MessageID
	tap(t, env, who, page, "›")
	second := edited(t, env, chat, page, func(s string) bool { return strings.Contains(s, "6–6") })
	tap(t, env, who, page, fmt.Sprintf(w.correctN, memoryNumber(t, second.Text, w.chats[0])))
	env.TG.WaitMessageAfter(t, chat, page, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, w.correctAsk) })
	reply(t, env, who, w.correction, w.corrected)

	// The corrected one's history, and back; then delete one with its
	// button.
	page = reply(t, env, who, "/memory", w.memoriesHeader).MessageID
	m, _ := env.TG.MessageByID(chat, page)
	tap(t, env, who, page, fmt.Sprintf(w.historyN, memoryNumber(t, m.Text, w.correction)))
	edited(t, env, chat, page, func(s string) bool { return strings.HasPrefix(s, w.historyHeader) })
	tap(t, env, who, page, w.back)
	m = edited(t, env, chat, page, func(s string) bool { return strings.HasPrefix(s, w.memoriesHeader) })
	tap(t, env, who, page, fmt.Sprintf(w.deleteN, memoryNumber(t, m.Text, w.chats[2])))
	edited(t, env, chat, page, func(s string) bool { return strings.Contains(s, w.deleteConfirm) })
	tap(t, env, who, page, w.deleteYes)
	edited(t, env, chat, page, func(s string) bool { return strings.HasPrefix(s, w.deleted) })

	// Forget one in plain words.
	found := reply(t, env, who, w.forget, w.aboutFound).MessageID
	tap(t, env, who, found, w.aboutYes)
	edited(t, env, chat, found, func(s string) bool { return strings.HasPrefix(s, w.aboutDeleted) })
	eventually(t, 30*time.Second, func() bool { return remembered() == len(w.chats)-2 })

	cmd := who.SendText(chat, "/export")
	md, js := exportFiles(t, env, who, cmd.MessageID)
	assert.NotEmpty(t, md.Caption)
	assert.NotEmpty(t, js.Caption)

	reply(t, env, who, "/incognito", "🕶")
	q := who.SendText(chat, w.incognito)
	env.TG.WaitMessage(t, chat, func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.Contains(m.Text, "🕶")
	})
	reply(t, env, who, "/incognito", w.incognitoOff)
}

// scriptLangMarker is how the scripted mentor's answer begins, as the
// user reads it.
var scriptLangMarker = map[string]string{"en": "Noted.", "ru": "Понял.", "uk": "Зрозумів."}

// weekLater: the digest of the senior vacancies and a card from it, the
// reminder about the application left waiting, and the reports.
func (u *weekUser) weekLater(t *testing.T, env *e2e.Env) {
	w, who, chat := u.words, u.who, u.id
	digest := env.TG.WaitMessage(t, chat, func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "📬") })
	for _, l := range digest.ReplyMarkup.Labels() {
		if strings.HasSuffix(l, "▶") {
			tap(t, env, who, digest.MessageID, l)
			env.TG.WaitFor(t, 30*time.Second, func() bool {
				m, _ := env.TG.MessageByID(chat, digest.MessageID)
				return !slices.Contains(m.ReplyMarkup.Labels(), l)
			})
		}
	}
	digest, _ = env.TG.MessageByID(chat, digest.MessageID)
	require.NotEmpty(t, digest.ReplyMarkup.Labels())
	number := digest.ReplyMarkup.Labels()[0]
	assert.NotEmpty(t, tap(t, env, who, digest.MessageID, number).Text)
	env.TG.WaitMessageAfter(t, chat, digest.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Senior Golang developer") && len(vacancyMessages(env, chat)) == 6
	})

	reminder := env.TG.WaitMessage(t, chat, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔔") })
	assert.Contains(t, reminder.Text, "developer 7503")
	assert.NotEmpty(t, tap(t, env, who, reminder.MessageID, w.invited).Text)

	reply(t, env, who, "/applications", w.appsHeader)
	reply(t, env, who, "/vacancies", w.vacanciesHeader)
	reply(t, env, who, "/memory", w.memoriesHeader)
	reply(t, env, who, "/help", w.help)

	// A vacancy's link pasted from a browser: its card again, as it
	// stands, judged long ago (not the memory chat's question).
	pasted := who.SendText(chat, "https://hh.ru/vacancy/7501?from=share")
	card := env.TG.WaitMessageAfter(t, chat, pasted.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "developer 7501")
	})
	assert.NotEmpty(t, card.ReplyMarkup.Labels(), "the card comes with its buttons")
}

// weekReadable is one thing a reader saw: a version of a message, a
// caption, a button's answer, a streamed draft.
type weekReadable struct {
	where, text string
	buttons     []tgfake.InlineKeyboardButton
}

func weekReadables(env *e2e.Env, chat int64) []weekReadable {
	var out []weekReadable
	for _, m := range env.TG.Messages(chat) {
		versions := append(append([]tgfake.Message(nil), m.Edits...), m.Message)
		for i, v := range versions {
			where := fmt.Sprintf("chat %d, message #%d, version %d of %d", chat, m.MessageID, i+1, len(versions))
			if s := v.Shown(); s != "" {
				out = append(out, weekReadable{where: where, text: s, buttons: v.ReplyMarkup.Buttons()})
			}
		}
	}
	for _, c := range env.TG.Callbacks(chat) {
		if c.Answer.Text != "" {
			out = append(out, weekReadable{where: fmt.Sprintf("chat %d, the answer to a press of %q", chat, c.Query.Data), text: c.Answer.Text})
		}
	}
	for i, d := range env.TG.Drafts(chat) {
		out = append(out, weekReadable{where: fmt.Sprintf("chat %d, draft %d", chat, i+1), text: d.Text})
	}
	return out
}

var cyrillic = regexp.MustCompile(`\p{Cyrillic}`)

// checkWeekText asserts what the first hour's tour asserts of every
// message, and more: no markup or template leftovers, a reader of Russian
// or Ukrainian reads their language, every button leads somewhere.
func checkWeekText(t *testing.T, lang string, r weekReadable) {
	t.Helper()
	text := r.text
	readsRight(t, r.where, lang, text)
	assert.LessOrEqual(t, len([]rune(text)), 1000, "%s is a wall of text: %q", r.where, text)
	if lang == "ru" || lang == "uk" {
		assert.Regexp(t, cyrillic, text, "%s (%s) is not in the reader's language: %q", r.where, lang, text)
	}
	for _, b := range r.buttons {
		assert.NotEmpty(t, strings.TrimSpace(b.Text), "%s: a button without a label", r.where)
		assert.True(t, b.CallbackData != "" || b.Copies() != "" || b.Disabled != nil || strings.HasPrefix(b.URL, "https://") || strings.HasPrefix(b.URL, "tg://"),
			"%s: the button %q leads nowhere (%q)", r.where, b.Text, b.URL)
	}
}

// writeWeekChat writes a chat as its reader saw it: every message, the
// user's and the bot's, each of the bot's in every version with its
// buttons, what each press answered, the files sent.
func writeWeekChat(sb *strings.Builder, env *e2e.Env, chat int64, who string) {
	fmt.Fprintf(sb, "=== chat %d (%s)\n", chat, who)
	bot := map[int]tgfake.BotMessage{}
	for _, m := range env.TG.Messages(chat) {
		bot[m.MessageID] = m
	}
	presses := map[int][]tgfake.Callback{}
	for _, c := range env.TG.Callbacks(chat) {
		if c.Query.Message != nil {
			presses[c.Query.Message.MessageID] = append(presses[c.Query.Message.MessageID], c)
		}
	}
	label := func(m tgfake.BotMessage, data string) string {
		for _, v := range append(append([]tgfake.Message(nil), m.Edits...), m.Message) {
			for _, b := range v.ReplyMarkup.Buttons() {
				if b.CallbackData == data {
					return b.Text
				}
			}
		}
		return data
	}
	for _, h := range env.TG.History(chat) {
		m, ok := bot[h.MessageID]
		if !ok {
			text := h.Text
			if h.Document != nil {
				text = "[file " + h.Document.FileName + "]"
			}
			fmt.Fprintf(sb, ">>> #%d %s: %s\n", h.MessageID, h.From.FirstName, text)
			continue
		}
		delete(bot, h.MessageID)
		fmt.Fprint(sb, topicHeading(env, chat, m))
		writeWeekMessage(sb, m)
		for _, c := range presses[m.MessageID] {
			alert := ""
			if c.Answer.ShowAlert {
				alert = " (alert)"
			}
			fmt.Fprintf(sb, "    [pressed %q → %q%s]\n", label(m, c.Query.Data), c.Answer.Text, alert)
		}
	}
	for _, m := range bot { // deleted by the bot
		fmt.Fprint(sb, "(deleted) ")
		writeWeekMessage(sb, m)
	}
	if ds := env.TG.Drafts(chat); len(ds) > 0 {
		fmt.Fprintf(sb, "(streamed drafts: %d; the last: %q)\n", len(ds), ds[len(ds)-1].Text)
	}
}

func writeWeekMessage(sb *strings.Builder, m tgfake.BotMessage) {
	reply := ""
	if m.ReplyToID() != 0 {
		reply = fmt.Sprintf(" (reply to #%d)", m.ReplyToID())
	}
	for i, v := range m.Edits {
		fmt.Fprintf(sb, "--- #%d version %d%s\n%s\n", m.MessageID, i+1, weekButtons(v.ReplyMarkup), v.Shown())
	}
	fmt.Fprintf(sb, "--- #%d%s%s\n", m.MessageID, reply, weekButtons(m.ReplyMarkup))
	if m.File != nil {
		fmt.Fprintf(sb, "[file %s, %s] caption: %s\n", m.File.FileName, m.File.MimeType, m.Caption)
		if strings.HasSuffix(m.File.FileName, ".md") {
			fmt.Fprintf(sb, "%s\n[end of file]\n", m.File.Data)
		}
		return
	}
	fmt.Fprintf(sb, "%s\n", m.Shown())
}

func weekButtons(kb *tgfake.InlineKeyboardMarkup) string {
	var out []string
	for _, row := range kbRows(kb) {
		var cells []string
		for _, b := range row {
			switch {
			case b.URL != "":
				cells = append(cells, "["+b.Text+" → "+b.URL+"]")
			case b.Copies() != "":
				cells = append(cells, "["+b.Text+" ⎘ "+b.Copies()+"]")
			case b.Disabled != nil:
				cells = append(cells, "["+b.Text+" (disabled)]")
			case b.Style != "":
				cells = append(cells, "["+b.Text+" ("+b.Style+")]")
			default:
				cells = append(cells, "["+b.Text+"]")
			}
		}
		out = append(out, strings.Join(cells, " "))
	}
	if len(out) == 0 {
		return ""
	}
	return " " + strings.Join(out, " / ")
}

func kbRows(kb *tgfake.InlineKeyboardMarkup) [][]tgfake.InlineKeyboardButton {
	if kb == nil {
		return nil
	}
	return kb.InlineKeyboard
}
