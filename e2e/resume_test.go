package e2e_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/e2e"
	"switchboard/e2e/tgfake"
	"switchboard/llm/llmtest"
)

// The phrases the committed résumés hold and nothing else does
// (domain/resume/testdata_test.go made them).
const (
	pdfPhrase  = "quokka ledger reconciler"
	docxPhrase = "heron telemetry pipeline"
)

// condensed is the scripted model's profile drafted from any résumé.
const condensed = "Senior Go developer, 7 years.\nSkills: Go, PostgreSQL, Kafka, Redis."

// resumeRule answers the résumé prompt, named "resume".
func resumeRule(env *e2e.Env) *llmtest.Rule {
	return env.LLM.On(llmtest.SystemContains("turn a job seeker's résumé")).Named("resume")
}

// startResume starts the binary with overrides over a model that
// condenses every résumé to condensed.
func startResume(t *testing.T, overrides map[string]string) (*e2e.Env, *e2e.Process) {
	t.Helper()
	env := e2e.New(t)
	resumeRule(env).ReplyJSON(map[string]any{"profile": condensed})
	return env, env.Start(overrides)
}

func resumeFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "domain", "resume", "testdata", name))
	require.NoError(t, err)
	return b
}

// draftFor waits for the draft message after the document sent.
func draftFor(t *testing.T, env *e2e.Env, who *tgfake.Person, after int) tgfake.BotMessage {
	t.Helper()
	return env.TG.WaitMessageAfter(t, who.ID(), after, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Your profile, drafted from your résumé")
	})
}

func profileOf(t *testing.T, pool *pgxpool.Pool, user int64) string {
	t.Helper()
	var p string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT profile FROM users WHERE id = $1`, user).Scan(&p))
	return p
}

// tablesHolding names the tables of the schema with a row holding phrase.
func tablesHolding(t *testing.T, pool *pgxpool.Pool, phrase string) []string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "profile_drafts")
	var holding []string
	for _, table := range tables {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` t WHERE t::text ILIKE '%' || $1 || '%'`, phrase).Scan(&n))
		if n > 0 {
			holding = append(holding, table)
		}
	}
	return holding
}

// A PDF becomes a draft, confirmed; a DOCX becomes a draft, edited and
// confirmed. The model read each file's text; nothing of it is stored;
// only the sender's press acts, and once.
func TestResumePDFAndDOCXBecomeConfirmedProfile(t *testing.T) {
	t.Parallel()
	env, _ := startResume(t, nil)
	pool := db(t, env)
	ann := env.TG.User(801, "Ann", "en")

	sent := ann.SendDocument(ann.ID(), "Alex CV.pdf", "application/pdf", resumeFile(t, "resume.pdf"))
	ack := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	require.Contains(t, ack.Text, "Reading your résumé")
	draft := draftFor(t, env, ann, ack.MessageID)
	require.Contains(t, draft.Text, "Senior Go developer, 7 years.\nSkills: Go, PostgreSQL", "the model's draft, line breaks kept")
	require.Contains(t, describe(draft), "✅ Use this profile")
	require.Contains(t, describe(draft), "✏️ Edit")
	require.Contains(t, describe(draft), "✖️ Cancel")
	reqs := env.LLM.RequestsFor("resume")
	require.Len(t, reqs, 1)
	require.Contains(t, reqs[0].Prompt, pdfPhrase, "the model read the PDF's text")
	require.Contains(t, reqs[0].Prompt, "Образование: МГУ", "Cyrillic included")
	require.Empty(t, profileOf(t, pool, ann.ID()), "nothing replaced before the user confirms")

	// Bob presses Ann's button in his own chat.
	bob := env.TG.User(802, "Bob", "en")
	hello := ask(t, env, bob, bob.ID(), "/start")
	use := draft.ReplyMarkup.Buttons()[0].CallbackData
	forged := bob.PressRaw(hello, use)
	require.Equal(t, "This button is not for you.", env.TG.WaitCallbackAnswer(t, forged.ID).Text)

	require.False(t, ann.PressAndWait(t, draft, "✅ Use this profile").ShowAlert)
	used, _ := env.TG.MessageByID(ann.ID(), draft.MessageID)
	require.Contains(t, used.Text, "This is your profile now")
	require.Empty(t, used.ReplyMarkup.Buttons())
	require.Equal(t, condensed, profileOf(t, pool, ann.ID()))
	again := ann.PressRaw(draft, use)
	stale := env.TG.WaitCallbackAnswer(t, again.ID)
	require.True(t, stale.ShowAlert)
	require.Contains(t, stale.Text, "no longer current")

	// A DOCX, edited before it is used.
	sent = ann.SendDocument(ann.ID(), "cv.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", resumeFile(t, "resume.docx"))
	draft = draftFor(t, env, ann, sent.MessageID)
	require.Contains(t, env.LLM.RequestsFor("resume")[1].Prompt, docxPhrase, "the model read the DOCX's text")
	ann.PressAndWait(t, draft, "✏️ Edit")
	prompt := env.TG.WaitMessageAfter(t, ann.ID(), draft.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Send me the corrected profile")
	})
	require.Contains(t, prompt.Text, "Senior Go developer, 7 years.", "the draft to copy")
	oldEdit := ann.PressRaw(draft, draft.ReplyMarkup.Buttons()[0].CallbackData)
	require.Contains(t, env.TG.WaitCallbackAnswer(t, oldEdit.ID).Text, "no longer current", "the first message's buttons are stale")

	corrected := "Go developer, 8 years; PostgreSQL, Kafka. Remote only."
	fix := ann.SendText(ann.ID(), corrected)
	revised := draftFor(t, env, ann, fix.MessageID)
	require.Contains(t, revised.Text, corrected)
	var runs int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pipeline_runs`).Scan(&runs))
	require.Zero(t, runs, "the corrected text is the draft's, not the memory chat's")
	ann.PressAndWait(t, revised, "✅ Use this profile")
	eventually(t, 10*time.Second, func() bool { return profileOf(t, pool, ann.ID()) == corrected })

	var drafts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM profile_drafts`).Scan(&drafts))
	require.Zero(t, drafts)
	require.Empty(t, tablesHolding(t, pool, pdfPhrase), "the PDF's text is stored nowhere")
	require.Empty(t, tablesHolding(t, pool, docxPhrase), "the DOCX's text is stored nowhere")
	require.Empty(t, tablesHolding(t, pool, "Образование"), "nor the Cyrillic of either")
	// The inbox holds an update's body until the update has ended (its
	// done-mark, after its handler), so a loaded machine may still show the
	// correction there for a moment; once nothing of the chat is pending,
	// only the profile and the draft shown hold it.
	eventually(t, 30*time.Second, func() bool {
		var pending int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM inbox WHERE state = 'pending'`).Scan(&pending))
		return pending == 0
	}, func() string { return "updates still pending in the inbox" })
	require.ElementsMatch(t, []string{"users", "outbox"}, tablesHolding(t, pool, "Kafka. Remote only"),
		"the search finds what is stored: the profile and the draft shown")
}

