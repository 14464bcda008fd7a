package e2e_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/domain/tasks"
	"switchboard/e2e"
	"switchboard/e2e/ghfake"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
	"switchboard/tracker/webhook"
)

// receiver is a team's webhook endpoint: it verifies every delivery's
// signature, refuses the first fail deliveries with a 500, and keeps what
// it accepted.
type receiver struct {
	mu       sync.Mutex
	secret   []byte
	fail     int
	bad      int
	accepted [][]byte
	ids      []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !webhook.Verify(rc.secret, body, r.Header.Get("X-Switchboard-Signature-256")) {
		rc.bad++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if rc.fail > 0 {
		rc.fail--
		http.Error(w, "busy", http.StatusInternalServerError)
		return
	}
	rc.accepted = append(rc.accepted, body)
	rc.ids = append(rc.ids, r.Header.Get("X-Switchboard-Delivery"))
	w.WriteHeader(http.StatusNoContent)
}

func (rc *receiver) got() (accepted [][]byte, ids []string, bad int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([][]byte(nil), rc.accepted...), append([]string(nil), rc.ids...), rc.bad
}

// Issue 40's first path through the built binary: an admin sends one
// group's approved tasks to a GitHub repository and another's to a
// webhook. Approving a proposal on the board files it once as an issue
// with its priority label, the assignee a member's linked login, and a
// working link to its source message; /tasks shows it with its number.
// The webhook's receiver refuses the first delivery with a 500 and gets
// the task on a retry, signed, once.
func TestApprovedTasksReachTheTeamsTracker(t *testing.T) {
	t.Parallel()
	gh := newGitHub(t)
	gh.AddCollaborator("acme/app", "bob-gh")
	rc := &receiver{secret: []byte("hook-secret"), fail: 1}
	deadline := time.Now().AddDate(0, 0, 7).Format(time.DateOnly)
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)

	env := e2e.New(t, e2e.WithAdminGroup(adminGroup))
	team := env.TG.Supergroup(teamChat, "Team", "")
	ops := env.TG.Supergroup(-1002000000002, "Ops", "")
	env.LLM.On(llmtest.SystemContains("propose the tasks")).Named("proposals").ReplyFunc(func(r llmtest.Request) string {
		out := proposals(r)
		out = strings.ReplaceAll(out, `"assignee":""`, `"assignee":"@BobDev"`)
		return strings.ReplaceAll(out, `"deadline":""`, `"deadline":"`+deadline+`"`)
	})
	env.Start(map[string]string{
		"GITHUB_API_URL": gh.URL(), "GITHUB_TOKEN": "ghp_test", "TASKS_WEBHOOK_SECRET": "hook-secret",
		"TASKS_PUSH_INTERVAL": "200ms", "TASKS_SYNC_INTERVAL": "1s",
	})
	pool := db(t, env)
	boss := env.TG.User(e2e.AdminID, "Boss", "en")
	ann := env.TG.User(841, "Ann", "en")
	bob := env.TG.User(842, "Bob", "en")
	bob.SetUsername("BobDev")

	fix := ann.SendText(team.ID, "@BobDev, please fix the login page")
	ann.SendText(ops.ID, "please renew the TLS certificate")
	waitGroupMessages(t, pool, 2)

	require.NotContains(t, ask(t, env, ann, ann.ID(), "/help").Text, "/github", "no task goes to GitHub yet")
	require.Contains(t, ask(t, env, bob, bob.ID(), "/github bob-gh").Text, "Linked: bob-gh")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/tracker -1002000000777 github acme/app").Text, "I am in no group",
		"a mistyped chat id is refused")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/tracker "+strconv.FormatInt(team.ID, 10)+" github acme/app").Text, "go to GitHub acme/app")
	require.Contains(t, ask(t, env, ann, ann.ID(), "/help").Text, "/github — link your GitHub login")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/tracker "+strconv.FormatInt(ops.ID, 10)+" webhook https://").Text,
		"“https://” is not a webhook URL: write the whole address", "a URL without a host is refused when it is set, not at every push")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/tracker "+strconv.FormatInt(ops.ID, 10)+" webhook "+hook.URL+"/tasks").Text, "go to webhook")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/tracker "+strconv.FormatInt(team.ID, 10)+" github not a repo").Text, "Usage")
	listed := ask(t, env, boss, boss.ID(), "/tracker").Text
	require.Contains(t, listed, "Team ("+strconv.FormatInt(team.ID, 10)+") → GitHub acme/app")
	require.Contains(t, listed, "Ops ("+strconv.FormatInt(ops.ID, 10)+") → webhook")
	b := completedRun(t, env, boss)
	pressEach(t, boss, b, "1 ✅", "2 ✅")

	issue := gh.WaitIssue(t, "acme/app", func(i ghfake.Issue) bool { return strings.Contains(i.Title, "fix the login page") })
	require.Contains(t, issue.Body, "https://t.me/c/2000000001/"+strconv.Itoa(fix.MessageID), "a working link to its source")
	fixID := scalar[int64](t, pool, `SELECT id FROM analysis_proposals WHERE title LIKE '%login page%'`)
	tlsID := scalar[int64](t, pool, `SELECT id FROM analysis_proposals WHERE title LIKE '%TLS%'`)
	require.Contains(t, issue.Body, tasks.Marker(fixID))
	require.Len(t, issue.Labels, 1)
	require.Contains(t, issue.Labels[0], "medium")
	require.Equal(t, []string{"bob-gh"}, issue.Assignees, "the mention of a member maps to their login")
	require.Contains(t, issue.Body, "**Deadline:** "+deadline)

	env.TG.WaitFor(t, 60*time.Second, func() bool { a, _, _ := rc.got(); return len(a) == 1 })
	accepted, ids, bad := rc.got()
	require.Zero(t, bad, "every delivery is signed with the secret")
	require.Contains(t, string(accepted[0]), "renew the TLS certificate")
	require.Equal(t, []string{tasks.Marker(tlsID)}, ids)

	// The board links the issue; closing it on GitHub is told once.
	waitBoard(t, env, 1, 60*time.Second, func(m tgfake.BotMessage) bool { return linksIssue(m, issue.Number) })
	gh.CloseIssue("acme/app", issue.Number, "completed")
	closedNote := func(m tgfake.BotMessage) bool { return strings.Contains(m.Text, "Task closed on GitHub") }
	env.TG.WaitMessage(t, adminGroup, closedNote)

	list := ask(t, env, boss, boss.ID(), "/tasks")
	require.Contains(t, list.Text, "#"+strconv.Itoa(issue.Number))
	require.Contains(t, list.Text, "sent to webhook")
	settled(t, pool)
	require.Len(t, gh.Issues("acme/app"), 1, "filed once")
	require.Contains(t, list.Text, "(closed)")
	closings := 0
	for _, m := range env.TG.Messages(adminGroup) {
		if closedNote(m) {
			closings++
		}
	}
	require.Equal(t, 1, closings, "a closed issue is told once")
	a, _, _ := rc.got()
	require.Len(t, a, 1, "delivered once the receiver took it")
}

