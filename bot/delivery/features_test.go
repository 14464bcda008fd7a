package delivery_test

import (
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
)

// A copy button goes out as copy_text; a server that does not know the
// field (older than Bot API 7.11) refuses the keyboard, and the message
// goes again at once without its copy buttons, the rest kept. The refusal
// is believed for a while (no second refused call) and named by Lacking;
// a server that knows copy buttons is never marked as lacking them by a
// refusal of something else.
func TestCopyButtonsFallBackOnAServerWithoutThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	s := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	card := func(text string) domain.Message {
		return domain.Message{ChatID: 1, Kind: domain.KindReply, Text: text, Buttons: [][]domain.Button{
			{{Text: "Copy address", Copy: "Lviv, Shevchenka 1"}, {Text: "Copy phone", Copy: "+380 67 000 00 00"}},
			{{Text: "Done", Data: "ad:1"}},
		}}
	}

	id, err := s.SendNow(b.ctx, card("first"))
	require.NoError(t, err)
	msg, _ := b.srv.MessageByID(1, id)
	buttons := msg.ReplyMarkup.Buttons()
	require.Len(t, buttons, 3)
	assert.Equal(t, "Lviv, Shevchenka 1", buttons[0].Copies())
	assert.Equal(t, "+380 67 000 00 00", buttons[1].Copies())
	assert.Empty(t, s.Lacking())

	// Too long a copy text is the bot's bug, not a missing feature.
	long := card("too long")
	long.Buttons[0][0].Copy = strings.Repeat("x", tgfake.MaxCopyText+1)
	_, err = s.SendNow(b.ctx, long)
	require.ErrorContains(t, err, "BUTTON_COPY_TEXT_INVALID")
	assert.Empty(t, s.Lacking(), "a refusal of one copy text is no sign of a server without them")

	b.srv.SetUnsupported(true, tgfake.FeatureCopyText)
	calls := len(b.srv.CallsTo("sendMessage"))
	id, err = s.SendNow(b.ctx, card("second"))
	require.NoError(t, err)
	msg, _ = b.srv.MessageByID(1, id)
	assert.Equal(t, "second", msg.Text)
	assert.Equal(t, []string{"Done"}, msg.ReplyMarkup.Labels(), "the copy buttons' row goes, the rest stays")
	assert.Len(t, b.srv.CallsTo("sendMessage"), calls+2, "refused once, then sent without them")
	assert.Equal(t, []delivery.Feature{delivery.FeatureCopyButtons}, s.Lacking())

	_, err = s.SendNow(b.ctx, card("third"))
	require.NoError(t, err)
	assert.Len(t, b.srv.CallsTo("sendMessage"), calls+3, "believed: no refused call before the third")
}

