package tgfake

import (
	"errors"
	"time"
	"unicode/utf8"
)

// DraftLife is how long Telegram shows a message draft after its last
// update: a temporary preview, gone unless updated again or replaced by a
// message.
const DraftLife = 30 * time.Second

// Draft is one sendMessageDraft the server accepted.
type Draft struct {
	ChatID  int64
	DraftID int64
	// Text is as the user sees it, entities parsed out, as in Message.Text.
	Text     string
	Entities []MessageEntity
	Time     time.Time
	// CanStop shows the user a button to stop it (can_stop); KeepOnStop
	// keeps it shown when they do (keep_on_stop). Bot API 10.3.
	CanStop, KeepOnStop bool
	// MessageThreadID is the topic it is shown in (0: the chat).
	MessageThreadID int
}

// draftState is a private chat's current draft.
type draftState struct {
	draft Draft
	// ended: a message from the bot came after it, which takes its place,
	// or the user stopped it and it was not to be kept.
	ended bool
	// stopped: the user pressed its stop button; later updates of its
	// draft_id are taken and not shown ("stop further drafts").
	stopped bool
}

// sendMessageDraft shows a message being written in a private chat
// (Bot API 9.5, open to every bot): chat_id must be a private chat with a
// user who started the bot, draft_id non-zero, text 1-4096 characters after
// entity parsing. Updates of one draft_id animate one draft; it lives
// DraftLife after its last update, or until the bot's next message in the
// chat. Drafts count against the flood limits like messages.
func sendMessageDraft(s *Server, r *request) (any, *APIError) {
	if s.lacks(FeatureDrafts) {
		return nil, errDesc(404, DescNotFound)
	}
	if r.int64Arg("draft_id") == 0 {
		return nil, badRequest("DRAFT_ID_INVALID")
	}
	text := r.str("text")
	if text == "" {
		return nil, errDesc(400, DescTextEmpty)
	}
	body, apiErr := s.formatText(text, r.str("parse_mode"), r.str("entities"), false)
	if apiErr != nil {
		return nil, apiErr
	}
	if utf8.RuneCountInString(body.Text) > maxMessageText {
		return nil, errDesc(400, DescMessageTooLong)
	}
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		if ch.chat.Type != ChatPrivate {
			return nil, badRequest("TEXTDRAFT_PEER_INVALID")
		}
		if apiErr := s.writableLocked(ch); apiErr != nil {
			return nil, apiErr
		}
		thread := int(r.int64Arg("message_thread_id"))
		if apiErr := s.threadLocked(ch, thread); apiErr != nil {
			return nil, apiErr
		}
		if apiErr := s.admitLocked(r, ch.chat.ID); apiErr != nil {
			return nil, apiErr
		}
		d := Draft{ChatID: ch.chat.ID, DraftID: r.int64Arg("draft_id"), Text: body.Text, Entities: body.Entities, Time: s.now(),
			MessageThreadID: thread}
		if !s.lacking[FeatureDraftStop] {
			d.CanStop, d.KeepOnStop = r.boolArg("can_stop"), r.boolArg("keep_on_stop")
		}
		ch.drafts = append(ch.drafts, d)
		if ch.draft != nil && ch.draft.stopped && ch.draft.draft.DraftID == d.DraftID {
			return true, nil // stopped: the user sees no more of it
		}
		ch.draft = &draftState{draft: d}
		s.hub.NotifyLocked()
		return true, nil
	})
}

// Drafts returns every draft update the bot sent to a chat, in order.
func (s *Server) Drafts(chatID int64) []Draft {
	return readChat(s, chatID, func(ch *chatState) []Draft { return append([]Draft(nil), ch.drafts...) })
}

// ShownDraft is the draft the user sees in a chat now, if any: the last
// update, unless DraftLife has passed since it or a message from the bot
// has replaced it.
func (s *Server) ShownDraft(chatID int64) (Draft, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[chatID]
	if ch == nil || ch.draft == nil || ch.draft.ended || s.now().Sub(ch.draft.draft.Time) >= DraftLife {
		return Draft{}, false
	}
	return ch.draft.draft, true
}

// ErrNoStopButton: the chat shows no draft with a stop button to press.
var ErrNoStopButton = errors.New("tgfake: no draft with a stop button is shown")

// StopDraft presses the stop button of the draft the chat shows, as the
// user would: the bot receives stopped_message_generation with the
// draft's id; the draft stays shown if it was sent with keep_on_stop,
// else it goes. ErrNoStopButton when no draft is shown or it has no
// button (sent without can_stop, or by a server older than Bot API 10.3).
func (p *Person) StopDraft(chatID int64) (Draft, error) {
	s := p.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.chats[chatID]
	if ch == nil || ch.draft == nil || ch.draft.ended || ch.draft.stopped ||
		s.now().Sub(ch.draft.draft.Time) >= DraftLife || !ch.draft.draft.CanStop {
		return Draft{}, ErrNoStopButton
	}
	ch.draft.stopped = true
	ch.draft.ended = !ch.draft.draft.KeepOnStop
	s.pushUpdateLocked(Update{StoppedMessageGeneration: &MessageGenerationStopped{Chat: ch.chat, DraftID: ch.draft.draft.DraftID}})
	return ch.draft.draft, nil
}
