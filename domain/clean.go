package domain

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// What PostgreSQL cannot store, and what we store instead.
//
// text and jsonb refuse U+0000 (SQLSTATE 22021 in text; an escaped
// "\u0000" in jsonb, 22P05), jsonb an escaped UTF-16 surrogate without its
// pair (22P02), and both bytes that are not UTF-8 (22021). Telegram passes
// on whatever a client sent, and HH and the model may write them too; none
// is ever meaningful text, so each becomes U+FFFD, the replacement
// character — what Go's own JSON decoder makes of a lone surrogate or a
// bad byte — at the edge where the text comes in: intake, the HH client,
// the LLM client (résumé extraction's tidying drops them already).

// Replacement is what an unstorable character becomes.
const Replacement = "\uFFFD"

// CleanText is s as PostgreSQL's text and jsonb can hold it: NUL and bytes
// that are not UTF-8 become U+FFFD. A clean s is returned as it is.
func CleanText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, Replacement), "\x00", Replacement)
}

// CleanJSON returns JSON text as jsonb can hold it, and whether it changed
// anything: each escape jsonb refuses (\u0000, a surrogate half without
// its pair) is rewritten as \ufffd in place, and bytes that are not UTF-8
// become U+FFFD; every other byte is kept, so ids, numbers and key order
// are untouched. Text around the JSON (a model's prose, a fence) is
// treated the same way, harmlessly.
func CleanJSON(raw []byte) ([]byte, bool) {
	valid := utf8.Valid(raw)
	if valid && firstBadEscape(raw, 0) < 0 {
		return raw, false
	}
	out := raw
	if !valid {
		out = bytes.ToValidUTF8(raw, []byte(Replacement))
	} else {
		out = bytes.Clone(raw)
	}
	for at := firstBadEscape(out, 0); at >= 0; at = firstBadEscape(out, at+6) {
		copy(out[at:at+6], `\ufffd`)
	}
	return out, true
}

// firstBadEscape is the index of the first \uXXXX escape at or after from
// that jsonb refuses, or -1. In JSON a backslash stands only inside a
// string, so no string tracking is needed: only an escaped backslash
// ("\\u0000", the text \u0000) must not be read as an escape.
func firstBadEscape(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue
		}
		if b[i+1] != 'u' {
			i++ // \" \\ \n …: the escaped character is no escape itself
			continue
		}
		c, ok := hex4(b, i+2)
		switch {
		case !ok:
			i++ // malformed: the JSON decoder refuses it, not jsonb's concern here
		case c == 0, c >= 0xDC00 && c <= 0xDFFF:
			return i // NUL, or a low half with no high half before it
		case c >= 0xD800 && c <= 0xDBFF:
			if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if lo, ok := hex4(b, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11 // a pair: an emoji, say
					continue
				}
			}
			return i
		default:
			i += 5
		}
	}
	return -1
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var c rune
	for _, h := range b[at : at+4] {
		c <<= 4
		switch {
		case h >= '0' && h <= '9':
			c |= rune(h - '0')
		case h >= 'a' && h <= 'f':
			c |= rune(h-'a') + 10
		case h >= 'A' && h <= 'F':
			c |= rune(h-'A') + 10
		default:
			return 0, false
		}
	}
	return c, true
}
