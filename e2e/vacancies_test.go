package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/hh/hhtest"
	"switchboard/llm/llmtest"
	"switchboard/storage/storagetest"
)

// screening is the rule answering the bot's relevance prompt, named
// "relevance"; the test scripts its answer.
func screening(env *e2e.Env) *llmtest.Rule {
	return env.LLM.On(llmtest.SystemContains("screen job vacancies")).Named("relevance")
}

// relevantVacancies has HH list n golang vacancies (see golangVacancies)
// that the model finds relevant.
func relevantVacancies(env *e2e.Env, n int, first int64) {
	screening(env).ReplyJSON(relevantAnswer)
	env.HH.Add(golangVacancies(n, first)...)
}

var relevantAnswer = map[string]any{"is_relevant": true, "score": 87, "reasons": []string{"Go <and> PostgreSQL match"}, "matched_skills": []string{"Go"}}

// golangVacancies returns n vacancies a "golang" search finds, published in
// the last hour, oldest first, ids from first.
func golangVacancies(n int, first int64) []hhtest.Vacancy {
	vs := hhtest.Generate(n, hhtest.GenOptions{Seed: first, FirstID: first, Newest: time.Now().Add(-time.Hour).Truncate(time.Second)})
	for i := range vs {
		vs[i].Name = "Golang developer " + vs[i].ID
		vs[i].Experience = hhtest.Between1And3
	}
	return vs
}

func db(t *testing.T, env *e2e.Env) *pgxpool.Pool {
	t.Helper()
	// A test's own reads are one at a time; the connections are the
	// binaries'. Tests run three at once beside other packages' on one
	// PostgreSQL (max_connections 100 by default).
	cfg, err := pgxpool.ParseConfig(env.DatabaseURL)
	require.NoError(t, err)
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// startHourly starts the bot with searches fetched hourly, so that within
// a test a search is fetched only once, at once when it is saved, and opens
// the test's pool.
func startHourly(t *testing.T, env *e2e.Env) *pgxpool.Pool {
	t.Helper()
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})
	return db(t, env)
}

func statuses(t *testing.T, pool *pgxpool.Pool) map[string]int {
	t.Helper()
	return countBy(t, pool, `SELECT status, count(*) FROM vacancy_matches GROUP BY status`)
}

