// Package clip shortens text quoted in errors and logs (a provider's
// answer, a prompt) without cutting a rune in two, so that the message
// stays valid UTF-8. It lives apart because the LLM client and its fake
// both quote what they were sent.
package clip

import "unicode/utf8"

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
