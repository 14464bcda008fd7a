package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/memory"
	"switchboard/locales"
)

// MemoryPrivacy is /export and /incognito as the bot needs them
// (*memory.Service implements it).
type MemoryPrivacy interface {
	RequestExport(ctx context.Context, userID int64, messageID int, tell []domain.Message) (memory.ExportRequest, error)
	SetIncognito(ctx context.Context, userID int64, messageID int, set *bool) (memory.Incognito, error)
}

// MemoryExports reads an export's content when its files are sent
// (*memory.Service implements it).
type MemoryExports interface {
	Export(ctx context.Context, userID int64, asOf time.Time) (memory.Export, error)
}

var _ MemoryExports = (*memory.Service)(nil)

// The two files of an export, as their outbox rows name them
// (domain.Message's Document).
const (
	exportMarkdown = "markdown"
	exportJSON     = "json"
)

// registerPrivacy adds /export and /incognito.
func (u *memoryUI) registerPrivacy() {
	u.b.Handle(Command{Name: "export", Desc: "cmd.export", Section: SectionMemory, Handle: u.export})
	u.b.Handle(Command{Name: "incognito", Desc: "cmd.incognito", Section: SectionMemory, Handle: u.incognito})
}

// export is /export: the user's memories and conversation as two files,
// Markdown to read and JSON for programs. The handler only queues their
// rows, which name what to send; the files are built from the tables when
// the rows go out (ExportDocuments), so a copy of the user's data waits
// nowhere, and the outbox makes them durable (once, in order, through
// 429s and dead replicas). The first file answers the command.
func (u *memoryUI) export(r *Request) error {
	msg := r.Message()
	rows := []domain.Message{
		{ChatID: msg.Chat.ID, Kind: domain.KindMemoryExport, Ref: r.User.ID, ReplyTo: msg.ID,
			Text: r.T("export.caption_markdown"), Document: exportMarkdown},
		{ChatID: msg.Chat.ID, Kind: domain.KindMemoryExport, Ref: r.User.ID,
			Text: r.T("export.caption_json"), Document: exportJSON},
	}
	req, err := u.m.RequestExport(r.Ctx, r.User.ID, msg.ID, rows)
	switch {
	case err != nil:
		return err
	case req.Queued:
		u.b.deps.Direct.Wake()
		return nil
	case req.Repeated:
		return nil // this command was handled already: its files are on their way
	case req.Empty:
		return r.Reply(r.T("export.empty"), nil)
	}
	return r.Reply(r.T("export.too_soon", locales.Data{"Wait": locales.Duration(r.Lang, req.RetryIn)}), nil)
}

// incognitoWords are what /incognito takes: on or off, in each language.
var incognitoWords = map[string]bool{
	"on": true, "вкл": true, "включить": true, "увімк": true, "увімкнути": true,
	"off": false, "выкл": false, "выключить": false, "вимк": false, "вимкнути": false,
}

// incognito is /incognito: toggles it, or sets it with on / off, and says
// the state it leaves.
func (u *memoryUI) incognito(r *Request) error {
	var set *bool
	if arg := strings.ToLower(strings.TrimSpace(commandArgs(r.Message()))); arg != "" {
		on, ok := incognitoWords[arg]
		if !ok {
			return r.Reply(r.T("incognito.usage"), nil)
		}
		set = &on
	}
	st, err := u.m.SetIncognito(r.Ctx, r.User.ID, r.Message().ID, set)
	if err != nil {
		return err
	}
	key := "incognito.off"
	switch {
	case st.On && st.Changed:
		key = "incognito.on"
	case st.On:
		key = "incognito.already_on"
	case !st.Changed:
		key = "incognito.already_off"
	}
	return r.Reply(r.T(key), nil)
}

// incognitoLine is the line every incognito run's answer ends with.
func (rd *Renderer) incognitoLine(r memory.PipelineRun, text string) string {
	if !r.Incognito {
		return text
	}
	return text + "\n\n" + rd.cat.T(r.Lang, "incognito.answer_line")
}