// countBy reads a query of (key, count) rows into a map.
func countBy(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) map[string]int {
	t.Helper()
	out := map[string]int{}
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT COALESCE(jsonb_object_agg(k, n), '{}') FROM (`+sql+`) AS q(k, n)`, args...).Scan(&out))
	return out
}

// eventually polls cond, which reads the database or a fake other than
// Telegram (tgfake's WaitFor only wakes on Telegram events), until it holds
// or timeout, the bound past which the system is not healthy; a failure
// says what why (if given) reports then.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, why ...func() string) {
	t.Helper()
	if cond() {
		return
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
		if cond() {
			return
		}
	}
	msg := "condition never satisfied"
	for _, w := range why {
		msg += ": " + w()
	}
	t.Fatal(msg)
}

// vacancyMessages are the bot's vacancy messages in a chat, in any of
// the three languages.
func vacancyMessages(env *e2e.Env, chatID int64) []tgfake.BotMessage {
	var out []tgfake.BotMessage
	for _, m := range env.TG.Messages(chatID) {
		if strings.Contains(m.Text, "Score: ") || strings.Contains(m.Text, "Оценка: ") || strings.Contains(m.Text, "Оцінка: ") {
			out = append(out, m)
		}
	}
	return out
}

// subscribe saves a profile and a search; it waits for each reply by its
// text, since a search others share may bring cards before it.
func subscribe(t *testing.T, env *e2e.Env, who *tgfake.Person, search string) {
	t.Helper()
	for _, step := range [][2]string{
		{"/profile Go developer, 5 years, PostgreSQL, remote", "Profile saved"},
		{"/search " + search, "Saved"},
	} {
		sent := who.SendText(who.ID(), step[0])
		env.TG.WaitMessageAfter(t, who.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
			return strings.Contains(m.Text, step[1])
		})
	}
}

// seeker is Ann, writing in English, once she has saved a Go profile and
// the search "golang".
func seeker(t *testing.T, env *e2e.Env, id int64) *tgfake.Person {
	t.Helper()
	ann := env.TG.User(id, "Ann", "en")
	subscribe(t, env, ann, "golang")
	return ann
}

// The main scenario: profile, search, a vacancy message with
// buttons, Applied; another user's forged press and a second press change
// nothing.
func TestVacancyDeliveredAndApplied(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	vs := golangVacancies(1, 7000)
	vs[0].Name = "Golang developer <b>Go & Rust</b>"
	env.HH.Add(vs...)
	pool := startHourly(t, env)

	ann := seeker(t, env, 601)
	// A new search is discovered at once, not at the next fetch tick.
	msg := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Score: 87/100") })
	require.Contains(t, msg.Text, "Golang developer <b>Go & Rust</b>", "HH's text arrives literally")
	require.Contains(t, msg.Text, "Go <and> PostgreSQL match", "the LLM's too")
	require.Contains(t, describe(msg), "✅ Applied")
	require.Contains(t, describe(msg), "https://hh.ru/vacancy/7000")

	ans := ann.PressAndWait(t, msg, "✅ Applied")
	require.False(t, ans.ShowAlert, ans.Text)
	edited, _ := env.TG.MessageByID(ann.ID(), msg.MessageID)
	require.Contains(t, edited.Text, "Applied")
	require.NotContains(t, describe(edited), "Not interested", "decision buttons gone")
	require.Contains(t, describe(edited), "https://hh.ru/vacancy/7000", "the link stays")
	var status string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM vacancy_matches`).Scan(&status))
	require.Equal(t, "APPLIED", status)

	// A second press (a stale client still showing the button) is harmless.
	data := msg.ReplyMarkup.Buttons()[0].CallbackData
	again := ann.PressRaw(msg, data)
	require.Contains(t, env.TG.WaitCallbackAnswer(t, again.ID).Text, "already")

	// Bob forges Ann's callback data on a message in his own chat.
	bob := env.TG.User(602, "Bob", "en")
	hello := ask(t, env, bob, bob.ID(), "/start")
	forged := bob.PressRaw(hello, data)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM vacancy_matches`).Scan(&status))
	require.Equal(t, "APPLIED", status)
	final, _ := env.TG.MessageByID(ann.ID(), msg.MessageID)
	require.Len(t, final.Edits, 1, "edited once")
}

func describe(m tgfake.BotMessage) string {
	var parts []string
	for _, b := range m.ReplyMarkup.Buttons() {
		parts = append(parts, b.Text+"→"+b.CallbackData+b.URL)
	}
	return strings.Join(parts, " | ")
}

// modelFailing starts the bot over a model that answers every screening
// call HTTP 500 (the returned rule) and n vacancies from first for the
// seeker id, the breaker opening at the second failure in a row, settings
// added. It returns once two matches have failed: the calls in flight when
// the breaker opened failed too, so two or more.
func modelFailing(t *testing.T, n int, first, id int64, settings map[string]string) (*e2e.Env, *llmtest.Rule, *pgxpool.Pool, *tgfake.Person) {
	t.Helper()
	env := e2e.New(t)
	rule := screening(env).Fault(llmtest.ServerError())
	env.HH.Add(golangVacancies(n, first)...)
	all := map[string]string{"FETCH_INTERVAL": "1h", "LLM_BREAKER_FAILURES": "2"}
	maps.Copy(all, settings)
	env.Start(all)
	pool := db(t, env)
	ann := seeker(t, env, id)
	eventually(t, 30*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM vacancy_matches WHERE failures = 1`) >= 2
	})
	return env, rule, pool, ann
}

// LLM down: the breaker opens on the first failures, the matches wait
// QUEUED (none SKIPPED) and /vacancies shows the breaker open; LLM back:
// they are delivered, the failed ones at their retry.
func TestVacancyBreakerHoldsMatchesUntilTheLLMIsBack(t *testing.T) {
	t.Parallel()
	env, rule, pool, ann := modelFailing(t, 4, 7100, 611, map[string]string{
		"RECOVERY_INTERVAL": "1s", "LLM_BREAKER_OPEN_FOR": "8s",
	})
	require.Equal(t, map[string]int{"QUEUED": 4}, statuses(t, pool), "nothing SKIPPED")
	stats := ask(t, env, ann, ann.ID(), "/vacancies")
	require.Contains(t, stats.Text, "The AI model is not answering; your vacancies will be checked when it is back.")
	require.NotContains(t, stats.Text, "closed", "no breaker jargon")
	require.Less(t, env.LLM.Calls("relevance"), 4, "no LLM call once the breaker is open")
	// The admin sees the queue: all four wait, those that failed are tried
	// again, and a turn the breaker cut short (if one was) is held back for it.
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	require.Regexp(t, `\nVacancy matches waiting to be judged: 4(, of them held back: [12] \(mostly: the AI model stopped answering\))?, `+
		`tried again after a failure: [234]; skipped, for recovery to try again: 0(\n|$)`, ask(t, env, boss, boss.ID(), "/status").Shown())

	rule.Fault(llmtest.Fault{}).ReplyJSON(relevantAnswer)
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 4 })
	// The message goes out just before its row says so.
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["SENT_TO_USER"] == 4 })
	require.Equal(t, map[string]int{"SENT_TO_USER": 4}, statuses(t, pool))
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "The AI model is answering.")
}

