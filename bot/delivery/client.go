// Package delivery is the bot's one outgoing path. Every message the bot
// sends on its own initiative is a row of the PostgreSQL outbox
// (storage/outbox.go); the Sender on every replica claims the oldest pending
// row of each chat's lane (a merged run of live-log lines at once), paces itself under Telegram's limits (Limiter: in
// process, or shared through Redis), calls the Bot API (Client), and applies
// one rule per class of failure (Classify). Replies to a user's commands
// are outbox rows too; what must go at once (the edit of a pressed button's
// message, a reply the database cannot take) goes through the same
// limiter, client and rules (Sender.SendNow).
//
// The client is a small JSON client of its own rather than telebot's:
// telebot's Raw treats a response body that is not JSON (the 502 page of
// Telegram's front proxy) as success and folds most error codes into plain
// strings, and the delivery path must tell a 5xx from a 403 from a 400.
package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"switchboard/domain"
)

// Client calls the Bot API: the one place the bot's requests to Telegram
// are made, so every one of them is read and classified the same way.
type Client struct {
	base  string // https://api.telegram.org/bot<token>/
	files string // https://api.telegram.org/file/bot<token>/
	http  *http.Client
	// download is http for file downloads, whose bodies take longer than
	// an API answer.
	download *http.Client
}

// NewClient builds a client for the Bot API at url with token.
func NewClient(url, token string, hc *http.Client) *Client {
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Every worker talks to the same host: keep a connection each, or
		// each delivery past the second would open (and TLS-handshake) anew.
		tr.MaxIdleConnsPerHost = 64
		hc = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	}
	dl := *hc
	dl.Timeout = max(hc.Timeout, time.Minute)
	root := strings.TrimRight(url, "/")
	return &Client{base: root + "/bot" + token + "/", files: root + "/file/bot" + token + "/", http: hc, download: &dl}
}

// APIError is a refusal by the Bot API (or a proxy in front of it).
type APIError struct {
	Status      int // HTTP status
	Code        int // error_code (Status when the body is not the API's JSON)
	Description string
	RetryAfter  time.Duration
}

func (e *APIError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("telegram: %d %s (retry after %s)", e.Code, e.Description, e.RetryAfter)
	}
	return fmt.Sprintf("telegram: %d %s", e.Code, e.Description)
}

// Call posts params as JSON to method and returns the result.
func (c *Client) Call(ctx context.Context, method string, params map[string]any) (json.RawMessage, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("%s: encode: %w", method, err)
	}
	return c.post(ctx, method, "application/json", body)
}

// Document is a file to upload: its name as the reader sees it, and its
// content.
type Document struct {
	Name string
	Data []byte
}

// Upload posts params and a file as multipart/form-data to method, the
// file in the part field (sendDocument's "document"), and returns the
// result. A parameter that is not a string goes as its JSON text, as the
// Bot API reads form fields.
func (c *Client) Upload(ctx context.Context, method string, params map[string]any, field string, doc Document) (json.RawMessage, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for k, v := range params {
		s, ok := v.(string)
		if !ok {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s: encode %s: %w", method, k, err)
			}
			s = string(b)
		}
		if err := w.WriteField(k, s); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
	}
	part, err := w.CreateFormFile(field, doc.Name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if _, err := part.Write(doc.Data); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	return c.post(ctx, method, w.FormDataContentType(), buf.Bytes())
}

// post sends one request to method and reads the Bot API's answer.
func (c *Client) post(ctx context.Context, method, contentType string, body []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+method, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, withoutURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: read response: %w", method, err)
	}
	var out struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		ErrorCode   int             `json:"error_code"`
		Description string          `json:"description"`
		Parameters  struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if jerr := json.Unmarshal(data, &out); jerr != nil || (!out.OK && out.ErrorCode == 0 && out.Description == "") {
		// Not the API's answer: a proxy's error page, say.
		desc := http.StatusText(resp.StatusCode)
		if resp.StatusCode == http.StatusOK {
			desc = "response is not the Bot API's JSON"
		}
		status := resp.StatusCode
		if status == http.StatusOK {
			status = http.StatusBadGateway
		}
		return nil, &APIError{Status: status, Code: status, Description: desc}
	}
	if !out.OK {
		code := out.ErrorCode
		if code == 0 {
			code = resp.StatusCode
		}
		// Cleaned: the description is stored with the row it refused
		// (last_error), and a NUL in it (the server echoing what it was
		// sent) would have that write refused, the row claimed and sent
		// again after every lease, its chat's later rows behind it.
		return nil, &APIError{Status: resp.StatusCode, Code: code, Description: domain.CleanText(out.Description),
			RetryAfter: time.Duration(out.Parameters.RetryAfter) * time.Second}
	}
	return out.Result, nil
}

