// Package tgfake is a strict fake of the Telegram Bot API for end-to-end
// tests. A bot under test (for example one built with gopkg.in/telebot.v3)
// is pointed at the fake's URL; the test then plays users who write to the
// bot and press its inline buttons, and inspects what the bot sent.
//
// The fake follows the Bot API (https://core.telegram.org/bots/api) and the
// behaviour of the official Bot API server closely, including its error
// descriptions, so that bugs in the bot fail here as they would fail
// against Telegram: malformed HTML or MarkdownV2, texts over 4096 characters
// (1024 for captions), callback_data over 64 bytes, edits that change
// nothing, messages to unknown chats or to users who never started the bot,
// unanswered or twice-answered callback queries, and so on.
//
// # Usage
//
//	func TestStart(t *testing.T) {
//		srv := tgfake.New(t)
//		bot, err := tele.NewBot(tele.Settings{
//			URL:    srv.URL(),
//			Token:  srv.Token(),
//			Poller: &tele.LongPoller{Timeout: time.Second},
//		})
//		require.NoError(t, err)
//		registerHandlers(bot)
//		go bot.Start()
//		t.Cleanup(bot.Stop)
//
//		alice := srv.User(1001, "Alice", "en")
//		sent := alice.SendText(alice.ID(), "/start")
//		reply := srv.WaitMessageAfter(t, alice.ID(), sent.MessageID, nil)
//		require.Equal(t, "Welcome!", reply.Text)
//
//		q, err := alice.Press(reply, "menu:settings")
//		require.NoError(t, err)
//		answer := srv.WaitCallbackAnswer(t, q.ID)
//		require.Equal(t, "Opening settings", answer.Text)
//	}
//
// # Model
//
// Chats are registered by the test: User creates a user together with the
// private chat (chat id = user id); Group and Supergroup create group chats
// the bot is a member of. Users and the bot share one message id sequence
// per chat. Update ids increase monotonically across the server.
//
// getUpdates implements long polling for real: a call with a timeout is held
// until an update arrives or the timeout passes, and a second concurrent
// call terminates the first with 409 Conflict. Waiting, both in long polls
// and in the Wait* helpers, is driven by change notifications rather than
// sleeps, so tests react as soon as the bot does.
//
// Text limits are counted in Unicode code points, as Telegram counts them
// (TDLib's utf8_length), after entity parsing and trimming; entity offsets
// are in UTF-16 code units, as in the Bot API.
//
// Every bot API call is logged (Calls, CallLog); the log is printed when the
// test fails. FailNext injects 429 flood-control errors, FailNextWith any
// other error.
//
// # Deliberate differences from Telegram
//
//   - In HTML, a '&' that does not start &lt; &gt; &amp; &quot; or a numeric
//     reference (with ';') is an error. Telegram keeps it literally, but the
//     Bot API docs require escaping it, and it usually means unescaped user
//     input. A bare '>' is accepted, as on Telegram.
//   - An inline button declaring more than one of url, callback_data,
//     switch_inline_query, ... is an error (the docs say "exactly one";
//     Telegram silently uses the first). Empty switch_inline_query* fields,
//     which telebot always sends, count only when nothing else is set.
//   - Bots see every group message (as with privacy mode disabled).
//   - getUpdates answers repeated short polls at once; the Bot API server
//     stretches them to 3 seconds to discourage busy polling.
//   - Inline mode, webhooks, media other than photos and documents, and file
//     downloads are not implemented; unimplemented methods answer 404.
package tgfake
