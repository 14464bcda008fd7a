package tgfake

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The HTML parse mode, following TDLib's parse_html (what the Bot API uses)
// so that error messages match Telegram's word for word. One deliberate
// difference: Telegram silently keeps a '&' that does not start a supported
// entity, but the Bot API documentation requires every such '&' to be
// escaped, and an unescaped '&' usually means user input was inserted
// without html.EscapeString. The fake therefore rejects it. Inside attribute
// values (part of a tag, so not covered by that rule) it is accepted.

var htmlTags = map[string]bool{
	"a": true, "b": true, "strong": true, "i": true, "em": true, "s": true, "strike": true, "del": true,
	"u": true, "ins": true, "tg-spoiler": true, "tg-emoji": true, "tg-time": true, "span": true,
	"pre": true, "code": true, "blockquote": true,
}

// dateTimeFormat is what a date_time entity's format may be: "r" (relative),
// or an optional weekday, date (short d, long D) and time (short t, long
// T), in that order; "" shows the text as it is.
var dateTimeFormat = regexp.MustCompile(`^(r|w?[dD]?[tT]?)$`)

// htmlSpace matches TDLib's is_space, which includes NUL: the parser reads
// past the end of the text as NUL, so the end of input behaves like a space.
func htmlSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == 0 || c == '\v'
}

func isAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// decodeHTMLEntity decodes the character reference starting at text[pos]
// ('&'). It returns the code point and the index after the reference, or
// ok=false if there is no supported reference there. Telegram supports only
// &lt; &gt; &amp; &quot; and numeric references; with strict set the
// terminating ';' is required.
func decodeHTMLEntity(text string, pos int, strict bool) (r rune, next int, ok bool) {
	at := func(i int) byte { return byteAt(text, i) }
	end := pos + 1
	var code int
	if at(end) == '#' {
		end++
		digits := end
		if at(end) == 'x' {
			end++
			digits = end
			for isHex(at(end)) {
				v, _ := strconv.ParseInt(string(at(end)), 16, 32)
				code = code*16 + int(v)
				end++
				if code >= 0x10ffff {
					return 0, 0, false
				}
			}
		} else {
			for at(end) >= '0' && at(end) <= '9' {
				code = code*10 + int(at(end)-'0')
				end++
				if code >= 0x10ffff {
					return 0, 0, false
				}
			}
		}
		if end == digits || code == 0 || end-pos >= 10 {
			return 0, 0, false
		}
		if code >= 0xd800 && code <= 0xdfff {
			// A lone surrogate; Telegram rejects the text later as invalid
			// Unicode, the fake rejects the reference itself.
			return 0, 0, false
		}
	} else {
		for isAlpha(at(end)) {
			end++
		}
		switch text[pos+1 : end] {
		case "lt":
			code = '<'
		case "gt":
			code = '>'
		case "amp":
			code = '&'
		case "quot":
			code = '"'
		default:
			return 0, 0, false
		}
	}
	if at(end) == ';' {
		return rune(code), end + 1, true
	}
	if strict {
		return 0, 0, false
	}
	return rune(code), end, true
}

type htmlOpen struct {
	tag     string
	arg     string
	format  string // <tg-time>'s format
	offset  int    // UTF-16 offset in the result where the entity starts
	bytePos int    // byte offset in the result, for <a> without href
}

// parseHTML parses text in the HTML parse mode and returns the plain text
// and its entities. Errors carry Telegram's description without the
// "Bad Request: can't parse entities: " prefix.
func parseHTML(text string) (string, []MessageEntity, error) { return parseHTMLFor(text, true) }