// What cannot be read is refused with the reason: a scan, a file over the
// size limit, an image.
func TestResumeRefusals(t *testing.T) {
	t.Parallel()
	env, _ := startResume(t, map[string]string{"RESUME_MAX_FILE_MB": "1"})
	pool := db(t, env)
	ann := env.TG.User(811, "Ann", "en")

	sent := ann.SendDocument(ann.ID(), "scan.pdf", "application/pdf", resumeFile(t, "scanned.pdf"))
	scanned := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "Reading your résumé")
	})
	require.Equal(t, "This PDF has no text layer — it looks scanned. Please send a DOCX or a text version.", scanned.Text)

	big := append([]byte("%PDF-1.4\n"), bytes.Repeat([]byte("x"), 1<<20)...)
	sent = ann.SendDocument(ann.ID(), "huge.pdf", "application/pdf", big)
	tooBig := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	require.Contains(t, tooBig.Text, "This file is too large: I read résumés of up to 1 MB.")

	sent = ann.SendDocument(ann.ID(), "me.jpg", "image/jpeg", []byte("\xff\xd8\xff\xe0 a photo"))
	image := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	require.Contains(t, image.Text, "a PDF, a Word file (.docx) or a plain text file (.txt)")

	require.Zero(t, env.LLM.Calls("resume"), "no file read")
	// The scan's draft stays failed, for its message, holding nothing of
	// the file; the others were refused before any draft.
	var drafts int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM profile_drafts
