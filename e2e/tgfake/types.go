package tgfake

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The types in this file mirror the Bot API objects
// (https://core.telegram.org/bots/api#available-types) as the fake serialises
// them. Only the fields the fake can produce are present; optional fields use
// omitempty so responses look like Telegram's, which omits absent fields.

// User is the Bot API User object.
type User struct {
	ID           int64  `json:"id"`
	IsBot        bool   `json:"is_bot"`
	FirstName    string `json:"first_name"`
	LastName     string `json:"last_name,omitempty"`
	Username     string `json:"username,omitempty"`
	LanguageCode string `json:"language_code,omitempty"`

	// Returned only by getMe.
	CanJoinGroups           *bool `json:"can_join_groups,omitempty"`
	CanReadAllGroupMessages *bool `json:"can_read_all_group_messages,omitempty"`
	SupportsInlineQueries   *bool `json:"supports_inline_queries,omitempty"`
	CanConnectToBusiness    *bool `json:"can_connect_to_business,omitempty"`
	HasMainWebApp           *bool `json:"has_main_web_app,omitempty"`
	// Topics in private chats (Bot API 9.3, 9.4).
	HasTopicsEnabled          *bool `json:"has_topics_enabled,omitempty"`
	AllowsUsersToCreateTopics *bool `json:"allows_users_to_create_topics,omitempty"`
}

// Chat types as the Bot API spells them.
const (
	ChatPrivate    = "private"
	ChatGroup      = "group"
	ChatSupergroup = "supergroup"
)

// Chat is the Bot API Chat object.
type Chat struct {
	ID        int64  `json:"id"`
	Type      string `json:"type"`
	Title     string `json:"title,omitempty"`
	Username  string `json:"username,omitempty"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	IsForum   bool   `json:"is_forum,omitempty"`
}

// chatFullInfo is what getChat returns since Bot API 7.3: the Chat fields
// plus a few fields Telegram documents as always present.
type chatFullInfo struct {
	Chat
	AccentColorID    int `json:"accent_color_id"`
	MaxReactionCount int `json:"max_reaction_count"`
}

// MessageEntity is the Bot API MessageEntity object. Offsets and lengths are
// in UTF-16 code units, as in Telegram.
type MessageEntity struct {
	Type          string `json:"type"`
	Offset        int    `json:"offset"`
	Length        int    `json:"length"`
	URL           string `json:"url,omitempty"`
	User          *User  `json:"user,omitempty"`
	Language      string `json:"language,omitempty"`
	CustomEmojiID string `json:"custom_emoji_id,omitempty"`
	// UnixTime and DateTimeFormat are a date_time entity's (Bot API 9.5).
	UnixTime       int64  `json:"unix_time,omitempty"`
	DateTimeFormat string `json:"date_time_format,omitempty"`
}

// InlineKeyboardMarkup is the Bot API InlineKeyboardMarkup object.
type InlineKeyboardMarkup struct {
	InlineKeyboard [][]InlineKeyboardButton `json:"inline_keyboard"`
}

// Buttons returns all buttons row by row, for convenient searching.
func (m *InlineKeyboardMarkup) Buttons() []InlineKeyboardButton {
	if m == nil {
		return nil
	}
	var out []InlineKeyboardButton
	for _, row := range m.InlineKeyboard {
		out = append(out, row...)
	}
	return out
}

// Labels returns every button's text, row by row.
func (m *InlineKeyboardMarkup) Labels() []string {
	var out []string
	for _, b := range m.Buttons() {
		out = append(out, b.Text)
	}
	return out
}

// Data returns every button's callback data, row by row.
func (m *InlineKeyboardMarkup) Data() []string {
	var out []string
	for _, b := range m.Buttons() {
		out = append(out, b.CallbackData)
	}
	return out
}

// InlineKeyboardButton is the Bot API InlineKeyboardButton object. String
// pointers distinguish "absent" from "empty", which matters for the
// switch_inline_query fields where an empty query is meaningful.
type InlineKeyboardButton struct {
	Text                         string          `json:"text"`
	URL                          string          `json:"url,omitempty"`
	CallbackData                 string          `json:"callback_data,omitempty"`
	SwitchInlineQuery            *string         `json:"switch_inline_query,omitempty"`
	SwitchInlineQueryCurrentChat *string         `json:"switch_inline_query_current_chat,omitempty"`
	SwitchInlineQueryChosenChat  json.RawMessage `json:"switch_inline_query_chosen_chat,omitempty"`
	LoginURL                     json.RawMessage `json:"login_url,omitempty"`
	WebApp                       json.RawMessage `json:"web_app,omitempty"`
	CopyText                     json.RawMessage `json:"copy_text,omitempty"`
	CallbackGame                 json.RawMessage `json:"callback_game,omitempty"`
	Pay                          bool            `json:"pay,omitempty"`
	// Disabled (Bot API 10.3) makes it a button that does nothing;
	// Style (9.4) colours it: "danger", "success" or "primary".
	Disabled json.RawMessage `json:"disabled,omitempty"`
	Style    string          `json:"style,omitempty"`
}

// Copies is the text a copy_text button copies, "" for another button.
func (b InlineKeyboardButton) Copies() string {
	var c struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(b.CopyText, &c)
	return c.Text
}

// PhotoSize is the Bot API PhotoSize object.
type PhotoSize struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Width        int    `json:"width"`
	Height       int    `json:"height"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Attachment is the common part of the Bot API's Sticker, Voice, Video,
// Audio, Animation and VideoNote objects: what identifies the file, and
// the sticker's type and emoji.
type Attachment struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	Type         string `json:"type,omitempty"`
	Emoji        string `json:"emoji,omitempty"`
	Width        int    `json:"width,omitempty"`
	Height       int    `json:"height,omitempty"`
	Duration     int    `json:"duration,omitempty"`
}

