package tgfake

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRouting(t *testing.T) {
	srv := New(t)

	t.Run("wrong token", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL()+"/bot123:wrong/getMe", nil)
		require.NoError(t, err)
		requireError(t, do(t, req), 401, "Unauthorized")
	})
	t.Run("unknown method", func(t *testing.T) {
		requireError(t, callJSON(t, srv, "sendTelepathy", nil), 404, "Not Found")
	})
	t.Run("method names are case-insensitive", func(t *testing.T) {
		me := decodeResult[User](t, callJSON(t, srv, "GETME", nil))
		require.Equal(t, srv.Bot().ID, me.ID)
		require.True(t, me.IsBot)
		require.Equal(t, "tgfake_bot", me.Username)
	})
	t.Run("calls are logged", func(t *testing.T) {
		calls := srv.CallsTo("getMe")
		require.NotEmpty(t, calls)
		require.Equal(t, "getMe", calls[0].Method)
		require.Contains(t, srv.CallLog(), "sendTelepathy")
	})
}

func TestParameterEncodings(t *testing.T) {
	// Five messages to one private chat in a burst: over the per-chat
	// limit, which is not what this test is about (see limits_test.go).
	srv := New(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	chat := strconv.FormatInt(alice.ID(), 10)
	kb := keyboardJSON(t, []map[string]any{button("OK", "ok")})

	t.Run("JSON with string values and markup as a string", func(t *testing.T) {
		m := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{
			"chat_id": chat, "text": "one", "reply_markup": kb, "disable_web_page_preview": "true",
		}))
		require.Equal(t, "one", m.Text)
		require.Equal(t, "ok", m.ReplyMarkup.InlineKeyboard[0][0].CallbackData)
	})
	t.Run("JSON with native values and markup as an object", func(t *testing.T) {
		m := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{
			"chat_id": alice.ID(), "text": "two",
			"reply_markup":         map[string]any{"inline_keyboard": [][]map[string]any{{button("OK", "ok")}}},
			"link_preview_options": map[string]any{"is_disabled": true},
		}))
		require.Equal(t, "two", m.Text)
		require.Equal(t, "OK", m.ReplyMarkup.InlineKeyboard[0][0].Text)
	})
	t.Run("form body", func(t *testing.T) {
		m := decodeResult[Message](t, callForm(t, srv, "sendMessage", url.Values{"chat_id": {chat}, "text": {"three"}}))
		require.Equal(t, "three", m.Text)
	})
	t.Run("query string", func(t *testing.T) {
		m := decodeResult[Message](t, callQuery(t, srv, "sendMessage", url.Values{"chat_id": {chat}, "text": {"four"}}))
		require.Equal(t, "four", m.Text)
	})
	t.Run("multipart fields", func(t *testing.T) {
		m := decodeResult[Message](t, callMultipart(t, srv, "sendMessage", map[string]string{"chat_id": chat, "text": "five"}, "", "", nil))
		require.Equal(t, "five", m.Text)
	})

	msgs := srv.Messages(alice.ID())
	require.Len(t, msgs, 5)
	for i, m := range msgs {
		require.Equal(t, i+2, m.MessageID, "the user's /start took id 1; ids are shared and increasing")
		require.Equal(t, srv.Bot().ID, m.From.ID)
	}
}

