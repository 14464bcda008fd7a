package delivery_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot/delivery"
	"switchboard/domain"
	"switchboard/e2e/tgfake"
)

// A button press is answered through the client: the fake records the
// toast or alert; a second answer, or one to a press Telegram no longer
// waits for, is ErrQueryTooOld; a toast over Telegram's 200 characters is
// refused as a bad request, not mistaken for an old query.
func TestAnswerCallback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(1, "Ann")
	s := b.sender(t, nil, delivery.NewMemoryLimiter(delivery.DefaultLimits()), delivery.Config{})
	id, err := s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Text: "pick",
		Buttons: [][]domain.Button{{{Text: "Yes", Data: "y"}}}})
	require.NoError(t, err)
	msg, ok := b.srv.MessageByID(1, id)
	require.True(t, ok)
	tg := s.Client()

	q, err := ann.Press(msg, "y")
	require.NoError(t, err)
	require.NoError(t, tg.AnswerCallback(b.ctx, delivery.CallbackAnswer{QueryID: q.ID, Text: "done", Alert: true}))
	cbs := b.srv.Callbacks(1)
	require.Len(t, cbs, 1)
	require.True(t, cbs[0].Answered)
	require.Equal(t, "done", cbs[0].Answer.Text)
	require.True(t, cbs[0].Answer.ShowAlert)

	err = tg.AnswerCallback(b.ctx, delivery.CallbackAnswer{QueryID: q.ID})
	require.ErrorIs(t, err, delivery.ErrQueryTooOld, "answered already")

	q, err = ann.Press(msg, "y")
	require.NoError(t, err)
	err = tg.AnswerCallback(b.ctx, delivery.CallbackAnswer{QueryID: q.ID, Text: strings.Repeat("x", 201)})
	require.Error(t, err)
	require.NotErrorIs(t, err, delivery.ErrQueryTooOld)
	require.Equal(t, delivery.Bad, delivery.Classify(err))
	require.NoError(t, tg.AnswerCallback(b.ctx, delivery.CallbackAnswer{QueryID: q.ID, Text: strings.Repeat("x", 200)}))
	require.Empty(t, b.srv.UnansweredCallbacks())
}

// A chat action goes through the limiter: it takes none of the chat's
// message budget (actions follow each other and the message they announce
// freely) but obeys a pause, and a 429 to one pauses the chat; one to a
// user who blocked the bot is refused as Gone.
func TestChatActionObeysPauses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	b.user(2, "Cat")
	bob := b.user(3, "Bob")
	// A private chat's budget of one, refilled once an hour.
	lim := delivery.NewMemoryLimiter(delivery.Limits{Global: 1000, GlobalBurst: 100, Private: 1.0 / 3600, PrivateBurst: 1, Group: 1, GroupBurst: 1})
	s := b.sender(t, nil, lim, delivery.Config{})
	for range 3 {
		require.NoError(t, s.ChatAction(b.ctx, 1, "", "typing"))
	}
	require.Len(t, b.srv.CallsTo("sendChatAction"), 3, "none held back for the chat's budget")
	require.Equal(t, []string{"typing", "typing", "typing"}, b.srv.ChatActions(1))
	_, err := s.SendNow(b.ctx, domain.Message{ChatID: 1, Kind: domain.KindReply, Text: "the answer"})
	require.NoError(t, err, "the chat's one token is still there for the message")

	bob.Block()
	err = s.ChatAction(b.ctx, 3, "", "typing")
	require.Equal(t, delivery.Gone, delivery.Classify(err))
	require.Empty(t, b.srv.ChatActions(3))

	// A private chat's 429 is the bot's (see Sender.flood): every chat waits.
	b.srv.FailNext("sendChatAction", 1, 3600)
	require.Error(t, s.ChatAction(b.ctx, 2, "", "typing"))
	require.ErrorIs(t, s.ChatAction(b.ctx, 2, "", "typing"), delivery.ErrPaced, "the 429 paused the bot")
	require.ErrorIs(t, s.ChatAction(b.ctx, 1, "", "typing"), delivery.ErrPaced)
	require.Len(t, b.srv.CallsTo("sendChatAction"), 5, "the paused ones never reached Telegram")
	require.Empty(t, b.srv.ChatActions(2))
}