// The model down, then probed: while the half-open breaker's one probe
// hangs, the calls of the matches claimed meanwhile are turned away, and
// each such match waits for the breaker, not for the model's load. The
// admin's /status says the model stopped answering and the seeker's
// /vacancies that it is not answering: a probe out is not an answer.
func TestVacancyModelProbedReadsAsDown(t *testing.T) {
	t.Parallel()
	env, rule, pool, ann := modelFailing(t, 10, 7200, 621, map[string]string{
		"RECOVERY_INTERVAL": "1h", "QUEUE_INTERVAL": "1s",
		// Open briefly; the probe then hangs for longer than the test.
		"LLM_BREAKER_OPEN_FOR": "3s", "LLM_TIMEOUT": "5m",
	})
	rule.Fault(llmtest.Hang())
	eventually(t, 60*time.Second, func() bool { return env.LLM.InFlight() == 1 })
	eventually(t, 60*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM vacancy_matches WHERE wait_reason = 'breaker_open'`) >= 3
	})
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM vacancy_matches WHERE wait_reason = 'llm_busy'`),
		"nothing waits for a busy model")
	require.Equal(t, 1, env.LLM.InFlight(), "the probe still hangs")

	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	status := ask(t, env, boss, boss.ID(), "/status").Shown()
	require.Contains(t, status, "⏳ The AI model was not answering; I am checking whether it is back.")
	require.Regexp(t, `\nVacancy matches waiting to be judged: 10, of them held back: \d+ \(mostly: the AI model stopped answering\), `, status)
	stats := ask(t, env, ann, ann.ID(), "/vacancies").Text
	require.Contains(t, stats, "The AI model is not answering; your vacancies will be checked when it is back.")
	require.NotContains(t, stats, "The AI model is answering.")
}

// Two replicas on one database and Redis: every (user, vacancy) is
// delivered exactly once, and both replicas did part of the work.
func TestTwoReplicasDeliverEachVacancyOnce(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithRedis())
	screening(env).
		ReplyJSON(relevantAnswer).Latency(40 * time.Millisecond)
	env.HH.Add(golangVacancies(30, 7200)...)
	over := map[string]string{"FETCH_INTERVAL": "1h"}
	a := env.Start(over)
	b := env.Start(over)
	ann := env.TG.User(621, "Ann", "en")
	bob := env.TG.User(622, "Bob", "en")
	subscribe(t, env, ann, "golang")
	subscribe(t, env, bob, "golang")

	env.TG.WaitFor(t, 60*time.Second, func() bool {
		return len(vacancyMessages(env, ann.ID())) >= 30 && len(vacancyMessages(env, bob.ID())) >= 30
	})
	for _, who := range []*tgfake.Person{ann, bob} {
		seen := map[string]bool{}
		for _, m := range vacancyMessages(env, who.ID()) {
			title := strings.SplitN(m.Text, "\n", 2)[0]
			require.False(t, seen[title], "%s got %q twice", who.ID(), title)
			seen[title] = true
		}
		require.Len(t, seen, 30)
	}
	var sentA, sentB int
	// Counted as each worker queues its card in the outbox (the replicas'
	// senders then deliver them).
	eventually(t, 10*time.Second, func() bool {
		sentA, sentB = sentCount(t, a), sentCount(t, b)
		return sentA+sentB == 60
	})
	require.Positive(t, sentA, "replica A judged and queued some")
	require.Positive(t, sentB, "replica B judged and queued some")
}

var sentRx = regexp.MustCompile(`vacancy_matches_processed_total\{outcome="queued"\} (\d+)`)