func TestSendMessageLimits(t *testing.T) {
	// These are text and markup limits; the test sends dozens of messages
	// to one chat at once, far over the flood limits (see limits_test.go).
	srv := New(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	send := func(t *testing.T, params map[string]any) apiResponse {
		params["chat_id"] = strconv.FormatInt(alice.ID(), 10)
		return callJSON(t, srv, "sendMessage", params)
	}

	t.Run("callback_data of 64 bytes is accepted, 65 is not", func(t *testing.T) {
		ok64 := strings.Repeat("x", 64)
		m := decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": keyboardJSON(t, []map[string]any{button("B", ok64)})}))
		require.Equal(t, ok64, m.ReplyMarkup.InlineKeyboard[0][0].CallbackData)

		// 33 two-byte characters: 33 characters but 66 bytes, and the limit is in bytes.
		for _, data := range []string{strings.Repeat("x", 65), strings.Repeat("ж", 33)} {
			r := send(t, map[string]any{"text": "a", "reply_markup": keyboardJSON(t, []map[string]any{button("B", data)})})
			requireError(t, r, 400, "Bad Request: BUTTON_DATA_INVALID")
		}
	})
	t.Run("text of 4096 characters is accepted, 4097 is too long", func(t *testing.T) {
		for _, ch := range []string{"a", "я", "😀"} { // Telegram counts code points
			m := decodeResult[Message](t, send(t, map[string]any{"text": strings.Repeat(ch, 4096)}))
			require.Equal(t, strings.Repeat(ch, 4096), m.Text)
			requireError(t, send(t, map[string]any{"text": strings.Repeat(ch, 4097)}), 400, "Bad Request: message is too long")
		}
	})
	t.Run("the limit applies after entity parsing", func(t *testing.T) {
		text := "<b>" + strings.Repeat("я", 4096) + "</b>"
		m := decodeResult[Message](t, send(t, map[string]any{"text": text, "parse_mode": "HTML"}))
		require.Equal(t, []MessageEntity{{Type: "bold", Offset: 0, Length: 4096}}, m.Entities)
	})
	t.Run("at most 100 entities", func(t *testing.T) {
		bold := func(n int) string { return strings.Repeat("<b>x</b> ", n) }
		m := decodeResult[Message](t, send(t, map[string]any{"text": bold(100), "parse_mode": "HTML"}))
		require.Len(t, m.Entities, 100)
		requireError(t, send(t, map[string]any{"text": bold(101), "parse_mode": "HTML"}), 400,
			"Bad Request: too many entities: 101; Telegram keeps the first 100 and drops the rest silently (tgfake)")
		// Entities Telegram finds itself (links, commands) are not the
		// sender's and do not count.
		m = decodeResult[Message](t, send(t, map[string]any{"text": bold(100) + strings.Repeat("/start ", 20), "parse_mode": "HTML"}))
		require.Len(t, m.Entities, 120)
	})
	t.Run("empty text", func(t *testing.T) {
		requireError(t, send(t, map[string]any{"text": ""}), 400, "Bad Request: message text is empty")
		requireError(t, send(t, map[string]any{}), 400, "Bad Request: message text is empty")
		requireError(t, send(t, map[string]any{"text": "<b> </b>", "parse_mode": "HTML"}), 400, "Bad Request: text must be non-empty")
	})
	t.Run("unclosed tag", func(t *testing.T) {
		r := send(t, map[string]any{"text": "<b>unclosed", "parse_mode": "HTML"})
		requireError(t, r, 400, `Bad Request: can't parse entities: Can't find end tag corresponding to start tag "b"`)
	})
	t.Run("unknown tag", func(t *testing.T) {
		r := send(t, map[string]any{"text": "<foo>bar</foo>", "parse_mode": "HTML"})
		requireError(t, r, 400, `Bad Request: can't parse entities: Unsupported start tag "foo" at byte offset 0`)
	})
	t.Run("unescaped ampersand", func(t *testing.T) {
		r := send(t, map[string]any{"text": "Q&A", "parse_mode": "HTML"})
		requireError(t, r, 400, `Bad Request: can't parse entities: Character '&' at byte offset 1 must be escaped as "&amp;"`)
	})
	t.Run("escaped text is decoded", func(t *testing.T) {
		m := decodeResult[Message](t, send(t, map[string]any{"text": "&lt;b&gt;Go &amp; Rust&lt;/b&gt;", "parse_mode": "HTML"}))
		require.Equal(t, "<b>Go & Rust</b>", m.Text)
		require.Empty(t, m.Entities)
		last, ok := srv.LastMessage(alice.ID())
		require.True(t, ok)
		require.Equal(t, "<b>Go & Rust</b>", last.Text)
		require.Equal(t, "HTML", last.ParseMode)
	})
	t.Run("MarkdownV2 reserved character", func(t *testing.T) {
		r := send(t, map[string]any{"text": "Done.", "parse_mode": "MarkdownV2"})
		requireError(t, r, 400, `Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\'`)
	})
	t.Run("unsupported parse mode", func(t *testing.T) {
		requireError(t, send(t, map[string]any{"text": "x", "parse_mode": "BBCode"}), 400, "Bad Request: unsupported parse_mode")
	})
	t.Run("button kinds", func(t *testing.T) {
		textOnly := keyboardJSON(t, []map[string]any{{"text": "plain"}})
		requireError(t, send(t, map[string]any{"text": "a", "reply_markup": textOnly}), 400,
			"Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
		badURL := keyboardJSON(t, []map[string]any{{"text": "site", "url": "ftp://example.com"}})
		requireError(t, send(t, map[string]any{"text": "a", "reply_markup": badURL}), 400,
			"Bad Request: inline keyboard button URL 'ftp://example.com' is invalid: Unsupported URL protocol")
		both := keyboardJSON(t, []map[string]any{{"text": "x", "url": "https://example.com", "callback_data": "d"}})
		r := send(t, map[string]any{"text": "a", "reply_markup": both})
		require.Equal(t, 400, r.ErrorCode)
		require.Contains(t, r.Description, "exactly one of the optional fields")
		// telebot adds an empty switch_inline_query_current_chat to every button.
		tb := keyboardJSON(t, []map[string]any{{"text": "x", "callback_data": "d", "switch_inline_query_current_chat": ""}})
		m := decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": tb}))
		require.Equal(t, InlineKeyboardButton{Text: "x", CallbackData: "d"}, m.ReplyMarkup.InlineKeyboard[0][0])
		link := keyboardJSON(t, []map[string]any{{"text": "site", "url": "https://Example.com"}})
		m = decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": link}))
		require.Equal(t, "https://example.com/", m.ReplyMarkup.InlineKeyboard[0][0].URL, "normalised like Telegram")
	})
	t.Run("copy buttons", func(t *testing.T) {
		copyOf := func(text string) string {
			return keyboardJSON(t, []map[string]any{{"text": "Copy", "copy_text": map[string]any{"text": text}}})
		}
		m := decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": copyOf("Lviv, Shevchenka 1")}))
		require.Equal(t, "Lviv, Shevchenka 1", m.ReplyMarkup.InlineKeyboard[0][0].Copies())
		// 256 UTF-16 code units at most: 128 emoji are 256 of them.
		decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": copyOf(strings.Repeat("😀", 128))}))
		for _, bad := range []string{"", strings.Repeat("😀", 128) + "x"} {
			requireError(t, send(t, map[string]any{"text": "a", "reply_markup": copyOf(bad)}), 400, "Bad Request: BUTTON_COPY_TEXT_INVALID")
		}
		// A server older than Bot API 7.11 does not know the field: the
		// button has only its text.
		srv.SetUnsupported(true, FeatureCopyText)
		defer srv.SetUnsupported(false, FeatureCopyText)
		requireError(t, send(t, map[string]any{"text": "a", "reply_markup": copyOf("Lviv")}), 400,
			"Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
	})
	t.Run("button styles and disabled buttons", func(t *testing.T) {
		kb := keyboardJSON(t, []map[string]any{
			{"text": "Accept", "callback_data": "a", "style": "success"},
			{"text": "Decline", "callback_data": "d", "style": "danger"},
		}, []map[string]any{{"text": "⌛ Time ran out", "disabled": map[string]any{}}})
		m := decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": kb}))
		row := m.ReplyMarkup.InlineKeyboard
		require.Equal(t, "success", row[0][0].Style)
		require.Equal(t, "danger", row[0][1].Style)
		require.NotNil(t, row[1][0].Disabled)
		require.Empty(t, row[1][0].CallbackData)
		requireError(t, send(t, map[string]any{"text": "a", "reply_markup": keyboardJSON(t, []map[string]any{{"text": "x", "callback_data": "x", "style": "red"}})}),
			400, "Bad Request: BUTTON_STYLE_INVALID (tgfake: style is one of danger, success, primary)")
		requireError(t, send(t, map[string]any{"text": "a", "reply_markup": keyboardJSON(t, []map[string]any{{"text": "x", "callback_data": "x", "disabled": map[string]any{}}})}),
			400, "Bad Request: can't parse inline keyboard button: exactly one of the optional fields must be used, found callback_data, disabled (tgfake: Telegram would silently use callback_data)")

		// Older servers: a style is ignored, a disabled button is one with
		// only its text.
		srv.SetUnsupported(true, FeatureButtonStyle, FeatureDisabledButtons)
		defer srv.SetUnsupported(false, FeatureButtonStyle, FeatureDisabledButtons)
		requireError(t, send(t, map[string]any{"text": "a", "reply_markup": kb}), 400,
			"Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
		m = decodeResult[Message](t, send(t, map[string]any{"text": "a", "reply_markup": keyboardJSON(t, []map[string]any{{"text": "x", "callback_data": "x", "style": "red"}})}))
		require.Empty(t, m.ReplyMarkup.InlineKeyboard[0][0].Style)
	})
	t.Run("unknown chat", func(t *testing.T) {
		requireError(t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": "424242", "text": "x"}), 400, "Bad Request: chat not found")
		requireError(t, callJSON(t, srv, "sendMessage", map[string]any{"text": "x"}), 400, "Bad Request: chat_id is empty")
	})
	t.Run("reply to a missing message", func(t *testing.T) {
		requireError(t, send(t, map[string]any{"text": "x", "reply_to_message_id": 9999}), 400, "Bad Request: message to be replied not found")
		m := decodeResult[Message](t, send(t, map[string]any{"text": "x", "reply_parameters": `{"message_id":9999,"allow_sending_without_reply":true}`}))
		require.Nil(t, m.ReplyToMessage)
		m = decodeResult[Message](t, send(t, map[string]any{"text": "x", "reply_parameters": map[string]any{"message_id": 1}}))
		require.Equal(t, 1, m.ReplyToID())
		require.Equal(t, "/start", m.ReplyToMessage.Text)
	})
}

func TestPrivateChatAccess(t *testing.T) {
	srv := New(t)
	bob := srv.User(2002, "Bob", "de")
	send := func() apiResponse {
		return callJSON(t, srv, "sendMessage", map[string]any{"chat_id": bob.ID(), "text": "hi"})
	}
	requireError(t, send(), 403, "Forbidden: bot can't initiate conversation with a user")

	bob.SendText(bob.ID(), "hello")
	requireOK(t, send())

	bob.Block()
	requireError(t, send(), 403, "Forbidden: bot was blocked by the user")
	requireError(t, callJSON(t, srv, "sendChatAction", map[string]any{"chat_id": bob.ID(), "action": "typing"}), 403, "Forbidden: bot was blocked by the user")
	bob.Unblock()
	requireOK(t, send())

	bob.Block()
	bob.SendText(bob.ID(), "/start")
	requireOK(t, send()) // writing to the bot again restarts it
}

func TestEdits(t *testing.T) {
	// Edits count toward the flood limits; this test edits one message
	// several times in a row to check edit semantics, not pacing.
	srv := New(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	kb := keyboardJSON(t, []map[string]any{button("Go", "go")})
	sent := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{
		"chat_id": alice.ID(), "text": "<b>Hi</b>", "parse_mode": "HTML", "reply_markup": kb,
	}))
	edit := func(params map[string]any) apiResponse {
		params["chat_id"] = strconv.FormatInt(alice.ID(), 10)
		params["message_id"] = strconv.Itoa(sent.MessageID)
		return callJSON(t, srv, "editMessageText", params)
	}

	// Same text, same entities (from a different markup), same keyboard.
	requireError(t, edit(map[string]any{"text": "*Hi*", "parse_mode": "MarkdownV2", "reply_markup": kb}), 400,
		"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")

	// Omitting reply_markup removes the keyboard: a real change.
	edited := decodeResult[Message](t, edit(map[string]any{"text": "<b>Hi</b>", "parse_mode": "HTML"}))
	require.Nil(t, edited.ReplyMarkup)
	require.NotZero(t, edited.EditDate)

	edited = decodeResult[Message](t, edit(map[string]any{"text": "Bye"}))
	require.Equal(t, "Bye", edited.Text)
	require.Empty(t, edited.Entities)

	cur, ok := srv.MessageByID(alice.ID(), sent.MessageID)
	require.True(t, ok)
	require.Equal(t, "Bye", cur.Text)
	require.Len(t, cur.Edits, 2)
	require.Equal(t, "Hi", cur.Edits[0].Text)
	require.NotNil(t, cur.Edits[0].ReplyMarkup, "the original version keeps its keyboard")
	require.Equal(t, "", cur.ParseMode)

	t.Run("markup only", func(t *testing.T) {
		r := callJSON(t, srv, "editMessageReplyMarkup", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID, "reply_markup": kb})
		require.Equal(t, "go", decodeResult[Message](t, r).ReplyMarkup.InlineKeyboard[0][0].CallbackData)
		r = callJSON(t, srv, "editMessageReplyMarkup", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID, "reply_markup": kb})
		require.Equal(t, 400, r.ErrorCode)
		require.Contains(t, r.Description, "message is not modified")
		r = callJSON(t, srv, "editMessageReplyMarkup", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID, "reply_markup": "{}"})
		require.Nil(t, decodeResult[Message](t, r).ReplyMarkup)
	})
	t.Run("missing and foreign messages", func(t *testing.T) {
		r := callJSON(t, srv, "editMessageText", map[string]any{"chat_id": alice.ID(), "message_id": 999, "text": "x"})
		requireError(t, r, 400, "Bad Request: message to edit not found")
		r = callJSON(t, srv, "editMessageText", map[string]any{"chat_id": alice.ID(), "message_id": 1, "text": "x"})
		requireError(t, r, 400, "Bad Request: message can't be edited")
	})
	t.Run("delete", func(t *testing.T) {
		del := func() apiResponse {
			return callJSON(t, srv, "deleteMessage", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID})
		}
		require.Equal(t, "true", string(decodeResult[rawJSON](t, del())))
		requireError(t, del(), 400, "Bad Request: message to delete not found")
		r := callJSON(t, srv, "editMessageText", map[string]any{"chat_id": alice.ID(), "message_id": sent.MessageID, "text": "x"})
		requireError(t, r, 400, "Bad Request: message to edit not found")
		cur, _ := srv.MessageByID(alice.ID(), sent.MessageID)
		require.True(t, cur.Deleted)
		for _, m := range srv.History(alice.ID()) {
			require.NotEqual(t, sent.MessageID, m.MessageID, "deleted messages leave the visible history")
		}
	})
}

