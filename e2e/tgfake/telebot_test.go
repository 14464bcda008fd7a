package tgfake

import (
	"html"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"
)

// botErrors collects errors telebot reports through OnError, i.e. bot API
// calls the fake rejected.
type botErrors struct {
	mu    sync.Mutex
	errs  []error
	added chan struct{} // signalled on every error, for waiting without sleeps
}

func (b *botErrors) add(err error, _ tele.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errs = append(b.errs, err)
	select {
	case b.added <- struct{}{}:
	default:
	}
}

func (b *botErrors) list() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]error(nil), b.errs...)
}

// startBot runs a telebot bot against srv until the test ends.
func startBot(t *testing.T, srv *Server, setup func(*tele.Bot)) (*tele.Bot, *botErrors) {
	t.Helper()
	errs := &botErrors{added: make(chan struct{}, 1)}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	bot, err := tele.NewBot(tele.Settings{
		URL:     srv.URL(),
		Token:   srv.Token(),
		Poller:  &tele.LongPoller{Timeout: time.Second},
		OnError: errs.add,
		Client:  &http.Client{Transport: tr, Timeout: time.Minute},
	})
	require.NoError(t, err)
	require.Equal(t, srv.Bot().Username, bot.Me.Username, "NewBot calls getMe")
	setup(bot)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		bot.Start()
	}()
	t.Cleanup(func() {
		bot.Stop()
		<-stopped
	})
	return bot, errs
}

func TestTelebotConversation(t *testing.T) {
	srv := New(t)
	confirm := tele.InlineButton{Unique: "confirm", Text: "Confirm"}
	_, errs := startBot(t, srv, func(b *tele.Bot) {
		b.Handle("/start", func(c tele.Context) error {
			markup := &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{*confirm.With("42")}}}
			greeting := "Hello, <b>" + html.EscapeString(c.Sender().FirstName) + "</b>!"
			return c.Send(greeting, tele.ModeHTML, markup)
		})
		b.Handle(&confirm, func(c tele.Context) error {
			if err := c.Edit("Confirmed order " + c.Data()); err != nil {
				return err
			}
			return c.Respond(&tele.CallbackResponse{Text: "Done", ShowAlert: true})
		})
	})

	alice := srv.User(1001, "Tom & Jerry", "en")
	sent := alice.SendText(alice.ID(), "/start")
	reply := srv.WaitMessageAfter(t, alice.ID(), sent.MessageID, nil)
	require.Equal(t, "Hello, Tom & Jerry!", reply.Text)
	require.Equal(t, []MessageEntity{ent("bold", 7, 11)}, reply.Entities)
	require.Equal(t, "HTML", reply.ParseMode)
	require.Equal(t, srv.Bot().ID, reply.From.ID)
	buttons := reply.ReplyMarkup.Buttons()
	require.Len(t, buttons, 1)
	require.Equal(t, InlineKeyboardButton{Text: "Confirm", CallbackData: "\fconfirm|42"}, buttons[0])

	_, err := alice.Press(reply, "\fconfirm|43")
	require.ErrorIs(t, err, ErrNoSuchButton)
	q, err := alice.PressButton(reply, "Confirm")
	require.NoError(t, err)

	answer := srv.WaitCallbackAnswer(t, q.ID)
	require.Equal(t, "Done", answer.Text)
	require.True(t, answer.ShowAlert)

	edited := srv.WaitMessage(t, alice.ID(), func(m BotMessage) bool { return m.MessageID == reply.MessageID && len(m.Edits) > 0 })
	require.Equal(t, "Confirmed order 42", edited.Text)
	require.Nil(t, edited.ReplyMarkup, "editing without markup removes the keyboard, as on Telegram")
	require.Equal(t, "Hello, Tom & Jerry!", edited.Edits[0].Text)
	require.NotZero(t, edited.EditDate)

	_, err = alice.Press(edited, "\fconfirm|42")
	require.ErrorIs(t, err, ErrNoSuchButton, "the button is gone after the edit")

	srv.WaitUpdatesConsumed(t)
	require.Empty(t, srv.UnansweredCallbacks())
	require.Empty(t, errs.list())
	require.Len(t, srv.Messages(alice.ID()), 1)
}

