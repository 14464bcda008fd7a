package analysis

import (
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// mentionRx finds an @username (Telegram: 5–32 letters, digits, _).
var mentionRx = regexp.MustCompile(`(^|[^\w@])@\w{5,32}\b`)

// Prefilter keeps the messages that pass every filter set: at least MinLen
// characters, an @mention when Mentions, and any keyword (case-insensitive
// substring) when Keywords.
func Prefilter(msgs []GroupMessage, f Filters) []GroupMessage {
	out := make([]GroupMessage, 0, len(msgs))
	for _, m := range msgs {
		if f.MinLen > 0 && utf8.RuneCountInString(strings.TrimSpace(m.Text)) < f.MinLen {
			continue
		}
		if f.Mentions && !mentionRx.MatchString(m.Text) {
			continue
		}
		if len(f.Keywords) > 0 {
			lower := strings.ToLower(m.Text)
			if !slices.ContainsFunc(f.Keywords, func(k string) bool { return strings.Contains(lower, k) }) {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// Batch groups messages by chat and time proximity: within a chat, in date
// order, a gap of more than gap since the previous message, or a batch
// that already holds max messages, starts a new batch. Batches come out
// ordered by their first message's date (then chat), so progress follows
// the conversation.
func Batch(msgs []GroupMessage, gap time.Duration, max int) [][]GroupMessage {
	byChat := map[int64][]GroupMessage{}
	var chats []int64
	for _, m := range msgs {
		if _, ok := byChat[m.ChatID]; !ok {
			chats = append(chats, m.ChatID)
		}
		byChat[m.ChatID] = append(byChat[m.ChatID], m)
	}
	var out [][]GroupMessage
	for _, c := range chats {
		list := byChat[c]
		slices.SortStableFunc(list, func(a, b GroupMessage) int {
			if d := a.Date.Compare(b.Date); d != 0 {
				return d
			}
			return compareInt(a.MessageID, b.MessageID)
		})
		var cur []GroupMessage
		for _, m := range list {
			if len(cur) > 0 && (len(cur) >= max || m.Date.Sub(cur[len(cur)-1].Date) > gap) {
				out = append(out, cur)
				cur = nil
			}
			cur = append(cur, m)
		}
		if len(cur) > 0 {
			out = append(out, cur)
		}
	}
	slices.SortStableFunc(out, func(a, b []GroupMessage) int {
		if d := a[0].Date.Compare(b[0].Date); d != 0 {
			return d
		}
		return compareInt(a[0].ChatID, b[0].ChatID)
	})
	return out
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