// Contact is the Bot API Contact object.
type Contact struct {
	PhoneNumber string `json:"phone_number"`
	FirstName   string `json:"first_name"`
	UserID      int64  `json:"user_id,omitempty"`
}

// Poll is the Bot API Poll object, as much of it as a bot reads.
type Poll struct {
	ID       string       `json:"id"`
	Question string       `json:"question"`
	Options  []PollOption `json:"options"`
	Type     string       `json:"type"`
}

// PollOption is the Bot API PollOption object.
type PollOption struct {
	Text       string `json:"text"`
	VoterCount int    `json:"voter_count"`
}

// Dice is the Bot API Dice object.
type Dice struct {
	Emoji string `json:"emoji"`
	Value int    `json:"value"`
}

// MessageOrigin is the Bot API MessageOrigin object of a forward from a
// user ("user") or one hiding their account ("hidden_user").
type MessageOrigin struct {
	Type           string `json:"type"`
	Date           int64  `json:"date"`
	SenderUser     *User  `json:"sender_user,omitempty"`
	SenderUserName string `json:"sender_user_name,omitempty"`
}

// Document is the Bot API Document object.
type Document struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileName     string `json:"file_name,omitempty"`
	MimeType     string `json:"mime_type,omitempty"`
	FileSize     int64  `json:"file_size,omitempty"`
}

// Location is the Bot API Location object. LivePeriod, Heading and
// ProximityAlertRadius are a live location's, and only while it is live:
// the Bot API server writes them only while the location has time left
// (JsonLocation, expires_in > 0), so a stopped or expired one reads like a
// static one. LivePeriod counts from the message's date (0x7FFFFFFF: until
// stopped).
type Location struct {
	Latitude             float64 `json:"latitude"`
	Longitude            float64 `json:"longitude"`
	HorizontalAccuracy   float64 `json:"horizontal_accuracy,omitempty"`
	LivePeriod           int     `json:"live_period,omitempty"`
	Heading              int     `json:"heading,omitempty"`
	ProximityAlertRadius int     `json:"proximity_alert_radius,omitempty"`
}