// ExportDocuments is the document hook of the export's rows
// (delivery.Sender.OnDocument): it reads the user's export as it stood
// when they asked (the row's creation) and builds the file the row
// names, in the reader's language and zone. An export with nothing in it
// any more (the user forgot everything meanwhile) sends nothing.
func (rd *Renderer) ExportDocuments(src MemoryExports) delivery.DocumentHook {
	return func(ctx context.Context, q domain.Queued) (delivery.Document, error) {
		e, err := src.Export(ctx, q.Ref, q.CreatedAt)
		if err != nil {
			return delivery.Document{}, err
		}
		if e.Empty() {
			return delivery.Document{}, delivery.ErrNoDocument
		}
		lang := e.User.Lang()
		loc, _ := rd.readerZone(e.User.TimeZone, e.User.MasterCity, lang)
		name := "memory-export-" + e.AsOf.In(loc).Format("2006-01-02")
		switch q.Document {
		case exportMarkdown:
			data := fitExport(e, delivery.MaxDocumentBytes, func(e memory.Export, omitted int) []byte {
				return rd.exportMarkdown(e, lang, loc, omitted)
			})
			return delivery.Document{Name: name + ".md", Data: data}, nil
		case exportJSON:
			data := fitExport(e, delivery.MaxDocumentBytes, exportJSONFile)
			return delivery.Document{Name: name + ".json", Data: data}, nil
		}
		return delivery.Document{}, fmt.Errorf("export of user %d: unknown document %q", q.Ref, q.Document)
	}
}

// fitExport builds a file within limit bytes: the oldest messages of the
// conversation are left out until it fits, and counted in the file with
// those the read left out already (e.Omitted).
func fitExport(e memory.Export, limit int, build func(memory.Export, int) []byte) []byte {
	all := e.Conversation
	dropped := 0
	for {
		e.Conversation = all[dropped:]
		data := build(e, e.Omitted+dropped)
		if len(data) <= limit || len(e.Conversation) == 0 {
			return data
		}
		dropped += max(len(e.Conversation)/10, 1)
	}
}

// ExportSchema and ExportSchemaVersion name the JSON export's format
// (README "Export and incognito" documents its fields). A change that
// renames or removes a field, or changes a field's meaning, takes a new
// version; adding a field does not.
const (
	ExportSchema        = "switchboard.memory_export"
	ExportSchemaVersion = 1
)

// exportFile is the JSON export.
type exportFile struct {
	Schema              string          `json:"schema"`
	SchemaVersion       int             `json:"schema_version"`
	ExportedAt          string          `json:"exported_at"`
	User                exportUser      `json:"user"`
	Memories            []exportMemory  `json:"memories"`
	Conversation        []exportMessage `json:"conversation"`
	ConversationOmitted int             `json:"conversation_omitted"`
}

type exportUser struct {
	ID       int64  `json:"id"`
	Language string `json:"language"`
	TimeZone string `json:"time_zone,omitempty"`
}

type exportMemory struct {
	ID           int64    `json:"id"`
	Summary      string   `json:"summary"`
	Tags         []string `json:"tags"`
	RememberedAt string   `json:"remembered_at"`
	WeekStart    string   `json:"week_start"`
	WeekEnd      string   `json:"week_end"`
	State        string   `json:"state"`
	SupersededAt *string  `json:"superseded_at"`
	SupersededBy *int64   `json:"superseded_by"`
	SourceRunIDs []int64  `json:"source_run_ids"`
}

type exportMessage struct {
	Role  string `json:"role"`
	Text  string `json:"text"`
	At    string `json:"at"`
	RunID int64  `json:"run_id,omitempty"`
}

// rfc3339 is t in UTC, as every time of the JSON export is written.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// role is who wrote a raw log: the user's query, or the bot's answer.
func role(l memory.LogEntry) string {
	if l.Type == "answer" {
		return "assistant"
	}
	return "user"
}

// exportJSONFile is the JSON export of e, omitted of its oldest messages
// left out.
func exportJSONFile(e memory.Export, omitted int) []byte {
	f := exportFile{
		Schema: ExportSchema, SchemaVersion: ExportSchemaVersion, ExportedAt: rfc3339(e.AsOf),
		User:     exportUser{ID: e.User.ID, Language: e.User.Lang(), TimeZone: e.User.TimeZone},
		Memories: []exportMemory{}, Conversation: []exportMessage{}, ConversationOmitted: omitted,
	}
	for _, m := range e.Memories {
		s := m.Memory
		em := exportMemory{ID: s.ID, Summary: s.Summary, Tags: s.Tags, RememberedAt: rfc3339(s.CreatedAt),
			WeekStart: rfc3339(s.BucketStart), WeekEnd: rfc3339(s.BucketEnd), State: "current", SourceRunIDs: s.SourceRunIDs}
		if em.Tags == nil {
			em.Tags = []string{}
		}
		if em.SourceRunIDs == nil {
			em.SourceRunIDs = []int64{}
		}
		if !m.SupersededAt.IsZero() {
			at := rfc3339(m.SupersededAt)
			em.State, em.SupersededAt = "superseded", &at
			if m.SupersededBy != 0 {
				by := m.SupersededBy
				em.SupersededBy = &by
			}
		}
		f.Memories = append(f.Memories, em)
	}
	for _, l := range e.Conversation {
		f.Conversation = append(f.Conversation, exportMessage{Role: role(l), Text: l.Text, At: rfc3339(l.CreatedAt), RunID: l.RunID})
	}
	// Written for people to open too: "<" and "&" stay themselves, not
	// \u003c and \u0026 (the file is never embedded in HTML).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		// Strings, numbers and slices of them always encode.
		panic(fmt.Sprintf("export: encode JSON: %v", err))
	}
	return buf.Bytes()
}

