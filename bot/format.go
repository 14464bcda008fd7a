package bot

import (
	"html"
	"strings"
	"unicode"
	"unicode/utf8"

	internalclip "switchboard/internal/clip"
)

// MaxMessageLen is Telegram's limit on a message's text. Telegram counts the
// text left after parsing entities, in characters; we count UTF-16 units of
// the raw HTML, which are never fewer, so a part we accept Telegram accepts
// too.
const MaxMessageLen = 4096

// MaxMessageEntities is the most formatting entities Telegram keeps in a
// message: it takes more and drops those past the 100th without a word, so
// a long list's last links would read as plain text. Each opening tag is
// at most one entity.
const MaxMessageEntities = 100

// Escape makes a user-, LLM- or HH-originated string safe inside Telegram HTML.
func Escape(s string) string { return html.EscapeString(s) }

// fitMessage keeps a message that is edited in place to one message: the
// views edited in place are built to fit (their budgets, their pages), and
// this is the backstop behind them, since Telegram refuses a longer edit
// outright and the press would seem to do nothing. Losing the tail beats
// losing the edit and its buttons.
func fitMessage(text string) string {
	if utf16Len(text) > MaxMessageLen {
		return Split(text, MaxMessageLen)[0]
	}
	return text
}

func utf16Len(s string) int { return internalclip.UTF16Len(s) }

// Split cuts Telegram HTML into parts of at most limit UTF-16 units of raw
// HTML (tags and entities as written: see MaxMessageLen for why that is the
// safe side of Telegram's count). It cuts at line boundaries first; a line
// too long for a part is cut after the last space that fits, if that is
// past the middle of what fits, else after the last whole character
// (keeping ZWJ sequences, flags, skin tones and combining marks together
// when it can), never inside a tag or an entity. A text without a visible
// character is returned as it is.
//
// Every part is well-formed on its own: the elements open where a part ends
// are closed there, innermost first, and reopened with their original
// opening tags (attributes included) at the start of the next part; these
// tags count toward the limit. A part also holds at most
// MaxMessageEntities opening tags, the reopened ones among them. Newlines
// at the end of a part are dropped, and so are parts without visible text,
// which Telegram refuses.
//
// Reopened tags may take at most half a part, and half its entities, so
// that text deep inside nested elements still fills parts instead of
// trickling out a few characters a message: elements are reopened
// outermost first, and one whose tags do not fit in what is left stays
// closed in that part (its text there loses that formatting). An opening
// tag that does not fit in a part holding only the reopened tags is left
// out with its closing tag. A character or entity that does not fit next
// to the reopened tags goes in without them; only a limit shorter than
// that one character or entity (at most 10 units) makes a part longer than
// limit. Every step consumes input, ends a part or (once a part) gives up
// its reopened tags, so Split terminates on any input. Input Telegram
// would refuse (unbalanced tags) is cut on the same rules, but its parts
// cannot be well-formed.
func Split(text string, limit int) []string {
	if limit <= 0 {
		limit = MaxMessageLen
	}
	s := splitter{limit: limit}
	toks := tokenize(text)
	for len(toks) > 0 {
		n := 1
		for n < len(toks) && toks[n-1].text != "\n" {
			n++
		}
		line := toks[:n]
		toks = toks[n:]
		for len(line) > 0 {
			switch {
			case s.fits(line):
				s.add(line)
				line = nil
			case s.written:
				s.flush()
			default:
				line = line[s.head(line):]
			}
		}
	}
	s.flush()
	if len(s.out) == 0 {
		return []string{text}
	}
	return s.out
}

type tokenKind uint8

const (
	tokText  tokenKind = iota // one character or one entity
	tokOpen                   // an opening tag
	tokClose                  // a closing tag
)

// token is a piece of the input no cut may go inside.
type token struct {
	text  string
	units int // UTF-16 units of text
	kind  tokenKind
	r     rune   // the character a text token stands for; -1 if unknown
	close string // for tokOpen, the closing tag Split writes to close it early
}

