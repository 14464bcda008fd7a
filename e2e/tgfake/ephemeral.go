package tgfake

import (
	"encoding/json"
	"time"
)

// ephemeralWindow is how long after a user's eligible action (a button
// press, an ephemeral command) any bot may send that user an ephemeral
// message: "within 15 seconds of the incoming eligible action".
const ephemeralWindow = 15 * time.Second

// The refusals of an ephemeral message. The Bot API documents the rules,
// not these texts, so each says it is the fake's.
const (
	DescEphemeralChat     = "Bad Request: ephemeral messages can be sent only to group and supergroup chats (tgfake)"
	DescEphemeralReceiver = "Bad Request: the receiver of an ephemeral message must be a member of the chat and not a bot (tgfake)"
	DescEphemeralRights   = "Bad Request: not enough rights to send an ephemeral message: no eligible action within 15 seconds, and the bot is no administrator (tgfake)"
)

// ephemeralParams is sendMessage's ephemeral_message_parameters
// (EphemeralMessageParameters, Bot API 10.3).
type ephemeralParams struct {
	ReceiverUserID  int64  `json:"receiver_user_id"`
	CallbackQueryID string `json:"callback_query_id"`
	Replace         bool   `json:"replace_callback_query_message"`
}

// parseEphemeral reads ephemeral_message_parameters; nil when absent, or
// on a server that lacks ephemeral messages, which ignores the parameter
// as it does any it does not know, and posts the message for everyone.
func (s *Server) parseEphemeral(r *request) (*ephemeralParams, *APIError) {
	raw := r.str("ephemeral_message_parameters")
	if raw == "" || s.lacks(FeatureEphemeral) {
		return nil, nil
	}
	var p ephemeralParams
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		return nil, badRequest("can't parse ephemeral message parameters JSON object")
	}
	if p.ReceiverUserID == 0 {
		return nil, badRequest("receiver_user_id is required (tgfake)")
	}
	if p.Replace {
		// Showing it in place of the pressed message is outside what the
		// fake models, and the bot never asks for it.
		return nil, badRequest("replace_callback_query_message is not modelled (tgfake)")
	}
	return &p, nil
}

// ephemeralAllowedLocked applies the Bot API's rules: a group or
// supergroup; a receiver who is a member and no bot; and either the
// receiver's press of a button in this chat, answered within
// ephemeralWindow of it (callback_query_id), or a bot that administers the
// chat, which may send one at any time.
func (s *Server) ephemeralAllowedLocked(ch *chatState, p *ephemeralParams) (User, *APIError) {
	if ch.chat.Type != ChatGroup && ch.chat.Type != ChatSupergroup {
		return User{}, errDesc(400, DescEphemeralChat)
	}
	person, ok := s.users[p.ReceiverUserID]
	if st := ch.memberStatus(p.ReceiverUserID); !ok || person.user.IsBot || st == StatusLeft || st == StatusKicked {
		return User{}, errDesc(400, DescEphemeralReceiver)
	}
	receiver := person.user
	if p.CallbackQueryID != "" {
		cb := s.callbacks[p.CallbackQueryID]
		if cb == nil || cb.chatID != ch.chat.ID || cb.query.From.ID != p.ReceiverUserID {
			return User{}, errDesc(400, DescQueryInvalid)
		}
		if s.now().Sub(cb.at) <= ephemeralWindow {
			return receiver, nil
		}
	}
	if ch.memberStatus(s.bot.ID) == StatusAdministrator {
		return receiver, nil
	}
	return User{}, errDesc(400, DescEphemeralRights)
}

// EphemeralMessages returns the ephemeral messages the bot sent in a chat,
// oldest first: each seen only by its ReceiverUser.
func (s *Server) EphemeralMessages(chatID int64) []BotMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[chatID]
	if ch == nil {
		return nil
	}
	out := make([]BotMessage, 0, len(ch.ephemeral))
	now := s.now().Unix()
	for _, m := range ch.ephemeral {
		out = append(out, m.snapshot(now))
	}
	return out
}
