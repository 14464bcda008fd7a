package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/e2e"
	"switchboard/e2e/tgfake"
)

// exportedFile is the JSON export as a reader's program decodes it.
type exportedFile struct {
	Schema        string `json:"schema"`
	SchemaVersion int    `json:"schema_version"`
	ExportedAt    string `json:"exported_at"`
	User          struct {
		ID       int64  `json:"id"`
		Language string `json:"language"`
		TimeZone string `json:"time_zone"`
	} `json:"user"`
	Memories []struct {
		ID           int64    `json:"id"`
		Summary      string   `json:"summary"`
		Tags         []string `json:"tags"`
		RememberedAt string   `json:"remembered_at"`
		State        string   `json:"state"`
		SupersededAt *string  `json:"superseded_at"`
		SourceRunIDs []int64  `json:"source_run_ids"`
	} `json:"memories"`
	Conversation []struct {
		Role  string `json:"role"`
		Text  string `json:"text"`
		At    string `json:"at"`
		RunID int64  `json:"run_id"`
	} `json:"conversation"`
	ConversationOmitted int `json:"conversation_omitted"`
}

// exportFiles waits for the two documents an /export sends after the
// command's message, Markdown first.
func exportFiles(t *testing.T, env *e2e.Env, who *tgfake.Person, after int) (md, js tgfake.BotMessage) {
	t.Helper()
	docs := func() []tgfake.BotMessage {
		var out []tgfake.BotMessage
		for _, m := range env.TG.Messages(who.ID()) {
			if m.MessageID > after && m.File != nil && m.File.Kind == "document" {
				out = append(out, m)
			}
		}
		return out
	}
	eventually(t, 30*time.Second, func() bool { return len(docs()) >= 2 })
	got := docs()
	require.Len(t, got, 2)
	return got[0], got[1]
}

// memoryEnv is a started binary whose memory chat answers with the
// scripted model (scriptMemory), and a pool on its database.
func memoryEnv(t *testing.T) (*e2e.Env, *pgxpool.Pool) {
	t.Helper()
	env := e2e.New(t)
	scriptMemory(env)
	env.Start(nil)
	return env, db(t, env)
}

// chatRemembered writes text to the memory chat as who and waits until it is
// answered and the exchange summarised.
func chatRemembered(t *testing.T, env *e2e.Env, pool *pgxpool.Pool, who *tgfake.Person, text string) {
	t.Helper()
	const sums = `SELECT count(*) FROM lsm_storage WHERE user_id = $1`
	before := scalar[int](t, pool, sums, who.ID())
	q := who.SendText(who.ID(), text)
	env.TG.WaitMessage(t, who.ID(), func(m tgfake.BotMessage) bool {
		return m.ReplyToID() == q.MessageID && strings.HasPrefix(m.Text, "Mentor says")
	})
	eventually(t, 20*time.Second, func() bool { return scalar[int](t, pool, sums, who.ID()) == before+1 })
}

// mustRFC3339UTC parses a JSON export's time, which is RFC 3339 in UTC.
func mustRFC3339UTC(t *testing.T, s string) time.Time {
	t.Helper()
	require.True(t, strings.HasSuffix(s, "Z"), "UTC: %s", s)
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return at
}

