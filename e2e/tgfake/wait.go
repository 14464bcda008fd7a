package tgfake

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// WaitFor blocks until cond returns true, re-evaluating it whenever the
// server's state changes (a bot API call, a user action), and fails the test
// if timeout passes first. cond may call the server's snapshot methods; it
// should depend only on the server's state, because changes elsewhere (say,
// a variable the bot's handler sets) do not wake the wait.
func (s *Server) WaitFor(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	s.hub.Must(t, timeout, cond, "tgfake", "bot API calls", s.CallLog)
}

// WaitMessage waits (up to the server's wait timeout) until one of the bot's
// messages in the chat, in its current state, satisfies match, and returns
// the first such message. A nil match accepts any message. Deleted messages
// are included; check BotMessage.Deleted if it matters.
func (s *Server) WaitMessage(t testing.TB, chatID int64, match func(BotMessage) bool) BotMessage {
	t.Helper()
	return s.waitMessage(t, chatID, 0, match)
}

// WaitMessageAfter is WaitMessage restricted to messages with an id greater
// than afterID. Since users and the bot share a chat's id sequence, passing
// the id of the user's message waits for the bot's reaction to it:
//
//	m := alice.SendText(alice.ID(), "/start")
//	reply := srv.WaitMessageAfter(t, alice.ID(), m.MessageID, nil)
func (s *Server) WaitMessageAfter(t testing.TB, chatID int64, afterID int, match func(BotMessage) bool) BotMessage {
	t.Helper()
	return s.waitMessage(t, chatID, afterID, match)
}

func (s *Server) waitMessage(t testing.TB, chatID int64, afterID int, match func(BotMessage) bool) BotMessage {
	t.Helper()
	var found BotMessage
	ok := s.hub.Until(s.waitTimeout, func() bool {
		s.mu.Lock()
		msgs := s.botMessagesLocked(chatID, afterID)
		s.mu.Unlock()
		for _, m := range msgs {
			if match == nil || match(m) {
				found = m
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("tgfake: no matching bot message in chat %d (after message %d) within %s\nbot messages there:\n%s\nbot API calls:\n%s",
			chatID, afterID, s.waitTimeout, describeMessages(s.Messages(chatID)), s.CallLog())
	}
	return found
}

// WaitCallbackAnswer waits until the bot answered the callback query with
// the given id and returns the answer.
func (s *Server) WaitCallbackAnswer(t testing.TB, queryID string) CallbackAnswer {
	t.Helper()
	var answer CallbackAnswer
	ok := s.hub.Until(s.waitTimeout, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		cb := s.callbacks[queryID]
		if cb == nil || !cb.answered {
			return false
		}
		answer = cb.answer
		return true
	})
	if !ok {
		t.Fatalf("tgfake: callback query %s not answered within %s\nbot API calls:\n%s", queryID, s.waitTimeout, s.CallLog())
	}
	return answer
}

// WaitChatAction waits until the bot sent the given chat action ("typing",
// "upload_photo", ...) to the chat.
func (s *Server) WaitChatAction(t testing.TB, chatID int64, action string) {
	t.Helper()
	ok := s.hub.Until(s.waitTimeout, func() bool {
		for _, a := range s.ChatActions(chatID) {
			if a == action {
				return true
			}
		}
		return false
	})
	if !ok {
		t.Fatalf("tgfake: no %q chat action in chat %d within %s; seen: %v", action, chatID, s.waitTimeout, s.ChatActions(chatID))
	}
}

// WaitUpdatesConsumed waits until the bot has confirmed (via getUpdates'
// offset) every update delivered so far, i.e. it has received them all.
func (s *Server) WaitUpdatesConsumed(t testing.TB) {
	t.Helper()
	ok := s.hub.Until(s.waitTimeout, func() bool { return len(s.PendingUpdates()) == 0 })
	if !ok {
		t.Fatalf("tgfake: bot did not fetch %d pending updates within %s", len(s.PendingUpdates()), s.waitTimeout)
	}
}

func describeMessages(msgs []BotMessage) string {
	if len(msgs) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for _, m := range msgs {
		text := m.Text
		if text == "" {
			text = m.Caption
		}
		flags := ""
		if m.RichMessage != nil {
			text, flags = m.RichMessage.PlainText(), " [rich]"
		}
		if m.Location != nil {
			text = fmt.Sprintf("📍 %v, %v", m.Location.Latitude, m.Location.Longitude)
			if m.Live != LiveNone {
				flags += " [" + string(m.Live) + "]"
			}
		}
		if m.Deleted {
			flags += " [deleted]"
		}
		if len(m.Edits) > 0 {
			flags += fmt.Sprintf(" [edited %d×]", len(m.Edits))
		}
		fmt.Fprintf(&b, "  #%d%s %q buttons: %s\n", m.MessageID, flags, text, describeButtons(m.ReplyMarkup))
	}
	return b.String()
}
