// Package webhook files approved tasks by posting signed JSON to a URL the
// team's own tracker receives. *Client implements tasks.Tracker for
// targets that are http(s) URLs.
//
// # The request
//
//	POST <target>
//	Content-Type: application/json
//	User-Agent: switchboard
//	X-Switchboard-Event: task.approved
//	X-Switchboard-Delivery: switchboard-proposal-123
//	X-Switchboard-Signature-256: sha256=<hex HMAC-SHA256 of the body with the secret>
//
//	{
//	  "event": "task.approved",
//	  "proposal_id": 123,
//	  "run_id": 7,
//	  "title": "Fix the login page",
//	  "description": "Users cannot log in since Monday.",
//	  "priority": "high",                           // low, medium, high
//	  "assignee": {"login": "alice", "mention": "Alice"}, // null for none; login "" when unmapped
//	  "deadline": "2026-03-10",                     // null for none
//	  "sources": [{
//	    "chat_id": -1001234, "chat_title": "Dev chat", "message_id": 42,
//	    "link": "https://t.me/c/1234/42",           // null where Telegram has none
//	    "author": "Bob", "text": "login is broken",
//	    "at": "2026-03-01T09:00:00Z"
//	  }],
//	  "approved_at": "2026-03-01T11:00:00Z",
//	  "approved_by": 777,                           // a Telegram user id
//	  "marker": "switchboard-proposal-123"
//	}
//
// Payload is that document; a receiver written in Go may decode into it.
//
// # Delivery
//
// Delivery is at least once: a push whose answer was lost is posted again,
// and a webhook cannot be asked what it already holds, so Find always
// says not found. A receiver makes that harmless by keeping the
// X-Switchboard-Delivery (the task's marker, the same on every attempt)
// and answering 2xx to one it has seen. A receiver checks the signature
// with Verify over the body exactly as received, before parsing it.
//
// # Answers
//
//   - 2xx: filed; the Filed is zero (a receiver returns no number).
//   - 404, 410: tasks.ErrGone (the URL is no more).
//   - 401, 403: tasks.ErrAccess (the receiver refuses our signature:
//     most likely the secret differs).
//   - 429: *tasks.RateLimited until its Retry-After, or a minute from now
//     without one.
//   - 400, 413, 422: tasks.ErrRefused (the receiver refuses what the task
//     holds: the same body would be refused however often it came, so the
//     push is set aside until an admin sends it again).
//   - Anything else, a redirect included (it is not followed: a POST's
//     body is not re-sent to wherever a redirect points), a timeout or a
//     network error: transient.
//
// An error names the method, the URL's scheme and host only (webhook URLs
// often carry a secret in their path or query) and the status. The
// target not being an http(s) URL is ErrGone without a request.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"switchboard/domain/tasks"
	"switchboard/tracker"
)

// Event is the event name of an approved task.
const Event = "task.approved"

// The request's headers.
const (
	HeaderEvent     = "X-Switchboard-Event"
	HeaderDelivery  = "X-Switchboard-Delivery"
	HeaderSignature = "X-Switchboard-Signature-256"
)

// DefaultTimeout bounds a delivery when Config.HTTP is nil: a receiver
// should queue the task and answer at once.
const DefaultTimeout = 15 * time.Second

// Payload is the JSON body of a delivery.
type Payload struct {
	Event       string    `json:"event"`
	ProposalID  int64     `json:"proposal_id"`
	RunID       int64     `json:"run_id"`
	Title       string    `json:"title"`
	Description string    `json:"description"`
	Priority    string    `json:"priority"`
	Assignee    *Assignee `json:"assignee"`
	Deadline    *string   `json:"deadline"`
	Sources     []Source  `json:"sources"`
	ApprovedAt  time.Time `json:"approved_at"`
	ApprovedBy  int64     `json:"approved_by"`
	Marker      string    `json:"marker"`
}

// Assignee is who the task is for: the GitHub login they map to ("" when
// unmapped) and how the messages named them.
type Assignee struct {
	Login   string `json:"login"`
	Mention string `json:"mention"`
}

// Source is a group message the task was made from.
type Source struct {
	ChatID    int64     `json:"chat_id"`
	ChatTitle string    `json:"chat_title"`
	MessageID int64     `json:"message_id"`
	Link      *string   `json:"link"`
	Author    string    `json:"author"`
	Text      string    `json:"text"`
	At        time.Time `json:"at"`
}