func sentCount(t *testing.T, p *e2e.Process) int {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr() + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := sentRx.FindSubmatch(body)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// SIGTERM while the LLM is thinking: the matches in flight are put back
// QUEUED, claimable at once, each a wait and not a failure; the rest are
// untouched, and the exit is clean.
func TestVacancySIGTERMPutsMatchesInFlightBack(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).Fault(llmtest.Hang())
	env.HH.Add(golangVacancies(5, 7300)...)
	p := env.Start(map[string]string{"FETCH_INTERVAL": "1h", "LLM_MAX_CONCURRENCY": "2", "LLM_TIMEOUT": "2m"})
	pool := db(t, env)
	seeker(t, env, 631)
	eventually(t, 30*time.Second, func() bool { return env.LLM.Calls("relevance") == 2 })

	p.Signal(syscall.SIGTERM)
	require.Equal(t, 0, p.Wait(30*time.Second))
	// In flight are the two with the LLM and whatever the other two workers
	// (two per LLM slot) had claimed by the signal, waiting for a slot: how
	// many that is depends on how quickly they got there. A claim counts in
	// attempts, so each match says whether it was in flight.
	byClaim := countBy(t, pool, `SELECT status || ' claimed ' || attempts || ', waits ' || waits || ' (' || wait_reason || ')' ||
    ', failures ' || failures, count(*) FROM vacancy_matches GROUP BY 1`)
	const putBack, untouched = "QUEUED claimed 1, waits 1 (shutdown), failures 0", "QUEUED claimed 0, waits 0 (), failures 0"
	inFlight := byClaim[putBack]
	t.Logf("matches in flight at SIGTERM: %d", inFlight)
	require.Equal(t, map[string]int{putBack: inFlight, untouched: 5 - inFlight}, byClaim,
		"every match claimed is put back QUEUED, a wait; every other one untouched")
	require.GreaterOrEqual(t, inFlight, 2, "the two with the LLM")
	require.LessOrEqual(t, inFlight, 4, "no more than the workers")
	var claimed int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM vacancy_matches WHERE claim_token IS NOT NULL OR claimed_until > now()`).Scan(&claimed))
	require.Zero(t, claimed, "no claim outlives the process, and the next replica may take them at once")
}

// kill -9 while the LLM is thinking: the claims stay while no replica runs;
// the next process sees the dead one's liveness lock gone, takes them over
// within seconds and delivers. VACANCY_CLAIM_LEASE is ten minutes here, past
// the wait's bound: only the dead replica's lock can have told.
func TestVacancyKilledClaimsAreTakenOver(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	rule := screening(env).Fault(llmtest.Hang())
	env.HH.Add(golangVacancies(3, 7400)...)
	over := map[string]string{"FETCH_INTERVAL": "1h", "LLM_MAX_CONCURRENCY": "2", "LLM_TIMEOUT": "1m", "VACANCY_CLAIM_LEASE": "10m"}
	first := env.Start(over)
	pool := db(t, env)
	ann := seeker(t, env, 641)
	eventually(t, 30*time.Second, func() bool { return env.LLM.Calls("relevance") == 2 })
	first.Kill()

	var held []int64
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT COALESCE(array_agg(id), '{}') FROM vacancy_matches
WHERE status = 'QUEUED' AND claimed_until > now()`).Scan(&held))
	// Two are with the LLM; with two workers per LLM slot, a third may be
	// claimed and waiting for a slot.
	require.GreaterOrEqual(t, len(held), 2, "the dead process's claims are still held")

	rule.Fault(llmtest.Fault{}).ReplyJSON(relevantAnswer)
	env.Start(over)
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 3 })
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["SENT_TO_USER"] == 3 })
	var attempts, waits []int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT array_agg(attempts ORDER BY attempts), array_agg(waits ORDER BY attempts) FROM vacancy_matches`).Scan(&attempts, &waits))
	want, wantWaits := []int{1, 1, 1}, []int{0, 0, 0}
	for i := range held {
		want[len(want)-1-i], wantWaits[len(want)-1-i] = 2, 1
	}
	require.Equal(t, want, attempts, "the held matches were claimed twice, the others once")
	require.Equal(t, wantWaits, waits, "the dead process's turns are waits, not failures")
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM vacancy_matches WHERE failures > 0`))
}

// The model is not pulled: the start-up log and /status name it and the
// pull command, the admin chat is told once, the matches wait QUEUED with
// no storm of requests (a probe per LLM_BREAKER_OPEN_FOR), and once the
// model is there they are judged and delivered, none SKIPPED for it, and
// the admin chat hears the LLM is back.
func TestVacanciesWaitForAMissingModel(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	relevantVacancies(env, 4, 7300)
	env.LLM.ServeModels("nomic-embed-text")
	p := env.Start(map[string]string{
		"FETCH_INTERVAL": "1h", "RECOVERY_INTERVAL": "1s", "LLM_BREAKER_OPEN_FOR": "2s",
	})
	line := p.WaitLog(`"msg":"LLM model missing"`, 15*time.Second)
	require.Contains(t, line, `qwen2.5:7b`)
	require.Contains(t, line, `ollama pull qwen2.5:7b`)
	pool := db(t, env)
	ann := env.TG.User(631, "Ann", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	subscribe(t, env, ann, "golang")

	refusedNotice := func() int {
		n := 0
		for _, m := range env.TG.Messages(adminGroup) {
			if strings.Contains(m.Text, "The LLM refuses us") && strings.Contains(m.Text, "ollama pull qwen2.5:7b") {
				n++
			}
		}
		return n
	}
	env.TG.WaitFor(t, 30*time.Second, func() bool { return refusedNotice() == 1 })
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["QUEUED"] == 4 })
	before := len(env.LLM.Requests())
	time.Sleep(6 * time.Second) // the window the probes are counted in
	probes := len(env.LLM.Requests()) - before
	t.Logf("requests to the model server in 6 s while the model was missing: %d", probes)
	require.LessOrEqual(t, probes, 4, "a probe per open period, not a request per match")
	require.Equal(t, map[string]int{"QUEUED": 4}, statuses(t, pool), "nothing SKIPPED for a missing model")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/status").Shown(), "ollama pull qwen2.5:7b")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "ollama pull qwen2.5:7b")

	env.LLM.ServeModels("qwen2.5:7b", "nomic-embed-text")
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 4 })
	eventually(t, 10*time.Second, func() bool { return statuses(t, pool)["SENT_TO_USER"] == 4 })
	require.Equal(t, map[string]int{"SENT_TO_USER": 4}, statuses(t, pool))
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		for _, m := range env.TG.Messages(adminGroup) {
			if strings.Contains(m.Text, "The LLM answers again") {
				return true
			}
		}
		return false
	})
	require.Equal(t, 1, refusedNotice(), "told once")
}

