package bot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/renderer/html"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/domain/memory"
)

// exportsFunc is a bot.MemoryExports of a test's own.
type exportsFunc func(ctx context.Context, userID int64, asOf time.Time) (memory.Export, error)

func (f exportsFunc) Export(ctx context.Context, userID int64, asOf time.Time) (memory.Export, error) {
	return f(ctx, userID, asOf)
}

// The export's document hook reads the export as of the row's creation
// and writes a superseded memory as such in both files: its state and end
// in the JSON (UTC), "replaced" with the time in the reader's zone in the
// Markdown. An export with nothing left sends nothing.
func TestExportDocumentsWriteSupersededMemories(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	week := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	ex := memory.Export{
		User: domain.User{ID: 5, Language: "uk", TimeZone: "Europe/Kyiv"}, AsOf: asOf,
		Memories: []memory.ExportedMemory{
			{Memory: memory.Summary{ID: 1, Summary: "lives in Kyiv", CreatedAt: asOf.Add(-48 * time.Hour), BucketStart: week, BucketEnd: week.AddDate(0, 0, 7)},
				SupersededAt: asOf.Add(-time.Hour), SupersededBy: 2},
			{Memory: memory.Summary{ID: 2, Summary: "moved to Lviv\n# not a heading", Tags: []string{"home"}, CreatedAt: asOf.Add(-time.Hour),
				BucketStart: week, BucketEnd: week.AddDate(0, 0, 7)}},
		},
	}
	var asked time.Time
	hook := testRenderer(bot.RenderConfig{}).ExportDocuments(exportsFunc(func(_ context.Context, userID int64, at time.Time) (memory.Export, error) {
		require.EqualValues(t, 5, userID)
		asked = at
		return ex, nil
	}))
	row := domain.Queued{Message: domain.Message{ChatID: 5, Kind: domain.KindMemoryExport, Ref: 5, Document: "json"}, CreatedAt: asOf}

	doc, err := hook(t.Context(), row)
	require.NoError(t, err)
	require.True(t, asked.Equal(asOf), "as the tables stood when the user asked")
	require.Equal(t, "memory-export-2026-11-26.json", doc.Name)
	var f struct {
		Memories []struct {
			State        string  `json:"state"`
			SupersededAt *string `json:"superseded_at"`
			SupersededBy *int64  `json:"superseded_by"`
			Tags         []string
		} `json:"memories"`
		Conversation []any `json:"conversation"`
	}
	require.NoError(t, json.Unmarshal(doc.Data, &f))
	require.Len(t, f.Memories, 2)
	require.Equal(t, "superseded", f.Memories[0].State)
	require.Equal(t, "2026-11-26T09:00:00Z", *f.Memories[0].SupersededAt)
	require.EqualValues(t, 2, *f.Memories[0].SupersededBy)
	require.Equal(t, []string{}, f.Memories[0].Tags, "an empty list, never null")
	require.Equal(t, "current", f.Memories[1].State)
	require.Nil(t, f.Memories[1].SupersededAt)
	require.NotNil(t, f.Conversation, "an empty list, never null")

	row.Document = "markdown"
	doc, err = hook(t.Context(), row)
	require.NoError(t, err)
	require.Equal(t, "memory-export-2026-11-26.md", doc.Name)
	md := string(doc.Data)
	require.Contains(t, md, "### 1. 2026-11-24 12:00 · замінений 2026-11-26 11:00\n\n> lives in Kyiv\n")
	require.Contains(t, md, "### 2. 2026-11-26 11:00 · актуальний\n\nТеги: home\n\n> moved to Lviv\n> # not a heading\n")
	require.Contains(t, md, "Повідомлень поки немає.")
	require.Regexp(t, `Часовий пояс: \S.* \(UTC\+02:00\)\.\n`, md, "a named zone with its offset")
	require.False(t, strings.Contains(md, "\n# not"), "what was written cannot make a heading")

	row.Document = "pdf"
	_, err = hook(t.Context(), row)
	require.Error(t, err)

	ex = memory.Export{AsOf: asOf}
	_, err = hook(t.Context(), row)
	require.ErrorIs(t, err, delivery.ErrNoDocument)
}

