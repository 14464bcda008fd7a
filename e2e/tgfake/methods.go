package tgfake

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

type methodSpec struct {
	name   string // canonical spelling, for the call log
	handle func(*Server, *request) (any, *APIError)
}

// methods maps lower-cased method names to handlers: Telegram matches
// method names case-insensitively.
var methods = func() map[string]methodSpec {
	list := []methodSpec{
		{"getMe", getMe},
		{"getUpdates", getUpdates},
		{"getWebhookInfo", getWebhookInfo},
		{"setWebhook", setWebhook},
		{"deleteWebhook", deleteWebhook},
		{"sendMessage", sendMessage},
		{"sendPhoto", sendPhoto},
		{"sendDocument", sendDocument},
		{"getFile", getFile},
		{"editMessageText", editMessageText},
		{"editMessageCaption", editMessageCaption},
		{"editMessageReplyMarkup", editMessageReplyMarkup},
		{"deleteMessage", deleteMessage},
		{"answerCallbackQuery", answerCallbackQuery},
		{"sendChatAction", sendChatAction},
		{"sendMessageDraft", sendMessageDraft},
		{"sendRichMessage", sendRichMessage},
		{"sendLocation", sendLocation},
		{"editMessageLiveLocation", editMessageLiveLocation},
		{"stopMessageLiveLocation", stopMessageLiveLocation},
		{"createForumTopic", createForumTopic},
		{"deleteForumTopic", deleteForumTopic},
		{"setMyCommands", setMyCommands},
		{"getMyCommands", getMyCommands},
		{"deleteMyCommands", deleteMyCommands},
		{"getChat", getChat},
		{"getChatMember", getChatMember},
	}
	m := make(map[string]methodSpec, len(list))
	for _, spec := range list {
		m[strings.ToLower(spec.name)] = spec
	}
	return m
}()

func boolPtr(b bool) *bool { return &b }

func getMe(s *Server, _ *request) (any, *APIError) {
	me := s.bot
	me.CanJoinGroups = boolPtr(true)
	me.CanReadAllGroupMessages = boolPtr(s.readAll)
	me.SupportsInlineQueries = boolPtr(false)
	me.CanConnectToBusiness = boolPtr(false)
	me.HasMainWebApp = boolPtr(false)
	if !s.lacks(FeatureTopics) {
		s.mu.Lock()
		me.HasTopicsEnabled, me.AllowsUsersToCreateTopics = boolPtr(s.topicsOn), boolPtr(s.usersCreateTopics)
		s.mu.Unlock()
	}
	return me, nil
}

