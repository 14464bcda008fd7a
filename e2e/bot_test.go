package e2e_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/storage/storagetest"
)

func TestMain(m *testing.M) {
	// An e2e test spends its time waiting on the binary it drives (timers,
	// Telegram's pacing in the fake), not on this process's CPU, so more of
	// them run at once than GOMAXPROCS, the default, unless -parallel says.
	// Three: with up to three replicas of six connections each, four at
	// once beside another package's tests came within a few connections
	// of PostgreSQL's default limit of 100, and past it.
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		if err := flag.Set("test.parallel", "3"); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	e2e.Cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func ask(t *testing.T, env *e2e.Env, who *tgfake.Person, chatID int64, text string) tgfake.BotMessage {
	t.Helper()
	sent := who.SendText(chatID, text)
	return env.TG.WaitMessageAfter(t, chatID, sent.MessageID, nil)
}

func TestStartAndHelpDifferForUserAndAdmin(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	ann := env.TG.User(501, "Ann", "en")
	boss := env.TG.User(e2e.AdminID, "Boss", "en")

	start := ask(t, env, ann, ann.ID(), "/start")
	require.Contains(t, start.Text, "Hello, Ann!")
	userHelp := ask(t, env, ann, ann.ID(), "/help")
	adminHelp := ask(t, env, boss, boss.ID(), "/help")
	require.Contains(t, userHelp.Text, "/lang")
	require.NotContains(t, userHelp.Text, "/status")
	require.Contains(t, adminHelp.Text, "/status")
	// /start is a first step, not the list: the admin gets a pointer to
	// their commands, which /help lists.
	bossStart := ask(t, env, boss, boss.ID(), "/start")
	require.Contains(t, bossStart.Text, "You are an admin")
	require.NotContains(t, bossStart.Text, "/status")
	require.NotContains(t, start.Text, "You are an admin")
	var pointer bool
	for _, b := range bossStart.ReplyMarkup.Buttons() {
		pointer = pointer || b.Text == "🗂 Admin commands"
	}
	require.True(t, pointer, "the admin's /start points to the admin commands")

	// The process is ready: database reachable and schema current.
	resp, err := http.Get("http://" + p.Env["HTTP_ADDR"] + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.JSONEq(t, `{"postgres":"ok","migrations":"ok",
		"held_past_lease":{"pipeline_runs":0,"vacancy_matches":0,"outbox_rows":0,"inbox_updates":0}}`, string(body))
	resp, err = http.Get("http://" + p.Env["HTTP_ADDR"] + "/metrics")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(body), "go_goroutines")
}

func TestLangUkThenHelpInUkrainian(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	ann := env.TG.User(502, "Ann", "en")
	require.Equal(t, "Мову змінено на українську.", ask(t, env, ann, ann.ID(), "/lang uk").Text)
	help := ask(t, env, ann, ann.ID(), "/help")
	require.Contains(t, help.Text, "Що я вмію")
	require.Contains(t, help.Text, "/lang — змінити мову")
}

func TestUnknownCommandAndRefusedAdminCommand(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	env.Start(nil)
	ann := env.TG.User(503, "Ann", "ru")
	require.Equal(t, "Я не знаю команду /teleport. Отправьте /help, чтобы увидеть, что я умею.",
		ask(t, env, ann, ann.ID(), "/teleport now").Text)
	require.Equal(t, "Эта команда только для администраторов.", ask(t, env, ann, ann.ID(), "/status").Text)
}

func TestGroupMessageGetsNoReply(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	team := env.TG.Group(-100500, "Team")
	ann := env.TG.User(504, "Ann", "en")

	ann.SendText(team.ID, "hello team, who takes the release?")
	// The first update of this test is the group message; wait until the
	// bot has finished handling it before looking for replies.
	p.WaitLog(`"msg":"update handled","update_id":1,`, 30*time.Second)
	require.Empty(t, env.TG.Messages(team.ID), "nothing said in the group")
	require.Empty(t, env.TG.Messages(ann.ID()), "nothing said in private")
	require.Empty(t, env.TG.CallsTo("sendMessage"))

	// The bot still answers her in private.
	require.Contains(t, ask(t, env, ann, ann.ID(), "/help").Text, "What I can do")
}

func TestSIGTERMStopsGracefully(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	p := env.Start(nil)
	ann := env.TG.User(505, "Ann", "en")
	ask(t, env, ann, ann.ID(), "/start")
	p.Signal(syscall.SIGTERM)
	require.Equal(t, 0, p.Wait(15*time.Second))
	require.True(t, p.HasLog(`"msg":"stopped"`))
}

func TestBadConfigurationNamesTheVariable(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	out, code := env.Run(map[string]string{"FETCH_INTERVAL": "soon", "TELEGRAM_API_URL": "::nope"})
	require.Equal(t, 2, code)
	require.Contains(t, out, "FETCH_INTERVAL")
	require.Contains(t, out, "TELEGRAM_API_URL")
	out, code = env.Run(map[string]string{"TELEGRAM_TOKEN": ""})
	require.Equal(t, 2, code)
	require.Contains(t, out, "TELEGRAM_TOKEN: required")
	require.NotContains(t, out, env.TG.Token())

	out, code = env.Run(nil, "-help")
	require.Equal(t, 0, code)
	for _, v := range []string{"TELEGRAM_TOKEN", "DATABASE_URL", "OFFER_SLA", "2m"} {
		require.Contains(t, out, v)
	}
}

func TestMigrateCreatesDatabaseAndIsRepeatable(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	name := "sbtest_e2e_migrate_" + strings.ToLower(fmt.Sprint(time.Now().UnixNano()))
	t.Cleanup(func() { storagetest.Drop(t, name) })
	dbURL := storagetest.URLFor(name)
	for range 2 {
		out, code := env.Run(map[string]string{"DATABASE_URL": dbURL}, "migrate")
		require.Equal(t, 0, code, out)
	}
}

func TestPollingFailsOverWhenTheHolderDies(t *testing.T) {
	t.Parallel()
	// No Redis: the polling lease is a PostgreSQL session lock, so replicas
	// sharing only the database still poll one at a time.
	env := e2e.New(t)
	first, second := env.StartPair(nil)

	ann := env.TG.User(506, "Ann", "en")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/start").Text, "Hello, Ann!")
	// The answer is recorded as sent before the kill: a reply the holder
	// sent but had not marked would hold the chat's outbox lane for its
	// claim (10 s) and measure the outbox, not the polling failover.
	settled(t, db(t, env))

	first.Kill() // kill -9: no release; the server drops the lock with the connection
	died := time.Now()
	sent := ann.SendText(ann.ID(), "/help")
	// The bound only says the survivor never took over; how fast it does is
	// measured (docs/BENCHMARKS.md, "Polling failover").
	second.WaitLog("polling lease acquired", 90*time.Second)
	took := time.Since(died)
	help := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	answered := time.Since(died)
	t.Logf("failover: lease taken %s after kill -9, first answer %s after it",
		took.Round(time.Millisecond), answered.Round(time.Millisecond))
	require.Contains(t, help.Text, "What I can do", "the survivor answers a message sent after the kill")
	require.False(t, second.HasLog(`"level":"ERROR"`), "the survivor logged no error")
}