// Message is the Bot API Message object.
type Message struct {
	MessageID       int             `json:"message_id"`
	From            *User           `json:"from,omitempty"`
	Chat            Chat            `json:"chat"`
	Date            int64           `json:"date"`
	EditDate        int64           `json:"edit_date,omitempty"`
	ReplyToMessage  *Message        `json:"reply_to_message,omitempty"`
	Text            string          `json:"text,omitempty"`
	Entities        []MessageEntity `json:"entities,omitempty"`
	Caption         string          `json:"caption,omitempty"`
	CaptionEntities []MessageEntity `json:"caption_entities,omitempty"`
	Photo           []PhotoSize     `json:"photo,omitempty"`
	Document        *Document       `json:"document,omitempty"`
	Location        *Location       `json:"location,omitempty"`
	// The other kinds a user may send (SendKind): a sticker, a voice
	// note, a video, an audio, an animation, a video note, a contact, a
	// poll or a dice.
	Sticker   *Attachment `json:"sticker,omitempty"`
	Voice     *Attachment `json:"voice,omitempty"`
	Video     *Attachment `json:"video,omitempty"`
	Audio     *Attachment `json:"audio,omitempty"`
	Animation *Attachment `json:"animation,omitempty"`
	VideoNote *Attachment `json:"video_note,omitempty"`
	Contact   *Contact    `json:"contact,omitempty"`
	Poll      *Poll       `json:"poll,omitempty"`
	Dice      *Dice       `json:"dice,omitempty"`
	// MediaGroupID is an album's: its photos arrive as messages of their
	// own sharing it (SendAlbum).
	MediaGroupID string `json:"media_group_id,omitempty"`
	// ForwardOrigin is a forwarded message's origin (Forward).
	ForwardOrigin *MessageOrigin        `json:"forward_origin,omitempty"`
	ReplyMarkup   *InlineKeyboardMarkup `json:"reply_markup,omitempty"`
	// MessageThreadID and IsTopicMessage: the message is in that topic.
	MessageThreadID int  `json:"message_thread_id,omitempty"`
	IsTopicMessage  bool `json:"is_topic_message,omitempty"`
	// ReceiverUser and EphemeralMessageID are an ephemeral message's
	// (Bot API 10.2): the one member who sees it, and its number, apart
	// from the chat's message ids (its MessageID is 0).
	ReceiverUser       *User `json:"receiver_user,omitempty"`
	EphemeralMessageID int   `json:"ephemeral_message_id,omitempty"`
	// RichMessage is a rich message's content (Bot API 10.1), which has
	// no Text.
	RichMessage *RichMessage `json:"rich_message,omitempty"`
	// rawText, when set, is the text as a JSON string's inside, written
	// to the bot as it is in place of Text (a stand-in): SendRawText.
	rawText string
}

// MessageRef identifies a message in a chat. Message implements it, and so
// does every type embedding Message (such as BotMessage), so user actions
// accept whichever the test has at hand.
type MessageRef interface {
	Ref() (chatID int64, messageID int)
}

// Ref implements MessageRef.
func (m Message) Ref() (chatID int64, messageID int) { return m.Chat.ID, m.MessageID }

// ReplyToID returns the id of the message this one replies to, or 0.
func (m Message) ReplyToID() int {
	if m.ReplyToMessage == nil {
		return 0
	}
	return m.ReplyToMessage.MessageID
}

// CallbackQuery is the Bot API CallbackQuery object.
type CallbackQuery struct {
	ID           string   `json:"id"`
	From         User     `json:"from"`
	Message      *Message `json:"message,omitempty"`
	ChatInstance string   `json:"chat_instance"`
	Data         string   `json:"data,omitempty"`
}

// Update is the Bot API Update object.
type Update struct {
	UpdateID      int                `json:"update_id"`
	Message       *Message           `json:"message,omitempty"`
	EditedMessage *Message           `json:"edited_message,omitempty"`
	CallbackQuery *CallbackQuery     `json:"callback_query,omitempty"`
	MyChatMember  *ChatMemberUpdated `json:"my_chat_member,omitempty"`
	// StoppedMessageGeneration: the user pressed a draft's stop button
	// (Bot API 10.3).
	StoppedMessageGeneration *MessageGenerationStopped `json:"stopped_message_generation,omitempty"`
}

// MessageGenerationStopped is the Bot API MessageGenerationStopped object:
// a user stopping the message a draft was showing being written.
type MessageGenerationStopped struct {
	Chat            Chat  `json:"chat"`
	MessageThreadID int   `json:"message_thread_id,omitempty"`
	DraftID         int64 `json:"draft_id"`
}