// newGitHub is a fake GitHub with the repository acme/app, which the
// bot's token ghp_test may write to.
func newGitHub(t *testing.T) *ghfake.Server {
	t.Helper()
	gh := ghfake.New(t)
	gh.AddRepo("acme/app")
	gh.AddToken("ghp_test", "switchboard-bot", ghfake.Write("acme/app"))
	return gh
}

// githubRun is a team whose tasks go to GitHub acme/app, and its run #1
// completed over Ann's two asks ("fix the login page", "rotate the
// keys"), as startGitHubRun leaves them.
type githubRun struct {
	env       *e2e.Env
	over      map[string]string // the settings it started with
	proc      *e2e.Process
	pool      *pgxpool.Pool
	boss, ann *tgfake.Person
	board     tgfake.BotMessage
}

// startGitHubRun starts the bot with its tasks going to gh (pushed every
// 200ms), has Ann (annID) ask for two tasks in the team's group, sends
// the group's tasks to acme/app and completes run #1 over them.
func startGitHubRun(t *testing.T, gh *ghfake.Server, annID int64) githubRun {
	t.Helper()
	env, team := teamEnv(t)
	r := githubRun{env: env, over: map[string]string{"GITHUB_API_URL": gh.URL(), "GITHUB_TOKEN": "ghp_test", "TASKS_PUSH_INTERVAL": "200ms"}}
	r.proc = env.Start(r.over)
	r.pool = db(t, env)
	r.boss = env.TG.User(e2e.AdminID, "Boss", "en")
	r.ann = env.TG.User(annID, "Ann", "en")
	firstWords(t, r.pool, r.ann, team.ID, "please fix the login page", "please rotate the keys")
	require.Contains(t, ask(t, env, r.boss, r.boss.ID(), "/tracker "+strconv.FormatInt(team.ID, 10)+" github acme/app").Text, "go to GitHub")
	r.board = completedRun(t, env, r.boss)
	return r
}