// parseHTMLFor is parseHTML on a server that knows <tg-time> (Bot API 9.5)
// or, dateTime false, one older that refuses it as an unknown tag.
func parseHTMLFor(text string, dateTime bool) (string, []MessageEntity, error) {
	at := func(i int) byte { return byteAt(text, i) }
	var (
		p     parsed
		stack []htmlOpen
	)
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c == '&' {
			r, next, ok := decodeHTMLEntity(text, i, true)
			if !ok {
				return "", nil, fmt.Errorf("Character '&' at byte offset %d must be escaped as \"&amp;\"", i)
			}
			p.addRune(r)
			i = next - 1
			continue
		}
		if c != '<' {
			p.add(c)
			continue
		}

		begin := i
		i++
		if at(i) != '/' {
			for !htmlSpace(at(i)) && at(i) != '>' {
				i++
			}
			if i >= len(text) {
				return "", nil, fmt.Errorf("Unclosed start tag at byte offset %d", begin)
			}
			tag := strings.ToLower(text[begin+1 : i])
			if !htmlTags[tag] || (tag == "tg-time" && !dateTime) {
				return "", nil, fmt.Errorf("Unsupported start tag \"%s\" at byte offset %d", tag, begin)
			}
			open := htmlOpen{tag: tag, offset: p.u16, bytePos: len(p.text)}
			for at(i) != '>' {
				for i < len(text) && htmlSpace(at(i)) {
					i++
				}
				if at(i) == '>' {
					break
				}
				attrBegin := i
				for !htmlSpace(at(i)) && at(i) != '=' && at(i) != '>' && at(i) != '/' && at(i) != '"' && at(i) != '\'' {
					i++
				}
				attr := text[attrBegin:i]
				if attr == "" {
					return "", nil, fmt.Errorf("Empty attribute name in the tag \"%s\" at byte offset %d", tag, begin)
				}
				for i < len(text) && htmlSpace(at(i)) {
					i++
				}
				if at(i) != '=' {
					if i >= len(text) {
						return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, begin)
					}
					if tag == "blockquote" && attr == "expandable" {
						open.arg = "1"
					}
					continue
				}
				i++
				for i < len(text) && htmlSpace(at(i)) {
					i++
				}
				if i >= len(text) {
					return "", nil, fmt.Errorf("Unclosed start tag \"%s\" at byte offset %d", tag, begin)
				}
				var value string
				if q := at(i); q != '\'' && q != '"' {
					// An unquoted name token: letters, digits, '.', '-';
					// case-insensitive.
					tokenBegin := i
					for isAlnum(at(i)) || at(i) == '.' || at(i) == '-' {
						i++
					}
					value = strings.ToLower(text[tokenBegin:i])
					if !htmlSpace(at(i)) && at(i) != '>' {
						return "", nil, fmt.Errorf("Unexpected end of name token at byte offset %d", tokenBegin)
					}
				} else {
					i++
					var v []byte
					for i < len(text) && text[i] != q {
						if text[i] == '&' {
							if r, next, ok := decodeHTMLEntity(text, i, false); ok {
								v = utf8.AppendRune(v, r)
								i = next
								continue
							}
						}
						v = append(v, text[i])
						i++
					}
					if at(i) == q {
						i++
					}
					value = string(v)
				}
				if i >= len(text) {
					return "", nil, fmt.Errorf("Unclosed start tag at byte offset %d", begin)
				}
				switch {
				case tag == "a" && attr == "href":
					open.arg = value
				case tag == "code" && attr == "class" && strings.HasPrefix(value, "language-"):
					open.arg = value[len("language-"):]
				case tag == "span" && attr == "class" && strings.HasPrefix(value, "tg-"):
					open.arg = value[len("tg-"):]
				case tag == "tg-emoji" && attr == "emoji-id":
					open.arg = value
				case tag == "tg-time" && attr == "unix":
					open.arg = value
				case tag == "tg-time" && attr == "format":
					open.format = value
				case tag == "blockquote" && attr == "expandable":
					open.arg = "1"
				}
			}
			if tag == "span" && open.arg != "spoiler" {
				return "", nil, fmt.Errorf("Tag \"span\" must have class \"tg-spoiler\" at byte offset %d", begin)
			}
			stack = append(stack, open)
			continue
		}

		// An end tag.
		if len(stack) == 0 {
			return "", nil, fmt.Errorf("Unexpected end tag at byte offset %d", begin)
		}
		for !htmlSpace(at(i)) && at(i) != '>' {
			i++
		}
		endTag := strings.ToLower(text[begin+2 : i])
		for i < len(text) && htmlSpace(at(i)) {
			i++
		}
		if at(i) != '>' {
			return "", nil, fmt.Errorf("Unclosed end tag at byte offset %d", begin)
		}
		top := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if endTag != "" && endTag != top.tag {
			return "", nil, fmt.Errorf("Unmatched end tag at byte offset %d, expected \"</%s>\", found \"</%s>\"",
				begin, top.tag, endTag)
		}
		if p.u16 <= top.offset {
			continue
		}
		e, keep, err := htmlEntity(top, p.u16-top.offset, p.text, p.ents)
		if err != nil {
			return "", nil, err
		}
		if keep {
			p.ents = append(p.ents, e)
		}
	}
	if len(stack) > 0 {
		return "", nil, fmt.Errorf("Can't find end tag corresponding to start tag \"%s\"", stack[len(stack)-1].tag)
	}
	for i := range p.ents {
		if p.ents[i].Type == "code" {
			p.ents[i].Language = ""
		}
	}
	return p.done()
}