// rawJSON keeps a result undecoded.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = append((*r)[:0], b...)
	return nil
}

func TestCallbackQueries(t *testing.T) {
	srv := New(t)
	alice := startedUser(t, srv, 1001)
	sent := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{
		"chat_id": alice.ID(), "text": "Pick", "reply_markup": keyboardJSON(t, []map[string]any{button("Yes", "y"), button("No", "n")}),
	}))

	_, err := alice.Press(sent, "maybe")
	require.ErrorIs(t, err, ErrNoSuchButton)

	q, err := alice.PressButton(sent, "No")
	require.NoError(t, err)
	require.Equal(t, "n", q.Data)
	require.Equal(t, alice.ID(), q.From.ID)
	require.Equal(t, sent.MessageID, q.Message.MessageID)
	require.NotEmpty(t, q.ChatInstance)
	require.Len(t, srv.UnansweredCallbacks(), 1)

	answer := func(text string) apiResponse {
		return callJSON(t, srv, "answerCallbackQuery", map[string]any{"callback_query_id": q.ID, "text": text, "show_alert": true})
	}
	requireOK(t, answer("Noted"))
	requireError(t, answer("again"), 400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
	require.Equal(t, CallbackAnswer{QueryID: q.ID, Text: "Noted", ShowAlert: true}, srv.WaitCallbackAnswer(t, q.ID))
	require.Empty(t, srv.UnansweredCallbacks())

	forged := alice.PressRaw(sent, "admin:delete_everything")
	require.Equal(t, "admin:delete_everything", forged.Data)
	cbs := srv.Callbacks(alice.ID())
	require.Len(t, cbs, 2)
	require.True(t, cbs[0].Answered)
	require.False(t, cbs[1].Answered)

	// The update carries the press.
	ups := decodeResult[[]Update](t, callJSON(t, srv, "getUpdates", nil))
	require.NotNil(t, ups[len(ups)-1].CallbackQuery)
	require.Equal(t, forged.ID, ups[len(ups)-1].CallbackQuery.ID)
}