// A replica is killed (SIGKILL) while it pushes, at each step: while it
// asks GitHub whether the task is filed (before its request), and after
// GitHub filed the task but before the answer reached it (before our
// commit). The next replica takes the dead one's claim back and files
// nothing twice: each approved task is one issue.
func TestAPushingReplicaKilledFilesEachTaskOnce(t *testing.T) {
	t.Parallel()
	gh := newGitHub(t)
	run := startGitHubRun(t, gh, 851)
	env, pool, boss, b, p := run.env, run.pool, run.boss, run.board, run.proc
	pushed := func() int { return scalar[int](t, pool, `SELECT count(*) FROM task_pushes WHERE state = 'pushed'`) }

	for i, step := range []struct {
		name   string
		before func()
		held   func() bool
	}{
		{"before its request", func() { gh.HangNext(1) }, func() bool { return gh.PendingFaults() == 0 }},
		{"after GitHub's answer", func() { gh.LoseNextAnswer(1, http.MethodPost, "/repos/acme/app/issues") },
			func() bool { return len(gh.Issues("acme/app")) == 2 && gh.PendingFaults() == 0 }},
	} {
		step.before()
		boss.PressAndWait(t, b, strconv.Itoa(i+1)+" ✅")
		env.TG.WaitFor(t, 60*time.Second, step.held)
		p.Kill()
		require.Equal(t, i, pushed(), "%s: nothing recorded by the dead replica", step.name)
		p = env.Start(run.over)
		eventually(t, 90*time.Second, func() bool { return pushed() == i+1 })
		require.Len(t, gh.Issues("acme/app"), i+1, "%s: filed once", step.name)
	}
	titles := map[string]int{}
	for _, is := range gh.Issues("acme/app") {
		titles[is.Title]++
	}
	require.Equal(t, map[string]int{"please fix the login page": 1, "please rotate the keys": 1}, titles)
}

// A task that reads like an issue already open in the repository is not
// filed: the board shows "looks like #N" with Link to it / File anyway.
// Only an admin may choose; linking files nothing and links the proposal
// to that issue (on the board and in /tasks); a second press is stale.
// Another task of the same run that looks like nothing is filed as usual.
func TestALikelyDuplicateIsOfferedAsLinkToIt(t *testing.T) {
	t.Parallel()
	gh := newGitHub(t)
	open := gh.AddIssue("acme/app", ghfake.Issue{Title: "Login page is broken", Author: "alice"})
	run := startGitHubRun(t, gh, 861)
	env, pool, boss, ann, b := run.env, run.pool, run.boss, run.ann, run.board
	pressEach(t, boss, b, "1 ✅", "2 ✅")

	keys := gh.WaitIssue(t, "acme/app", func(i ghfake.Issue) bool { return strings.Contains(i.Title, "rotate the keys") })
	const linkIt = "1 🔗 Link to it (#1)"
	b = waitBoard(t, env, 1, 60*time.Second, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "looks like #1: “Login page is broken”") && hasButton(m, linkIt)
	})
	require.True(t, hasButton(b, "1 ➕ File anyway"))
	require.False(t, hasButton(b, "2 🔗 Link to it (#1)"), "the keys look like nothing")
	require.Len(t, gh.Issues("acme/app"), 2, "the login task waits for the admins")

	// Ann is no admin: her press changes nothing.
	var data string
	for _, btn := range b.ReplyMarkup.Buttons() {
		if btn.Text == linkIt {
			data = btn.CallbackData
		}
	}
	env.TG.WaitCallbackAnswer(t, ann.PressRaw(b, data).ID)
	require.Equal(t, "held", scalar[string](t, pool, `SELECT tp.state FROM task_pushes tp JOIN analysis_proposals p ON p.id = tp.proposal_id WHERE p.ordinal = 1`))

	answer := boss.PressAndWait(t, b, linkIt)
	require.False(t, answer.ShowAlert)
	require.Contains(t, answer.Text, "Linked")
	b = waitBoard(t, env, 1, 60*time.Second, func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "looks like") && !hasButton(m, linkIt) && linksIssue(m, open.Number) && linksIssue(m, keys.Number)
	})
	again := boss.PressRaw(b, data)
	require.Contains(t, env.TG.WaitCallbackAnswer(t, again.ID).Text, "decided already", "a second press is stale")

	list := ask(t, env, boss, boss.ID(), "/tasks").Text
	require.Contains(t, list, "please fix the login page — linked to #1 (open)")
	require.Contains(t, list, "please rotate the keys — #"+strconv.Itoa(keys.Number))
	settled(t, pool)
	require.Len(t, gh.Issues("acme/app"), 2, "linking filed nothing")
	for _, r := range gh.Requests() {
		require.False(t, r.Method == http.MethodPost && strings.Contains(string(r.Body), "login page"), "the login task was posted")
	}
}

