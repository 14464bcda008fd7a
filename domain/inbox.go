package domain

import (
	"encoding/json"
	"time"
)

// InboxUpdate is one Telegram update in the inbox: stored before Telegram
// is told it arrived, handled from there in its chat's order by any replica.
type InboxUpdate struct {
	ID int64
	// Chat is the chat the update must stay in order with; HasChat false
	// means nothing to keep it in order with (an inline query, say).
	Chat    int64
	HasChat bool
	// Body is the update as Telegram sent it, but for characters the
	// database cannot hold, replaced with U+FFFD (Cleaned says so).
	Body    json.RawMessage
	Cleaned bool
	// Refused, when set, says why the inbox could not keep the body: Body
	// is then a skeleton (ids only), which its worker fails at once,
	// telling the sender.
	Refused string
	// Attempts counts the claims so far, this one included; Token names
	// this claim to the statements that settle it.
	Attempts int
	Token    string
	// ReceivedAt is when the update was stored.
	ReceivedAt time.Time
}