func tokenize(text string) []token {
	toks := make([]token, 0, utf8.RuneCountInString(text))
	for i := 0; i < len(text); {
		t := token{kind: tokText, r: -1}
		if n := tagLen(text[i:]); n > 0 {
			t.text = text[i : i+n]
			t.kind = tokOpen
			if t.text[1] == '/' {
				t.kind = tokClose
			} else {
				name := t.text[1:strings.IndexAny(t.text, " \t\r\n\v>")]
				t.close = "</" + name + ">"
			}
		} else if n := entityLen(text[i:]); n > 0 {
			t.text = text[i : i+n]
			if r := []rune(html.UnescapeString(t.text)); len(r) == 1 && string(r) != t.text {
				t.r = r[0]
			}
		} else {
			// An invalid byte stays a token of its own, so the output keeps
			// the input's bytes.
			r, size := utf8.DecodeRuneInString(text[i:])
			t.text, t.r = text[i:i+size], r
		}
		t.units = utf16Len(t.text)
		toks = append(toks, t)
		i += len(t.text)
	}
	return toks
}

// tagLen is the length of the tag s starts with, 0 if none. A '>' inside a
// quoted attribute value does not end the tag, as in Telegram's parser. A
// '<' that starts no tag is taken as a character: Telegram refuses such
// text anyway.
func tagLen(s string) int {
	if len(s) < 3 || s[0] != '<' {
		return 0
	}
	if s[1] == '/' {
		return strings.IndexByte(s, '>') + 1
	}
	if c := s[1] | 0x20; c < 'a' || c > 'z' {
		return 0
	}
	for i := 2; i < len(s); i++ {
		switch s[i] {
		case '>':
			return i + 1
		case '=':
			j := i + 1
			for j < len(s) && strings.IndexByte(" \t\r\n\v", s[j]) >= 0 {
				j++
			}
			if j < len(s) && (s[j] == '"' || s[j] == '\'') {
				k := strings.IndexByte(s[j+1:], s[j])
				if k < 0 {
					return 0
				}
				i = j + 1 + k
			}
		}
	}
	return 0
}

// entityLen is the length of the character reference ("&amp;", "&#128512;")
// s starts with, 0 if none. Telegram's longest is "&#1114111;".
func entityLen(s string) int {
	if s == "" || s[0] != '&' {
		return 0
	}
	for i := 1; i < len(s) && i <= 12; i++ {
		switch c := s[i]; {
		case c == ';' && i > 1:
			return i + 1
		case c == '#' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		default:
			return 0
		}
	}
	return 0
}

const zwj = '\u200d'

// joins reports whether a cut between a and b would split what users see as
// one character: an emoji ZWJ sequence, an emoji with its skin tone or
// variation selector, a letter with its combining marks, CR LF.
func joins(a, b token) bool {
	if a.kind != tokText || b.kind != tokText || a.r < 0 || b.r < 0 {
		return false
	}
	return a.r == zwj || b.r == zwj || a.r == '\r' && b.r == '\n' ||
		unicode.In(b.r, unicode.Mn, unicode.Me, unicode.Mc) ||
		b.r >= 0x1F3FB && b.r <= 0x1F3FF || // skin tones
		b.r >= 0xE0020 && b.r <= 0xE007F // tags of subdivision flags
}

// isRegional reports whether r is a regional indicator; a pair of them is a
// flag.
func isRegional(r rune) bool { return r >= 0x1F1E6 && r <= 0x1F1FF }

// elem is an element open at the current point of the input.
type elem struct {
	open, close string
	units       int  // UTF-16 units of open and close together
	shown       bool // its opening tag is in the current part
}

type splitter struct {
	limit   int
	out     []string
	stack   []elem
	prefix  string // the reopened opening tags the current part starts with
	body    strings.Builder
	used    int  // UTF-16 units of prefix and body
	tags    int  // opening tags in prefix and body (MaxMessageEntities)
	closing int  // UTF-16 units of the closing tags the part would end with
	written bool // body is not empty
	visible bool // body has a character that is not white space
}

// walk simulates adding toks to the current part, reporting after each
// token i the units of the part so far without (used) and with (total) the
// closing tags it would then need; visit returns false to stop. It stops
// by itself before an opening tag the part has no entity left for, as it
// would stop at a unit past the limit.
func (s *splitter) walk(toks []token, visit func(i, used, total int) bool) {
	used, closing, tags := s.used, s.closing, s.tags
	depth := len(s.stack) // elements of s.stack not closed by toks so far
	var opened []int      // closing-tag units of the elements toks opened
	for i, t := range toks {
		switch t.kind {
		case tokOpen:
			if tags++; tags > MaxMessageEntities {
				return
			}
			c := utf16Len(t.close)
			opened = append(opened, c)
			closing += c
			used += t.units
		case tokClose:
			switch {
			case len(opened) > 0:
				closing -= opened[len(opened)-1]
				opened = opened[:len(opened)-1]
				used += t.units
			case depth > 0:
				depth--
				if e := s.stack[depth]; e.shown {
					closing -= utf16Len(e.close)
					used += t.units
				}
			default:
				used += t.units
			}
		default:
			used += t.units
		}
		if !visit(i, used, used+closing) {
			return
		}
	}
}