func TestRateLimit(t *testing.T) {
	srv := New(t)
	alice := startedUser(t, srv, 1001)
	srv.FailNext("SendMessage", 1, 7)
	send := func() apiResponse {
		return callJSON(t, srv, "sendMessage", map[string]any{"chat_id": alice.ID(), "text": "x"})
	}
	r := send()
	requireError(t, r, 429, "Too Many Requests: retry after 7")
	require.Equal(t, 7, r.Parameters.RetryAfter)
	require.Equal(t, "7", r.RetryHeader)
	requireOK(t, send())
	require.Len(t, srv.Messages(alice.ID()), 1, "the throttled call sent nothing")
	require.Zero(t, srv.RateLimited(), "injected 429s are not the rate limiter's")
	require.Zero(t, srv.EarlySends(), "nor is the bot held to their retry_after")
}

func TestCommands(t *testing.T) {
	srv := New(t)
	group := srv.Group(-100, "Team")
	set := func(params map[string]any) apiResponse { return callJSON(t, srv, "setMyCommands", params) }
	get := func(params map[string]any) []BotCommand {
		return decodeResult[[]BotCommand](t, callJSON(t, srv, "getMyCommands", params))
	}

	requireOK(t, set(map[string]any{"commands": []map[string]string{{"command": "/start", "description": " Start "}}}))
	requireOK(t, set(map[string]any{
		"commands":      `[{"command":"hilfe","description":"Hilfe"}]`,
		"scope":         map[string]any{"type": "chat", "chat_id": group.ID},
		"language_code": "de",
	}))
	require.Equal(t, []BotCommand{{Command: "start", Description: "Start"}}, get(nil))
	require.Equal(t, []BotCommand{{Command: "hilfe", Description: "Hilfe"}}, get(map[string]any{"scope": `{"type":"chat","chat_id":-100}`, "language_code": "de"}))
	require.Empty(t, get(map[string]any{"scope": map[string]any{"type": "chat", "chat_id": group.ID}}), "no fallback between languages")
	require.Empty(t, get(map[string]any{"language_code": "de"}))

	requireError(t, set(map[string]any{"commands": `[{"command":"Start","description":"x"}]`}), 400, "Bad Request: BOT_COMMAND_INVALID")
	requireError(t, set(map[string]any{"commands": `[{"command":"a","description":" "}]`}), 400, "Bad Request: command description must be non-empty")
	requireError(t, set(map[string]any{"commands": `[]`, "language_code": "eng"}), 400, "Bad Request: invalid language code specified")
	requireError(t, set(map[string]any{"commands": `[]`, "scope": `{"type":"chat","chat_id":5}`}), 400, "Bad Request: chat not found")

	requireOK(t, callJSON(t, srv, "deleteMyCommands", nil))
	require.Empty(t, get(nil))
	require.Len(t, srv.Commands(BotCommandScope{Type: "chat", ChatID: group.ID}, "de"), 1)
}

