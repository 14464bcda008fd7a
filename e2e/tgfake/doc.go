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
// unanswered or twice-answered callback queries, sending faster than
// Telegram's flood limits allow, and so on.
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
// setWebhook switches the fake to pushing updates (see webhook.go): each is
// POSTed to the URL with the secret token, retried until a 2xx answer, up to
// max_connections at once but one per chat at a time and in order; meanwhile
// getUpdates is refused with 409, as in Telegram. WithInsecureWebhooks lets
// a test use a plain-HTTP loopback URL.
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
// sendMessageDraft (drafts.go) shows a message being written in a private
// chat, as Bot API 9.5 opened it to every bot: Drafts lists every update,
// ShownDraft what the user sees now (a draft lives DraftLife after its last
// update, or until the bot's next message). SetUnsupported plays a server
// older than a feature (features.go): FeatureDrafts answers
// sendMessageDraft 404 Not Found, FeatureCopyText ignores a button's
// copy_text, as a server that does not know the field does, and
// FeatureDateTime refuses <tg-time> as an unknown tag. A server that knows
// them all parses <tg-time unix="…" format="…"> into a date_time entity
// (MessageEntity.UnixTime, DateTimeFormat).
//
// sendRichMessage (rich.go, Bot API 10.1) parses rich_message's html into
// blocks (Message.RichMessage; Find, RichBlock.Rows and PlainText read
// them, Message.Shown whichever form a message has), with the documented
// limits; editMessageText's rich_message edits a rich message.
// FeatureRichMessages answers sendRichMessage 404 and ignores the
// parameter on an edit.
//
// Every bot API call is logged (Calls, CallLog); the log is printed when the
// test fails. FailNext injects single 429 flood-control errors, FailNextWith
// any other error; these injections are independent of the rate limiter
// below (not counted by RateLimited or EarlySends, and the bot is not held
// to their retry_after).
//
// # Flood limits
//
// Like Telegram, the fake limits how fast the bot may produce messages.
// The limited ("message-producing") methods are sendMessage, sendPhoto,
// sendDocument, sendLocation, editMessageText, editMessageCaption,
// editMessageReplyMarkup, editMessageLiveLocation, stopMessageLiveLocation
// and sendMessageDraft: every call that creates or changes a message in a
// chat, or shows one being written (a draft is counted like a message, the
// strict reading of a limit Telegram does not document for drafts). (copyMessage and forwardMessage are not implemented.) Not limited
// by the fake: getUpdates, getMe, getChat, getChatMember,
// answerCallbackQuery, sendChatAction, deleteMessage and the command
// methods, none of which produces a message.
//
// By default (DefaultLimits) three token buckets apply, each starting full:
//
//   - per bot, all chats together: 30 messages per second, burst 30;
//   - per private chat (chat id > 0): one message per second, burst 3, so
//     short bursts pass;
//   - per group or supergroup (chat id < 0): 20 messages per minute, burst
//     20, one token back every 3 s.
//
// A call that any bucket it falls under cannot admit is refused without
// effect: no message is created or changed, and no token is taken from the
// other buckets (all are checked first, then all are charged). The answer
// is Telegram's: HTTP 429 with a Retry-After header and the body
//
//	{"ok":false,"error_code":429,"description":"Too Many Requests: retry after N","parameters":{"retry_after":N}}
//
// where N is the wait until the buckets admit the call, in whole seconds
// rounded up, at least 1; telebot turns it into a tele.FloodError with
// RetryAfter N. The limits apply after every other check, so calls that
// fail for other reasons (bad HTML, unknown chat, blocked user, ...)
// consume nothing.
//
// The fake holds the bot to the retry_after it answered: until it has
// passed, any further limited call into the same scope (that chat for a
// chat's bucket; any chat for the global bucket) is an early send, counted
// by EarlySends and refused again with the remaining time, even if the
// bucket has a token by then: a call refused 1.5 s before its bucket
// refills is answered "retry after 2", and the scope stays closed for 2 s.
// RateLimited counts every 429 of the limiter, early sends included;
// Throttles lists them with chat and scope. A bot that paces itself and
// honours retry_after keeps both at zero.
//
// AcceptedTimes and MaxInWindow report when limited calls took effect, per
// chat or for AllChats, for assertions like "the group never got more than
// 20 messages in a minute". The buckets do not guarantee that by
// themselves: a full group bucket plus its refill admits 39 messages within
// one minute, and the global bucket about 60 within one second.
//
// WithLimits changes the buckets (a zero Bucket lifts that limit),
// WithoutLimits lifts them all, for tests that measure something else, and
// SetLimits changes them at run time. WithClock replaces the server's
// clock (time.Now) that the limiter, FailFor, message dates and the call
// log read, so tests can exercise the limits without sleeping.
//
// # Bad days
//
// FailFor makes every limited call fail for a period with an HTTP error
// status as the nginx reverse proxy in front of api.telegram.org answers
// it: an HTML error page (Content-Type text/html), not Bot API JSON, so the
// client fails to parse it; the call has no effect and does not reach the
// rate limiter. ProxyError gives the same answer to FailNextWith for single
// calls. Person.Block gives 403 "Forbidden: bot was blocked by the user",
// Person.Deactivate (a deleted account) 403 "Forbidden: user is
// deactivated", and a bot removed from a group (SetChatMember or
// Person.SetBotStatus with StatusKicked or StatusLeft) gets 403 "Forbidden:
// bot was kicked from the group chat" ("supergroup chat") or "Forbidden:
// bot is not a member of the group chat". The last two apply to edits and
// deletions too, as the Bot API server checks them itself; Block applies
// to sends and chat actions only.
//
// # Files
//
// sendPhoto and sendDocument take a multipart upload (the file in its part,
// or attach://name), a file id the fake issued or an http(s) URL. As
// Telegram, the fake refuses a request without the file, an empty file, a
// file over the bots' 50 MB upload limit (413 "Request Entity Too Large"),
// a caption over 1024 characters, and, in a group whose permissions
// (SetChatPermissions) withhold photos or documents, the bot's file unless
// it is an administrator. getFile and the file URL serve what was uploaded,
// up to the bots' 20 MB download limit.
//
// # Locations
//
// sendLocation (location.go) sends a point on the map or, with a
// live_period of 60 to 86400 seconds or 0x7FFFFFFF ("until stopped"), a
// live location, which editMessageLiveLocation moves and
// stopMessageLiveLocation stops where it is. Its period ends on the
// server's clock (WithClock). Once ended or stopped, the location shows no
// live_period, heading or proximity_alert_radius (the Bot API server writes
// them only while a location is live), and moving or stopping it is
// refused with "message can't be edited", as is editing a static location
// or a person's; a message with no location is "there is no live location
// in the message to edit". An edit that changes neither the location nor
// the keyboard is "message is not modified"; an edit states the location
// whole (a heading it leaves out is gone) but for live_period, which it may
// only lengthen, by a day at most and to end within 90 days, or make
// 0x7FFFFFFF. Coordinates off the map, a live_period, heading (1-360) or
// proximity_alert_radius (0-100000) out of range are refused with TDLib's
// words; a horizontal_accuracy out of 0-1500 is brought into it, as TDLib
// does. Locations lists the bot's location messages; BotMessage.Live says
// whether a live one is LiveActive, LiveStopped or LiveExpired, its
// Location where it is and its Edits where it was.
//
// People share theirs: Person.SendLocation sends a static location,
// ShareLiveLocation a live one (the message's location carries
// live_period), MoveLiveLocation moves it (an edited_message with the new
// location and an edit_date) and StopLiveLocation stops it (the last
// edited_message: where it was, without live_period). Moving or stopping
// one that is not live, or no longer, fails the test; the end of its
// period sends the bot nothing, as on Telegram.
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
//   - Telegram does not publish its flood-control algorithm, only the
//     limits (30 messages per second, about one per second per chat, 20
//     per minute per group). The fake models them as exact token buckets
//     and applies them as documented above; real Telegram is sometimes
//     more lenient with short bursts and sometimes answers much longer
//     retry_after values. Edits count like sends.
//   - Telegram's server rounds coordinates, so an edit to a point a few
//     metres away can be "message is not modified" there
//     (tdlib/telegram-bot-api#380); the fake compares them exactly.
//   - Inline mode, venues, media other than photos and documents, and file
//     downloads are not implemented; unimplemented methods answer 404. An
//     inline_message_id, which the fake never issues, is MESSAGE_ID_INVALID.
package tgfake