// reply sends text and waits for the bot's answer that contains part
// (a note from the outbox may come first).
func reply(t *testing.T, env *e2e.Env, who *tgfake.Person, text, part string) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(who.ID(), text)
	return env.TG.WaitMessageAfter(t, who.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Shown(), part)
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
	relevantVacancies(env, 2, 8000)
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
	relevantVacancies(env, 3, 8100)
	env.Start(map[string]string{"FETCH_INTERVAL": "1s"})
	ann := seeker(t, env, 653)
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
	ann := seeker(t, env, 655)

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

// The built binary while HH answers every request with a captcha, then
// again: the admin chat hears of it once (with the captcha's URL and how
// to be let in for good) and once when it ends, /vacancies shows the HH
// state meanwhile, only the breaker's probes reach HH, and the user's
// cards arrive after recovery.
func TestVacanciesWaitWhileHHRefuses(t *testing.T) {
	t.Parallel()
	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	relevantVacancies(env, 4, 7400)
	env.HH.SetCaptcha(true)
	env.Start(map[string]string{
		"FETCH_INTERVAL": "1s", "HH_BREAKER_OPEN_FOR": "1s", "HH_BREAKER_MAX_OPEN": "2s",
	})
	pool := db(t, env)
	ann := seeker(t, env, 641)

	notices := func(part string) int {
		n := 0
		for _, m := range env.TG.Messages(adminGroup) {
			if strings.Contains(m.Text, part) {
				n++
			}
		}
		return n
	}
	env.TG.WaitFor(t, 30*time.Second, func() bool { return notices("HH.ru refuses our requests") == 1 })
	for _, m := range env.TG.Messages(adminGroup) {
		if strings.Contains(m.Text, "HH.ru refuses our requests") {
			require.Contains(t, m.Text, hhtest.CaptchaURL)
			require.Contains(t, m.Text, "HH_CLIENT_ID")
		}
	}
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "hh.ru refuses our requests")
	before := len(env.HH.Requests())
	time.Sleep(6 * time.Second) // the window the probes are counted in
	probes := len(env.HH.Requests()) - before
	t.Logf("requests to HH in 6 s while it asked for a captcha: %d", probes)
	require.LessOrEqual(t, probes, 6, "a probe per hold (1 s, then 2 s), not a request per tick or match")
	require.Empty(t, vacancyMessages(env, ann.ID()))
	require.Zero(t, statuses(t, pool)["SKIPPED"])

	env.HH.SetCaptcha(false)
	env.TG.WaitFor(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 4 })
	env.TG.WaitFor(t, 30*time.Second, func() bool { return notices("HH.ru answers again") == 1 })
	require.Equal(t, 1, notices("HH.ru refuses our requests"), "told once")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/vacancies").Text, "hh.ru is answering.")
	require.Equal(t, map[string]int{"SENT_TO_USER": 4}, statuses(t, pool))
}

// /skills counts the key skills of the vacancies the model found relevant,
// each vacancy once, and marks those the profile does not name; in the
// user's language, and only in private.
func TestSkillsCountsMatchedVacancies(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	screening(env).ReplyJSON(relevantAnswer)
	vs := golangVacancies(3, 7100)
	vs[0].KeySkills = []string{"Go", "PostgreSQL", "Docker"}
	vs[1].KeySkills = []string{"Golang", "Docker", "Kafka"}
	vs[2].KeySkills = []string{"Go", "docker", "<b>gRPC</b>"}
	env.HH.Add(vs...)
	env.Start(map[string]string{"FETCH_INTERVAL": "1h"})

	ann := env.TG.User(611, "Ann", "en")
	empty := ask(t, env, ann, ann.ID(), "/skills")
	require.Contains(t, empty.Text, "No vacancy has been found relevant for you in the last 30 days")

	subscribe(t, env, ann, "golang")
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 3 })
	got := ask(t, env, ann, ann.ID(), "/skills")
	t.Log(got.Text)
	lines := strings.Split(got.Text, "\n")
	require.Contains(t, got.Text, "Vacancies found relevant for you: 3; with key skills listed on hh.ru: 3.")
	// Docker: three vacancies (one wrote "docker"); "Golang" is another
	// skill on HH's side, so Go counts 2.
	require.Equal(t, []string{
		"1. Docker — 3 (100%) · not in your profile",
		"2. Go — 2 (67%)",
		"3. <b>gRPC</b> — 1 (33%) · not in your profile", // HH's text arrives literally
		"4. Golang — 1 (33%)",                            // the profile's "Go" through its alias
		"5. Kafka — 1 (33%) · not in your profile",
		"6. PostgreSQL — 1 (33%)",
	}, lines[3:9])
	require.Contains(t, got.Text, "Skills not in your profile: 3.")

	// In Russian, as a Russian speaker reads it.
	boris := env.TG.User(612, "Борис", "ru")
	for _, step := range [][2]string{
		{"/profile Бэкенд на Go, 5 лет, PostgreSQL", "Профиль сохранён"},
		{"/search golang", "Сохранено"},
	} {
		sent := boris.SendText(boris.ID(), step[0])
		env.TG.WaitMessageAfter(t, boris.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
			return strings.Contains(m.Text, step[1])
		})
	}
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, boris.ID())) == 3 })
	ru := ask(t, env, boris, boris.ID(), "/skills")
	t.Log(ru.Text)
	require.Contains(t, ru.Text, "Подходящих вам вакансий: 3; с ключевыми навыками на hh.ru: 3.")
	require.Contains(t, ru.Text, "1. Docker — 3 (100%) · нет в профиле")

	// Never in a group: it would show the profile's gaps to everyone there.
	group := env.TG.Group(-6110, "Team")
	inGroup := ask(t, env, ann, group.ID, "/skills")
	t.Log(inGroup.Text)
	require.NotContains(t, inGroup.Text, "Docker")
	require.Empty(t, slices.DeleteFunc(env.TG.Messages(group.ID), func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "Docker")
	}), "no skill is shown in the group")
}

