package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
)

// What intake does with an update PostgreSQL cannot hold.
//
// jsonb refuses a string holding U+0000 (an escaped "\u0000", SQLSTATE
// 22P05), an escaped UTF-16 surrogate without its pair (22P02) and bytes
// that are not UTF-8 (22021). Telegram passes on whatever a client sent, and
// a refused batch used to be retried for ever with the offset unmoved: one
// such update stopped the bot for everyone. So intake cleans a body before
// storing it: each of those characters becomes U+FFFD, the replacement
// character (what Go's own decoder makes of a lone surrogate or a bad byte),
// and the update is handled like any other. A NUL or a half emoji is never
// meaningful text, and a button's data so changed no longer matches the
// button, so it is refused as a forged press is. A body the database still
// refuses for what it holds (storage.AboutData) is kept as a skeleton — the
// update's id, chat, sender and message id, nothing they wrote — marked
// refused, which its worker fails at once, telling the sender once.

// replacement is what an unstorable character becomes.
const replacement = "\uFFFD"

// CleanUpdate returns raw as the inbox can store it, and whether it had to
// change it. A body with nothing to clean is returned as it is, untouched
// (the common case costs one scan).
func CleanUpdate(raw json.RawMessage) (json.RawMessage, bool) {
	if utf8.Valid(raw) && !hasBadEscape(raw) {
		return raw, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // ids are int64: a float64 would round them
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw, false // not JSON: the caller refuses it
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(cleanValue(v)); err != nil {
		return raw, false
	}
	return bytes.TrimRight(out.Bytes(), "\n"), true
}

// hasBadEscape finds, in JSON text, an escape jsonb refuses: \u0000, or a
// \uD800–\uDFFF not forming a high-then-low pair. Backslashes stand only
// inside strings in JSON, so no string tracking is needed.
func hasBadEscape(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // \" \\ \n …: the escaped character is not an escape itself
			continue
		}
		c, ok := hex4(raw, i+2)
		switch {
		case !ok:
			return true // malformed: let the decoder judge it
		case c == 0:
			return true
		case c >= 0xDC00 && c <= 0xDFFF:
			return true // a low half with no high half before it
		case c >= 0xD800 && c <= 0xDBFF:
			lo, ok := uint32(0), i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u'
			if ok {
				lo, ok = hex4(raw, i+8)
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11 // both halves
		default:
			i += 5
		}
	}
	return false
}

func hex4(b []byte, at int) (uint32, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var c uint32
	for _, h := range b[at : at+4] {
		c <<= 4
		switch {
		case h >= '0' && h <= '9':
			c |= uint32(h - '0')
		case h >= 'a' && h <= 'f':
			c |= uint32(h-'a') + 10
		case h >= 'A' && h <= 'F':
			c |= uint32(h-'A') + 10
		default:
			return 0, false
		}
	}
	return c, true
}

// cleanValue replaces NUL in every string, keys included; the decoder has
// already made U+FFFD of lone surrogates and of bytes that are not UTF-8.
func cleanValue(v any) any {
	switch t := v.(type) {
	case string:
		return CleanText(t)
	case []any:
		for i := range t {
			t[i] = cleanValue(t[i])
		}
	case map[string]any:
		for k, e := range t {
			if c := CleanText(k); c != k {
				delete(t, k)
				k = c
			}
			t[k] = cleanValue(e)
		}
	}
	return v
}

// CleanText is s as PostgreSQL's text and jsonb can hold it: NUL and bytes
// that are not UTF-8 become U+FFFD.
func CleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, replacement), "\x00", replacement)
}

// Skeleton is what the inbox keeps of an update whose body it cannot hold:
// enough to keep the chat's order and to tell the sender, nothing they
// wrote. raw must have been read by InboxUpdateOf.
func Skeleton(u domain.InboxUpdate, why string) domain.InboxUpdate {
	var t tele.Update
	_ = json.Unmarshal(u.Body, &t)
	who := func(s *tele.User) map[string]any {
		if s == nil {
			return nil
		}
		return map[string]any{"id": s.ID, "is_bot": s.IsBot, "first_name": "", "language_code": CleanText(s.LanguageCode)}
	}
	msg := func(m *tele.Message) map[string]any {
		if m == nil || m.Chat == nil {
			return nil
		}
		return map[string]any{"message_id": m.ID, "date": m.Unixtime,
			"chat": map[string]any{"id": m.Chat.ID, "type": CleanText(string(m.Chat.Type))}, "from": who(m.Sender)}
	}
	body := map[string]any{"update_id": u.ID}
	switch {
	case t.Message != nil:
		body["message"] = msg(t.Message)
	case t.EditedMessage != nil:
		body["edited_message"] = msg(t.EditedMessage)
	case t.Callback != nil:
		body["callback_query"] = map[string]any{"id": CleanText(t.Callback.ID), "from": who(t.Callback.Sender),
			"message": msg(t.Callback.Message), "chat_instance": ""}
	}
	b, _ := json.Marshal(body)
	return domain.InboxUpdate{ID: u.ID, Chat: u.Chat, HasChat: u.HasChat, Body: b, Refused: why}
}

// AboutData tells an error about what was written (the database will
// refuse it again however often it is tried) from a passing one.
type AboutData func(error) bool

// storeUpdates puts us in the inbox. It returns nil once each update is
// stored (as sent, cleaned, or as a refused skeleton) or, if even a
// skeleton is refused, logged and given up: a data error never comes
// back, so retrying it would only hold every later update. Any other error
// (the database away, a bug) is returned for the caller to retry, with
// Telegram's offset unmoved or its webhook call refused.
func storeUpdates(ctx context.Context, in Intake, aboutData AboutData, log *slog.Logger, us []domain.InboxUpdate) error {
	err := in.TakeUpdates(ctx, us)
	if err == nil || !aboutData(err) {
		return err
	}
	// One at a time, to find the update at fault and keep the rest.
	for _, u := range us {
		err := in.TakeUpdates(ctx, []domain.InboxUpdate{u})
		if err == nil {
			continue
		}
		if !aboutData(err) {
			return err
		}
		log.Warn("update refused by the inbox: kept as a skeleton, its sender is told", "update", u.ID, "err", err)
		err = in.TakeUpdates(ctx, []domain.InboxUpdate{Skeleton(u, err.Error())})
		if err == nil {
			continue
		}
		if !aboutData(err) {
			return err
		}
		log.Error("update dropped: the inbox refuses even its skeleton", "update", u.ID, "err", err)
	}
	return nil
}

// errNoUpdateID is a body with no update_id: nothing Telegram sends.
var errNoUpdateID = errors.New("an update without update_id")

// InboxUpdateOf is a raw update as the inbox keeps it: its id, the chat
// it stays in order with, and its body cleaned of what PostgreSQL cannot
// hold (CleanUpdate). A webhook takes updates through it too.
func InboxUpdateOf(raw json.RawMessage) (domain.InboxUpdate, error) {
	var id struct {
		ID *int64 `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &id); err != nil || id.ID == nil {
		return domain.InboxUpdate{}, fmt.Errorf("%w: %.200q", errNoUpdateID, raw)
	}
	body, cleaned := CleanUpdate(raw)
	in := domain.InboxUpdate{ID: *id.ID, Body: body, Cleaned: cleaned}
	var u tele.Update
	// An update telebot cannot read is still stored (and fails there, once,
	// logged) rather than stalling the poller on it for ever.
	if json.Unmarshal(body, &u) == nil {
		in.Chat, in.HasChat = orderKey(u)
	}
	return in, nil
}