// exportMarkdown is the export to read: the memories, then the
// conversation, with times in the reader's zone (named once, at the top).
// What the user and the model wrote is quoted line by line, so nothing in
// it can break the document's structure.
func (rd *Renderer) exportMarkdown(e memory.Export, lang string, loc *time.Location, omitted int) []byte {
	t := func(key string, data ...locales.Data) string { return rd.cat.T(lang, key, data...) }
	at := func(ts time.Time) string { return ts.In(loc).Format("2006-01-02 15:04") }
	var sb strings.Builder
	sb.WriteString("# " + t("export.md_title") + "\n\n")
	sb.WriteString(t("export.md_as_of", locales.Data{
		"Time": at(e.AsOf), "Zone": locales.ZoneLabel(lang, loc, e.AsOf), "Offset": locales.ZoneOffset(e.AsOf, loc),
	}) + "\n\n")
	sb.WriteString("## " + t("export.md_memories", locales.Data{"N": len(e.Memories)}) + "\n\n")
	if len(e.Memories) == 0 {
		sb.WriteString(t("export.md_no_memories") + "\n\n")
	}
	for i, m := range e.Memories {
		state := t("export.md_current")
		if !m.SupersededAt.IsZero() {
			state = t("export.md_superseded", locales.Data{"Time": at(m.SupersededAt)})
		}
		sb.WriteString(fmt.Sprintf("### %d. %s · %s\n\n", i+1, at(m.Memory.CreatedAt), state))
		var tags []string
		for _, tag := range m.Memory.Tags {
			if tag = oneLine(tag); tag != "" {
				tags = append(tags, markdownLiteral(tag))
			}
		}
		if len(tags) > 0 {
			sb.WriteString(t("export.md_tags", locales.Data{"Tags": locales.HTML(strings.Join(tags, ", "))}) + "\n\n")
		}
		sb.WriteString(quote(m.Memory.Summary) + "\n\n")
	}
	sb.WriteString("## " + t("export.md_conversation", locales.Data{"N": len(e.Conversation)}) + "\n\n")
	if omitted > 0 {
		sb.WriteString(t("export.md_omitted", locales.Data{"N": omitted}) + "\n\n")
	}
	if len(e.Conversation) == 0 {
		sb.WriteString(t("export.md_no_conversation") + "\n\n")
	}
	for _, l := range e.Conversation {
		who := t("export.md_you")
		if role(l) == "assistant" {
			who = t("export.md_bot")
		}
		sb.WriteString("**" + who + "** · " + at(l.CreatedAt) + "\n\n" + quote(l.Text) + "\n\n")
	}
	return []byte(sb.String())
}

// quote is text as a Markdown block quote, every line of it. The text
// stays Markdown (a model's answer is), but never HTML: most viewers
// would run a <script> or hide an <!-- in it, so outside fenced code
// every line is markdownLiteral. A fence counts only where no viewer can
// read it otherwise (codeFence), so a misread fence costs a visible
// backslash, never raw HTML.
func quote(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	fence := ""
	for i, l := range lines {
		switch {
		case fence != "":
			if closesFence(l, fence) {
				fence = ""
			}
		default:
			fence = codeFence(l)
			if fence == "" {
				l = markdownLiteral(l)
			}
		}
		lines[i] = strings.TrimRight("> "+l, " ")
	}
	return strings.Join(lines, "\n")
}

// markdownLiteral escapes what a Markdown viewer would take for HTML (a
// tag, a comment, an autolink, an entity) with CommonMark's backslash, and
// the backslash itself, so that none of the user's own escapes undoes it.
var markdownLiteral = strings.NewReplacer(`\`, `\\`, `<`, `\<`, `&`, `\&`).Replace

// codeFence is the fence (its run of ` or ~) that line opens, or "": only
// one at the line's very start, where no list or quote in the text can
// hold it, and a backtick fence without a backtick after it (CommonMark).
func codeFence(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n < 3 {
			continue
		}
		if c == "`" && strings.Contains(line[n:], "`") {
			return ""
		}
		return line[:n]
	}
	return ""
}

// closesFence says whether line may end the fence: a run of its character
// at least as long, alone on the line. Indentation is ignored, so this
// closes at least wherever a viewer would, and escaping resumes no later.
func closesFence(line, fence string) bool {
	l := strings.TrimSpace(line)
	return len(l) >= len(fence) && strings.Trim(l, fence[:1]) == ""
}