// NewPayload is t as a delivery carries it.
func NewPayload(t tasks.Task) Payload {
	p := Payload{
		Event: Event, ProposalID: t.ProposalID, RunID: t.RunID,
		Title: t.Title, Description: t.Description, Priority: t.Priority,
		Sources:    make([]Source, 0, len(t.Sources)),
		ApprovedAt: t.ApprovedAt.UTC(), ApprovedBy: t.ApprovedBy, Marker: t.Marker(),
	}
	if t.Assignee != "" || t.Mention != "" {
		p.Assignee = &Assignee{Login: t.Assignee, Mention: t.Mention}
	}
	if t.Deadline != "" {
		d := t.Deadline
		p.Deadline = &d
	}
	for _, s := range t.Sources {
		src := Source{ChatID: s.ChatID, ChatTitle: s.ChatTitle, MessageID: s.MessageID, Author: s.Author, Text: s.Text, At: s.At.UTC()}
		if s.Link != "" {
			link := s.Link
			src.Link = &link
		}
		p.Sources = append(p.Sources, src)
	}
	return p
}

// Sign is the X-Switchboard-Signature-256 value of body: "sha256=" and
// the hex HMAC-SHA256 of body keyed with secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether header is body's signature with secret, in
// constant time so that a forger learns nothing from how long it takes.
func Verify(secret, body []byte, header string) bool {
	hexSum, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	if !ok || len(secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// Config configures New.
type Config struct {
	// Secret keys the signature; required, since a receiver must be able
	// to tell our deliveries from anyone's.
	Secret []byte
	// HTTP is used for its transport and timeout; nil means a client with
	// DefaultTimeout. Redirects are never followed either way.
	HTTP *http.Client
	// UserAgent; "" means "switchboard".
	UserAgent string
	// Now is the clock Retry-After is counted from; nil means time.Now.
	Now func() time.Time
}

// Client delivers tasks to webhooks. It is safe for concurrent use.
type Client struct {
	secret []byte
	hc     *http.Client
	ua     string
	now    func() time.Time
}

var _ tasks.Tracker = (*Client)(nil)

// New validates cfg and builds a Client.
func New(cfg Config) (*Client, error) {
	if len(cfg.Secret) == 0 {
		return nil, errors.New("webhook: Config.Secret is empty")
	}
	ua := cmp.Or(strings.TrimSpace(cfg.UserAgent), "switchboard")
	if strings.ContainsAny(ua, "\r\n\x00") {
		return nil, errors.New("webhook: Config.UserAgent contains a control character")
	}
	hc := &http.Client{Timeout: DefaultTimeout}
	if cfg.HTTP != nil {
		cp := *cfg.HTTP
		hc = &cp
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Client{secret: append([]byte(nil), cfg.Secret...), hc: hc, ua: ua, now: now}, nil
}

// Find always reports not found: a webhook cannot be asked what it holds.
// The delivery id makes a second delivery harmless to the receiver.
func (c *Client) Find(context.Context, string, string) (tasks.Filed, bool, error) {
	return tasks.Filed{}, false, nil
}

// Error is a delivery that failed. It unwraps to what the worker acts on
// (tasks.ErrAccess, tasks.ErrGone, *tasks.RateLimited) or, for a
// transient failure, to the cause if there is one.
type Error struct {
	// Host is the target's scheme and host: the rest may hold a secret.
	Host    string
	Status  int    // 0 when no answer came
	Message string // the start of the answer's body
	Err     error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "webhook POST %s", e.Host)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d", e.Status)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, " %q", e.Message)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// File posts t to target.
func (c *Client) File(ctx context.Context, target string, t tasks.Task) (tasks.Filed, error) {
	u, err := url.Parse(strings.TrimSpace(target))
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return tasks.Filed{}, &Error{Host: "(not a URL)", Err: fmt.Errorf("target is not an http(s) URL: %w", tasks.ErrGone)}
	}
	host := u.Scheme + "://" + u.Host
	body, err := json.Marshal(NewPayload(t))
	if err != nil {
		return tasks.Filed{}, &Error{Host: host, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return tasks.Filed{}, &Error{Host: host, Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set(HeaderEvent, Event)
	req.Header.Set(HeaderDelivery, t.Marker())
	req.Header.Set(HeaderSignature, Sign(c.secret, body))
	resp, err := c.hc.Do(req)
	if err != nil {
		// url.Error quotes the whole URL; keep only its cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return tasks.Filed{}, &Error{Host: host, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return tasks.Filed{}, nil
	}
	e := &Error{Host: host, Status: resp.StatusCode, Message: tracker.ErrorText(resp.Body)}
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusGone:
		e.Err = tasks.ErrGone
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Err = tasks.ErrAccess
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		e.Err = tasks.ErrRefused
	case http.StatusTooManyRequests:
		until, ok := tracker.RetryAfter(resp.Header, c.now())
		if !ok {
			until = c.now().Add(tracker.DefaultRetryAfter)
		}
		e.Err = &tasks.RateLimited{Until: until}
	default:
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
			e.Message = "redirect not followed; update the webhook's URL"
		}
	}
	return tasks.Filed{}, e
}
