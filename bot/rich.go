package bot

import (
	"context"
	"strings"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
)

// Rich messages (Bot API 10.1): a reply that reads better as tables and
// collapsible sections carries a rich form beside its HTML text
// (domain.Message.Rich), which bot/delivery sends where the server has
// rich messages; the text is the same message for a server that lacks
// them, so both are rendered from the same lines.

// richDoc builds a rich message's HTML ("Rich HTML style"): blocks of the
// same Telegram HTML the texts are written in. Line breaks are <br>, never
// "\n": the Bot API does not say how rich HTML reads a newline.
type richDoc struct{ sb strings.Builder }

// para adds text (Telegram HTML, lines split by "\n", paragraphs by a
// blank line) as paragraphs.
func (d *richDoc) para(text string) {
	for _, p := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			d.sb.WriteString("<p>" + richLines(p) + "</p>")
		}
	}
}

// table adds a bordered table: a header row, then rows of cells (Telegram
// HTML, one line each).
func (d *richDoc) table(header []string, rows [][]string) {
	d.sb.WriteString("<table bordered striped><tr>")
	for _, h := range header {
		d.sb.WriteString("<th>" + h + "</th>")
	}
	d.sb.WriteString("</tr>")
	for _, row := range rows {
		d.sb.WriteString("<tr>")
		for _, c := range row {
			d.sb.WriteString("<td>" + richLines(c) + "</td>")
		}
		d.sb.WriteString("</tr>")
	}
	d.sb.WriteString("</table>")
}

// details adds a collapsible section, its summary always shown, its body
// what add writes; open shows the body at first.
func (d *richDoc) details(summary string, open bool, add func(*richDoc)) {
	if open {
		d.sb.WriteString("<details open>")
	} else {
		d.sb.WriteString("<details>")
	}
	d.sb.WriteString("<summary>" + richLines(summary) + "</summary>")
	add(d)
	d.sb.WriteString("</details>")
}

func (d *richDoc) String() string { return d.sb.String() }

// richLines is Telegram HTML with its line breaks as <br>.
func richLines(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "<br>") }

// queueRichReply is queueReply for a reply with a rich form: the rich
// message where its text fits one message (a server without rich messages
// gets the text, bot/delivery), else the text alone, split.
func (b *Bot) queueRichReply(ctx context.Context, chatID int64, text, rich string, kb *tele.ReplyMarkup) error {
	msgs := Messages(chatID, domain.KindReply, 0, text, kb)
	if len(msgs) == 1 {
		msgs[0].Rich = rich
	}
	return b.queueMessages(ctx, chatID, msgs)
}

// ReplyRich is Reply for a reply with a rich form (queueRichReply).
func (r *Request) ReplyRich(text, rich string, markup *tele.ReplyMarkup) error {
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return r.bot.queueRichReply(ctx, r.Chat().ID, text, rich, markup)
}

// editPressedRich is editPressed for a message with a rich form: a
// pressed rich message (which has no text) is edited to the rich form, a
// message of text (sent where the server had no rich messages) to the
// text, since the Bot API does not say a message may change between the
// two.
func (b *Bot) editPressedRich(r *Request, text, rich string, kb *tele.ReplyMarkup) {
	chatID, msgID, ok := pressedMessage(r)
	if !ok {
		return
	}
	m := domain.Message{ChatID: chatID, Kind: domain.KindReply, Edit: true, ReplyTo: msgID, Text: b.fitEdit(text), Buttons: Buttons(kb)}
	if pressed := r.Callback().Message; pressed.Text == "" && pressed.Caption == "" {
		m.Rich = rich
	}
	if _, err := b.deps.Direct.SendNow(r.Ctx, m); err != nil {
		b.deps.Log.Warn("edit pressed message", "user", r.User.ID, "message", msgID, "err", err)
	}
}