// The card's buttons move an application Applied → Invited → Offer, each
// press editing the card; a stale press and a forged one change nothing;
// /applications counts it, overall and for the search that found it, and
// lists the application still waiting.
func TestPipelineButtonsAndApplications(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	relevantVacancies(env, 2, 7600)
	pool := startHourly(t, env)

	ann := seeker(t, env, 641)
	env.TG.WaitFor(t, 30*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 2 })
	cards := vacancyMessages(env, ann.ID())
	card, other := cards[0], cards[1]
	// HH's description comes collapsed, in an expandable quotation (Bot
	// API 7.3, which every server the bot supports has).
	require.True(t, slices.ContainsFunc(card.Entities, func(e tgfake.MessageEntity) bool { return e.Type == "expandable_blockquote" }),
		"the description is an expandable quotation: %q", card.Text)

	require.False(t, ann.PressAndWait(t, card, "✅ Applied").ShowAlert)
	card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
	require.Contains(t, card.Text, "Applied")
	require.Contains(t, describe(card), "🎉 Invited")
	require.Contains(t, describe(card), "🔇 No answer")
	rejected := buttonData(t, card, "❌ Rejected")

	require.Equal(t, "Marked: invited.", ann.PressAndWait(t, card, "🎉 Invited").Text)
	card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
	require.Contains(t, card.Text, "🎉 Invited")
	require.NotContains(t, describe(card), "No answer")
	offer := buttonData(t, card, "🏆 Offer")

	// Rejected as the Applied card offered it: not what the card shows now.
	stale := env.TG.WaitCallbackAnswer(t, ann.PressRaw(card, rejected).ID)
	require.True(t, stale.ShowAlert)
	require.Equal(t, "This application is already marked: Invited. Nothing changed.", stale.Text)

	// Bob forges Ann's Offer on a message of his own chat.
	bob := env.TG.User(642, "Bob", "en")
	forged := env.TG.WaitCallbackAnswer(t, bob.PressRaw(ask(t, env, bob, bob.ID(), "/start"), offer).ID)
	require.Equal(t, "This button is not for you.", forged.Text)
	require.Equal(t, map[string]int{"INVITED": 1, "SENT_TO_USER": 1}, statuses(t, pool))

	require.Equal(t, "Marked: offer.", ann.PressAndWait(t, card, "🏆 Offer").Text)
	card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
	require.Contains(t, card.Text, "🏆 Offer received")
	require.NotContains(t, describe(card), "Rejected", "an offer is final")
	require.False(t, ann.PressAndWait(t, other, "✅ Applied").ShowAlert)
	require.Equal(t, map[string]int{"OFFER": 1, "APPLIED": 1}, statuses(t, pool))

	// A server with rich messages (Bot API 10.1) gets the funnel as a
	// table, the searches' funnels as a table in a collapsed section.
	report := ask(t, env, ann, ann.ID(), "/applications")
	require.NotNil(t, report.RichMessage, "sent by sendRichMessage: %q", report.Text)
	funnelTable := func(m tgfake.BotMessage) [][]string {
		t.Helper()
		table, ok := tgfake.Find(m.RichMessage.Blocks, "table")
		require.True(t, ok, m.Shown())
		return table.Rows()
	}
	require.Equal(t, [][]string{{"Applied", "Answered", "Invited", "Offers"}, {"2", "1", "1", "1"}}, funnelTable(report))
	bySearch, ok := tgfake.Find(report.RichMessage.Blocks, "details")
	require.True(t, ok)
	require.Equal(t, "By search", bySearch.Summary.String())
	require.False(t, bySearch.IsOpen)
	searches, ok := tgfake.Find(bySearch.Blocks, "table")
	require.True(t, ok)
	require.Equal(t, [][]string{{"Search", "Applied", "Answered", "Invited", "Offers"}, {"golang", "2", "1", "1", "1"}}, searches.Rows())
	require.Contains(t, report.Shown(), "Waiting for an answer: 1\n1. ")
	require.Equal(t, "1 · 🎉 Invited", report.ReplyMarkup.Buttons()[0].Text)

	// A step pressed in the report redraws it with the new counts, a rich
	// message still.
	require.Equal(t, "Marked: rejected.", ann.PressAndWait(t, report, "1 · ❌ Rejected").Text)
	report, _ = env.TG.MessageByID(ann.ID(), report.MessageID)
	require.NotNil(t, report.RichMessage)
	require.Equal(t, [][]string{{"Applied", "Answered", "Invited", "Offers"}, {"2", "2", "1", "1"}}, funnelTable(report))
	require.NotContains(t, report.Shown(), "Waiting for an answer")
	require.Empty(t, report.ReplyMarkup.Buttons())

	// A server older than Bot API 10.1 gets the report as text, as before.
	env.TG.SetUnsupported(true, tgfake.FeatureRichMessages)
	report = ask(t, env, ann, ann.ID(), "/applications")
	require.Nil(t, report.RichMessage)
	require.Contains(t, report.Text, "Your applications over the last 30 days\nApplied: 2\nAnswered: 2\nInvited: 1\nOffers: 1")
	require.Contains(t, report.Text, "By search\ngolang\napplied: 2 · answered: 2 · invited: 1 · offers: 1")
	require.Equal(t, map[string]int{"OFFER": 1, "REJECTED": 1}, statuses(t, pool))
	// The card tells the same story as the report.
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		other, _ = env.TG.MessageByID(ann.ID(), other.MessageID)
		return strings.Contains(other.Text, "❌ Rejected")
	})
	require.NotContains(t, describe(other), "No answer", "a rejection is final")
}