// What the user and the model wrote reads in a Markdown viewer as they
// wrote it, and never as HTML: tags, comments, entities and autolinks in
// quoted text and in tags show as text, a backslash of their own does not
// undo the escape, a tag cannot start a line of its own, and code in a
// fence keeps its < and & without a backslash. A fence a list holds is
// not taken for one: the lines after it are escaped all the same.
func TestExportMarkdownShowsHTMLAsText(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ex := memory.Export{
		User: domain.User{ID: 5, Language: "en"}, AsOf: asOf,
		Memories: []memory.ExportedMemory{{Memory: memory.Summary{ID: 1, CreatedAt: asOf,
			Summary: "Likes <b>bold</b> & <script>x</script>\n<!-- hidden\n\\<i>escaped</i> &amp; <https://example.com>",
			Tags:    []string{"<b>tag</b>", "a\n<script>y</script>", " "}}}},
		Conversation: []memory.LogEntry{
			{Type: "query", Text: "What is <div>?", CreatedAt: asOf},
			{Type: "answer", Text: "Like this:\n\n```go\nfmt.Println(a < b && c)\n```\n\n- a list\n  ```\n<script>z</script>\n```", CreatedAt: asOf},
		},
	}
	hook := testRenderer(bot.RenderConfig{}).ExportDocuments(exportsFunc(func(context.Context, int64, time.Time) (memory.Export, error) {
		return ex, nil
	}))
	doc, err := hook(t.Context(), domain.Queued{Message: domain.Message{ChatID: 5, Kind: domain.KindMemoryExport, Ref: 5, Document: "markdown"}, CreatedAt: asOf})
	require.NoError(t, err)
	md := string(doc.Data)
	t.Logf("Markdown:\n%s", md)
	require.Contains(t, md, "Tags: \\<b>tag\\</b>, a \\<script>y\\</script>\n")
	require.Contains(t, md, "> Likes \\<b>bold\\</b> \\& \\<script>x\\</script>\n> \\<!-- hidden\n> \\\\\\<i>escaped\\</i> \\&amp; \\<https://example.com>\n")
	require.Contains(t, md, "> ```go\n> fmt.Println(a < b && c)\n> ```\n", "code in a fence as written")
	require.Contains(t, md, "Time zone: UTC.\n", "a zone named by its offset, once")

	// The JSON file is for programs and people alike: the characters as written.
	js, err := hook(t.Context(), domain.Queued{Message: domain.Message{ChatID: 5, Kind: domain.KindMemoryExport, Ref: 5, Document: "json"}, CreatedAt: asOf})
	require.NoError(t, err)
	require.Contains(t, string(js.Data), `"text": "What is <div>?"`)
	require.NotContains(t, string(js.Data), `\u003c`)

	// As a viewer that passes raw HTML through renders it.
	var page bytes.Buffer
	require.NoError(t, goldmark.New(goldmark.WithRendererOptions(html.WithUnsafe())).Convert(doc.Data, &page))
	out := page.String()
	t.Logf("HTML:\n%s", out)
	for _, raw := range []string{"<b>", "<script>", "<!--", "<i>", "<div>", "<a href"} {
		require.NotContains(t, out, raw, "raw HTML from the text")
	}
	for _, text := range []string{
		"Tags: &lt;b&gt;tag&lt;/b&gt;, a &lt;script&gt;y&lt;/script&gt;</p>",
		"Likes &lt;b&gt;bold&lt;/b&gt; &amp; &lt;script&gt;x&lt;/script&gt;\n&lt;!-- hidden\n\\&lt;i&gt;escaped&lt;/i&gt; &amp;amp; &lt;https://example.com&gt;</p>",
		"What is &lt;div&gt;?",
		"<code class=\"language-go\">fmt.Println(a &lt; b &amp;&amp; c)\n</code>",
		"&lt;script&gt;z&lt;/script&gt;",
	} {
		require.Contains(t, out, text)
	}
}

// Messages the read left out (past what one file can carry) are counted in
// both files, beside the newest ones that were read.
func TestExportCountsWhatTheReadLeftOut(t *testing.T) {
	t.Parallel()
	asOf := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	ex := memory.Export{
		User: domain.User{ID: 5, Language: "en"}, AsOf: asOf, Omitted: 3,
		Conversation: []memory.LogEntry{{Type: "query", Text: "the newest question", CreatedAt: asOf.Add(-time.Minute)}},
	}
	hook := testRenderer(bot.RenderConfig{}).ExportDocuments(exportsFunc(func(context.Context, int64, time.Time) (memory.Export, error) {
		return ex, nil
	}))
	row := domain.Queued{Message: domain.Message{ChatID: 5, Kind: domain.KindMemoryExport, Ref: 5, Document: "json"}, CreatedAt: asOf}
	doc, err := hook(t.Context(), row)
	require.NoError(t, err)
	var f struct {
		Conversation []struct {
			Text string `json:"text"`
		} `json:"conversation"`
		Omitted int `json:"conversation_omitted"`
	}
	require.NoError(t, json.Unmarshal(doc.Data, &f))
	require.Equal(t, 3, f.Omitted)
	require.Len(t, f.Conversation, 1)
	require.Equal(t, "the newest question", f.Conversation[0].Text)

	row.Document = "markdown"
	doc, err = hook(t.Context(), row)
	require.NoError(t, err)
	require.Contains(t, string(doc.Data), "The 3 oldest messages are left out to keep this file within Telegram's size limit.")
	require.Contains(t, string(doc.Data), "the newest question")
}
