package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	tele "gopkg.in/telebot.v3"

	"switchboard/domain"
)

// What intake does with an update PostgreSQL cannot hold: it cleans the
// body (domain.CleanJSON: each character jsonb refuses becomes U+FFFD) and
// handles it like any other. A NUL or a half emoji is never meaningful
// text, and a button's data so changed no longer matches its button, so it
// is refused as a forged press is. A body the database still refuses for
// what it holds (storage.AboutData) is kept as a skeleton — the update's
// id, chat, sender and message id, nothing they wrote — marked refused,
// which its worker fails at once, telling the sender once; and if even
// that is refused, it is logged and given up, since retrying a refusal
// would hold every later update behind it.

// skeleton is what the inbox keeps of an update whose body it cannot hold:
// enough to keep the chat's order and to tell the sender, nothing they
// wrote. raw must have been read by InboxUpdateOf.
func skeleton(u domain.InboxUpdate, why string) domain.InboxUpdate {
	var t tele.Update
	_ = json.Unmarshal(u.Body, &t)
	who := func(s *tele.User) map[string]any {
		if s == nil {
			return nil
		}
		return map[string]any{"id": s.ID, "is_bot": s.IsBot, "first_name": "", "language_code": domain.CleanText(s.LanguageCode)}
	}
	msg := func(m *tele.Message) map[string]any {
		if m == nil || m.Chat == nil {
			return nil
		}
		return map[string]any{"message_id": m.ID, "date": m.Unixtime,
			"chat": map[string]any{"id": m.Chat.ID, "type": domain.CleanText(string(m.Chat.Type))}, "from": who(m.Sender)}
	}
	body := map[string]any{"update_id": u.ID}
	switch {
	case t.Message != nil:
		body["message"] = msg(t.Message)
	case t.EditedMessage != nil:
		body["edited_message"] = msg(t.EditedMessage)
	case t.Callback != nil:
		body["callback_query"] = map[string]any{"id": domain.CleanText(t.Callback.ID), "from": who(t.Callback.Sender),
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
func storeUpdates(ctx context.Context, in Intake, from string, aboutData AboutData, log *slog.Logger, us []domain.InboxUpdate) error {
	for _, u := range us {
		if u.Cleaned {
			log.Warn("update held characters the inbox cannot store: replaced with U+FFFD", "update", u.ID)
		}
	}
	err := in.Take(ctx, from, us)
	if err == nil || !aboutData(err) {
		return err
	}
	// One at a time, to find the update at fault and keep the rest.
	for _, u := range us {
		err := in.Take(ctx, from, []domain.InboxUpdate{u})
		if err == nil {
			continue
		}
		if !aboutData(err) {
			return err
		}
		log.Warn("update refused by the inbox: kept as a skeleton, its sender is told", "update", u.ID, "err", err)
		err = in.Take(ctx, from, []domain.InboxUpdate{skeleton(u, err.Error())})
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
// hold (domain.CleanJSON). A webhook takes updates through it too.
func InboxUpdateOf(raw json.RawMessage) (domain.InboxUpdate, error) {
	var id struct {
		ID *int64 `json:"update_id"`
	}
	if err := json.Unmarshal(raw, &id); err != nil || id.ID == nil {
		return domain.InboxUpdate{}, fmt.Errorf("%w: %.200q", errNoUpdateID, raw)
	}
	body, cleaned := domain.CleanJSON(raw)
	in := domain.InboxUpdate{ID: *id.ID, Body: body, Cleaned: cleaned}
	var u tele.Update
	// An update telebot cannot read is still stored (and fails there, once,
	// logged) rather than stalling the poller on it for ever.
	if json.Unmarshal(body, &u) == nil {
		in.Chat, in.HasChat = orderKey(u)
	}
	return in, nil
}
