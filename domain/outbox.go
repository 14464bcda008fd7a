package domain

import (
	"errors"
	"time"
)

// Message is one message the bot sends on its own initiative: a row of the
// outbox (storage/outbox.go), written in the same transaction as the state
// change that causes it (see Render) and delivered by the senders
// (bot/delivery) under Telegram's limits. Workflows build Messages with the
// bot's renderers; nothing but the senders talks to Telegram.
type Message struct {
	ChatID int64
	// Kind says what the message is (the Kind* constants): metrics, and the
	// hook its workflow runs when it is delivered or dropped.
	Kind string
	// Ref is the workflow row it belongs to (match, offer, proposal, run).
	Ref int64
	// Key names the message for later edits. A delivered send records its
	// message id under Key; an edit (Edit set) changes the message Key names.
	Key  string
	Edit bool
	// MarkupOnly makes an edit change the buttons alone
	// (editMessageReplyMarkup; no buttons removes them), the text left as it
	// is. Only at once (the senders' SendNow, which names the message by
	// ReplyTo): the outbox refuses it, since it would supersede a pending
	// edit of the text.
	MarkupOnly bool
	// Text is HTML within one message's limit: the renderers split longer
	// text into several Messages, which go out in order.
	Text string
	// Rich is the same message as a rich message (sendRichMessage, Bot
	// API 10.1): HTML in the rich formatting (headings, paragraphs,
	// tables, collapsible <details>), for a server that has them. Text
	// stays the message for a server that lacks them and must say the
	// same; a message with Rich is one message (its Text fits one). An
	// edit with Rich edits a rich message (editMessageText's
	// rich_message), and a rich message is only ever edited so: the Bot
	// API does not say a message may change between text and rich. "":
	// a message of text.
	Rich    string
	Buttons [][]Button
	// Photo, a Telegram file id, makes the message that photo with Text
	// as its caption (at most 1024 characters); never an edit.
	Photo string
	// Document names a file the kind's document hook builds when the row
	// is sent (bot/delivery's Sender.OnDocument), uploaded with
	// sendDocument, Text its caption; never an edit. The file's content is
	// read at sending time, so it waits in no table.
	Document string
	// Location makes the message a point on the map (sendLocation), or a
	// live one; an edit of a live location moves it
	// (editMessageLiveLocation) or, with Stop, stops it
	// (stopMessageLiveLocation). A location message has no Text.
	Location *Location
	// Ephemeral: the row keeps no text once it is delivered, dropped or
	// failed (an incognito answer must not outlive its delivery).
	Ephemeral bool
	// Origin, when set, names what wrote the message so that it is written
	// once: a handler's replies are "<update_id>.<n>", the n-th reply of
	// that update, and a second run of the update (its replica died before
	// the done-mark) writes none of those the first run wrote.
	Origin string
	// ReplyTo answers a message of the chat (0: none); a deleted original
	// does not stop the answer.
	ReplyTo int
	// OnlyFor makes a message in a group one that only this member sees
	// (an ephemeral message, Bot API 10.2), where Telegram lets the bot
	// send one: a bot that administers the group may at any time. Where it
	// may not, or the server has no such messages, it goes to the group as
	// any other: only what everyone may read is sent this way. 0: everyone.
	OnlyFor int64
	// Topic is the topic the message goes into where its chat has topics
	// (TopicOf: "" takes its kind's; bot/delivery's Sender.UseTopics),
	// created on first use.
	Topic string
	// Thread is the topic of a forum group a reply goes into: the one its
	// command was written in (0: the group's General, or by Topic).
	Thread int
	// ForPress is the button press (a callback query id) an OnlyFor
	// message answers: any bot may send one within 15 seconds of the
	// press. Only at once (SendNow): a queued row could miss the window.
	ForPress string
	// IfGone is what an edit does when its message is gone or was never
	// delivered: IfGoneDrop (default) or IfGoneSend (post it anew).
	IfGone string
	// Lane takes the message out of its chat's order: rows of one lane go
	// out in the order written, independently of the chat's other rows
	// ("" is the main lane). A lane's edit waits for its message's send.
	Lane string
	// Every paces the lane: at least this long between two deliveries of
	// it. With edits of one key this is coalescing (a newer edit replaces
	// a pending one, so the latest state goes out at most once per Every
	// and the last one always goes); with Merge it gathers lines.
	Every time.Duration
	// Merge: consecutive pending rows of the lane with Merge set go out as
	// one message, one line each, within one message's length.
	Merge bool
	// Delay holds the row back this long from its write (not_before on
	// the database's clock, as the senders' claim reads it, so a process
	// whose wall clock is shifted still holds it for the right length).
	// A held row heads its lane until then: it goes in a lane of its own.
	Delay time.Duration
}

// Location is a point on the map a message shows (Message.Location).
type Location struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
	// Accuracy is the radius of uncertainty in metres (0 to 1500; 0:
	// unknown).
	Accuracy float64 `json:"accuracy,omitempty"`
	// Heading is the direction of travel in degrees (1 to 360; 0: none),
	// for a live location.
	Heading int `json:"heading,omitempty"`
	// Live makes a send a live location for this long (60 s to a day, or
	// LiveUntilStopped); 0: a still point. An edit that posts anew
	// (IfGoneSend) posts it live for as long.
	Live time.Duration `json:"live,omitempty"`
	// Stop makes an edit stop the live location where it is.
	Stop bool `json:"stop,omitempty"`
}

// LiveUntilStopped is the live period of a location shown until it is
// stopped (the Bot API's 0x7FFFFFFF).
const LiveUntilStopped = 0x7FFFFFFF * time.Second