// /export sends the user's memories and conversation as a Markdown file to
// read (times in their zone) and a JSON file for programs (RFC 3339 UTC,
// a schema and its version), built when they are sent; the first answers
// the command. Asking again within a minute is refused, with the wait; a
// user with nothing to export is told so, in their language.
func TestExportSendsMemoriesAndConversation(t *testing.T) {
	t.Parallel()
	const annID = 7_300_001
	env, pool := memoryEnv(t)
	ann := env.TG.User(annID, "Ann", "en")
	ivan := env.TG.User(7_300_002, "Иван", "ru")

	empty := ask(t, env, ivan, ivan.ID(), "/export")
	t.Logf("ru, nothing to export: %s", empty.Text)
	require.Equal(t, "Экспортировать пока нечего: я ничего о вас не помню, и переписки у нас ещё не было.", empty.Text)
	require.Nil(t, empty.File)

	require.Contains(t, ask(t, env, ann, ann.ID(), "/timezone Asia/Tokyo").Text, "Time zone set")
	chatRemembered(t, env, pool, ann, "I run a marathon in <April> & swim")

	// Telegram's 429 and a 500 on the way cost a retry each, never a file.
	env.TG.FailNext("sendDocument", 1, 1)
	env.TG.FailNextWith("sendDocument", 1, &tgfake.APIError{Code: 500, Description: "Internal Server Error"})
	cmd := ann.SendText(ann.ID(), "/export")
	md, js := exportFiles(t, env, ann, cmd.MessageID)
	t.Logf("en captions: %q, %q", md.Caption, js.Caption)
	require.Equal(t, "📄 What I remember about you and our conversation, to read.", md.Caption)
	require.Equal(t, "🗂 The same as JSON, for other apps.", js.Caption)
	require.Equal(t, cmd.MessageID, md.ReplyToID(), "the first file answers the command")
	today := time.Now().In(tokyo(t)).Format("2006-01-02")
	require.Equal(t, "memory-export-"+today+".md", md.File.FileName)
	require.Equal(t, "memory-export-"+today+".json", js.File.FileName)
	require.Equal(t, "application/json", js.File.MimeType)

	var f exportedFile
	require.NoError(t, json.Unmarshal(js.File.Data, &f), string(js.File.Data))
	require.Equal(t, bot.ExportSchema, f.Schema)
	require.Equal(t, 1, f.SchemaVersion)
	require.EqualValues(t, annID, f.User.ID)
	require.Equal(t, "en", f.User.Language)
	require.Equal(t, "Asia/Tokyo", f.User.TimeZone)
	exported := mustRFC3339UTC(t, f.ExportedAt)
	require.Len(t, f.Memories, 1)
	require.Equal(t, "The user said: I run a marathon in <April> & swim", f.Memories[0].Summary)
	require.Equal(t, []string{"sport"}, f.Memories[0].Tags)
	require.Equal(t, "current", f.Memories[0].State)
	require.Nil(t, f.Memories[0].SupersededAt)
	remembered := mustRFC3339UTC(t, f.Memories[0].RememberedAt)
	require.False(t, remembered.After(exported))
	require.Len(t, f.Conversation, 2)
	require.Equal(t, "user", f.Conversation[0].Role)
	require.Equal(t, "I run a marathon in <April> & swim", f.Conversation[0].Text)
	require.Equal(t, "assistant", f.Conversation[1].Role)
	require.Equal(t, "Mentor says: I run a marathon in <April> & swim", f.Conversation[1].Text)
	require.Equal(t, f.Conversation[0].RunID, f.Conversation[1].RunID)
	require.Equal(t, []int64{f.Conversation[0].RunID}, f.Memories[0].SourceRunIDs)
	asked := mustRFC3339UTC(t, f.Conversation[0].At)
	require.Zero(t, f.ConversationOmitted)

	text := string(md.File.Data)
	t.Logf("en Markdown:\n%s", text)
	require.True(t, strings.HasPrefix(text, "# What I remember about you and our conversation\n\n"), text)
	require.Contains(t, text, ". Time zone: JST (UTC+09:00).\n")
	require.Contains(t, text, "## Memories: 1\n\n### 1. "+remembered.In(tokyo(t)).Format("2006-01-02 15:04")+" · current\n\nTags: sport\n\n"+
		"> The user said: I run a marathon in <April> & swim\n")
	require.Contains(t, text, "## Conversation: 2 messages\n\n**You** · "+asked.In(tokyo(t)).Format("2006-01-02 15:04")+
		"\n\n> I run a marathon in <April> & swim\n\n**Bot** · ")
	require.NotContains(t, text, "&lt;", "a file, not HTML: nothing escaped")

	// The rows named what to send; once sent they hold nothing of Ann's.
	quiet(t, pool)
	require.Equal(t, 2, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE kind = 'memory_export' AND state = 'sent'`))
	require.Zero(t, scalar[int](t, pool, `SELECT count(*) FROM outbox WHERE kind = 'memory_export' AND body::text LIKE '%marathon%'`))

	require.Len(t, env.TG.SentFiles(ann.ID()), 2, "each file once")
	var refused int
	for _, c := range env.TG.CallsTo("sendDocument") {
		if c.Err != nil {
			refused++
		}
	}
	require.Equal(t, 2, refused, "the 429 and the 500 were met, and retried")

	again := ask(t, env, ann, ann.ID(), "/export")
	t.Logf("en, too soon: %s", again.Text)
	require.Regexp(t, `^You can ask for an export once a minute\. Try again in \d+\x{a0}s\.$`, again.Text)
	require.Len(t, env.TG.SentFiles(ann.ID()), 2, "nothing more was sent")

	// Ivan, once he has talked, gets his export in Russian.
	chatRemembered(t, env, pool, ivan, "Я учу испанский")
	icmd := ivan.SendText(ivan.ID(), "/export")
	imd, ijs := exportFiles(t, env, ivan, icmd.MessageID)
	t.Logf("ru captions: %q, %q\nru Markdown:\n%s", imd.Caption, ijs.Caption, imd.File.Data)
	require.Equal(t, "📄 Что я о вас помню и наша переписка — для чтения.", imd.Caption)
	require.Contains(t, string(imd.File.Data), "# Что я о вас помню и наша переписка\n")
	require.Contains(t, string(imd.File.Data), "**Вы** · ")
	require.Contains(t, string(imd.File.Data), "> Я учу испанский\n")
}

// nobody is an id no row holds: holding then looks for a text alone.
const nobody = 9_300_999_999

func tokyo(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	return loc
}

// Incognito: /incognito turns it on (durable, per user); an exchange taken
// in meanwhile is answered with the incognito line, summarised by nobody,
// in no table once its answer is delivered, and absent from the next
// runs' prompts and from /export; /incognito off ends it.
func TestIncognitoLeavesNoMemory(t *testing.T) {
	t.Parallel()
	const (
		ivanID = 7_300_011
		secret = "kumquat-7300"
	)
	env, pool := memoryEnv(t)
	ivan := env.TG.User(ivanID, "Иван", "ru")
	ann := env.TG.User(7_300_012, "Ann", "en")

	chatRemembered(t, env, pool, ivan, "Я бегаю марафоны")

	on := ask(t, env, ivan, ivan.ID(), "/incognito")
	t.Logf("ru, on: %s", on.Text)
	require.True(t, strings.HasPrefix(on.Text, "🕶 Режим инкогнито включён. Я отвечаю, но ничего из сказанного не запоминаю"), on.Text)
	require.True(t, scalar[bool](t, pool, `SELECT incognito FROM memory_settings WHERE user_id = $1`, int64(ivanID)))

	q := ivan.SendText(ivan.ID(), "Мой секрет: "+secret)
	answer := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q.MessageID })
	t.Logf("ru, incognito answer: %s", answer.Text)
	require.Equal(t, "Mentor says: Мой секрет: "+secret+"\n\n🕶 Инкогнито: этот обмен сообщениями я не запомню.", answer.Text)
	line := utf16.Encode([]rune("🕶 Инкогнито: этот обмен сообщениями я не запомню."))
	require.Contains(t, answer.Entities, tgfake.MessageEntity{Type: "italic",
		Offset: len(utf16.Encode([]rune(answer.Text))) - len(line), Length: len(line)}, "the line is in italics")

	// Delivered, closed: no table holds the exchange, and nothing was
	// summarised.
	quiet(t, pool)
	eventually(t, 20*time.Second, func() bool {
		return scalar[int](t, pool, `SELECT count(*) FROM pipeline_runs WHERE closed_at IS NULL`) == 0
	})
	require.Empty(t, holding(t, pool, secret, nobody), "the incognito exchange is in no table")
	require.Equal(t, 1, scalar[int](t, pool, `SELECT count(*) FROM lsm_storage`))
	require.Equal(t, 1, env.LLM.Calls("archivist"), "the incognito exchange was never summarised")

	// Still on (durable): a second exchange is incognito too.
	q2 := ivan.SendText(ivan.ID(), "Ещё один секрет: "+secret)
	a2 := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == q2.MessageID })
	require.True(t, strings.HasSuffix(a2.Text, "🕶 Инкогнито: этот обмен сообщениями я не запомню."), a2.Text)

	off := ask(t, env, ivan, ivan.ID(), "/incognito выкл")
	t.Logf("ru, off: %s", off.Text)
	require.Equal(t, "Режим инкогнито выключен. Я снова запоминаю наш разговор; сказанное, пока он был включён, не сохранилось.", off.Text)
	already := ask(t, env, ivan, ivan.ID(), "/incognito off")
	t.Logf("ru, already off: %s", already.Text)
	require.Equal(t, "Режим инкогнито уже выключен. /incognito включит его.", already.Text)

	next := ivan.SendText(ivan.ID(), "Что ты обо мне знаешь?")
	a3 := env.TG.WaitMessage(t, ivan.ID(), func(m tgfake.BotMessage) bool { return m.ReplyToID() == next.MessageID })
	require.NotContains(t, a3.Text, "Инкогнито")
	for _, role := range []string{"analyzer", "assembler", "responder"} {
		reqs := env.LLM.RequestsFor(role)
		last := reqs[len(reqs)-1].Prompt
		require.Contains(t, last, "Что ты обо мне знаешь?", role)
		require.NotContains(t, last, secret, "a later run's context never sees the incognito exchange (%s)", role)
		require.Contains(t, last, "Я бегаю марафоны", "while it sees what was remembered (%s)", role)
	}
	require.NotContains(t, ask(t, env, ivan, ivan.ID(), "/memory").Text, secret)
	ecmd := ivan.SendText(ivan.ID(), "/export")
	_, js := exportFiles(t, env, ivan, ecmd.MessageID)
	require.NotContains(t, string(js.File.Data), secret)
	require.Contains(t, string(js.File.Data), "Я бегаю марафоны")

	// In English: the replies of each state.
	for _, c := range []struct{ cmd, want string }{
		{"/incognito on", "🕶 Incognito is on. I will answer, but remember nothing of what we say: no summaries, nothing in /memory or /export, and it will not shape my later answers. Send /incognito again to turn it off."},
		{"/incognito on", "Incognito is already on. /incognito off turns it off."},
		{"/incognito maybe", "/incognito switches incognito on or off; /incognito on and /incognito off set it."},
		{"/incognito", "Incognito is off. I remember our conversation again; what we said while it was on is gone."},
	} {
		got := ask(t, env, ann, ann.ID(), c.cmd)
		t.Logf("en, %s: %s", c.cmd, got.Text)
		require.Equal(t, c.want, got.Text)
	}
}

// /forget after an /export: the export's rows, its record and incognito go
// with everything else, and no table holds the user's text or id.
func TestForgetAfterExportLeavesNothing(t *testing.T) {
	t.Parallel()
	const (
		annID  = 7_300_021
		marker = "quokka-7300"
	)
	env, pool := memoryEnv(t)
	ann := env.TG.User(annID, "Ann", "en")
	chatRemembered(t, env, pool, ann, "Remember "+marker)
	require.Contains(t, ask(t, env, ann, ann.ID(), "/incognito").Text, "Incognito is on")
	cmd := ann.SendText(ann.ID(), "/export")
	_, js := exportFiles(t, env, ann, cmd.MessageID)
	require.Contains(t, string(js.File.Data), marker)
	quiet(t, pool)
	require.Contains(t, holding(t, pool, marker, annID), "memory_settings")

	confirm := ask(t, env, ann, ann.ID(), "/forget")
	press, err := ann.PressButton(confirm, "Forget everything")
	require.NoError(t, err)
	require.False(t, env.TG.WaitCallbackAnswer(t, press.ID).ShowAlert)
	quiet(t, pool)
	require.Empty(t, holding(t, pool, marker, annID), "no table holds Ann's text or id")

	// Coming back, she starts afresh: nothing to export.
	again := ask(t, env, ann, ann.ID(), "/export")
	require.Equal(t, "There is nothing to export yet: I have no memories of you and no conversation with you.", again.Text)
}