// GitHub refuses a task's issue with a 422 that is about neither the
// assignee nor anything the pusher cuts to fit (here the label the issue
// names): the same request would be refused again, so after one try the
// push is set aside, not retried for ever. The admins are told once, in
// GitHub's words; /tasks shows it refused with them and offers to send it
// again. Once the cause is gone on GitHub's side, the admin's press files
// it, once, and a second press is stale.
func TestATaskGitHubRefusesIsSetAsideUntilAnAdminRetriesIt(t *testing.T) {
	t.Parallel()
	gh := newGitHub(t)
	gh.RefuseIssues("acme/app", ghfake.FieldError{Resource: "Label", Code: "invalid", Field: "name", Value: "priority: medium"})
	run := startGitHubRun(t, gh, 871)
	env, pool, boss, b := run.env, run.pool, run.boss, run.board
	pressEach(t, boss, b, "1 ✅")

	refusedNote := func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "refused the task “please fix the login page”") && strings.Contains(m.Text, "priority: medium")
	}
	env.TG.WaitMessage(t, adminGroup, refusedNote)
	posts := func() (n int) {
		for _, r := range gh.Requests() {
			if r.Method == http.MethodPost && r.Path == "/repos/acme/app/issues" {
				n++
			}
		}
		return n
	}
	time.Sleep(2 * time.Second) // ten ticks of the push job: none tries it again
	require.Equal(t, 1, posts(), "one try, not retried")
	require.Equal(t, "refused", scalar[string](t, pool, `SELECT state FROM task_pushes`))

	list := ask(t, env, boss, boss.ID(), "/tasks")
	require.Contains(t, list.Text, "please fix the login page — refused by GitHub acme/app:")
	require.Contains(t, list.Text, "Validation Failed")
	require.Contains(t, list.Text, "priority: medium", "GitHub's words")
	var retry, data string
	for _, btn := range list.ReplyMarkup.Buttons() {
		if strings.HasPrefix(btn.Text, "🔁") {
			retry, data = btn.Text, btn.CallbackData
		}
	}
	require.NotEmpty(t, retry, "/tasks offers to send it again: %+v", list.ReplyMarkup)

	gh.RefuseIssues("acme/app")
	answer := boss.PressAndWait(t, list, retry)
	require.False(t, answer.ShowAlert)
	issue := gh.WaitIssue(t, "acme/app", func(i ghfake.Issue) bool { return strings.Contains(i.Title, "fix the login page") })
	eventually(t, 30*time.Second, func() bool { return scalar[string](t, pool, `SELECT state FROM task_pushes`) == "pushed" })
	env.TG.WaitFor(t, 30*time.Second, func() bool {
		for _, m := range env.TG.Messages(boss.ID()) {
			if m.MessageID == list.MessageID {
				return !hasButton(m, retry)
			}
		}
		return false
	})
	again := boss.PressRaw(list, data)
	require.True(t, env.TG.WaitCallbackAnswer(t, again.ID).ShowAlert, "a second press is stale")
	require.Contains(t, ask(t, env, boss, boss.ID(), "/tasks").Text, "please fix the login page — #"+strconv.Itoa(issue.Number))

	settled(t, pool)
	require.Len(t, gh.Issues("acme/app"), 1, "filed once")
	told := 0
	for _, m := range env.TG.Messages(adminGroup) {
		if refusedNote(m) {
			told++
		}
	}
	require.Equal(t, 1, told, "the admins are told once")
}

func hasButton(m tgfake.BotMessage, text string) bool {
	for _, b := range m.ReplyMarkup.Buttons() {
		if b.Text == text {
			return true
		}
	}
	return false
}

// linksIssue reports whether m links issue number of the repository.
func linksIssue(m tgfake.BotMessage, number int) bool {
	for _, e := range m.Entities {
		if e.Type == "text_link" && strings.HasSuffix(e.URL, "/issues/"+strconv.Itoa(number)) {
			return true
		}
	}
	return false
}