// withoutURL drops the URL an HTTP client's error names: it holds the
// bot's token, which must never reach an error or a log.
func withoutURL(err error) error {
	var uerr interface{ Unwrap() error }
	if errors.As(err, &uerr) && uerr.Unwrap() != nil {
		return uerr.Unwrap()
	}
	return err
}

// Class is what a delivery outcome means for the row.
type Class int

// The classes, one rule each (see Sender.deliver).
const (
	OK          Class = iota
	Transient         // 5xx, timeout, network: retry with capped exponential backoff and jitter
	Flood             // 429: nothing more to that chat (or any) until retry_after
	Gone              // 403 and the like: the recipient is unreachable for good
	NotModified       // an edit that changes nothing: done
	EditGone          // the message to edit is gone or cannot be edited
	Bad               // any other 400: a bug; failed, never retried
)

func (c Class) String() string {
	return [...]string{"ok", "transient", "flood", "gone", "not_modified", "edit_gone", "bad"}[c]
}

// Classify sorts an error from Call.
func Classify(err error) Class {
	if err == nil {
		return OK
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return Transient // network, timeout, cancelled
	}
	desc := strings.ToLower(ae.Description)
	switch {
	case ae.Code == http.StatusTooManyRequests:
		return Flood
	case ae.Code >= 500 || ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound || ae.Code == http.StatusConflict:
		// 401/404 mean a revoked token or a wrong TELEGRAM_API_URL: not the
		// row's fault, and fixed by the operator, so keep the row.
		return Transient
	case ae.Code == http.StatusForbidden:
		return Gone
	case strings.Contains(desc, "message is not modified"):
		return NotModified
	case strings.Contains(desc, "message to edit not found"), strings.Contains(desc, "message can't be edited"):
		return EditGone
	case strings.Contains(desc, "chat not found"), strings.Contains(desc, "user is deactivated"),
		strings.Contains(desc, "group chat was upgraded"), strings.Contains(desc, "peer_id_invalid"):
		return Gone
	}
	return Bad
}

// sendParams are sendMessage's parameters for a message.
func sendParams(chatID int64, b body) map[string]any {
	p := placed(b, map[string]any{
		"chat_id": chatID, "text": b.Text, "parse_mode": "HTML",
		"link_preview_options": map[string]any{"is_disabled": true},
	})
	if b.OnlyFor != 0 {
		eph := map[string]any{"receiver_user_id": b.OnlyFor}
		if b.ForPress != "" {
			eph["callback_query_id"] = b.ForPress
		}
		p["ephemeral_message_parameters"] = eph
	}
	return p
}

// richParams are sendRichMessage's parameters for a message's rich form.
func richParams(chatID int64, b body) map[string]any {
	return placed(b, map[string]any{"chat_id": chatID, "rich_message": map[string]any{"html": b.Rich}})
}

// ephemeral reports whether a sendMessage result is an ephemeral message:
// a server that does not know them ignores the parameter and posts the
// message for everyone, with no receiver_user.
func ephemeral(result json.RawMessage) bool {
	var m struct {
		Receiver *struct{} `json:"receiver_user"`
	}
	_ = json.Unmarshal(result, &m)
	return m.Receiver != nil
}

// photoParams are sendPhoto's parameters for a photo by its file id, the
// text its caption.
func photoParams(chatID int64, b body) map[string]any {
	p := captionParams(chatID, b)
	p["photo"] = b.Photo
	return p
}

// captionParams are the parameters of a message whose text is a caption
// (a photo, a document), beside the file.
func captionParams(chatID int64, b body) map[string]any {
	return placed(b, map[string]any{"chat_id": chatID, "caption": b.Text, "parse_mode": "HTML"})
}