func getWebhookInfo(s *Server, _ *request) (any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := map[string]any{"url": "", "has_custom_certificate": false, "pending_update_count": len(s.updates)}
	if h := s.hook; h != nil {
		info["url"] = h.url
		info["max_connections"] = h.maxConn
		if h.lastErrDate != 0 {
			info["last_error_date"], info["last_error_message"] = h.lastErrDate, h.lastErrMsg
		}
		if len(h.allowed) > 0 {
			var kinds []string
			for k := range h.allowed {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			info["allowed_updates"] = kinds
		}
	}
	return info, nil
}

func deleteWebhook(s *Server, r *request) (any, *APIError) {
	s.mu.Lock()
	s.dropWebhookLocked(r.boolArg("drop_pending_updates"))
	s.mu.Unlock()
	return true, nil
}

// chatLocked resolves a chat_id parameter: a numeric id or @username of a
// supergroup.
func (s *Server) chatLocked(id string) (*chatState, *APIError) {
	id = strings.TrimSpace(id)
	if id == "" {
		return nil, errDesc(400, DescChatIDEmpty)
	}
	if name, ok := strings.CutPrefix(id, "@"); ok {
		for _, ch := range s.chats {
			if ch.chat.Type != ChatPrivate && ch.chat.Username != "" && strings.EqualFold(ch.chat.Username, name) {
				return ch, nil
			}
		}
		return nil, errDesc(400, DescChatNotFound)
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || s.chats[n] == nil {
		return nil, errDesc(400, DescChatNotFound)
	}
	return s.chats[n], nil
}

// writableLocked applies Telegram's rules for sending to a chat.
func (s *Server) writableLocked(ch *chatState) *APIError {
	if ch.chat.Type != ChatPrivate {
		return s.editableLocked(ch)
	}
	p := s.users[ch.chat.ID]
	switch {
	case p.deactivated:
		return forbidden(DescDeactivated)
	case p.blocked:
		return forbidden(DescBlocked)
	case !p.started:
		return forbidden(DescCantInitiate)
	}
	return nil
}

// editableLocked applies the Bot API server's own access check for editing
// or deleting messages in a chat (check_chat_access with edit rights): the
// user's account must exist and the bot must still be in the group. (The
// fake does not apply Person.Block to edits and deletions.)
func (s *Server) editableLocked(ch *chatState) *APIError {
	kind := "group chat"
	switch ch.chat.Type {
	case ChatPrivate:
		if s.users[ch.chat.ID].deactivated {
			return forbidden(DescDeactivated)
		}
		return nil
	case ChatSupergroup:
		kind = "supergroup chat"
	}
	switch ch.memberStatus(s.bot.ID) {
	case StatusLeft:
		return forbidden("Forbidden: bot is not a member of the " + kind)
	case StatusKicked:
		return forbidden("Forbidden: bot was kicked from the " + kind)
	}
	return nil
}

type replyRef struct {
	messageID    int
	allowMissing bool
}

// parseReplyParams reads reply_parameters or, when it is absent, the
// legacy reply_to_message_id/allow_sending_without_reply.
func parseReplyParams(r *request) (replyRef, *APIError) {
	if !r.has("reply_parameters") {
		return replyRef{messageID: int(max(r.int64Arg("reply_to_message_id"), 0)), allowMissing: r.boolArg("allow_sending_without_reply")}, nil
	}
	raw := r.str("reply_parameters")
	if raw == "" {
		return replyRef{}, nil
	}
	obj, apiErr := decodeObject(raw, "Can't parse reply parameters JSON object", "Object expected as reply parameters")
	if apiErr != nil {
		return replyRef{}, apiErr
	}
	if len(obj) == 0 {
		return replyRef{}, nil
	}
	id, err := obj.reqInt("message_id")
	if err != nil {
		return replyRef{}, badRequest("%s", err.Error())
	}
	allow, err := obj.optBool("allow_sending_without_reply")
	if err != nil {
		return replyRef{}, badRequest("%s", err.Error())
	}
	return replyRef{messageID: int(max(id, 0)), allowMissing: allow}, nil
}

// checkLinkPreview validates link_preview_options; the fake does not render
// previews, but a malformed value fails on Telegram.
func checkLinkPreview(r *request) *APIError {
	raw := r.str("link_preview_options")
	if raw == "" {
		return nil
	}
	obj, apiErr := decodeObject(raw, "Can't parse link preview options JSON object", "Object expected as link preview options")
	if apiErr != nil {
		return apiErr
	}
	for _, f := range []string{"is_disabled", "prefer_small_media", "prefer_large_media", "show_above_text"} {
		if _, err := obj.optBool(f); err != nil {
			return badRequest("%s", err.Error())
		}
	}
	if _, _, err := obj.optString("url"); err != nil {
		return badRequest("%s", err.Error())
	}
	return nil
}

// outgoing is a message the bot is about to send.
type outgoing struct {
	body      formattedText
	isCaption bool
	parseMode string
	// media resolves the attached file once the chat is known to be
	// writable (Telegram checks file ids after the chat). It runs with s.mu
	// held.
	media func() (*SentFile, *APIError)
	// mediaKind is the file's kind ("photo", "document"), whose right to
	// send the chat's permissions may withhold from the bot.
	mediaKind string
	// rich makes it a rich message (sendRichMessage), body unused.
	rich *RichMessage
	// location makes it a location message (sendLocation), body unused;
	// live, a live one.
	location *Location
	live     bool
	// invalid is the content's own error, which Telegram finds after the
	// chat, the topic and the replied message.
	invalid *APIError
}

// deliver runs the checks shared by all send methods and stores the message.
func (s *Server) deliver(r *request, out outgoing) (any, *APIError) {
	reply, apiErr := parseReplyParams(r)
	if apiErr != nil {
		return nil, apiErr
	}
	eph, apiErr := s.parseEphemeral(r)
	if apiErr != nil {
		return nil, apiErr
	}
	markup, apiErr := parseReplyMarkup(r.str("reply_markup"), s.knows)
	if apiErr != nil {
		return nil, apiErr
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	ch, apiErr := s.chatLocked(r.str("chat_id"))
	if apiErr != nil {
		return nil, apiErr
	}
	if apiErr := s.writableLocked(ch); apiErr != nil {
		return nil, apiErr
	}
	if apiErr := s.mayPostMediaLocked(ch, out.mediaKind); apiErr != nil {
		return nil, apiErr
	}
	thread := int(r.int64Arg("message_thread_id"))
	if apiErr := s.threadLocked(ch, thread); apiErr != nil {
		return nil, apiErr
	}
	var receiver User
	if eph != nil {
		if receiver, apiErr = s.ephemeralAllowedLocked(ch, eph); apiErr != nil {
			return nil, apiErr
		}
	}
	var replyTo *Message
	if reply.messageID > 0 {
		if target := ch.live(reply.messageID); target != nil {
			replyTo = target.quoted(s.now().Unix())
		} else if !reply.allowMissing {
			return nil, errDesc(400, DescReplyNotFound)
		}
	}
	if out.invalid != nil {
		return nil, out.invalid
	}
	var file *SentFile
	fileIDs := s.nextFileID
	if out.media != nil {
		if file, apiErr = out.media(); apiErr != nil {
			return nil, apiErr
		}
	}
	if n := utf8.RuneCountInString(out.body.Text); out.isCaption && n > maxCaption {
		return nil, errDesc(400, DescCaptionTooLong)
	} else if !out.isCaption && n > maxMessageText {
		return nil, errDesc(400, DescMessageTooLong)
	}
	if apiErr := s.admitLocked(r, ch.chat.ID); apiErr != nil {
		s.nextFileID = fileIDs // refused without effect: not even a file id is used up
		return nil, apiErr
	}

	bot := s.bot
	m := Message{From: &bot, Date: s.now().Unix(), ReplyToMessage: replyTo, ReplyMarkup: markup.inline,
		MessageThreadID: thread, IsTopicMessage: thread != 0}
	switch {
	case out.rich != nil:
		m.RichMessage = out.rich
	case out.location != nil:
		m.Location = out.location
	case out.isCaption:
		m.Caption, m.CaptionEntities = out.body.Text, out.body.Entities
	default:
		m.Text, m.Entities = out.body.Text, out.body.Entities
	}
	if file != nil {
		switch file.Kind {
		case "photo":
			m.Photo = []PhotoSize{{FileID: file.FileID, FileUniqueID: file.FileUniqueID, Width: file.Width, Height: file.Height, FileSize: file.Size}}
		default:
			m.Document = &Document{FileID: file.FileID, FileUniqueID: file.FileUniqueID, FileName: file.FileName, MimeType: file.MimeType, FileSize: file.Size}
		}
		s.files[file.FileID] = file
	}
	if eph != nil {
		ch.lastEphemeral++
		m.Chat, m.ReceiverUser, m.EphemeralMessageID = ch.chat, &receiver, ch.lastEphemeral
		st := &msgState{msg: m, fromBot: true, parseMode: out.parseMode, reply: markup.reply, file: file, live: out.live}
		ch.ephemeral = append(ch.ephemeral, st)
		s.hub.NotifyLocked()
		return st.msg, nil
	}
	st := ch.addMessage(m, true)
	st.parseMode, st.reply, st.file, st.live = out.parseMode, markup.reply, file, out.live
	if ch.draft != nil {
		ch.draft.ended = true // the bot's message takes the draft's place
	}
	s.hub.NotifyLocked()
	return st.msg, nil
}

func sendMessage(s *Server, r *request) (any, *APIError) {
	text := r.str("text")
	if text == "" {
		return nil, errDesc(400, DescTextEmpty)
	}
	if apiErr := checkLinkPreview(r); apiErr != nil {
		return nil, apiErr
	}
	body, apiErr := s.formatText(text, r.str("parse_mode"), r.str("entities"), false)
	if apiErr != nil {
		return nil, apiErr
	}
	return s.deliver(r, outgoing{body: body, parseMode: r.str("parse_mode")})
}

// editTargetLocked finds the bot message an edit refers to.
func (s *Server) editTargetLocked(r *request) (*chatState, *msgState, *APIError) {
	chatID, id := r.str("chat_id"), r.int64Arg("message_id")
	if chatID == "" && id == 0 {
		if r.str("inline_message_id") == "" {
			return nil, nil, badRequest("Message identifier is not specified")
		}
		// Inline mode is outside what the fake models.
		return nil, nil, badRequest("MESSAGE_ID_INVALID")
	}
	ch, apiErr := s.chatLocked(chatID)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if apiErr := s.editableLocked(ch); apiErr != nil {
		return nil, nil, apiErr
	}
	m := ch.live(int(id))
	if id <= 0 || m == nil {
		return nil, nil, errDesc(400, DescEditNotFound)
	}
	if !m.fromBot {
		return nil, nil, errDesc(400, DescCantEdit)
	}
	return ch, m, nil
}

func sameMarkup(a, b *InlineKeyboardMarkup) bool {
	return marshalCompact(a) == marshalCompact(b)
}

// applyEditLocked records the current version in the history and installs
// the edited one. Per the copy-on-write rule, change builds a new Message.
func (s *Server) applyEditLocked(m *msgState, change func(*Message)) Message {
	m.edits = append(m.edits, m.msg)
	next := m.msg
	change(&next)
	next.EditDate = s.now().Unix()
	m.msg = next
	s.hub.NotifyLocked()
	return next
}

// editMarkup parses reply_markup for an edit. Omitting it removes the inline
// keyboard, as on Telegram, so a bot that edits text without re-sending the
// keyboard loses its buttons here too.
func (s *Server) editMarkup(r *request) (replyMarkup, *APIError) {
	return parseReplyMarkup(r.str("reply_markup"), s.knows)
}

func editMessageText(s *Server, r *request) (any, *APIError) {
	if r.has("rich_message") && s.knows(FeatureRichMessages) {
		if r.str("text") != "" {
			return nil, badRequest("text and rich_message can't be used together (tgfake)")
		}
		return editRichMessage(s, r)
	}
	if r.str("text") == "" {
		return nil, errDesc(400, DescTextEmpty)
	}
	if apiErr := checkLinkPreview(r); apiErr != nil {
		return nil, apiErr
	}
	return editFormatted(s, r, textField)
}

func editMessageCaption(s *Server, r *request) (any, *APIError) {
	return editFormatted(s, r, captionField)
}

func editMessageReplyMarkup(s *Server, r *request) (any, *APIError) {
	markup, apiErr := s.editMarkup(r)
	if apiErr != nil {
		return nil, apiErr
	}
	return s.edit(r, anEdit{markup: markup, markupOnly: true, same: func(Message) bool { return true }, apply: func(*Message) {}})
}

// formattedField is the part of a message editMessageText or
// editMessageCaption replaces, with the parameters that carry it and the
// errors Telegram gives for it.
type formattedField struct {
	param, entities string
	caption         bool
	max             int
	tooLong         string
	lacks           func(Message) *APIError
	get             func(Message) formattedText
	set             func(*Message, formattedText)
}

var (
	textField = formattedField{
		param: "text", entities: "entities", max: maxMessageText, tooLong: DescMessageTooLong,
		lacks: func(m Message) *APIError {
			if m.Text == "" {
				return errDesc(400, DescNoTextToEdit)
			}
			return nil
		},
		get: func(m Message) formattedText { return formattedText{Text: m.Text, Entities: m.Entities} },
		set: func(m *Message, b formattedText) { m.Text, m.Entities = b.Text, b.Entities },
	}
	captionField = formattedField{
		param: "caption", entities: "caption_entities", caption: true, max: maxCaption, tooLong: DescCaptionTooLong,
		lacks: func(m Message) *APIError {
			if m.Photo == nil && m.Document == nil {
				return badRequest("There is no caption in the message to edit")
			}
			return nil
		},
		get: func(m Message) formattedText { return formattedText{Text: m.Caption, Entities: m.CaptionEntities} },
		set: func(m *Message, b formattedText) { m.Caption, m.CaptionEntities = b.Text, b.Entities },
	}
)

// editFormatted replaces a message's text or caption (f says which) and its
// inline keyboard.
func editFormatted(s *Server, r *request, f formattedField) (any, *APIError) {
	body, apiErr := s.formatText(r.str(f.param), r.str("parse_mode"), r.str(f.entities), f.caption)
	if apiErr != nil {
		return nil, apiErr
	}
	markup, apiErr := s.editMarkup(r)
	if apiErr != nil {
		return nil, apiErr
	}
	e := anEdit{
		markup:    markup,
		lacks:     f.lacks,
		same:      func(m Message) bool { return f.get(m).equal(body) },
		parseMode: true,
		apply:     func(m *Message) { f.set(m, body) },
	}
	if utf8.RuneCountInString(body.Text) > f.max {
		e.invalid = errDesc(400, f.tooLong)
	}
	return s.edit(r, e)
}

// anEdit is what one edit call does to the message it targets.
type anEdit struct {
	markup replyMarkup
	// markupOnly: only the keyboard changes, which a bot may do to
	// messages whose content it can no longer edit.
	markupOnly bool
	// lacks, if set, refuses a message that has nothing to edit this way.
	lacks func(Message) *APIError
	// invalid is the new content's own error, reported after the target's.
	invalid *APIError
	// refuse, if set, is the new content's error against the current one.
	refuse func(Message) *APIError
	// same reports whether the content would stay as it is (the keyboard
	// is compared apart).
	same func(Message) bool
	// parseMode keeps the request's parse_mode as the message's.
	parseMode bool
	apply     func(*Message)
}

// edit checks an edit in Telegram's order (the target, whether its content
// may still change, what it lacks, a reply keyboard, the content, a change
// at all, the rate limit) and applies it with the new inline keyboard.
func (s *Server) edit(r *request, e anEdit) (any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, m, apiErr := s.editTargetLocked(r)
	if apiErr != nil {
		return nil, apiErr
	}
	// TDLib's can_edit_message: a location's content is editable only
	// while it is live (a static one never), whatever the edit would set.
	if !e.markupOnly && m.msg.Location != nil && !m.liveAt(s.now().Unix()) {
		return nil, errDesc(400, DescCantEdit)
	}
	if e.lacks != nil {
		if apiErr := e.lacks(m.msg); apiErr != nil {
			return nil, apiErr
		}
	}
	if e.markup.reply != nil {
		return nil, badRequest("Inline keyboard expected")
	}
	if e.invalid != nil {
		return nil, e.invalid
	}
	if e.refuse != nil {
		if apiErr := e.refuse(m.msg); apiErr != nil {
			return nil, apiErr
		}
	}
	if e.same(m.msg) && sameMarkup(m.msg.ReplyMarkup, e.markup.inline) {
		return nil, errDesc(400, DescNotModified)
	}
	if apiErr := s.admitLocked(r, ch.chat.ID); apiErr != nil {
		return nil, apiErr
	}
	if e.parseMode {
		m.parseMode = r.str("parse_mode")
	}
	return s.applyEditLocked(m, func(msg *Message) {
		e.apply(msg)
		msg.ReplyMarkup = e.markup.inline
	}), nil
}

// inChat runs a method's body under the server's lock with the request's
// chat_id resolved to its chat.
func (s *Server) inChat(r *request, body func(ch *chatState) (any, *APIError)) (any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, apiErr := s.chatLocked(r.str("chat_id"))
	if apiErr != nil {
		return nil, apiErr
	}
	return body(ch)
}

func deleteMessage(s *Server, r *request) (any, *APIError) {
	if r.str("chat_id") == "" {
		return nil, badRequest("Chat identifier is not specified")
	}
	id := r.int64Arg("message_id")
	if id <= 0 {
		return nil, badRequest("Message identifier is not specified")
	}
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		if apiErr := s.editableLocked(ch); apiErr != nil {
			return nil, apiErr
		}
		m := ch.live(int(id))
		if m == nil {
			return nil, errDesc(400, DescDeleteNotFound)
		}
		if ch.chat.Type != ChatPrivate && !m.fromBot {
			switch ch.memberStatus(s.bot.ID) {
			case StatusCreator, StatusAdministrator:
			default:
				return nil, errDesc(400, DescCantDelete)
			}
		}
		m.deleted = true
		s.hub.NotifyLocked()
		return true, nil
	})
}

func answerCallbackQuery(s *Server, r *request) (any, *APIError) {
	id := strings.TrimSpace(r.str("callback_query_id"))
	text := r.str("text")
	s.mu.Lock()
	defer s.mu.Unlock()
	cb := s.callbacks[id]
	if cb == nil || cb.answered {
		return nil, errDesc(400, DescQueryInvalid)
	}
	if utf8.RuneCountInString(text) > maxAnswerText {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	cb.answered = true
	cb.answer = CallbackAnswer{
		QueryID:   id,
		Text:      text,
		ShowAlert: r.boolArg("show_alert"),
		URL:       r.str("url"),
		CacheTime: r.intArg("cache_time", 0, 0, 30*24*60*60),
	}
	s.hub.NotifyLocked()
	return true, nil
}

var chatActions = map[string]string{
	"cancel": "cancel", "typing": "typing", "record_video": "record_video", "upload_video": "upload_video",
	"record_audio": "record_voice", "record_voice": "record_voice", "upload_audio": "upload_voice",
	"upload_voice": "upload_voice", "upload_photo": "upload_photo", "upload_document": "upload_document",
	"choose_sticker": "choose_sticker", "pick_up_location": "find_location", "find_location": "find_location",
	"record_video_note": "record_video_note", "upload_video_note": "upload_video_note",
}

func sendChatAction(s *Server, r *request) (any, *APIError) {
	action, ok := chatActions[strings.ToLower(r.str("action"))]
	if !ok {
		return nil, badRequest("Wrong parameter action in request")
	}
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		if apiErr := s.writableLocked(ch); apiErr != nil {
			return nil, apiErr
		}
		thread := int(r.int64Arg("message_thread_id"))
		if apiErr := s.threadLocked(ch, thread); apiErr != nil {
			return nil, apiErr
		}
		ch.actions = append(ch.actions, ChatAction{Action: action, Time: s.now(), MessageThreadID: thread})
		s.hub.NotifyLocked()
		return true, nil
	})
}