// Telegram refuses a command scope it does not know and a scope naming an
// invalid chat, for every commands method, and changes nothing.
func TestCommandScopesRefused(t *testing.T) {
	srv := New(t)
	group := srv.Group(-100, "Team")
	requireOK(t, callJSON(t, srv, "setMyCommands", map[string]any{
		"commands": `[{"command":"run","description":"a run"}]`, "scope": map[string]any{"type": "chat", "chat_id": group.ID},
	}))
	cmds := `[{"command":"x","description":"x"}]`
	for scope, want := range map[string]string{
		`{"type":"all_groups"}`:                             "Bad Request: can't parse BotCommandScope: Unsupported type specified",
		`{"type":"private_chats"}`:                          "Bad Request: can't parse BotCommandScope: Unsupported type specified",
		`{"chat_id":-100}`:                                  "Bad Request: can't parse BotCommandScope: Can't find field \"type\"",
		`{"type":"chat"}`:                                   "Bad Request: can't parse BotCommandScope: Can't find field \"chat_id\"",
		`{"type":"chat","chat_id":""}`:                      "Bad Request: can't parse BotCommandScope: Empty chat_id specified",
		`{"type":"chat","chat_id":-404}`:                    "Bad Request: chat not found",
		`{"type":"chat_administrators","chat_id":7}`:        "Bad Request: chat not found",
		`{"type":"chat_member","chat_id":-100}`:             "Bad Request: can't parse BotCommandScope: Can't find field \"user_id\"",
		`{"type":"chat_member","chat_id":-100,"user_id":0}`: "Bad Request: can't parse BotCommandScope: Invalid user_id specified",
		`"chat"`: "Bad Request: can't parse BotCommandScope: BotCommandScope must be an Object",
	} {
		for _, method := range []string{"setMyCommands", "getMyCommands", "deleteMyCommands"} {
			requireError(t, callJSON(t, srv, method, map[string]any{"commands": cmds, "scope": scope}), 400, want)
		}
	}
	require.Equal(t, []BotCommand{{Command: "run", Description: "a run"}}, srv.Commands(BotCommandScope{Type: "chat", ChatID: group.ID}, ""))
	require.Empty(t, srv.Commands(BotCommandScope{Type: "default"}, ""))
}

