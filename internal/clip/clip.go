// Package clip shortens text quoted in errors and logs (a provider's
// answer, a prompt) without cutting a rune in two, so that the message
// stays valid UTF-8, and measures text as Telegram does. It lives apart
// because the LLM client and its fake both quote what they were sent, and
// the bot's renderer and the outbox both count Telegram's limits.
package clip

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Clip returns s whole if it has at most n bytes, else its first n bytes,
// backed off to a rune boundary, and "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// UTF16Len is a text's length as Telegram counts it (its message and
// caption limits are in UTF-16 code units, not bytes or runes).
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
