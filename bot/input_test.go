package bot_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/e2e/tgfake"
)

// until has who send /help in chatID, which the bot answers in private
// and in groups alike, and returns the bot's messages there after
// afterID and before that answer: what it said to what came before, in
// the chat's order (the outbox delivers a chat's messages in order).
func (tb bundle) until(t *testing.T, who *tgfake.Person, chatID int64, afterID int) []tgfake.BotMessage {
	t.Helper()
	marker := who.SendText(chatID, "/help")
	answer := tb.srv.WaitMessageAfter(t, chatID, marker.MessageID, func(m tgfake.BotMessage) bool {
		// /help's answer; in a group, the pointer to the private chat.
		return m.ReplyToID() == 0 || m.ReplyToID() == marker.MessageID
	})
	var out []tgfake.BotMessage
	for _, m := range tb.srv.Messages(chatID) {
		if m.MessageID > afterID && m.MessageID < answer.MessageID {
			out = append(out, m)
		}
	}
	return out
}

const (
	unreadUK = "Такі повідомлення я не читаю: я читаю текст. Напишіть мені словами; /help — усе, що я вмію."
	editRU   = "Правки уже отправленных сообщений я не читаю. Пришлите исправленный текст новым сообщением."
)

// TestUnreadKindsAnsweredInPrivate: a sticker, voice note, video, contact,
// dice, poll, photo, document or location sent in private to a bot with
// no workflow that reads it is answered, in the user's language, as a
// reply to it — not met with silence; an album is answered once. In a
// group nothing is said.
func TestUnreadKindsAnsweredInPrivate(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, nil)
	ola := tb.srv.User(44, "Оля", "uk")
	kinds := []func() tgfake.Message{
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindSticker) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindVoice) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindVideo) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindVideoNote) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindAnimation) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindContact) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindDice) },
		func() tgfake.Message { return ola.SendKind(ola.ID(), tgfake.KindPoll) },
		func() tgfake.Message { return ola.SendPhoto(ola.ID(), "що це?") },
		func() tgfake.Message {
			return ola.SendDocument(ola.ID(), "cv.pdf", "application/pdf", []byte("%PDF-1.4"))
		},
		func() tgfake.Message { return ola.SendLocation(ola.ID(), 50.45, 30.52) },
	}
	for i, send := range kinds {
		sent := send()
		reply := tb.srv.WaitMessageAfter(t, ola.ID(), sent.MessageID, nil)
		require.Equal(t, unreadUK, reply.Text, "kind #%d", i)
		require.Equal(t, sent.MessageID, reply.ReplyToID(), "kind #%d is answered as a reply to it", i)
	}

	album := ola.SendAlbum(ola.ID(), 3, "")
	got := tb.until(t, ola, ola.ID(), album[0].MessageID)
	require.Len(t, got, 1, "an album is answered once")
	require.Equal(t, unreadUK, got[0].Text)
	// Once by the album's own outbox origin, which any replica and any
	// rerun of an item finds written, not by what this process remembers.
	var origins []string
	require.NoError(t, tb.st.Pool().QueryRow(context.Background(),
		`SELECT COALESCE(array_agg(origin), '{}') FROM outbox WHERE origin LIKE 'album:%'`).Scan(&origins))
	require.Len(t, origins, 1, "one answer, written under the album's origin")

	group := tb.srv.Group(-500, "Friends")
	first := ola.SendKind(group.ID, tgfake.KindSticker)
	ola.SendKind(group.ID, tgfake.KindVoice)
	ola.SendKind(group.ID, tgfake.KindPoll)
	ola.SendPhoto(group.ID, "")
	require.Empty(t, tb.until(t, ola, group.ID, first.MessageID-1), "group chatter is the group's")
}

// TestPrivateEditIsTold: an edit of a message sent in private (a
// question, a command) is not read, and the user is told so in their
// language rather than left believing the correction was taken. An edit
// in a group is not answered.
func TestPrivateEditIsTold(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, nil)
	ivan := tb.srv.User(45, "Иван", "ru")
	sent := ivan.SendText(ivan.ID(), "/nosuch")
	first := tb.srv.WaitMessageAfter(t, ivan.ID(), sent.MessageID, nil)
	ivan.Edit(sent, "/help")
	reply := tb.srv.WaitMessageAfter(t, ivan.ID(), first.MessageID, nil)
	require.Equal(t, editRU, reply.Text)
	require.Equal(t, sent.MessageID, reply.ReplyToID())

	group := tb.srv.Group(-501, "Friends")
	said := ivan.SendText(group.ID, "привет")
	ivan.Edit(said, "привет всем")
	require.Empty(t, tb.until(t, ivan, group.ID, said.MessageID))
}

// TestCommandsInAnyCase: a command of ours typed in another case (/HELP,
// /Lang) runs, rather than being called unknown; one addressed to another
// bot is still left alone; /lang's language may come on a line of its own.
func TestCommandsInAnyCase(t *testing.T) {
	t.Parallel()
	tb := setup(t, bot.Config{RateLimit: 1000, RateBurst: 1000}, nil)
	ola := tb.srv.User(44, "Оля", "uk")
	require.Equal(t, "Язык переключён на русский.", tb.ask(t, ola, "/lang\n\nru").Text)
	require.Equal(t, "Мову змінено на українську.", tb.ask(t, ola, "/lang\nuk").Text)
	require.True(t, strings.HasPrefix(tb.ask(t, ola, "/HELP").Text, "Що я вмію"), "/HELP is /help")
	require.Equal(t, "Язык переключён на русский.", tb.ask(t, ola, "/Lang\n\nru").Text)
	require.Equal(t, "Мову змінено на українську.", tb.ask(t, ola, "/LANG@"+tb.srv.Bot().Username+" uk").Text)

	group := tb.srv.Group(-502, "Friends")
	other := ola.SendText(group.ID, "/HELP@OtherBot")
	got := tb.until(t, ola, group.ID, other.MessageID-1)
	require.Empty(t, got, "a command for another bot is not ours")
	mine := ola.SendText(group.ID, "/HELP")
	require.Contains(t, tb.srv.WaitMessageAfter(t, group.ID, mine.MessageID, nil).Text, "/help", "pointed to the private chat")
}