func TestGroupsAndMembers(t *testing.T) {
	srv := New(t)
	alice := srv.User(1001, "Alice", "en")
	group := srv.Supergroup(-1001234567890, "Team", "team_chat")

	m := alice.SendText(group.ID, "/report@tgfake_bot now")
	require.Equal(t, []MessageEntity{{Type: "bot_command", Offset: 0, Length: len("/report@tgfake_bot")}}, m.Entities)
	require.Equal(t, ChatSupergroup, m.Chat.Type)

	chat := decodeResult[Chat](t, callJSON(t, srv, "getChat", map[string]any{"chat_id": "@team_chat"}))
	require.Equal(t, group.ID, chat.ID)

	member := decodeResult[ChatMember](t, callJSON(t, srv, "getChatMember", map[string]any{"chat_id": group.ID, "user_id": alice.ID()}))
	require.Equal(t, StatusMember, member.Status)
	srv.SetChatMember(group.ID, alice.ID(), StatusAdministrator)
	member = decodeResult[ChatMember](t, callJSON(t, srv, "getChatMember", map[string]any{"chat_id": group.ID, "user_id": alice.ID()}))
	require.Equal(t, StatusAdministrator, member.Status)
	require.Equal(t, "Alice", member.User.FirstName)

	// Deleting someone else's message needs admin rights.
	del := func() apiResponse {
		return callJSON(t, srv, "deleteMessage", map[string]any{"chat_id": group.ID, "message_id": m.MessageID})
	}
	requireError(t, del(), 400, "Bad Request: message can't be deleted")
	srv.SetChatMember(group.ID, srv.Bot().ID, StatusAdministrator)
	requireOK(t, del())

	srv.SetChatMember(group.ID, srv.Bot().ID, StatusKicked)
	requireError(t, callJSON(t, srv, "sendMessage", map[string]any{"chat_id": group.ID, "text": "x"}), 403, "Forbidden: bot was kicked from the supergroup chat")
	pending := len(srv.PendingUpdates())
	alice.SendText(group.ID, "anyone?")
	require.Len(t, srv.PendingUpdates(), pending, "a kicked bot receives nothing from the group")
}

