package bot_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"

	"switchboard/bot"
	"switchboard/bot/delivery"
	"switchboard/e2e/tgfake"
	"switchboard/locales"
	"switchboard/storage/storagetest"
)

var portAction = bot.NewAction("t_port", 0)

// A button's toast goes through the port and the fake records it. One that
// Telegram refuses as too old ("query is too old…") is no failure: the
// handler goes on (its reply after the toast arrives) and the user is not
// told of an error, which would be a second answer to the press.
func TestCallbackAnswersGoThroughThePort(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{}, func(b *bot.Bot) {
		b.Handle(bot.Command{Name: "press", Desc: "cmd.help", Handle: func(r *bot.Request) error {
			data, err := bot.Encode(portAction)
			if err != nil {
				return err
			}
			return r.Reply("press me", &tele.ReplyMarkup{InlineKeyboard: [][]tele.InlineButton{{{Text: "Go", Data: data}}}})
		}})
		b.HandleButton(portAction, func(r *bot.Request, _ bot.Callback) error {
			if err := r.Toast("pressed"); err != nil {
				return err
			}
			return r.Reply("after the toast", nil)
		})
	})
	ann := tb.srv.User(42, "Ann", "en")
	msg := tb.ask(t, ann, "/press")

	q, err := ann.Press(msg, "t_port")
	require.NoError(t, err)
	a := tb.srv.WaitCallbackAnswer(t, q.ID)
	requireToast(t, a, "pressed")
	require.Equal(t, "after the toast", tb.srv.WaitMessageAfter(t, 42, msg.MessageID, nil).Text)

	tb.srv.FailNextWith("answerCallbackQuery", 1, &tgfake.APIError{Code: 400, Description: tgfake.DescQueryInvalid})
	calls := len(tb.srv.CallsTo("answerCallbackQuery"))
	last := tb.srv.Messages(42)[len(tb.srv.Messages(42))-1]
	q, err = ann.Press(msg, "t_port")
	require.NoError(t, err)
	require.Equal(t, "after the toast", tb.srv.WaitMessageAfter(t, 42, last.MessageID, nil).Text,
		"the handler went on past the refused toast")
	require.Len(t, tb.srv.CallsTo("answerCallbackQuery"), calls+1, "no error alert after the refused toast")
	for _, cb := range tb.srv.Callbacks(42) {
		if cb.Query.ID == q.ID {
			require.False(t, cb.Answered)
		}
	}
}

// "typing" goes through the sender's limiter: while Telegram has the chat
// wait (a 429's retry_after) it is not sent at all.
func TestTypingObeysTheLimiter(t *testing.T) {
	t.Parallel()
	st := storagetest.New(t)
	tb := setupWith(t, bot.Config{}, st, bot.Deps{}, nil, delivery.DefaultLimits())
	tb.srv.Group(-100, "Team")
	ctx := context.Background()
	require.NoError(t, tb.bot.Typing(ctx, -100))
	tb.srv.FailNext("sendChatAction", 1, 3600)
	require.Error(t, tb.bot.Typing(ctx, -100), "the 429 is reported")
	require.ErrorIs(t, tb.bot.Typing(ctx, -100), delivery.ErrPaced)
	require.Len(t, tb.srv.CallsTo("sendChatAction"), 2, "the paused one never reached Telegram")
	require.Equal(t, []string{"typing"}, tb.srv.ChatActions(-100))
}

// A webhook a former deployment left is deleted through the port when the
// bot starts polling, and the updates Telegram held are kept.
func TestPollingDropsALeftoverWebhook(t *testing.T) {
	t.Parallel()
	srv := tgfake.New(t)
	ann := srv.User(42, "Ann", "en")
	tg := delivery.NewClient(srv.URL(), srv.Token(), nil)
	require.NoError(t, tg.SetWebhook(context.Background(), delivery.Webhook{URL: "https://bot.invalid/hook", Secret: "s3cret"}))
	held := ann.SendText(42, "/help")

	sender, err := delivery.NewSender(delivery.Config{}, nil, tg, delivery.NewMemoryLimiter(delivery.DefaultLimits()),
		slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	b, err := bot.New(bot.Config{URL: srv.URL(), Token: srv.Token(), PollTimeout: time.Second},
		bot.Deps{Users: storagetest.New(t).Users(), Catalog: locales.MustLoad(), Log: slog.New(slog.DiscardHandler), Replica: "test", Direct: sender})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })

	require.Contains(t, srv.WaitMessageAfter(t, 42, held.MessageID, nil).Text, "What I can do for you",
		"the update held while the webhook was set is served by polling")
	url, _ := srv.Webhook()
	require.Empty(t, url)
	require.Len(t, srv.CallsTo("deleteWebhook"), 1)
	require.Equal(t, "false", srv.CallsTo("deleteWebhook")[0].Params["drop_pending_updates"])
}
