package tgfake

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Webhooks, as the Bot API server delivers them: setWebhook makes the
// server POST each update to the URL as JSON, with the secret token in the
// X-Telegram-Bot-Api-Secret-Token header, and getUpdates is refused while a
// webhook is set. An update counts as delivered only on a 2xx answer;
// anything else (an error status, a refused connection, a timeout) is
// recorded as the webhook's last error and retried later, so nothing is
// lost while the bot is down. Up to max_connections requests are in flight
// at once, but never two for the same chat, and a chat's updates go in
// update_id order: a bot behind a load balancer sees each chat in order
// although its replicas answer in parallel.
//
// Telegram accepts only HTTPS URLs on ports 443, 80, 88 and 8443; tests
// serve plain HTTP on a loopback port, which WithInsecureWebhooks allows.

// SecretHeader is the header the secret token travels in.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// Descriptions of the Bot API server for webhooks.
const (
	DescWebhookHTTPS    = "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
	DescWebhookPort     = "Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443"
	DescWebhookURL      = "Bad Request: bad webhook: Failed to parse URL"
	DescSecretToken     = "Bad Request: secret token contains unallowed characters"
	DescSecretTokenLong = "Bad Request: secret token is too long"
	DescMaxConnections  = "Bad Request: bad webhook: max_connections must be between 1 and 100"
	DescWebhookActive   = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)

var secretToken = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// WithInsecureWebhooks lets setWebhook take an http:// URL on any port, as
// a test's loopback server needs; Telegram itself would refuse it.
func WithInsecureWebhooks() Option { return func(s *settings) { s.insecureHooks = true } }

// webhook is the webhook set with setWebhook.
type webhook struct {
	url, secret string
	maxConn     int
	allowed     map[string]bool // empty: every kind
	lastErrDate int64
	lastErrMsg  string
	stop        chan struct{} // closed when the webhook is replaced or deleted
	// per update: how often delivery failed and when it may be tried again
	attempts map[int]int
	nextTry  map[int]time.Time
	inflight map[int64]bool // chats with a request in flight
	busy     int
}

