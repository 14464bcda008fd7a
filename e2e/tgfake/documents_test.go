package tgfake

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sendDocument as a bot uploads it (multipart/form-data, the file in the
// "document" part, the other parameters as form fields) and everything
// Telegram refuses about it: no file, an empty one, one over 50 MB, a
// caption over 1024 characters, a user who never started the bot, a
// group whose permissions withhold documents from the bot.
func TestSendDocumentUpload(t *testing.T) {
	srv := New(t, WithoutLimits())
	alice := startedUser(t, srv, 1001)
	chat := strconv.FormatInt(alice.ID(), 10)
	data := []byte("# Export\n\n> hello\n")

	// As the bot's delivery client sends it: reply_parameters as the JSON
	// text of a form field.
	doc := decodeResult[Message](t, callMultipart(t, srv, "sendDocument", map[string]string{
		"chat_id": chat, "caption": "<b>Your</b> export", "parse_mode": "HTML",
		"reply_parameters": `{"message_id":1,"allow_sending_without_reply":true}`,
	}, "document", "memory-export-2026-11-26.md", data))
	require.Equal(t, "memory-export-2026-11-26.md", doc.Document.FileName)
	require.EqualValues(t, len(data), doc.Document.FileSize)
	require.Equal(t, "Your export", doc.Caption)
	require.Equal(t, 1, doc.ReplyToID())
	files := srv.SentFiles(alice.ID())
	require.Len(t, files, 1)
	require.Equal(t, data, files[0].Data)

	// The bot may download what it uploaded, as any file.
	f := decodeResult[File](t, callJSON(t, srv, "getFile", map[string]any{"file_id": doc.Document.FileID}))
	resp, err := client(t).Get(srv.URL() + "/file/bot" + srv.Token() + "/" + f.FilePath)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, data, got)

	requireError(t, callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": chat}, "", "", nil), 400,
		"Bad Request: there is no document in the request")
	requireError(t, callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": chat}, "document", "empty.json", nil), 400,
		DescFileEmpty)
	requireError(t, callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": chat, "caption": strings.Repeat("я", 1025)},
		"document", "a.json", []byte("{}")), 400, DescCaptionTooLong)
	// 50 MB is the bots' upload limit: one byte over, and a body over it
	// altogether, are refused before anything is sent.
	requireError(t, callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": chat},
		"document", "big.json", make([]byte, maxUploadBytes+1)), 413, DescTooLarge)
	requireError(t, callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": chat},
		"document", "bigger.json", make([]byte, maxRequestBody+1)), 413, DescTooLarge)
	require.Len(t, srv.SentFiles(alice.ID()), 1, "nothing refused was sent")

	// A user who never wrote to the bot cannot be sent anything.
	bob := srv.User(1002, "Bob", "en")
	requireError(t, callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": strconv.FormatInt(bob.ID(), 10)},
		"document", "a.json", []byte("{}")), 403, DescCantInitiate)
}

// In a group the bot sends documents as a member may: the group's
// permissions can withhold them (an administrator bot is exempt), and a
// bot no longer in the group is refused.
func TestSendDocumentGroupRules(t *testing.T) {
	srv := New(t, WithoutLimits())
	team := srv.Supergroup(-1001234567890, "Team", "")
	chat := strconv.FormatInt(team.ID, 10)
	send := func() apiResponse {
		return callMultipart(t, srv, "sendDocument", map[string]string{"chat_id": chat}, "document", "notes.txt", []byte("notes"))
	}
	requireOK(t, send())

	srv.SetChatPermissions(team.ID, ChatPermissions{CanSendPhotos: true})
	requireError(t, send(), 400, "Bad Request: not enough rights to send documents to the chat")
	srv.SetChatMember(team.ID, srv.Bot().ID, StatusAdministrator)
	requireOK(t, send())

	srv.SetChatMember(team.ID, srv.Bot().ID, StatusKicked)
	requireError(t, send(), 403, "Forbidden: bot was kicked from the supergroup chat")
	require.Len(t, srv.SentFiles(team.ID), 2)
}