// A week after Applied, by the binary's injected clock (CLOCK_START,
// restarted eight days later), a reminder asks how it went, once; its
// Invited button moves the application and edits the reminder, and the
// invitation's own waiting period gets its own reminder a week on.
func TestFollowUpReminderOnInjectedClock(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	relevantVacancies(env, 1, 7700)
	start := time.Now().UTC().Truncate(time.Second)
	over := map[string]string{
		"FETCH_INTERVAL": "1h", "APPLICATION_FOLLOW_UP_INTERVAL": "1s",
		"CLOCK_START": start.Format(time.RFC3339),
	}
	p := env.Start(over)
	pool := db(t, env)
	ann := seeker(t, env, 651)
	card := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Score: 87/100") })
	require.False(t, ann.PressAndWait(t, card, "✅ Applied").ShowAlert)
	require.Equal(t, map[string]int{"APPLIED": 1}, statuses(t, pool))
	p.Signal(syscall.SIGTERM)
	require.Zero(t, p.Wait(30*time.Second))
	require.Zero(t, reminders(t, pool, ann.ID()), "not due within the week")

	over["CLOCK_START"] = start.Add(8*24*time.Hour + time.Hour).Format(time.RFC3339)
	p = env.Start(over)
	reminder := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔔") })
	require.Contains(t, reminder.Text, "How did it go? Days without news: 8. Did the employer answer?")
	require.Contains(t, reminder.Text, "Golang developer 7700\n")
	require.Contains(t, reminder.Text, "Status: Applied")
	require.Contains(t, describe(reminder), "🎉 Invited")
	require.Contains(t, describe(reminder), "https://hh.ru/vacancy/7700")
	var reminded bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT followed_up_at IS NOT NULL FROM vacancy_matches`).Scan(&reminded))
	require.True(t, reminded)

	require.Equal(t, "Marked: invited.", ann.PressAndWait(t, reminder, "🎉 Invited").Text)
	reminder, _ = env.TG.MessageByID(ann.ID(), reminder.MessageID)
	require.Contains(t, reminder.Text, "Status: Invited")
	require.NotContains(t, reminder.Text, "🔔", "the question is answered")
	require.Contains(t, describe(reminder), "🏆 Offer")
	var invitedDays float64
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM invited_at - applied_at) / 86400 FROM vacancy_matches WHERE status = 'INVITED' AND followed_up_at IS NULL`).Scan(&invitedDays))
	require.InDelta(t, 8, invitedDays, 0.1, "reported on the injected clock")
	require.Equal(t, 1, reminders(t, pool, ann.ID()), "one reminder per waiting period")
	p.Signal(syscall.SIGTERM)
	require.Zero(t, p.Wait(30*time.Second))

	// A week after the invitation.
	over["CLOCK_START"] = start.Add(16*24*time.Hour + 2*time.Hour).Format(time.RFC3339)
	env.Start(over)
	second := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, "🔔 How did the interview go?") })
	require.Contains(t, describe(second), "🏆 Offer")
	require.Equal(t, "Marked: offer.", ann.PressAndWait(t, second, "🏆 Offer").Text)
	require.Equal(t, map[string]int{"OFFER": 1}, statuses(t, pool))
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		card, _ = env.TG.MessageByID(ann.ID(), card.MessageID)
		return strings.Contains(card.Text, "🏆 Offer received")
	})
	require.NotContains(t, describe(card), "Rejected", "the card offers no step after an offer")
	require.Equal(t, 2, reminders(t, pool, ann.ID()))
}