WHERE state <> 'failed' OR file_id IS NOT NULL OR file_name <> ''`).Scan(&drafts))
	require.Zero(t, drafts)
}

// A PDF whose page tree holds itself sends the PDF library round it for
// ever. The replica reads each file in a child process killed at
// RESUME_READ_TIMEOUT: the user hears the file is unreadable, no child is
// left spinning, and the next résumé is read as usual. The timeout is
// what a healthy host never needs for a one-page PDF (a child of the race
// binary took more than 2 s on a CI host under load): 8 s, well inside the
// wait for the reply.
func TestResumeThatHangsTheReaderIsToldUnreadable(t *testing.T) {
	t.Parallel()
	env, bot := startResume(t, map[string]string{"RESUME_READ_TIMEOUT": "8s"})
	ann := env.TG.User(812, "Ann", "en")

	sent := ann.SendDocument(ann.ID(), "cv.pdf", "application/pdf", resumeFile(t, "cyclic.pdf"))
	told := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, func(m tgfake.BotMessage) bool {
		return !strings.Contains(m.Text, "Reading your résumé")
	})
	require.Equal(t, "I could not open this file: it may be damaged, password-protected or saved in another format. "+
		"Please send a PDF, DOCX or text version.", told.Text)
	require.Equal(t, sent.MessageID, told.ReplyToID(), "the reply names the file")
	require.Empty(t, children(t, bot.Pid(), "extract-resume"), "the reader was killed, not left spinning")
	require.Zero(t, env.LLM.Calls("resume"), "nothing went to the model")

	sent = ann.SendDocument(ann.ID(), "Alex CV.pdf", "application/pdf", resumeFile(t, "resume.pdf"))
	ack := env.TG.WaitMessageAfter(t, ann.ID(), sent.MessageID, nil)
	draft := draftFor(t, env, ann, ack.MessageID)
	require.Contains(t, draft.Text, "Senior Go developer, 7 years.")
	require.Contains(t, env.LLM.RequestsFor("resume")[0].Prompt, pdfPhrase)
}

// children lists the processes whose parent is pid and whose command line
// holds arg.
func children(t *testing.T, pid int, arg string) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	var out []int
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue // ended meanwhile
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(st), "cmdline"))
		if bytes.Contains(cmdline, []byte(arg)) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(st)))
			out = append(out, n)
		}
	}
	return out
}

// While the provider refuses the key, a résumé waits for the model instead
// of spending its attempts: its sender is told once, in their language and
// in reply to the file, and the draft comes when the key works again, at
// the next try. Nobody is asked to send the file again.
func TestResumeWaitsWhileTheModelIsAway(t *testing.T) {
	t.Parallel()
	env := e2e.New(t)
	rule := resumeRule(env).Fault(llmtest.HTTPErrorSaying(401, "invalid api key"))
	// The refusal holds the breaker for LLM_BREAKER_OPEN_FOR: tries in
	// between are turned away unrun, and after it one probes the model.
	env.Start(map[string]string{"RESUME_MODEL_RETRY": "1s", "LLM_BREAKER_OPEN_FOR": "2s"})
	ann := env.TG.User(813, "Ann", "en")
	ivan := env.TG.User(814, "Иван", "ru")

	sent := ann.SendDocument(ann.ID(), "cv.pdf", "application/pdf", resumeFile(t, "resume.pdf"))
	isent := ivan.SendDocument(ivan.ID(), "резюме.pdf", "application/pdf", resumeFile(t, "resume.pdf"))
	waiting := func(who *tgfake.Person, after int, prefix string) {
		t.Helper()
		m := env.TG.WaitMessageAfter(t, who.ID(), after, func(m tgfake.BotMessage) bool { return strings.HasPrefix(m.Text, prefix) })
		require.Equal(t, after, m.ReplyToID(), "the notice answers the file")
	}
	waiting(ann, sent.MessageID, "⏳")
	waiting(ivan, isent.MessageID, "⏳")
	// More tries, refused by the provider or turned away by the breaker,
	// before the key works again.
	eventually(t, 2*time.Minute, func() bool { return env.LLM.Calls("resume") >= 3 })
	rule.Fault(llmtest.Fault{}).ReplyJSON(map[string]any{"profile": condensed})

	draftFor(t, env, ann, sent.MessageID)
	env.TG.WaitMessageAfter(t, ivan.ID(), isent.MessageID, func(m tgfake.BotMessage) bool {
		return strings.Contains(m.Text, "Ваш профиль, составленный по резюме")
	})
	texts := func(who *tgfake.Person) []string {
		var out []string
		for _, m := range env.TG.Messages(who.ID()) {
			t.Logf("to %s: %s", who.User().FirstName, m.Text)
			out = append(out, strings.SplitN(m.Text, "\n", 2)[0])
		}
		return out
	}
	require.Equal(t, []string{
		"Reading your résumé… I will send you a profile drafted from it in a minute or two.",
		"⏳ The AI model is not answering right now. I will send you the profile drafted from this file as soon as it is back; " +
			"there is no need to send the file again.",
		"Your profile, drafted from your résumé",
	}, texts(ann), "told once that it waits, then the draft")
	require.Equal(t, []string{
		"Читаю ваше резюме… Через минуту-другую пришлю составленный по нему профиль.",
		"⏳ ИИ-модель сейчас не отвечает. Я пришлю профиль по этому файлу, как только она вернётся; отправлять файл ещё раз не нужно.",
		"Ваш профиль, составленный по резюме",
	}, texts(ivan), "in his language")
}