// MarshalJSON writes the update as Telegram does, with a message's raw
// text (SendRawText) spliced in where encoding/json could not write it.
func (u Update) MarshalJSON() ([]byte, error) {
	type plain Update
	b, err := json.Marshal(plain(u))
	if err != nil || u.Message == nil || u.Message.rawText == "" {
		return b, err
	}
	stand, _ := json.Marshal(u.Message.Text)
	return bytes.Replace(b, stand, []byte(`"`+u.Message.rawText+`"`), 1), nil
}

// ChatMemberUpdated is the Bot API ChatMemberUpdated object: here always
// the bot's own membership (my_chat_member).
type ChatMemberUpdated struct {
	Chat          Chat       `json:"chat"`
	From          User       `json:"from"`
	Date          int64      `json:"date"`
	OldChatMember ChatMember `json:"old_chat_member"`
	NewChatMember ChatMember `json:"new_chat_member"`
}

// BotCommand is the Bot API BotCommand object.
type BotCommand struct {
	Command     string `json:"command"`
	Description string `json:"description"`
}

// BotCommandScope is the Bot API BotCommandScope object. The zero value is
// the "default" scope.
type BotCommandScope struct {
	Type   string `json:"type"`
	ChatID int64  `json:"chat_id,omitempty"`
	UserID int64  `json:"user_id,omitempty"`
}

// Chat member statuses as the Bot API spells them.
const (
	StatusCreator       = "creator"
	StatusAdministrator = "administrator"
	StatusMember        = "member"
	StatusRestricted    = "restricted"
	StatusLeft          = "left"
	StatusKicked        = "kicked"
)

// ChatMember is the Bot API ChatMember object, flattened over its variants:
// fields that a variant does not have are omitted.
type ChatMember struct {
	User        User   `json:"user"`
	Status      string `json:"status"`
	IsAnonymous *bool  `json:"is_anonymous,omitempty"`
	IsMember    *bool  `json:"is_member,omitempty"`
	CanBeEdited *bool  `json:"can_be_edited,omitempty"`
	// Administrator rights; present for creators' and administrators'
	// variants only.
	CanManageChat       *bool  `json:"can_manage_chat,omitempty"`
	CanDeleteMessages   *bool  `json:"can_delete_messages,omitempty"`
	CanManageVideoChats *bool  `json:"can_manage_video_chats,omitempty"`
	CanRestrictMembers  *bool  `json:"can_restrict_members,omitempty"`
	CanPromoteMembers   *bool  `json:"can_promote_members,omitempty"`
	CanChangeInfo       *bool  `json:"can_change_info,omitempty"`
	CanInviteUsers      *bool  `json:"can_invite_users,omitempty"`
	CanPinMessages      *bool  `json:"can_pin_messages,omitempty"`
	CanSendMessages     *bool  `json:"can_send_messages,omitempty"`
	UntilDate           *int64 `json:"until_date,omitempty"`
}

// APIError is a Bot API error response. It is also what the call log records
// for failed calls and what FailNextWith injects.
type APIError struct {
	Code        int
	Description string
	// RetryAfter is sent as parameters.retry_after when non-zero.
	RetryAfter int
	// proxy marks an error of the reverse proxy in front of the Bot API
	// (see ProxyError): it is answered as an HTML page, not as JSON.
	proxy bool
}

func (e *APIError) Error() string {
	return fmt.Sprintf("telegram: %s (%d)", e.Description, e.Code)
}

func (e *APIError) MarshalJSON() ([]byte, error) {
	type params struct {
		RetryAfter int `json:"retry_after,omitempty"`
	}
	out := struct {
		OK          bool    `json:"ok"`
		ErrorCode   int     `json:"error_code"`
		Description string  `json:"description"`
		Parameters  *params `json:"parameters,omitempty"`
	}{ErrorCode: e.Code, Description: e.Description}
	if e.RetryAfter > 0 {
		out.Parameters = &params{RetryAfter: e.RetryAfter}
	}
	return json.Marshal(out)
}