func TestMedia(t *testing.T) {
	// Several uploads and an edit in one private chat at once: over the
	// per-chat flood limit, which is not what this test is about.
	srv := New(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	chat := strconv.FormatInt(alice.ID(), 10)
	var pngData bytes.Buffer
	require.NoError(t, png.Encode(&pngData, image.NewRGBA(image.Rect(0, 0, 40, 30))))

	photo := decodeResult[Message](t, callMultipart(t, srv, "sendPhoto",
		map[string]string{"chat_id": chat, "caption": "<i>chart</i>", "parse_mode": "HTML"}, "photo", "chart.png", pngData.Bytes()))
	require.Len(t, photo.Photo, 1)
	require.Equal(t, 40, photo.Photo[0].Width)
	require.Equal(t, "chart", photo.Caption)
	require.Equal(t, []MessageEntity{{Type: "italic", Offset: 0, Length: 5}}, photo.CaptionEntities)
	stored, _ := srv.LastMessage(alice.ID())
	require.Equal(t, pngData.Bytes(), stored.File.Data)

	// Re-sending by file_id works; garbage does not.
	again := decodeResult[Message](t, callJSON(t, srv, "sendPhoto", map[string]any{"chat_id": chat, "photo": photo.Photo[0].FileID}))
	require.Equal(t, photo.Photo[0].FileID, again.Photo[0].FileID)
	requireError(t, callJSON(t, srv, "sendPhoto", map[string]any{"chat_id": chat, "photo": "nonsense"}), 400,
		"Bad Request: wrong file identifier/HTTP URL specified")
	requireError(t, callMultipart(t, srv, "sendPhoto", map[string]string{"chat_id": chat}, "photo", "x.png", []byte("not an image")), 400,
		"Bad Request: IMAGE_PROCESS_FAILED")
	requireError(t, callJSON(t, srv, "sendPhoto", map[string]any{"chat_id": chat}), 400, "Bad Request: there is no photo in the request")

	doc := decodeResult[Message](t, callMultipart(t, srv, "sendDocument",
		map[string]string{"chat_id": chat, "document": "attach://report", "caption": strings.Repeat("c", 1024)}, "report", "report.pdf", []byte("%PDF-1.4\n")))
	require.Equal(t, "report.pdf", doc.Document.FileName)
	require.Equal(t, "application/pdf", doc.Document.MimeType)
	requireError(t, callMultipart(t, srv, "sendDocument",
		map[string]string{"chat_id": chat, "caption": strings.Repeat("c", 1025)}, "document", "r.txt", []byte("x")), 400,
		"Bad Request: message caption is too long")

	files := srv.SentFiles(alice.ID())
	require.Len(t, files, 3)
	require.Equal(t, []string{"upload", "file_id", "upload"}, []string{files[0].Source, files[1].Source, files[2].Source})

	recaptioned := decodeResult[Message](t, callJSON(t, srv, "editMessageCaption", map[string]any{"chat_id": chat, "message_id": doc.MessageID, "caption": "new"}))
	require.Equal(t, "new", recaptioned.Caption)
	requireError(t, callJSON(t, srv, "editMessageText", map[string]any{"chat_id": chat, "message_id": doc.MessageID, "text": "x"}), 400,
		"Bad Request: there is no text in the message to edit")
}

func TestChatActions(t *testing.T) {
	srv := New(t)
	alice := startedUser(t, srv, 1001)
	requireOK(t, callJSON(t, srv, "sendChatAction", map[string]any{"chat_id": alice.ID(), "action": "typing"}))
	requireError(t, callJSON(t, srv, "sendChatAction", map[string]any{"chat_id": alice.ID(), "action": "dancing"}), 400,
		"Bad Request: wrong parameter action in request")
	srv.WaitChatAction(t, alice.ID(), "typing")
	require.Equal(t, []string{"typing"}, srv.ChatActions(alice.ID()))
}

// recordingTB captures Fatalf instead of stopping the test, to check the
// failure path of the Wait helpers.
type recordingTB struct {
	testing.TB
	fatal string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

func TestOptionsRepliesAndTimeouts(t *testing.T) {
	srv := New(t, WithToken("4242:secret"), WithBotUser("switchboard_bot", "Switchboard"), WithWaitTimeout(100*time.Millisecond))
	me := decodeResult[User](t, callJSON(t, srv, "getMe", nil))
	require.Equal(t, User{ID: 4242, IsBot: true, FirstName: "Switchboard", Username: "switchboard_bot"}, User{ID: me.ID, IsBot: me.IsBot, FirstName: me.FirstName, Username: me.Username})

	srv.FailNextWith("getMe", 1, &APIError{Code: 500, Description: "Internal Server Error"})
	requireError(t, callJSON(t, srv, "getMe", nil), 500, "Internal Server Error")
	requireOK(t, callJSON(t, srv, "getMe", nil))

	alice := startedUser(t, srv, 1001)
	question := decodeResult[Message](t, callJSON(t, srv, "sendMessage", map[string]any{
		"chat_id": alice.ID(), "text": "Your name?", "reply_markup": `{"force_reply":true,"input_field_placeholder":"Name"}`,
	}))
	asked, _ := srv.MessageByID(alice.ID(), question.MessageID)
	require.Equal(t, &ReplyKeyboard{ForceReply: true, Placeholder: "Name"}, asked.ReplyKeyboard)
	require.Nil(t, asked.ReplyMarkup, "non-inline markup is not part of the returned message")

	answer := alice.Reply(asked, "Alice")
	require.Equal(t, question.MessageID, answer.ReplyToID())
	ups := srv.PendingUpdates()
	require.Equal(t, "Your name?", ups[len(ups)-1].Message.ReplyToMessage.Text)

	rec := &recordingTB{TB: t}
	srv.WaitMessageAfter(rec, alice.ID(), answer.MessageID, nil)
	require.Contains(t, rec.fatal, "no matching bot message in chat 1001")
	require.Contains(t, rec.fatal, `"Your name?"`, "the failure lists what the bot did send")
}

// A message a test has seen has its call in the log: the call is logged
// after the message is stored, so Calls waits for the calls in flight.
func TestCallOfASeenMessageIsLogged(t *testing.T) {
	srv := New(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	const n = 200
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range n {
			callJSON(t, srv, "sendMessage", map[string]any{"chat_id": alice.ID(), "text": fmt.Sprint("m", i)})
		}
	}()
	defer func() { <-sent }() // the sends end before the server closes, even when the check fails
	checked := 0
	for done := false; !done; {
		select {
		case <-sent:
			done = true
		default:
		}
		seen := len(srv.Messages(alice.ID()))
		logged := len(srv.CallsTo("sendMessage"))
		require.GreaterOrEqual(t, logged, seen, "a message seen before its call was logged")
		checked++
	}
	require.Len(t, srv.Messages(alice.ID()), n)
	t.Logf("checked %d times", checked)
}
