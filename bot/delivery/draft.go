package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrDraftsRefused: the Bot API server takes no message drafts, at all (a
// server older than Bot API 9.5, where sendMessageDraft opened to every
// bot, answers 404) or for this chat (a 400 about the chat or the draft).
var ErrDraftsRefused = errors.New("telegram refuses message drafts")

// ErrPaced: the chat's or the bot's budget has no room for a draft now. A
// draft is never worth waiting for: the next one carries the text further.
var ErrPaced = errors.New("no room for a draft now")

// Draft shows text (HTML within one message) as draft draftID in a private
// chat, in its topic (domain.TopicOf; "": the chat): sendMessageDraft, which streams a message being written and which
// the chat's next message replaces. It goes through the same limiter as
// every message, but never waits: with no budget free it is ErrPaced. A
// 429 pauses the chat as for any message. A draft is cosmetic, so it is
// never retried and never marks a chat unreachable.
func (s *Sender) Draft(ctx context.Context, chatID int64, topic string, draftID int64, text string) error {
	if s.features.lacks(FeatureDrafts) {
		return ErrDraftsRefused
	}
	wait, err := s.limiter.Take(ctx, chatID, 0)
	if err != nil {
		return fmt.Errorf("draft in chat %d: %w", chatID, err)
	}
	if wait > 0 {
		return ErrPaced
	}
	// can_stop shows the reader a button to stop the answer (Bot API
	// 10.3: the stopped_message_generation update); keep_on_stop keeps
	// what they read shown until the answer, as stopped, replaces it. An
	// older server ignores both: no button, as before.
	params := map[string]any{
		"chat_id": chatID, "draft_id": draftID, "text": text, "parse_mode": "HTML",
		"can_stop": true, "keep_on_stop": true,
	}
	thread, kept := s.threadFor(ctx, chatID, topic)
	if thread != 0 {
		params["message_thread_id"] = thread
	}
	_, err = s.client.Call(ctx, "sendMessageDraft", params)
	if kept && threadNotFound(err) {
		// The user deleted the topic: the answer's message opens it
		// again; the drafts before it are not worth a topic of their own.
		if ferr := s.topics.store.ForgetThread(ctx, chatID, topic, thread); ferr != nil {
			return fmt.Errorf("draft in chat %d: forget a deleted topic: %w (after %w)", chatID, ferr, err)
		}
		return fmt.Errorf("draft in chat %d: its topic was deleted: %w", chatID, ErrPaced)
	}
	var ae *APIError
	switch {
	case err == nil:
		s.m.sent.WithLabelValues("draft").Inc()
		return nil
	case !errors.As(err, &ae):
		return fmt.Errorf("draft in chat %d: %w", chatID, err)
	case ae.Code == http.StatusNotFound:
		s.features.refused(FeatureDrafts, err)
		return fmt.Errorf("%w: %w", ErrDraftsRefused, err)
	case ae.Code == http.StatusTooManyRequests:
		s.flood(ctx, chatID, err)
		return fmt.Errorf("draft in chat %d: %w", chatID, err)
	case ae.Code == http.StatusBadRequest && !strings.Contains(strings.ToLower(ae.Description), "can't parse entities"):
		return fmt.Errorf("%w: %w", ErrDraftsRefused, err)
	}
	s.m.failed.WithLabelValues("draft").Inc()
	return fmt.Errorf("draft in chat %d: %w", chatID, err)
}

// ChatAction shows action ("typing") in a chat: sendChatAction, which
// Telegram shows for five seconds or until the chat's next message. It is
// the only way the bot sends one. It goes through the limiter but takes no
// budget: Telegram does not count an action as a message, and one that
// took the chat's budget would hold up the answer it announces. It obeys
// the limiter's pauses (no action to a chat or a bot Telegram told to wait:
// ErrPaced), and a 429 pauses the chat as for any message.
func (s *Sender) ChatAction(ctx context.Context, chatID int64, topic, action string) error {
	paused, err := s.limiter.Paused(ctx, chatID)
	if err != nil {
		return fmt.Errorf("%s in chat %d: %w", action, chatID, err)
	}
	if paused > 0 {
		return fmt.Errorf("%s in chat %d: %w", action, chatID, ErrPaced)
	}
	params := map[string]any{"chat_id": chatID, "action": action}
	// Shown in the topic the message it announces goes to; an action
	// creates no topic, and one the user deleted shows nothing.
	if thread := s.keptThread(ctx, chatID, topic); thread != 0 {
		params["message_thread_id"] = thread
	}
	_, err = s.client.Call(ctx, "sendChatAction", params)
	if threadNotFound(err) {
		return fmt.Errorf("%s in chat %d: its topic was deleted: %w", action, chatID, ErrPaced)
	}
	if Classify(err) == Flood {
		s.flood(ctx, chatID, err)
	}
	if err != nil {
		return fmt.Errorf("%s in chat %d: %w", action, chatID, err)
	}
	return nil
}

// Client is the Bot API client the sender calls through, for the calls
// that are not paced (callback answers, command menus, webhooks, files):
// one client for every call the bot makes.
func (s *Sender) Client() *Client { return s.client }