func setWebhook(s *Server, r *request) (any, *APIError) {
	raw := strings.TrimSpace(r.str("url"))
	if raw == "" {
		s.mu.Lock()
		s.dropWebhookLocked(r.boolArg("drop_pending_updates"))
		s.mu.Unlock()
		return true, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, errDesc(400, DescWebhookURL)
	}
	if !s.insecureHooks {
		if u.Scheme != "https" {
			return nil, errDesc(400, DescWebhookHTTPS)
		}
		switch u.Port() {
		case "", "443", "80", "88", "8443":
		default:
			return nil, errDesc(400, DescWebhookPort)
		}
	}
	secret := r.str("secret_token")
	if len(secret) > 256 {
		return nil, errDesc(400, DescSecretTokenLong)
	}
	if secret != "" && !secretToken.MatchString(secret) {
		return nil, errDesc(400, DescSecretToken)
	}
	maxConn := 40
	if r.has("max_connections") {
		n, err := strconv.Atoi(r.str("max_connections"))
		if err != nil || n < 1 || n > 100 {
			return nil, errDesc(400, DescMaxConnections)
		}
		maxConn = n
	}
	allowed, apiErr := allowedUpdates(r)
	if apiErr != nil {
		return nil, apiErr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropWebhookLocked(r.boolArg("drop_pending_updates"))
	if s.poll != nil { // a held long poll ends as the webhook takes over
		close(s.poll.conflict)
		s.poll = nil
	}
	h := &webhook{
		url: u.String(), secret: secret, maxConn: maxConn, allowed: allowed, stop: make(chan struct{}),
		attempts: map[int]int{}, nextTry: map[int]time.Time{}, inflight: map[int64]bool{},
	}
	s.hook = h
	go s.deliverHook(h)
	s.hub.NotifyLocked()
	return true, nil
}

// dropWebhookLocked removes the webhook, if any, and with drop forgets the
// pending updates.
func (s *Server) dropWebhookLocked(drop bool) {
	if s.hook != nil {
		close(s.hook.stop)
		s.hook = nil
	}
	if drop {
		s.updates = nil
	}
	s.hub.NotifyLocked()
}

// Webhook reports the URL set with setWebhook ("" for none) and the last
// delivery error Telegram would show in getWebhookInfo.
func (s *Server) Webhook() (url, lastError string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hook == nil {
		return "", ""
	}
	return s.hook.url, s.hook.lastErrMsg
}

// allowedUpdates reads allowed_updates: the kinds of update the bot asks
// for (empty: every kind).
func allowedUpdates(r *request) (map[string]bool, *APIError) {
	allowed := map[string]bool{}
	if a := r.str("allowed_updates"); a != "" {
		var kinds []string
		if err := json.Unmarshal([]byte(a), &kinds); err != nil {
			return nil, badRequest("can't parse allowed_updates JSON array")
		}
		for _, k := range kinds {
			allowed[k] = true
		}
	}
	return allowed, nil
}

// updateKind is the field an update carries, as allowed_updates names it.
func updateKind(u Update) string {
	switch {
	case u.Message != nil:
		return "message"
	case u.EditedMessage != nil:
		return "edited_message"
	case u.CallbackQuery != nil:
		return "callback_query"
	case u.MyChatMember != nil:
		return "my_chat_member"
	case u.StoppedMessageGeneration != nil:
		return "stopped_message_generation"
	}
	return ""
}

// updateChat is the chat an update belongs to, for per-chat ordering.
func updateChat(u Update) int64 {
	switch {
	case u.Message != nil:
		return u.Message.Chat.ID
	case u.EditedMessage != nil:
		return u.EditedMessage.Chat.ID
	case u.CallbackQuery != nil:
		if u.CallbackQuery.Message != nil {
			return u.CallbackQuery.Message.Chat.ID
		}
		return u.CallbackQuery.From.ID
	case u.MyChatMember != nil:
		return u.MyChatMember.Chat.ID
	case u.StoppedMessageGeneration != nil:
		return u.StoppedMessageGeneration.Chat.ID
	}
	return 0
}

// deliverHook runs while h is the webhook: it starts a request for every
// update whose chat has nothing earlier pending or in flight, up to
// max_connections, and sleeps until something changes or a retry is due.
func (s *Server) deliverHook(h *webhook) {
	client := &http.Client{Timeout: 30 * time.Second}
	for {
		s.mu.Lock()
		if s.hook != h {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		wake := s.hub.ChangedLocked()
		var due time.Time
		blocked := map[int64]bool{}
		keep := s.updates[:0]
		for _, u := range s.updates {
			if len(h.allowed) > 0 && !h.allowed[updateKind(u)] {
				continue // Telegram drops what the bot did not ask for
			}
			keep = append(keep, u)
		}
		s.updates = keep
		for _, u := range s.updates {
			chat := updateChat(u)
			if blocked[chat] || h.inflight[chat] {
				blocked[chat] = true
				continue
			}
			blocked[chat] = true // later updates of the chat wait for this one
			if at := h.nextTry[u.UpdateID]; at.After(now) {
				if due.IsZero() || at.Before(due) {
					due = at
				}
				continue
			}
			if h.busy >= h.maxConn {
				break
			}
			h.inflight[chat] = true
			h.busy++
			go s.post(h, client, u, chat)
		}
		s.mu.Unlock()
		var timer <-chan time.Time
		if !due.IsZero() {
			timer = time.After(time.Until(due))
		}
		select {
		case <-wake:
		case <-timer:
		case <-h.stop:
			return
		case <-s.hub.Closing():
			return
		}
	}
}

// post sends one update and records the outcome.
func (s *Server) post(h *webhook, client *http.Client, u Update, chat int64) {
	body, _ := json.Marshal(u)
	errMsg := ""
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-h.stop:
		case <-s.hub.Closing():
		case <-ctx.Done():
		}
		cancel()
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		if h.secret != "" {
			req.Header.Set(SecretHeader, h.secret)
		}
		var resp *http.Response
		resp, err = client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				errMsg = fmt.Sprintf("Wrong response from the webhook: %s", resp.Status)
			}
		}
	}
	cancel()
	if err != nil {
		errMsg = "Connection refused"
		if strings.Contains(err.Error(), "Timeout") || strings.Contains(err.Error(), "deadline") {
			errMsg = "Read timeout expired"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	h.busy--
	delete(h.inflight, chat)
	if errMsg == "" {
		delete(h.attempts, u.UpdateID)
		delete(h.nextTry, u.UpdateID)
		for i, p := range s.updates {
			if p.UpdateID == u.UpdateID {
				s.updates = append(s.updates[:i], s.updates[i+1:]...)
				break
			}
		}
	} else {
		h.lastErrDate, h.lastErrMsg = s.now().Unix(), errMsg
		n := h.attempts[u.UpdateID] + 1
		h.attempts[u.UpdateID] = n
		// Telegram waits longer between attempts; a test wants the bot back
		// in business quickly, so the fake's backoff tops out at 2 s.
		h.nextTry[u.UpdateID] = time.Now().Add(min(100*time.Millisecond<<min(n-1, 5), 2*time.Second))
	}
	s.hub.NotifyLocked()
}