// A time goes out as a date_time entity; a server older than Bot API 9.5
// refuses <tg-time> as an unknown tag, and the message goes again at once
// with the tags taken out: the same text, in the reader's zone. A server
// lacking both that and copy buttons costs one refused call for each, and
// both are believed; a malformed tag is the bot's bug, not a missing
// feature.
func TestTimesFallBackOnAServerWithoutDateTimeEntities(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	s := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	at := time.Date(2026, 11, 30, 7, 5, 0, 0, time.UTC)
	text := "Next digest: " + string(locales.TimeTag("en", at, locales.LangZone("uk"), at)) + " &amp; more"
	msg := func(text string, buttons ...domain.Button) domain.Message {
		m := domain.Message{ChatID: 1, Kind: domain.KindReply, Text: text}
		if len(buttons) > 0 {
			m.Buttons = [][]domain.Button{buttons}
		}
		return m
	}

	id, err := s.SendNow(b.ctx, msg(text))
	require.NoError(t, err)
	got, _ := b.srv.MessageByID(1, id)
	require.Len(t, got.Entities, 1)
	e := got.Entities[0]
	assert.Equal(t, "date_time", e.Type)
	assert.Equal(t, at.Unix(), e.UnixTime)
	assert.Equal(t, "dt", e.DateTimeFormat)
	want := "Next digest: 30 Nov, 09:05 (Kyiv) & more"
	assert.Equal(t, want, got.Text)

	_, err = s.SendNow(b.ctx, msg(`<tg-time unix="1" format="x">then</tg-time>`))
	require.Error(t, err, "a format the Bot API does not know is refused")
	assert.Empty(t, s.Lacking(), "a refusal of one malformed tag is no sign of a server without them")

	b.srv.SetUnsupported(true, tgfake.FeatureDateTime, tgfake.FeatureCopyText)
	calls := len(b.srv.CallsTo("sendMessage"))
	id, err = s.SendNow(b.ctx, msg(text, domain.Button{Text: "Copy", Copy: "09:05"}, domain.Button{Text: "Done", Data: "d:1"}))
	require.NoError(t, err)
	got, _ = b.srv.MessageByID(1, id)
	assert.Equal(t, want, got.Text, "the time is still there, in the reader's zone")
	assert.Empty(t, got.Entities)
	assert.Equal(t, []string{"Done"}, got.ReplyMarkup.Labels())
	assert.Len(t, b.srv.CallsTo("sendMessage"), calls+3, "the tag refused, then the copy button, then sent")
	assert.ElementsMatch(t, []delivery.Feature{delivery.FeatureCopyButtons, delivery.FeatureDateTime}, s.Lacking())

	id, err = s.SendNow(b.ctx, msg(text))
	require.NoError(t, err)
	assert.Len(t, b.srv.CallsTo("sendMessage"), calls+4, "believed: no refused call before the next")
	got, _ = b.srv.MessageByID(1, id)
	assert.Equal(t, want, got.Text)
}

// A button's style goes out as style, a disabled button as disabled; a
// server older than Bot API 10.3 refuses the disabled button (it has only
// its text), and the message goes again at once without it, believed.
func TestDisabledButtonsFallBackOnAServerWithoutThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	s := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	closed := domain.Message{ChatID: 1, Kind: domain.KindReply, Text: "⌛ The offer expired.", Buttons: [][]domain.Button{
		{{Text: "⌛ Time ran out", Disabled: true}},
		{{Text: "Orders", Data: "o:1", Style: domain.StylePrimary}},
	}}
	id, err := s.SendNow(b.ctx, closed)
	require.NoError(t, err)
	msg, _ := b.srv.MessageByID(1, id)
	buttons := msg.ReplyMarkup.Buttons()
	require.Len(t, buttons, 2)
	assert.NotNil(t, buttons[0].Disabled)
	assert.Equal(t, "primary", buttons[1].Style)

	b.srv.SetUnsupported(true, tgfake.FeatureDisabledButtons)
	calls := len(b.srv.CallsTo("sendMessage"))
	id, err = s.SendNow(b.ctx, closed)
	require.NoError(t, err)
	msg, _ = b.srv.MessageByID(1, id)
	assert.Equal(t, []string{"Orders"}, msg.ReplyMarkup.Labels())
	assert.Len(t, b.srv.CallsTo("sendMessage"), calls+2, "refused once, then sent without it")
	assert.Equal(t, []delivery.Feature{delivery.FeatureDisabledButtons}, s.Lacking())
}