// placed adds to a new message's parameters p what places it: its buttons,
// the message it answers and the topic it goes into.
func placed(b body, p map[string]any) map[string]any {
	if kb := markup(b.Buttons); kb != nil {
		p["reply_markup"] = kb
	}
	if b.ReplyTo > 0 {
		p["reply_parameters"] = map[string]any{"message_id": b.ReplyTo, "allow_sending_without_reply": true}
	}
	if b.Thread != 0 {
		p["message_thread_id"] = b.Thread
	}
	return p
}

// editParams are editMessageText's parameters; no buttons removes them.
// A rich form replaces the text of a rich message: text is required only
// without rich_message.
func editParams(chatID int64, messageID int, b body) map[string]any {
	p := map[string]any{
		"chat_id": chatID, "message_id": messageID, "text": b.Text, "parse_mode": "HTML",
		"link_preview_options": map[string]any{"is_disabled": true},
	}
	if b.Rich != "" {
		p = map[string]any{"chat_id": chatID, "message_id": messageID, "rich_message": map[string]any{"html": b.Rich}}
	}
	if kb := markup(b.Buttons); kb != nil {
		p["reply_markup"] = kb
	}
	return p
}

// locationParams are sendLocation's parameters (live for loc.Live), or
// with messageID those of editMessageLiveLocation, which moves a live
// location and keeps its period.
func locationParams(chatID int64, messageID int, b body) map[string]any {
	loc := b.Location
	p := map[string]any{"chat_id": chatID, "latitude": loc.Lat, "longitude": loc.Lon}
	if messageID != 0 {
		p["message_id"] = messageID
		if kb := markup(b.Buttons); kb != nil {
			p["reply_markup"] = kb
		}
	} else {
		p = placed(b, p)
		if loc.Live > 0 {
			p["live_period"] = int64(loc.Live / time.Second)
		}
	}
	if loc.Accuracy > 0 {
		p["horizontal_accuracy"] = min(loc.Accuracy, maxAccuracy)
	}
	// A heading is a live location's: on a still one the server refuses it.
	if loc.Heading >= 1 && loc.Heading <= 360 && (messageID != 0 || loc.Live > 0) {
		p["heading"] = loc.Heading
	}
	return p
}

// maxAccuracy is the largest horizontal_accuracy the Bot API takes, in
// metres.
const maxAccuracy = 1500

// markupParams are editMessageReplyMarkup's parameters: the buttons alone,
// the text left as it is; no buttons removes them.
func markupParams(chatID int64, messageID int, b body) map[string]any {
	p := map[string]any{"chat_id": chatID, "message_id": messageID}
	if kb := markup(b.Buttons); kb != nil {
		p["reply_markup"] = kb
	}
	return p
}

func markup(rows [][]domain.Button) map[string]any {
	if len(rows) == 0 {
		return nil
	}
	out := make([][]map[string]any, 0, len(rows))
	for _, r := range rows {
		row := make([]map[string]any, 0, len(r))
		for _, b := range r {
			btn := map[string]any{"text": b.Text}
			if b.Style != "" {
				btn["style"] = b.Style
			}
			switch {
			case b.Disabled:
				btn["disabled"] = map[string]any{}
			case b.URL != "":
				btn["url"] = b.URL
			case b.Copy != "":
				btn["copy_text"] = map[string]string{"text": b.Copy}
			default:
				btn["callback_data"] = b.Data
			}
			row = append(row, btn)
		}
		out = append(out, row)
	}
	return map[string]any{"inline_keyboard": out}
}

// body is what one Bot API call carries beyond the chat.
type body struct {
	Text    string
	Buttons [][]domain.Button
	ReplyTo int
	Photo   string // a file id: sendPhoto with Text as the caption
	// OnlyFor and ForPress make it an ephemeral message (domain.Message).
	OnlyFor  int64
	ForPress string
	// Thread is the topic it goes into (message_thread_id); 0: the chat.
	Thread int
	// Rich is its rich form (domain.Message.Rich): sendRichMessage, or an
	// edit's rich_message.
	Rich string
	// Location makes it a location (domain.Message.Location).
	Location *domain.Location
}

// messageID reads message_id from a sendMessage result.
func messageID(result json.RawMessage) int {
	var m struct {
		MessageID int `json:"message_id"`
	}
	_ = json.Unmarshal(result, &m)
	return m.MessageID
}