// Command menus are set and deleted per scope and language, as
// getMyCommands would read them; a scope of a chat Telegram does not know
// is refused.
func TestCommandMenus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.user(1, "Ann")
	tg := b.client()
	private := delivery.CommandScope{Type: "all_private_chats"}
	cmds := []delivery.Command{{Name: "start", Description: "Begin"}, {Name: "help", Description: "What I do"}}
	require.NoError(t, tg.SetCommands(b.ctx, cmds, private, ""))
	require.NoError(t, tg.SetCommands(b.ctx, cmds[:1], private, "uk"))
	require.Equal(t, []tgfake.BotCommand{{Command: "start", Description: "Begin"}, {Command: "help", Description: "What I do"}},
		b.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, ""))
	require.Len(t, b.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "uk"), 1)

	require.NoError(t, tg.DeleteCommands(b.ctx, private, "uk"))
	require.Empty(t, b.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, "uk"))
	require.Len(t, b.srv.Commands(tgfake.BotCommandScope{Type: "all_private_chats"}, ""), 2, "only that language's menu went")

	require.NoError(t, tg.SetCommands(b.ctx, cmds, delivery.CommandScope{Type: "chat", ChatID: 1}, ""))
	require.Len(t, b.srv.Commands(tgfake.BotCommandScope{Type: "chat", ChatID: 1}, ""), 2)
	err := tg.SetCommands(b.ctx, cmds, delivery.CommandScope{Type: "chat", ChatID: 999}, "")
	require.Error(t, err, "no such chat")
	require.Equal(t, delivery.Gone, delivery.Classify(err))
}

// getMe reads the bot's account; a refused token is a 401 the caller can
// tell apart.
func TestGetMe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg := b.client()
	me, err := tg.GetMe(b.ctx)
	require.NoError(t, err)
	require.Equal(t, b.srv.Bot().ID, me.ID)
	require.Equal(t, b.srv.Bot().Username, me.Username)
	require.True(t, me.IsBot)

	_, err = delivery.NewClient(b.srv.URL(), "123:wrong", nil).GetMe(b.ctx)
	var ae *delivery.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, 401, ae.Code)
	require.NotContains(t, err.Error(), "123:wrong", "the token stays out of errors")
}

// A webhook is set with its secret, read back and deleted; Telegram's
// refusals of a bad secret or a port it does not push to come back.
func TestWebhookCalls(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tg := b.client()
	// hook is the webhook's URL as getWebhookInfo reads it back.
	hook := func() string {
		t.Helper()
		info, err := tg.GetWebhookInfo(b.ctx)
		require.NoError(t, err)
		return info.URL
	}
	require.Empty(t, hook())

	err := tg.SetWebhook(b.ctx, delivery.Webhook{URL: "https://bot.invalid/hook", Secret: "not allowed!"})
	require.Equal(t, delivery.Bad, delivery.Classify(err), "%v", err)
	err = tg.SetWebhook(b.ctx, delivery.Webhook{URL: "https://bot.invalid:9999/hook"})
	require.Equal(t, delivery.Bad, delivery.Classify(err), "%v", err)

	require.NoError(t, tg.SetWebhook(b.ctx, delivery.Webhook{URL: "https://bot.invalid/hook", Secret: "s3cret",
		MaxConnections: 5, AllowedUpdates: []string{"message", "callback_query"}}))
	require.Equal(t, "https://bot.invalid/hook", hook())
	calls := b.srv.CallsTo("setWebhook")
	require.Equal(t, `["message","callback_query"]`, calls[len(calls)-1].Params["allowed_updates"])

	require.NoError(t, tg.DeleteWebhook(b.ctx, false))
	require.Empty(t, hook())
}

// A file a user sent is found with getFile and downloaded whole; one past
// the caller's bound is ErrFileTooBig; an unknown file id is refused.
func TestFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ann := b.user(1, "Ann")
	sent := ann.SendDocument(1, "cv.pdf", "application/pdf", []byte("%PDF-1.4 résumé"))
	tg := b.client()
	f, err := tg.GetFile(b.ctx, sent.Document.FileID)
	require.NoError(t, err)
	require.EqualValues(t, len("%PDF-1.4 résumé"), f.Size)
	data, err := tg.DownloadFile(b.ctx, f.Path, 1<<20)
	require.NoError(t, err)
	require.Equal(t, []byte("%PDF-1.4 résumé"), data)
	_, err = tg.DownloadFile(b.ctx, f.Path, 4)
	require.ErrorIs(t, err, delivery.ErrFileTooBig)
	_, err = tg.GetFile(b.ctx, "nope")
	require.Equal(t, delivery.Bad, delivery.Classify(err), "%v", err)
}