// htmlEntity turns a closed tag into an entity. For <pre><code class=...>
// Telegram merges the two into one pre entity with a language; that case is
// handled by mutating the previous entity, hence ents is passed in.
func htmlEntity(open htmlOpen, length int, out []byte, ents []MessageEntity) (MessageEntity, bool, error) {
	e := MessageEntity{Offset: open.offset, Length: length}
	last := func() *MessageEntity {
		if len(ents) == 0 {
			return nil
		}
		l := &ents[len(ents)-1]
		if l.Offset == e.Offset && l.Length == e.Length {
			return l
		}
		return nil
	}
	switch open.tag {
	case "b", "strong":
		e.Type = "bold"
	case "i", "em":
		e.Type = "italic"
	case "u", "ins":
		e.Type = "underline"
	case "s", "strike", "del":
		e.Type = "strikethrough"
	case "tg-spoiler", "span":
		e.Type = "spoiler"
	case "tg-time":
		// A time the client shows in its reader's locale and zone (Bot API
		// 9.5), the text what an older client shows. Telegram's wording
		// for a bad unix or format is not known: the fake's says so.
		unix, err := strconv.ParseInt(open.arg, 10, 64)
		if err != nil || unix <= 0 {
			return e, false, fmt.Errorf("Invalid Unix time %q in the tag \"tg-time\" (tgfake)", open.arg)
		}
		if !dateTimeFormat.MatchString(open.format) {
			return e, false, fmt.Errorf("Invalid date and time format %q in the tag \"tg-time\" (tgfake)", open.format)
		}
		e.Type, e.UnixTime, e.DateTimeFormat = "date_time", unix, open.format
	case "tg-emoji":
		id, err := strconv.ParseInt(open.arg, 10, 64)
		if err != nil || id == 0 {
			return e, false, fmt.Errorf("Invalid custom emoji identifier specified")
		}
		e.Type, e.CustomEmojiID = "custom_emoji", strconv.FormatInt(id, 10)
	case "a":
		url := open.arg
		if url == "" {
			url = string(out[open.bytePos:])
		}
		link, ok := linkEntity(url, e.Offset, e.Length)
		return link, ok, nil
	case "pre":
		if l := last(); l != nil && l.Type == "code" && l.Language != "" {
			l.Type = "pre"
			return e, false, nil
		}
		e.Type = "pre"
	case "code":
		if l := last(); l != nil && l.Type == "pre" && open.arg != "" {
			l.Language = open.arg
			return e, false, nil
		}
		e.Type, e.Language = "code", open.arg
	case "blockquote":
		e.Type = "blockquote"
		if open.arg != "" {
			e.Type = "expandable_blockquote"
		}
	}
	return e, true, nil
}
