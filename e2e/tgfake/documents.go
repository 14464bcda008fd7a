package tgfake

import (
	"net/http"
	"path"
	"strings"
)

// maxDownloadBytes is the largest file the Bot API lets a bot download
// (getFile refuses larger ones).
const maxDownloadBytes = 20 << 20

// documentsDir is where the fake's file paths live, as the Bot API's
// "documents/file_7.pdf".
const documentsDir = "documents/"

// SendDocument sends a file as this user to a chat, as a Telegram client
// does: the bot receives a message with a document (file_id,
// file_unique_id, file_name, mime_type, file_size) and may download the
// content with getFile and the file URL. It returns the message as the bot
// will receive it.
func (p *Person) SendDocument(chatID int64, fileName, mimeType string, data []byte) Message {
	s := p.srv
	s.t.Helper()
	if len(data) == 0 {
		s.t.Fatalf("tgfake: Telegram clients cannot send an empty file")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := p.chatForLocked(chatID)
	id, unique := s.newFileIDLocked("document")
	f := &SentFile{Kind: "document", FileID: id, FileUniqueID: unique, FileName: fileName, MimeType: mimeType,
		Size: int64(len(data)), Data: append([]byte(nil), data...), Source: "user"}
	s.files[id] = f
	from := p.user
	m := Message{From: &from, Date: s.now().Unix(),
		Document: &Document{FileID: id, FileUniqueID: unique, FileName: fileName, MimeType: mimeType, FileSize: f.Size}}
	return s.postLocked(ch, m)
}

// File is the Bot API File object.
type File struct {
	FileID       string `json:"file_id"`
	FileUniqueID string `json:"file_unique_id"`
	FileSize     int64  `json:"file_size,omitempty"`
	FilePath     string `json:"file_path,omitempty"`
}

// filePath is the path the fake serves a file under: its id, with its
// name's extension as Telegram keeps it.
func filePath(f *SentFile) string {
	return documentsDir + f.FileID + strings.ToLower(path.Ext(f.FileName))
}

// getFile answers as the Bot API: the file's path for the download URL,
// or "file is too big" past 20 MB.
func getFile(s *Server, r *request) (any, *APIError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.files[r.str("file_id")]
	if f == nil || f.Data == nil {
		return nil, badRequest("invalid file_id")
	}
	if f.Size > maxDownloadBytes {
		return nil, badRequest("file is too big")
	}
	return File{FileID: f.FileID, FileUniqueID: f.FileUniqueID, FileSize: f.Size, FilePath: filePath(f)}, nil
}

// serveFile is the download URL, https://api.telegram.org/file/bot<token>/<file_path>:
// the content of a file getFile named, else 404 as Telegram answers.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/file/bot")
	token, p, ok := strings.Cut(rest, "/")
	if !ok || token != s.token || r.Method != http.MethodGet || !strings.HasPrefix(p, documentsDir) {
		http.NotFound(w, r)
		return
	}
	id := strings.TrimPrefix(p, documentsDir)
	id = strings.TrimSuffix(id, path.Ext(id))
	s.mu.Lock()
	f := s.files[id]
	var data []byte
	if f != nil && filePath(f) == p && f.Size <= maxDownloadBytes {
		data = f.Data
	}
	s.mu.Unlock()
	if data == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

// maxUploadBytes is the largest file a bot may upload (sendDocument,
// sendPhoto's own 10 MB aside): Telegram's 50 MB. A larger file is
// refused as the Bot API refuses it, 413 "Request Entity Too Large".
const maxUploadBytes = 50 << 20

// ChatPermissions are a group's default permissions for its members, as
// setChatPermissions sets them: the bot, unless it is an administrator or
// the creator, may send only what they allow.
type ChatPermissions struct {
	CanSendPhotos    bool
	CanSendDocuments bool
}

// SetChatPermissions restricts what a group's members, the bot among them
// unless it is an administrator, may send. Private chats have no
// permissions.
func (s *Server) SetChatPermissions(chatID int64, p ChatPermissions) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := s.groupLocked("SetChatPermissions", chatID)
	if ch == nil {
		return
	}
	ch.perms = &p
	s.hub.NotifyLocked()
}

// mayPostMediaLocked applies a group's permissions to a file of kind the
// bot sends there, with Telegram's wording when they withhold it.
func (s *Server) mayPostMediaLocked(ch *chatState, kind string) *APIError {
	if kind == "" || ch.perms == nil || ch.chat.Type == ChatPrivate {
		return nil
	}
	switch ch.memberStatus(s.bot.ID) {
	case StatusAdministrator, StatusCreator:
		return nil
	}
	allowed := map[string]bool{"photo": ch.perms.CanSendPhotos, "document": ch.perms.CanSendDocuments}
	if !allowed[kind] {
		return badRequest("not enough rights to send %ss to the chat", kind)
	}
	return nil
}