// reminders counts the follow-up reminders queued for the chat (the
// messages themselves are edited once answered).
func reminders(t *testing.T, pool *pgxpool.Pool, chatID int64) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE chat_id = $1 AND body->>'text' LIKE '🔔%'`, chatID).Scan(&n))
	return n
}

// A search HH refuses for its own parameters (400 bad_argument) is about
// the search, not an outage: the user hears once which parameter, /searches
// marks it, and neither the fetch nor the first-news ticks ask HH for it
// again. What /search can know HH would refuse (a currency HH has no code
// for) is refused there; ISO's RUB is HH's RUR.
func TestSearchHHRefusesIsSetAsideAndToldOnce(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	relevantVacancies(env, 2, 8300)
	// HH's answer to a value it dropped from its dictionary, say: to every
	// request of that search (first news and the fetch may ask at once),
	// to no other.
	env.HH.InjectFault(hhtest.Fault{Count: 1000, Status: http.StatusBadRequest, On: hhtest.SearchEndpoint,
		Query: url.Values{"area": {"1"}},
		Body:  []byte(`{"errors":[{"type":"bad_argument","value":"area"}],"bad_argument":"area","description":"bad area"}`)})
	env.Start(map[string]string{"FETCH_INTERVAL": "1s", "FIRST_NEWS_INTERVAL": "1s"})
	ann := env.TG.User(656, "Ann", "en")

	reply(t, env, ann, "/search golang area=1", "Saved: golang area=1")
	note := env.TG.WaitMessage(t, ann.ID(), func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "refuses the search") })
	require.True(t, strings.HasPrefix(note.Text, "hh.ru refuses the search golang area=1: it does not accept area=1. "+
		"I've set this search aside and no longer check it."), note.Text)
	asked := len(searchesFor(env, "golang"))
	require.True(t, asked == 1 || asked == 2, "asked by first news, the fetch or both: %d", asked)
	time.Sleep(4 * time.Second) // four fetch and first-news ticks
	require.Len(t, searchesFor(env, "golang"), asked, "HH is not asked again for a search it refused")
	require.Contains(t, reply(t, env, ann, "/searches", "Your searches").Text,
		"1. golang area=1\n    ⛔ refused by hh.ru (area): not checked; save it corrected or delete it")
	notes := slices.DeleteFunc(env.TG.Messages(ann.ID()), func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "refuses the search") && !strings.Contains(m.Text, "did not answer")
	})
	require.Len(t, notes, 1, "told once, and never that hh.ru did not answer")

	require.Contains(t, reply(t, env, ann, "/search golang salary=200000 currency=GBP", "currency").Text,
		"currency=GBP: hh.ru has no such currency.")
	require.Contains(t, reply(t, env, ann, "/search golang salary=200000 currency=RUB", "Saved").Text, "Saved: golang salary=200000\n")
	eventually(t, 30*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 2 })
	for _, r := range searchesFor(env, "golang")[asked:] {
		require.Equal(t, "RUR", r.Query.Get("currency"), "HH is sent its own code")
	}
}

// A database of the build before /search took RUB as HH's RUR, holding a
// RUB search HH refused (and its user was told): the upgraded binary
// rewrites it on start and asks HH again, in HH's own terms, and its user
// gets the cards and a search /searches no longer marks refused.
func TestARUBSearchHHRefusedIsAskedAgainAfterTheUpgrade(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	relevantVacancies(env, 2, 8400)
	url, db, p := storagetest.Migrator(t)
	env.DatabaseURL = url
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.UpTo(ctx, 55)
	require.NoError(t, err)
	// The key the build before gave "golang currency=RUB".
	sum := sha256.Sum256([]byte("area=\ncurrency=RUB\nexperience=\nsalary=0\nschedule=\ntext=golang"))
	_, err = db.ExecContext(ctx, `
INSERT INTO users (id, first_name, language, profile) VALUES (661, 'Ann', 'en', 'Go developer, 5 years, PostgreSQL, remote');
INSERT INTO searches (user_id, params, search_key, state, refused_args, refused_at, first_news, created_at)
VALUES (661, '{"text":"golang","currency":"RUB"}', '`+hex.EncodeToString(sum[:])+`', 'refused', '{currency}', now() - interval '1 day', 'told', now() - interval '2 days')`)
	require.NoError(t, err)

	ann := env.TG.User(661, "Ann", "en")
	ann.SendText(ann.ID(), "/help") // written as the upgrade started
	env.Start(map[string]string{"FETCH_INTERVAL": "1s", "FIRST_NEWS_INTERVAL": "1s"})
	eventually(t, 60*time.Second, func() bool { return len(vacancyMessages(env, ann.ID())) == 2 })
	asked := searchesFor(env, "golang")
	require.NotEmpty(t, asked)
	for _, r := range asked {
		require.Empty(t, r.Query.Get("currency"), "roubles are HH's default: no currency sent")
	}
	list := reply(t, env, ann, "/searches", "Your searches").Text
	require.Contains(t, list, "1. golang")
	require.NotContains(t, list, "refused")
	for _, m := range env.TG.Messages(ann.ID()) {
		t.Logf("to Ann: %q", m.Text)
	}
}
