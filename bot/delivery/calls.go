package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrQueryTooOld: Telegram no longer waits for an answer to this button
// press (some seconds on, or answered already). There is nothing left to
// answer, which callers treat as done rather than as a failure.
var ErrQueryTooOld = errors.New("callback query too old to answer")

// CallbackAnswer is answerCallbackQuery's answer to a button press: a toast,
// an alert, or (no text) just the end of the client's spinner.
type CallbackAnswer struct {
	QueryID string
	Text    string
	Alert   bool
}

// AnswerCallback answers a button press. It is not paced: Telegram does not
// count answers among messages, and one that waited for a chat's budget
// would come after the client gave up on it.
func (c *Client) AnswerCallback(ctx context.Context, a CallbackAnswer) error {
	p := map[string]any{"callback_query_id": a.QueryID}
	if a.Text != "" {
		p["text"] = a.Text
	}
	if a.Alert {
		p["show_alert"] = true
	}
	_, err := c.Call(ctx, "answerCallbackQuery", p)
	if queryTooOld(err) {
		return fmt.Errorf("%w: %w", ErrQueryTooOld, err)
	}
	return err
}

// queryTooOld is Telegram's refusal of an answer to a press it no longer
// waits for (400 "query is too old and response timeout expired or query ID
// is invalid").
func queryTooOld(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == http.StatusBadRequest &&
		strings.Contains(strings.ToLower(ae.Description), "query is too old")
}

// Command is one entry of a command menu.
type Command struct {
	Name        string `json:"command"`
	Description string `json:"description"`
}

// CommandScope is whose menu a command list is: Type is the Bot API's
// (default, all_private_chats, all_group_chats, chat…), ChatID set for the
// scopes of one chat.
type CommandScope struct {
	Type   string `json:"type"`
	ChatID int64  `json:"chat_id,omitempty"`
}

// SetCommands publishes the menu of scope in lang ("" for every language
// without its own). Telegram refuses an empty list: use DeleteCommands.
func (c *Client) SetCommands(ctx context.Context, cmds []Command, scope CommandScope, lang string) error {
	return c.callMenu(ctx, "setMyCommands", map[string]any{"commands": cmds, "scope": scope}, lang)
}

// DeleteCommands removes the menu of scope in lang, so the scope falls
// back to a wider one.
func (c *Client) DeleteCommands(ctx context.Context, scope CommandScope, lang string) error {
	return c.callMenu(ctx, "deleteMyCommands", map[string]any{"scope": scope}, lang)
}

// callMenu calls a menu method with p for lang: Telegram's
// language_code is left out for "", the menu of every language without
// its own.
func (c *Client) callMenu(ctx context.Context, method string, p map[string]any, lang string) error {
	if lang != "" {
		p["language_code"] = lang
	}
	_, err := c.Call(ctx, method, p)
	return err
}

// Me is the bot's account as getMe tells it.
type Me struct {
	ID                      int64  `json:"id"`
	IsBot                   bool   `json:"is_bot"`
	FirstName               string `json:"first_name"`
	Username                string `json:"username"`
	CanJoinGroups           bool   `json:"can_join_groups"`
	CanReadAllGroupMessages bool   `json:"can_read_all_group_messages"`
	SupportsInlineQueries   bool   `json:"supports_inline_queries"`
	// HasTopicsEnabled is the bot's topic mode in private chats, which its
	// owner sets in @BotFather (Bot API 9.3); nil: the server says nothing
	// of it (older).
	HasTopicsEnabled *bool `json:"has_topics_enabled"`
}

// GetMe reads the bot's account. Privacy mode (CanReadAllGroupMessages) can
// change while the bot runs, so callers ask when they need to know.
func (c *Client) GetMe(ctx context.Context) (Me, error) {
	me, err := callFor[Me](ctx, c, "getMe", map[string]any{})
	if err == nil && me.ID == 0 {
		return Me{}, errors.New("getMe: unexpected answer: no bot id")
	}
	return me, err
}

// callFor calls method and decodes its result as a T.
func callFor[T any](ctx context.Context, c *Client, method string, params map[string]any) (T, error) {
	var out T
	res, err := c.Call(ctx, method, params)
	if err != nil {
		return out, err
	}
	if err := json.Unmarshal(res, &out); err != nil {
		var zero T
		return zero, fmt.Errorf("%s: unexpected answer: %w", method, err)
	}
	return out, nil
}

// Webhook is where Telegram pushes updates.
type Webhook struct {
	URL            string
	Secret         string // sent back in X-Telegram-Bot-Api-Secret-Token
	MaxConnections int
	AllowedUpdates []string
}

// SetWebhook has Telegram push updates to w.URL. It is idempotent: every
// replica sets the same webhook.
func (c *Client) SetWebhook(ctx context.Context, w Webhook) error {
	p := map[string]any{"url": w.URL}
	if w.Secret != "" {
		p["secret_token"] = w.Secret
	}
	if w.MaxConnections > 0 {
		p["max_connections"] = w.MaxConnections
	}
	if w.AllowedUpdates != nil {
		p["allowed_updates"] = w.AllowedUpdates
	}
	_, err := c.Call(ctx, "setWebhook", p)
	return err
}

// WebhookInfo is what getWebhookInfo tells of the webhook; URL is empty when
// none is set.
type WebhookInfo struct {
	URL                string `json:"url"`
	PendingUpdateCount int    `json:"pending_update_count"`
	LastErrorMessage   string `json:"last_error_message"`
}

// GetWebhookInfo reads the webhook Telegram pushes to, if any.
func (c *Client) GetWebhookInfo(ctx context.Context) (WebhookInfo, error) {
	return callFor[WebhookInfo](ctx, c, "getWebhookInfo", map[string]any{})
}

// DeleteWebhook removes the webhook, so getUpdates is no longer refused;
// dropPending false keeps the updates Telegram holds.
func (c *Client) DeleteWebhook(ctx context.Context, dropPending bool) error {
	_, err := c.Call(ctx, "deleteWebhook", map[string]any{"drop_pending_updates": dropPending})
	return err
}

// File is a file on Telegram's servers as getFile tells it: Path is where
// DownloadFile fetches it from, for about an hour.
type File struct {
	ID   string `json:"file_id"`
	Size int64  `json:"file_size"`
	Path string `json:"file_path"`
}

// GetFile asks where a file a user sent can be downloaded.
func (c *Client) GetFile(ctx context.Context, fileID string) (File, error) {
	f, err := callFor[File](ctx, c, "getFile", map[string]any{"file_id": fileID})
	if err != nil {
		return File{}, err
	}
	if f.Path == "" {
		return File{}, errors.New("getFile: no file_path in the answer")
	}
	return f, nil
}

// ErrFileTooBig: a download is longer than its caller allows.
var ErrFileTooBig = errors.New("file too big")

// DownloadFile fetches the file at path (File.Path), at most max bytes;
// a longer one is ErrFileTooBig. Errors never carry the URL, which holds
// the token.
func (c *Client) DownloadFile(ctx context.Context, path string, max int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.files+path, nil)
	if err != nil {
		return nil, errors.New("download: bad file path")
	}
	resp, err := c.download.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download: HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("download: %w", withoutURL(err))
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrFileTooBig, max)
	}
	return data, nil
}
