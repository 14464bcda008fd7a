package tgfake

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A rich message as the Bot API sets it out: sendRichMessage with
// rich_message's html parsed into blocks (a table's cells, a details
// block's summary and content), the message read back with rich_message
// and no text; its edit by editMessageText's rich_message; the documented
// rules (exactly one of html or markdown, only inline formatting in a
// table cell, at most 20 columns) refused; and an older server that knows
// no such method (404) and ignores rich_message on an edit.
func TestRichMessages(t *testing.T) {
	srv := New(t, WithoutLimits())
	ann := startedUser(t, srv, 1001)
	send := func(rich any) apiResponse {
		return callJSON(t, srv, "sendRichMessage", map[string]any{"chat_id": ann.ID(), "rich_message": rich,
			"reply_markup": keyboardJSON(t, []map[string]any{button("Again", "a:1")})})
	}
	page := `<h3>Funnel</h3><table bordered><tr><th>Applied</th><th align="right">Invited</th></tr>` +
		`<tr><td>12</td><td align="right"><b>3</b></td></tr></table>` +
		`<details><summary>By search</summary><p>go &amp; rust</p><ul><li>one</li><li>two</li></ul></details>` +
		`<blockquote>said<cite>Ann</cite></blockquote>text at the top <tg-time unix="1700000000" format="dt">then</tg-time>`

	r := send(map[string]any{"html": page})
	msg := decodeResult[Message](t, r)
	assert.Empty(t, msg.Text, "a rich message has no text")
	require.NotNil(t, msg.RichMessage)
	var raw struct {
		RichMessage struct {
			Blocks []json.RawMessage `json:"blocks"`
		} `json:"rich_message"`
	}
	require.NoError(t, json.Unmarshal(r.Result, &raw))
	require.Len(t, raw.RichMessage.Blocks, 5)
	assert.JSONEq(t, `{"type":"heading","text":"Funnel","size":3}`, string(raw.RichMessage.Blocks[0]))

	blocks := msg.RichMessage.Blocks
	table, ok := Find(blocks, "table")
	require.True(t, ok)
	assert.True(t, table.IsBordered)
	assert.Equal(t, [][]string{{"Applied", "Invited"}, {"12", "3"}}, table.Rows())
	assert.True(t, table.Cells[0][0].IsHeader)
	assert.Equal(t, "right", table.Cells[1][1].Align)
	_, bold := table.Cells[1][1].Text.Find("bold")
	assert.True(t, bold)
	details, ok := Find(blocks, "details")
	require.True(t, ok)
	assert.Equal(t, "By search", details.Summary.String())
	assert.False(t, details.IsOpen)
	require.Len(t, details.Blocks, 2)
	assert.Equal(t, "go & rust", details.Blocks[0].Text.String())
	require.Len(t, details.Blocks[1].Items, 2)
	quote, _ := Find(blocks, "blockquote")
	assert.Equal(t, "Ann", quote.Credit.String())
	assert.Equal(t, "paragraph", blocks[4].Type, "inline content at the top is a paragraph")
	when, ok := blocks[4].Text.Find("date_time")
	require.True(t, ok)
	assert.Equal(t, int64(1700000000), when.UnixTime)
	stored, _ := srv.MessageByID(ann.ID(), msg.MessageID)
	assert.Contains(t, stored.RichMessage.PlainText(), "Applied | Invited\n12 | 3")
	assert.Equal(t, []string{"Again"}, stored.ReplyMarkup.Labels())

	// The edit: rich_message replaces a rich message; text does not, and
	// a message of text is not made rich.
	edit := func(id int, params map[string]any) apiResponse {
		params["chat_id"], params["message_id"] = ann.ID(), id
		return callJSON(t, srv, "editMessageText", params)
	}
	requireOK(t, edit(msg.MessageID, map[string]any{"rich_message": map[string]any{"html": "<p>now</p>"}}))
	stored, _ = srv.MessageByID(ann.ID(), msg.MessageID)
	assert.Equal(t, "now", stored.RichMessage.PlainText())
	assert.Nil(t, stored.ReplyMarkup, "an edit without reply_markup removes the keyboard, as for text")
	requireError(t, edit(msg.MessageID, map[string]any{"rich_message": map[string]any{"html": "<p>now</p>"}}), 400, DescNotModified)
	requireError(t, edit(msg.MessageID, map[string]any{"text": "plain"}), 400, DescNoTextToEdit)
	plain := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": ann.ID(), "text": "plain"}))
	requireError(t, edit(plain.MessageID, map[string]any{"rich_message": map[string]any{"html": "<p>x</p>"}}), 400,
		"Bad Request: a message of text is not edited to a rich one (tgfake)")

	// The documented rules.
	requireError(t, send(map[string]any{"html": "<p>a</p>", "markdown": "a"}), 400,
		"Bad Request: exactly one of html or markdown must be used in a rich message (tgfake)")
	requireError(t, send(map[string]any{"html": "<table><tr><td><p>a</p></td></tr></table>"}), 400,
		"Bad Request: can't parse rich message: <td> can contain only inline formatting, not <p> (tgfake)")
	requireError(t, send(map[string]any{"html": "<table><tr>" + strings.Repeat("<td>x</td>", MaxRichColumns+1) + "</tr></table>"}), 400,
		"Bad Request: a table of a rich message has more than 20 columns (tgfake)")
	requireError(t, send(map[string]any{"html": "<p>a &copy; b</p>"}), 400,
		`Bad Request: can't parse rich message: unsupported HTML entity "&copy;" (tgfake)`)
	requireError(t, send(map[string]any{"html": "<p>a<div>b</div></p>"}), 400,
		`Bad Request: can't parse rich message: unsupported start tag "div" (tgfake)`)
	requireError(t, send(map[string]any{"html": "<p>" + strings.Repeat("x", MaxRichText+1) + "</p>"}), 400,
		"Bad Request: rich message is too long (tgfake)")
	requireError(t, send(map[string]any{"html": strings.Repeat("<p>x</p>", MaxRichBlocks+1)}), 400,
		"Bad Request: rich message has too many blocks: 501 (tgfake)")
	requireError(t, send(map[string]any{"html": strings.Repeat("<blockquote>", MaxRichNesting+1) + "x" +
		strings.Repeat("</blockquote>", MaxRichNesting+1)}), 400, "Bad Request: rich message is nested too deeply (tgfake)")

	// An older server.
	srv.SetUnsupported(true, FeatureRichMessages)
	requireError(t, send(map[string]any{"html": "<p>a</p>"}), 404, DescNotFound)
	requireError(t, edit(msg.MessageID, map[string]any{"rich_message": map[string]any{"html": "<p>later</p>"}}), 400, DescTextEmpty)
}
