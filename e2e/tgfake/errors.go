package tgfake

import (
	"fmt"
	"strings"
)

// Error descriptions that tests commonly assert on. They are Telegram's
// exact wording (see the telegram-bot-api and TDLib sources), so an assertion
// written against the fake also holds against the real Bot API.
const (
	DescUnauthorized       = "Unauthorized"
	DescNotFound           = "Not Found"
	DescChatNotFound       = "Bad Request: chat not found"
	DescChatIDEmpty        = "Bad Request: chat_id is empty"
	DescTextEmpty          = "Bad Request: message text is empty"
	DescTextMustBeNonEmpty = "Bad Request: text must be non-empty"
	DescMessageTooLong     = "Bad Request: message is too long"
	DescCaptionTooLong     = "Bad Request: message caption is too long"
	DescButtonDataInvalid  = "Bad Request: BUTTON_DATA_INVALID"
	DescNotModified        = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"
	DescEditNotFound       = "Bad Request: message to edit not found"
	DescDeleteNotFound     = "Bad Request: message to delete not found"
	DescReplyNotFound      = "Bad Request: message to be replied not found"
	DescCantEdit           = "Bad Request: message can't be edited"
	DescCantDelete         = "Bad Request: message can't be deleted"
	DescNoTextToEdit       = "Bad Request: there is no text in the message to edit"
	DescQueryInvalid       = "Bad Request: query is too old and response timeout expired or query ID is invalid"
	DescUnsupportedParse   = "Bad Request: unsupported parse_mode"
	DescCantParsePrefix    = "Bad Request: can't parse entities: "
	DescBlocked            = "Forbidden: bot was blocked by the user"
	DescDeactivated        = "Forbidden: user is deactivated"
	DescCantInitiate       = "Forbidden: bot can't initiate conversation with a user"
	DescConflict           = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
	DescTooLarge           = "Request Entity Too Large"
	DescFileEmpty          = "Bad Request: file must be non-empty"
	// DescTooManyEntities is the fake's own: Telegram takes a text with
	// more than 100 entities and drops the rest without a word.
	DescTooManyEntities = "Bad Request: too many entities: %d; Telegram keeps the first 100 and drops the rest silently (tgfake)"
)

func badRequest(format string, args ...any) *APIError {
	return &APIError{Code: 400, Description: botAPIDescription("Bad Request", fmt.Sprintf(format, args...))}
}

func forbidden(desc string) *APIError { return &APIError{Code: 403, Description: desc} }

func errDesc(code int, desc string) *APIError { return &APIError{Code: code, Description: desc} }

func tooManyRequests(retryAfter int) *APIError {
	return &APIError{
		Code:        429,
		Description: fmt.Sprintf("Too Many Requests: retry after %d", retryAfter),
		RetryAfter:  retryAfter,
	}
}

// botAPIDescription formats a TDLib-style message the way the Bot API server
// does: "<prefix>: <message>" with the first letter lowered unless the
// message is an UPPER_CASE server error code such as BUTTON_DATA_INVALID.
func botAPIDescription(prefix, msg string) string {
	if strings.HasPrefix(msg, prefix) {
		return msg
	}
	if len(msg) >= 2 && (msg[1] == '_' || (msg[1] >= 'A' && msg[1] <= 'Z')) {
		return prefix + ": " + msg
	}
	if msg != "" && msg[0] >= 'A' && msg[0] <= 'Z' {
		msg = string(msg[0]+'a'-'A') + msg[1:]
	}
	return prefix + ": " + msg
}