func TestTelebotSurfacesAPIErrors(t *testing.T) {
	srv := New(t)
	_, errs := startBot(t, srv, func(b *tele.Bot) {
		b.Handle("/broken", func(c tele.Context) error {
			// A classic bug: user input in HTML without escaping.
			return c.Send("<b>"+c.Message().Payload+"</b>", tele.ModeHTML)
		})
	})
	bob := srv.User(2002, "Bob", "en")
	bob.SendText(bob.ID(), "/broken <script>")
	// OnError runs in the bot, after the fake has answered, so wait on the
	// bot's side rather than on the server's state.
	select {
	case <-errs.added:
	case <-time.After(5 * time.Second):
		t.Fatal("the bot reported no error")
	}
	require.ErrorContains(t, errs.list()[0], `can't parse entities: Unsupported start tag "script" at byte offset 3`)
	require.Empty(t, srv.Messages(bob.ID()))
}

func TestTelebotCommands(t *testing.T) {
	srv := New(t)
	bot, _ := startBot(t, srv, func(*tele.Bot) {})

	defaults := []tele.Command{{Text: "start", Description: "Start the bot"}, {Text: "help", Description: "Show help"}}
	require.NoError(t, bot.SetCommands(defaults))
	german := []tele.Command{{Text: "hilfe", Description: "Hilfe anzeigen"}}
	private := tele.CommandScope{Type: tele.CommandScopeAllPrivateChats}
	require.NoError(t, bot.SetCommands(german, "de", private))

	got, err := bot.Commands()
	require.NoError(t, err)
	require.Equal(t, defaults, got)
	got, err = bot.Commands("de", private)
	require.NoError(t, err)
	require.Equal(t, german, got)
	got, err = bot.Commands("de")
	require.NoError(t, err)
	require.Empty(t, got, "commands are stored per scope and language, without fallback")
	require.Equal(t, []BotCommand{{Command: "hilfe", Description: "Hilfe anzeigen"}},
		srv.Commands(BotCommandScope{Type: "all_private_chats"}, "de"))

	require.NoError(t, bot.DeleteCommands())
	got, err = bot.Commands()
	require.NoError(t, err)
	require.Empty(t, got)

	err = bot.SetCommands([]tele.Command{{Text: "Start", Description: "x"}})
	require.ErrorContains(t, err, "BOT_COMMAND_INVALID")
}

func TestTelebotMediaAndRateLimit(t *testing.T) {
	srv := New(t)
	bot, _ := startBot(t, srv, func(*tele.Bot) {})
	alice := startedUser(t, srv, 1001)
	to := &tele.User{ID: alice.ID()}

	doc := &tele.Document{File: tele.FromReader(strings.NewReader("col1,col2\n")), FileName: "export.pdf", Caption: "Your <i>export</i>"}
	m, err := bot.Send(to, doc, tele.ModeHTML)
	require.NoError(t, err)
	require.Equal(t, "export.pdf", m.Document.FileName)
	require.Equal(t, "Your export", m.Caption)
	stored, _ := srv.LastMessage(alice.ID())
	require.Equal(t, "col1,col2\n", string(stored.File.Data))

	srv.FailNext("sendMessage", 1, 3)
	_, err = bot.Send(to, "hi")
	var flood tele.FloodError
	require.ErrorAs(t, err, &flood)
	require.Equal(t, 3, flood.RetryAfter)
	_, err = bot.Send(to, "hi")
	require.NoError(t, err)

	require.NoError(t, bot.Notify(to, tele.Typing))
	require.Equal(t, []string{"typing"}, srv.ChatActions(alice.ID()))
	member, err := bot.ChatMemberOf(to, to)
	require.NoError(t, err)
	require.Equal(t, tele.Member, member.Role)
}