// A message with a rich form goes by sendRichMessage, its table and
// collapsible section read back as blocks, and its edit by
// editMessageText's rich_message. A server older than Bot API 10.1 answers
// sendRichMessage 404 and ignores an edit's rich_message (so the edit has
// no text): the message goes again at once as its HTML text, the refusal
// is believed (no second refused call) and named once in the log and by
// Lacking.
func TestRichMessagesFallBackOnAServerWithoutThem(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	var logged bytes.Buffer
	var logMu sync.Mutex
	s, err := delivery.NewSender(delivery.Config{Poll: 10 * time.Millisecond}, b.store.Outbox(), b.client(),
		delivery.NewMemoryLimiter(delivery.DefaultLimits()),
		slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logged}, nil)), nil)
	require.NoError(t, err)
	start(t, s)
	funnel := func(applied int) domain.Message {
		n := strconv.Itoa(applied)
		return domain.Message{ChatID: 1, Kind: domain.KindReply,
			Text:    "<b>Funnel</b>\nApplied: " + n,
			Rich:    "<h3>Funnel</h3><table><tr><th>Applied</th></tr><tr><td>" + n + "</td></tr></table>",
			Buttons: [][]domain.Button{{{Text: "Again", Data: "a:1"}}}}
	}

	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, funnel(3)))
	s.Wake()
	got := b.srv.WaitMessage(t, 1, func(m tgfake.BotMessage) bool { return m.RichMessage != nil })
	assert.Empty(t, got.Text)
	table, ok := tgfake.Find(got.RichMessage.Blocks, "table")
	require.True(t, ok)
	assert.Equal(t, [][]string{{"Applied"}, {"3"}}, table.Rows())
	assert.Equal(t, []string{"Again"}, got.ReplyMarkup.Labels())

	edit := funnel(4)
	edit.Edit, edit.ReplyTo = true, got.MessageID
	_, err = s.SendNow(b.ctx, edit)
	require.NoError(t, err)
	got, _ = b.srv.MessageByID(1, got.MessageID)
	table, _ = tgfake.Find(got.RichMessage.Blocks, "table")
	assert.Equal(t, [][]string{{"Applied"}, {"4"}}, table.Rows())
	assert.Empty(t, s.Lacking())

	b.srv.SetUnsupported(true, tgfake.FeatureRichMessages)
	rich, plain := len(b.srv.CallsTo("sendRichMessage")), len(b.srv.CallsTo("sendMessage"))
	require.NoError(t, b.store.Outbox().Enqueue(b.ctx, funnel(5)))
	s.Wake()
	got = b.srv.WaitMessage(t, 1, func(m tgfake.BotMessage) bool { return m.Text == "Funnel\nApplied: 5" })
	assert.Nil(t, got.RichMessage)
	assert.Equal(t, []string{"Again"}, got.ReplyMarkup.Labels(), "the buttons stay")
	assert.Len(t, b.srv.CallsTo("sendRichMessage"), rich+1, "refused once")
	assert.Len(t, b.srv.CallsTo("sendMessage"), plain+1, "then sent as text")
	// The sender believes the refusal once the call that went through has
	// answered, a moment after the fake shows the message.
	b.srv.WaitFor(t, 30*time.Second, func() bool { return len(s.Lacking()) > 0 })
	assert.Equal(t, []delivery.Feature{delivery.FeatureRichMessages}, s.Lacking())

	_, err = s.SendNow(b.ctx, funnel(6))
	require.NoError(t, err)
	assert.Len(t, b.srv.CallsTo("sendRichMessage"), rich+1, "believed: no refused call before the next")
	logMu.Lock()
	assert.Equal(t, 1, strings.Count(logged.String(), "this Bot API server lacks rich messages (Bot API 10.1)"), logged.String())
	logMu.Unlock()

	// A sender that has not met the older server yet edits with
	// rich_message, which that server ignores: the edit has no text, and
	// goes again at once as text.
	fresh := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	edit = funnel(7)
	edit.Edit, edit.ReplyTo = true, got.MessageID
	_, err = fresh.SendNow(b.ctx, edit)
	require.NoError(t, err)
	got, _ = b.srv.MessageByID(1, got.MessageID)
	assert.Equal(t, "Funnel\nApplied: 7", got.Text)
	assert.Equal(t, []delivery.Feature{delivery.FeatureRichMessages}, fresh.Lacking())
}

// lockedWriter lets a test read a log the sender's goroutines write.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
