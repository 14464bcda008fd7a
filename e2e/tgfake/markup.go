package tgfake

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ReplyKeyboard records a non-inline reply_markup (ReplyKeyboardMarkup,
// ReplyKeyboardRemove or ForceReply). Telegram never returns these in
// Message.reply_markup, so the fake keeps them on BotMessage for assertions.
type ReplyKeyboard struct {
	Rows        [][]string // button texts, row by row
	Remove      bool
	ForceReply  bool
	OneTime     bool
	Resize      bool
	Persistent  bool
	Selective   bool
	Placeholder string
}

// replyMarkup is a parsed reply_markup parameter: at most one of the two
// fields is set.
type replyMarkup struct {
	inline *InlineKeyboardMarkup
	reply  *ReplyKeyboard
}

// MaxCopyText is the most a copy_text button copies: 1-256 characters.
const MaxCopyText = 256

// Telegram silently truncates keyboards beyond these sizes.
const (
	maxButtonsPerRow = 12
	maxButtonsTotal  = 300
)

// parseReplyMarkup validates reply_markup like the Bot API server plus TDLib
// plus Telegram's servers. On top of that it enforces the documented rule
// that an inline button uses exactly one of its optional fields, which
// Telegram itself does not check (it silently picks one).
//
// knows says whether the server knows a newer button field (copy_text,
// Bot API 7.11; style, 9.4; disabled, 10.3); one that does not ignores the
// field, as it ignores every field it does not know.
func parseReplyMarkup(raw string, knows func(Feature) bool) (replyMarkup, *APIError) {
	if raw == "" {
		return replyMarkup{}, nil
	}
	obj, apiErr := decodeObject(raw, "Can't parse reply keyboard markup JSON object", "Object expected as reply markup")
	if apiErr != nil {
		return replyMarkup{}, apiErr
	}

	var rows [][]string
	if kb, present := obj["keyboard"]; present {
		rows, apiErr = keyboardRows(kb, "keyboard", "Field \"keyboard\" must be an Array of Arrays",
			func(b any) (string, *APIError) {
				text, err := keyboardButtonText(b)
				if err != nil {
					return "", badRequest("Can't parse keyboard button: %s", err.Error())
				}
				return text, nil
			}, func(text string) string { return text })
		if apiErr != nil {
			return replyMarkup{}, apiErr
		}
	}

	var inline [][]InlineKeyboardButton
	if ik, present := obj["inline_keyboard"]; present {
		inline, apiErr = keyboardRows(ik, "inline_keyboard", "Field \"inline_keyboard\" of the InlineKeyboardMarkup must be an Array of Arrays",
			func(v any) (InlineKeyboardButton, *APIError) { return parseInlineButton(v, knows) },
			func(b InlineKeyboardButton) string { return b.Text })
		if apiErr != nil {
			return replyMarkup{}, apiErr
		}
	}

	var rk ReplyKeyboard
	for name, dst := range map[string]*bool{
		"remove_keyboard": &rk.Remove, "hide_keyboard": &rk.Remove, "force_reply": &rk.ForceReply,
		"selective": &rk.Selective, "resize_keyboard": &rk.Resize, "one_time_keyboard": &rk.OneTime,
		"is_persistent": &rk.Persistent,
	} {
		b, err := obj.optBool(name)
		if err != nil {
			return replyMarkup{}, badRequest("%s", err.Error())
		}
		*dst = *dst || b
	}
	var err error
	if rk.Placeholder, _, err = obj.optString("input_field_placeholder"); err != nil {
		return replyMarkup{}, badRequest("%s", err.Error())
	}

	switch {
	case len(rows) > 0:
		rk.Rows, rk.Remove, rk.ForceReply = rows, false, false
		return replyMarkup{reply: &rk}, nil
	case len(inline) > 0:
		return replyMarkup{inline: &InlineKeyboardMarkup{InlineKeyboard: inline}}, nil
	case rk.Remove:
		return replyMarkup{reply: &ReplyKeyboard{Remove: true, Selective: rk.Selective}}, nil
	case rk.ForceReply:
		return replyMarkup{reply: &ReplyKeyboard{ForceReply: true, Selective: rk.Selective, Placeholder: rk.Placeholder}}, nil
	}
	return replyMarkup{}, nil
}

func keyboardButtonText(v any) (string, error) {
	switch b := v.(type) {
	case string:
		return b, nil
	case map[string]any:
		return jsonObject(b).reqString("text")
	}
	return "", fmt.Errorf("KeyboardButton must be a String or an Object")
}

// keyboardRows reads a keyboard's field (v, an Array of Arrays of
// buttons, each read by parse) as Telegram does: a button without text
// (text says a button's) is dropped instead of failing, and so is one
// beyond maxButtonsPerRow in its row or maxButtonsTotal in all; an empty
// row is left out.
func keyboardRows[B any](v any, field, notArrays string, parse func(any) (B, *APIError), text func(B) string) ([][]B, *APIError) {
	arr, ok := v.([]any)
	if !ok {
		return nil, badRequest("Field %q must be of type Array", field)
	}
	var rows [][]B
	total := 0
	for _, rowV := range arr {
		row, ok := rowV.([]any)
		if !ok {
			return nil, badRequest("%s", notArrays)
		}
		var buttons []B
		for _, bv := range row {
			b, err := parse(bv)
			if err != nil {
				return nil, err
			}
			if text(b) == "" || len(buttons) >= maxButtonsPerRow || total >= maxButtonsTotal {
				continue
			}
			buttons = append(buttons, b)
			total++
		}
		if len(buttons) > 0 {
			rows = append(rows, buttons)
		}
	}
	return rows, nil
}

// buttonStyles are the colours an inline button's style may name.
var buttonStyles = map[string]bool{"danger": true, "success": true, "primary": true}

func parseInlineButton(v any, knows func(Feature) bool) (InlineKeyboardButton, *APIError) {
	fail := func(format string, args ...any) (InlineKeyboardButton, *APIError) {
		return InlineKeyboardButton{}, badRequest("Can't parse inline keyboard button: "+format, args...)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fail("InlineKeyboardButton must be an Object")
	}
	obj := jsonObject(m)
	text, err := obj.reqString("text")
	if err != nil {
		return fail("%s", err.Error())
	}
	b := InlineKeyboardButton{Text: text}
	if knows(FeatureButtonStyle) {
		style, present, err := obj.optString("style")
		if err != nil {
			return fail("%s", err.Error())
		}
		if present && !buttonStyles[style] {
			return InlineKeyboardButton{}, badRequest("BUTTON_STYLE_INVALID (tgfake: style is one of danger, success, primary)")
		}
		b.Style = style
	}

	// Collect every kind the button declares. Empty url/callback_data count
	// as absent (Telegram ignores them); an empty switch_inline_query* is a
	// valid "insert only the bot's username" button, but telebot sends
	// switch_inline_query_current_chat:"" on every button, so empty switch
	// fields only count when nothing else is declared.
	var kinds, weak []string
	str := func(name string) (string, bool, error) { return obj.optString(name) }
	if u, _, err := str("url"); err != nil {
		return fail("%s", err.Error())
	} else if u != "" {
		kinds = append(kinds, "url")
		b.URL = u
	}
	if d, _, err := str("callback_data"); err != nil {
		return fail("%s", err.Error())
	} else if d != "" {
		kinds = append(kinds, "callback_data")
		b.CallbackData = d
	}
	for _, name := range []string{"switch_inline_query", "switch_inline_query_current_chat"} {
		q, present, err := str(name)
		if err != nil {
			return fail("%s", err.Error())
		}
		if !present {
			continue
		}
		q2 := q
		if name == "switch_inline_query" {
			b.SwitchInlineQuery = &q2
		} else {
			b.SwitchInlineQueryCurrentChat = &q2
		}
		if q != "" {
			kinds = append(kinds, name)
		} else {
			weak = append(weak, name)
		}
	}
	for _, name := range []string{"callback_game", "pay", "switch_inline_query_chosen_chat", "login_url", "web_app", "copy_text", "disabled"} {
		raw, present := obj[name]
		if !present || (name == "copy_text" && !knows(FeatureCopyText)) || (name == "disabled" && !knows(FeatureDisabledButtons)) {
			continue
		}
		kinds = append(kinds, name)
		data, _ := json.Marshal(raw)
		switch name {
		case "pay":
			b.Pay = true
		case "callback_game":
			b.CallbackGame = data
		case "disabled":
			// DisabledButton "currently holds no information".
			if _, ok := raw.(map[string]any); !ok {
				return fail("Field \"%s\" must be of type Object", name)
			}
			b.Disabled = data
		case "switch_inline_query_chosen_chat":
			if _, ok := raw.(map[string]any); !ok {
				return fail("Field \"%s\" must be of type Object", name)
			}
			b.SwitchInlineQueryChosenChat = data
		case "login_url", "web_app", "copy_text":
			sub, ok := raw.(map[string]any)
			if !ok {
				return fail("Field \"%s\" must be of type Object", name)
			}
			field := "url"
			if name == "copy_text" {
				field = "text"
			}
			val, err := jsonObject(sub).reqString(field)
			if err != nil {
				return fail("%s", err.Error())
			}
			if name == "copy_text" && (val == "" || utf16Len(val) > MaxCopyText) {
				return InlineKeyboardButton{}, badRequest("BUTTON_COPY_TEXT_INVALID")
			}
			if name == "web_app" {
				if _, err := normalizeURL(val); err != nil || !strings.HasPrefix(strings.ToLower(val), "https://") {
					return InlineKeyboardButton{}, badRequest("Inline keyboard button Web App URL '%s' is invalid: Only HTTPS links are allowed", val)
				}
			}
			switch name {
			case "login_url":
				b.LoginURL = data
			case "web_app":
				b.WebApp = data
			default:
				b.CopyText = data
			}
		}
	}
	switch {
	case len(kinds) == 0 && len(weak) == 0:
		// Also the answer to an empty callback_data: Telegram treats it as
		// absent, leaving a plain text button.
		return fail("Text buttons are unallowed in the inline keyboard")
	case len(kinds) == 0:
		kinds = weak[:1]
	case len(kinds) > 1:
		return fail("exactly one of the optional fields must be used, found %s (tgfake: Telegram would silently use %s)",
			strings.Join(kinds, ", "), kinds[0])
	}
	// Drop the ignored empty switch fields so the stored button looks like
	// the one Telegram returns.
	if kinds[0] != "switch_inline_query" {
		b.SwitchInlineQuery = nil
	}
	if kinds[0] != "switch_inline_query_current_chat" {
		b.SwitchInlineQueryCurrentChat = nil
	}

	switch kinds[0] {
	case "url":
		if !strings.HasPrefix(strings.ToLower(b.URL), "tg://user?id=") {
			norm, err := normalizeURL(b.URL)
			if err != nil {
				return InlineKeyboardButton{}, badRequest("Inline keyboard button URL '%s' is invalid: %s", b.URL, err.Error())
			}
			b.URL = norm
		}
	case "callback_data":
		if len(b.CallbackData) > maxCallbackData {
			return InlineKeyboardButton{}, errDesc(400, DescButtonDataInvalid)
		}
	}
	return b, nil
}