// Render is how a workflow hands the messages a state change causes to
// that change, the one way in every workflow: the repository calls it
// inside the change's transaction with S, the state the change left as the
// repository read it back (a dispatch Changed, an analysis run's Review,
// the vacancy searches whose first news the change settled), and writes
// what it returns to the outbox in that transaction. The messages exist
// exactly when the change commits, and only if it happens; they are
// rendered from the state the transaction saw, not from a guess made
// before it. A repository may call it more than once (a retried
// transaction), so it keeps nothing between calls. Nil tells nothing.
//
// Messages that need nothing the change reads back (a vacancy card, a
// memory answer, an admin notice, a reply to a command) are the trivial
// case, Fixed; a change written as one statement, which reads nothing back
// before its messages go in, takes only those.
type Render[S any] func(S) []Message

// Fixed is the Render of messages rendered before the change.
func Fixed[S any](msgs ...Message) Render[S] {
	if len(msgs) == 0 {
		return nil
	}
	return func(S) []Message { return msgs }
}

// Of is what r renders for s: nothing for a nil r.
func (r Render[S]) Of(s S) []Message {
	if r == nil {
		return nil
	}
	return r(s)
}

// Button is one inline button: callback data, a URL, or a text the
// client copies to the clipboard when pressed (Copy; at most MaxCopyText
// characters). A server that lacks copy buttons gets the message without
// them, so what a Copy button holds must stand in the text too.
type Button struct {
	Text string `json:"text"`
	Data string `json:"data,omitempty"`
	URL  string `json:"url,omitempty"`
	Copy string `json:"copy,omitempty"`
	// Style colours it (StyleSuccess, StyleDanger, StylePrimary); a server
	// older than Bot API 9.4 shows it plain.
	Style string `json:"style,omitempty"`
	// Disabled makes it one that does nothing, its Text saying why (Bot
	// API 10.3); a server without them gets the message without it.
	Disabled bool `json:"disabled,omitempty"`
}

// Button styles: what a button's colour says it does.
const (
	StyleSuccess = "success" // agrees, takes, approves
	StyleDanger  = "danger"  // refuses or destroys
	StylePrimary = "primary" // the step expected next
)

// MaxCopyText is the most a copy button holds: Telegram's 256 characters
// (UTF-16 code units, as it counts a message's length).
const MaxCopyText = 256

// Message kinds. The delivery of some changes the state of the workflow
// that wrote it, by the hook that workflow registers for its kind.
const (
	KindVacancy      = "vacancy"       // Ref: match; delivery makes it SENT_TO_USER
	KindDigest       = "digest"        // Ref: vacancy digest; delivery records its message
	KindCoverLetter  = "cover_letter"  // Ref: cover letter; the letter, or why it could not be drafted
	KindOffer        = "offer"         // Ref: offer; delivery records its message
	KindOfferClose   = "offer_close"   // Ref: offer; the edit when it ended
	KindAssigned     = "assigned"      // Ref: offer; the edit of an accepted offer's message as its order moves
	KindNote         = "note"          // a note to a master
	KindLiveLog      = "live_log"      // a dispatch event in the admin chat
	KindProposal     = "proposal"      // Ref: proposal; delivery records its message
	KindProgress     = "progress"      // Ref: run; delivery records the progress message
	KindRunEvent     = "run_event"     // an analysis run event in the admin chat
	KindMemoryAnswer = "memory_answer" // Ref: pipeline run
	KindMemoryNote   = "memory_note"   // Ref: pipeline run; "your message waits behind N", or for the model
	KindMemoryDraft  = "memory_draft"  // Ref: pipeline run; the placeholder of an answer being written, and its edits
	KindReply        = "reply"         // the answer to a user's command
	KindPhoto        = "photo"         // Ref: order; a master's photo of the finished work, for the admins
	KindCustomer     = "customer"      // Ref: order; to its customer (status, notes, the work's photo); delivery records the message
	KindRelay        = "relay"         // Ref: order; a text between its customer and its master; delivery records the message
	KindMemoryExport = "memory_export" // Ref: user; one file of their /export, built when sent
)

// Edits whose message is gone.
const (
	IfGoneDrop = ""
	IfGoneSend = "send"
)

// ErrUnreachable: Telegram refuses the chat for good (the user blocked the
// bot or was deactivated, the bot left the group). The chat is marked
// unreachable until its user writes again.
var ErrUnreachable = errors.New("recipient unreachable")

// ErrNotYetRecorded: nothing is recorded for a message, but the outbox is
// delivering one to its chat whose record is still to come. Telegram shows
// a message as it answers the send and its delivery hook records it after,
// so a user's quick reply can come between. It passes within the claim's
// lease (storage.Passing counts it), so the inbox runs the update again.
var ErrNotYetRecorded = errors.New("a message being delivered to the chat is not recorded yet")

// Queued is an outbox row claimed for delivery.
type Queued struct {
	Message
	ID        int64
	Attempts  int
	Token     string // the claim: settling the row needs it
	CreatedAt time.Time
	// Target is the message an edit changes (0: its send was never
	// delivered, or it was pruned).
	Target int
	// Unreachable: the chat was marked unreachable after the row was
	// written; the sender drops it.
	Unreachable bool
	// Superseded: an edit with a newer edit of the same message pending
	// behind it; the sender drops it, so the latest state wins and a
	// progress message edited on every batch costs the chat one message.
	Superseded bool
	// Merged is how many rows this delivery carries (1 unless Merge
	// gathered followers, whose texts Text holds after its own).
	Merged int
}

// Dropped is a pending row dropped because its chat became unreachable.
type Dropped struct {
	ID   int64
	Kind string
	Ref  int64
}