func getChat(s *Server, r *request) (any, *APIError) {
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		return chatFullInfo{Chat: ch.chat, MaxReactionCount: 11}, nil
	})
}

func getChatMember(s *Server, r *request) (any, *APIError) {
	userID := r.int64Arg("user_id")
	if userID <= 0 {
		return nil, badRequest("Invalid user_id specified")
	}
	return s.inChat(r, func(ch *chatState) (any, *APIError) {
		var user User
		switch p, ok := s.users[userID]; {
		case userID == s.bot.ID:
			user = s.bot
		case ok:
			user = p.user
		default:
			return nil, badRequest("User not found")
		}
		status := ch.memberStatus(userID)
		if ch.chat.Type == ChatPrivate && userID != ch.chat.ID && userID != s.bot.ID {
			status = StatusLeft
		}
		return chatMember(user, status), nil
	})
}

func chatMember(u User, status string) ChatMember {
	cm := ChatMember{User: u, Status: status}
	yes, no := boolPtr(true), boolPtr(false)
	switch status {
	case StatusCreator:
		cm.IsAnonymous = no
	case StatusAdministrator:
		cm.CanBeEdited, cm.IsAnonymous = no, no
		cm.CanManageChat, cm.CanDeleteMessages, cm.CanManageVideoChats = yes, yes, yes
		cm.CanRestrictMembers, cm.CanPromoteMembers, cm.CanChangeInfo = yes, no, yes
		cm.CanInviteUsers, cm.CanPinMessages = yes, yes
	case StatusRestricted:
		var forever int64
		cm.IsMember, cm.CanSendMessages, cm.UntilDate = yes, no, &forever
	case StatusKicked:
		var forever int64
		cm.UntilDate = &forever
	}
	return cm
}