// fits reports whether all of toks fit in the current part.
func (s *splitter) fits(toks []token) bool {
	ok := false
	s.walk(toks, func(i, used, total int) bool {
		if used > s.limit {
			return false
		}
		ok = i == len(toks)-1 && total <= s.limit
		return true
	})
	return ok
}

// head puts the longest head of line that fits, preferring to cut after a
// space and then between whole characters, into the current part, which
// is empty; it returns how many tokens it consumed, 0 if it made room
// instead.
func (s *splitter) head(line []token) int {
	var best, space, whole int // token counts of candidate heads
	var bestEnd, spaceEnd, wholeEnd, end, regional int
	s.walk(line, func(i, used, total int) bool {
		// Tags make total rise and fall, but used only grows.
		if used > s.limit {
			return false
		}
		t := line[i]
		end += len(t.text)
		if isRegional(t.r) {
			regional++
		} else {
			regional = 0
		}
		if total > s.limit || i+1 == len(line) {
			return true
		}
		best, bestEnd = i+1, end
		if t.text == " " {
			space, spaceEnd = best, end
		}
		if next := line[i+1]; !joins(t, next) && (regional%2 == 0 || !isRegional(next.r)) {
			whole, wholeEnd = best, end
		}
		return true
	})
	n := best
	switch {
	case best == 0:
		return s.overflow(line[0])
	case space > 0 && spaceEnd-1 > bestEnd/2:
		n = space
	case whole > 0 && wholeEnd > bestEnd/2:
		n = whole
	}
	s.add(line[:n])
	return n
}

// overflow handles a token that does not fit even in an empty part.
func (s *splitter) overflow(t token) int {
	switch {
	case t.kind == tokOpen:
		s.stack = append(s.stack, elem{open: t.text, close: t.close, units: t.units + utf16Len(t.close)})
		return 1
	case s.prefix != "":
		for i := range s.stack {
			s.stack[i].shown = false
		}
		s.prefix, s.used, s.closing, s.tags = "", 0, 0, 0
		return 0
	}
	s.add([]token{t})
	return 1
}

func (s *splitter) add(toks []token) {
	for _, t := range toks {
		switch t.kind {
		case tokOpen:
			e := elem{open: t.text, close: t.close, units: t.units + utf16Len(t.close), shown: true}
			s.stack = append(s.stack, e)
			s.closing += utf16Len(e.close)
			s.tags++
		case tokClose:
			if n := len(s.stack); n > 0 {
				e := s.stack[n-1]
				s.stack = s.stack[:n-1]
				if !e.shown {
					continue // its opening tag is not in this part
				}
				s.closing -= utf16Len(e.close)
			}
		default:
			if t.r < 0 || !unicode.IsSpace(t.r) {
				s.visible = true
			}
		}
		s.body.WriteString(t.text)
		s.used += t.units
		s.written = true
	}
}

// flush ends the current part and starts the next one with the elements
// still open.
func (s *splitter) flush() {
	if s.visible {
		var sb strings.Builder
		sb.WriteString(s.prefix)
		sb.WriteString(strings.TrimRight(s.body.String(), "\n"))
		for i := len(s.stack) - 1; i >= 0; i-- {
			if s.stack[i].shown {
				sb.WriteString(s.stack[i].close)
			}
		}
		s.out = append(s.out, sb.String())
	}
	s.body.Reset()
	s.written, s.visible = false, false

	var prefix strings.Builder
	budget := s.limit / 2
	s.closing, s.tags = 0, 0
	for i := range s.stack {
		e := &s.stack[i]
		e.shown = e.units <= budget && s.tags < MaxMessageEntities/2
		if e.shown {
			budget -= e.units
			prefix.WriteString(e.open)
			s.closing += utf16Len(e.close)
			s.tags++
		}
	}
	s.prefix = prefix.String()
	s.used = utf16Len(s.prefix)
}
