package tgfake

import (
	"fmt"
	"strconv"
	"strings"
)

// The Markdown and MarkdownV2 parse modes, following TDLib's parse_markdown
// and parse_markdown_v2 so that what is accepted, what is rejected and the
// error wording all match Telegram.

// byteAt is text[i], or 0 past the end: the parsers look ahead freely.
func byteAt(text string, i int) byte {
	if i < len(text) {
		return text[i]
	}
	return 0
}

// parseMarkdown implements the legacy "Markdown" parse mode.
func parseMarkdown(text string) (string, []MessageEntity, error) {
	n := len(text)
	at := func(i int) byte { return byteAt(text, i) }
	var p parsed
	for i := 0; i < n; i++ {
		c := text[i]
		if c == '\\' && (at(i+1) == '_' || at(i+1) == '*' || at(i+1) == '`' || at(i+1) == '[') {
			i++
			p.add(text[i])
			continue
		}
		if c != '_' && c != '*' && c != '`' && c != '[' {
			p.add(c)
			continue
		}

		begin := i
		endChar := c
		if c == '[' {
			endChar = ']'
		}
		i++
		isPre := false
		lang := ""
		if c == '`' && at(i) == '`' && at(i+1) == '`' {
			isPre = true
			lang, i = preLanguage(text, i+2)
		}
		entOff := p.u16
		for i < n && (text[i] != endChar || (isPre && !(at(i+1) == '`' && at(i+2) == '`'))) {
			p.add(text[i])
			i++
		}
		if i == n {
			return "", nil, fmt.Errorf("Can't find end of the entity starting at byte offset %d", begin)
		}
		if entOff != p.u16 {
			length := p.u16 - entOff
			switch c {
			case '_':
				p.ents = append(p.ents, MessageEntity{Type: "italic", Offset: entOff, Length: length})
			case '*':
				p.ents = append(p.ents, MessageEntity{Type: "bold", Offset: entOff, Length: length})
			case '[':
				var url string
				if at(i+1) != '(' {
					url = text[begin+1 : i]
				} else {
					i += 2
					start := i
					for i < n && text[i] != ')' {
						i++
					}
					url = text[start:i]
				}
				if e, ok := linkEntity(url, entOff, length); ok {
					p.ents = append(p.ents, e)
				}
			case '`':
				switch {
				case !isPre:
					p.ents = append(p.ents, MessageEntity{Type: "code", Offset: entOff, Length: length})
				default:
					p.ents = append(p.ents, MessageEntity{Type: "pre", Offset: entOff, Length: length, Language: lang})
				}
			}
		}
		if isPre {
			i += 2
		}
	}
	return p.done()
}

// skipOneNewline skips a single line break (\n, \r, \r\n or \n\r) at the
// start of a pre block, as Telegram does.
// preLanguage reads what follows a pre block's opening "```" at i: its
// language, the bytes up to a space or '`' when there are some and a
// space (not '`', nor the text's end) follows them, else "". start is
// where the block's text begins, past the language and one line break.
func preLanguage(text string, i int) (lang string, start int) {
	le := i
	for !htmlSpace(byteAt(text, le)) && byteAt(text, le) != '`' {
		le++
	}
	if i != le && le < len(text) && text[le] != '`' {
		lang, i = text[i:le], le
	}
	return lang, skipOneNewline(text, i)
}

func skipOneNewline(text string, i int) int {
	at := func(i int) byte { return byteAt(text, i) }
	if at(i) == '\n' || at(i) == '\r' {
		if (at(i+1) == '\n' || at(i+1) == '\r') && at(i) != at(i+1) {
			return i + 2
		}
		return i + 1
	}
	return i
}

// MarkdownV2 entity kinds, named as TDLib names them in error messages
// ("Can't find end of Bold entity at byte offset 0").
const (
	mdBold          = "Bold"
	mdItalic        = "Italic"
	mdUnderline     = "Underline"
	mdStrike        = "Strikethrough"
	mdSpoiler       = "Spoiler"
	mdCode          = "Code"
	mdPre           = "Pre"
	mdPreCode       = "PreCode"
	mdTextURL       = "TextUrl"
	mdCustomEmoji   = "CustomEmoji"
	mdBlockQuote    = "BlockQuote"
	mdExpandableBQ  = "ExpandableBlockQuote"
	mdReservedChars = "_*[]()~`>#+-=|{}.!\n"
)

var mdBotAPIType = map[string]string{
	mdBold: "bold", mdItalic: "italic", mdUnderline: "underline", mdStrike: "strikethrough",
	mdSpoiler: "spoiler", mdCode: "code", mdPre: "pre", mdPreCode: "pre", mdTextURL: "text_link",
	mdCustomEmoji: "custom_emoji", mdBlockQuote: "blockquote", mdExpandableBQ: "expandable_blockquote",
}

type mdOpen struct {
	kind       string
	arg        string
	offset     int // UTF-16 offset in the result
	byteOffset int // byte offset in the source, for error messages
	beginPos   int // byte offset in the result
}

func mdReserved(c byte) error {
	return fmt.Errorf("Character '%c' is reserved and must be escaped with the preceding '\\'", c)
}

func mdUnclosed(o mdOpen) error {
	return fmt.Errorf("Can't find end of %s entity at byte offset %d", o.kind, o.byteOffset)
}

// parseMarkdownV2 implements the "MarkdownV2" parse mode.
func parseMarkdownV2(text string) (string, []MessageEntity, error) {
	n := len(text)
	at := func(i int) byte { return byteAt(text, i) }
	var (
		p              parsed
		stack          []mdOpen
		haveBlockquote bool
		canStartQuote  = true
	)
	// readURL reads a "(url)" body starting after '(' with backslash escapes.
	readURL := func(i int) (string, int, error) {
		start := i
		var url []byte
		for i < n && text[i] != ')' {
			if text[i] == '\\' && at(i+1) > 0 && at(i+1) <= 126 {
				url = append(url, text[i+1])
				i += 2
				continue
			}
			url = append(url, text[i])
			i++
		}
		if at(i) != ')' {
			return "", i, fmt.Errorf("Can't find end of a URL at byte offset %d", start)
		}
		return string(url), i, nil
	}

	for i := 0; i < n; i++ {
		c := text[i]
		if c == '\\' && at(i+1) > 0 && at(i+1) <= 126 {
			i++
			p.add(text[i])
			if text[i] != '\r' {
				canStartQuote = text[i] == '\n'
			}
			continue
		}

		reserved := mdReservedChars
		if len(stack) > 0 {
			switch stack[len(stack)-1].kind {
			case mdCode, mdPre, mdPreCode:
				reserved = "`"
			}
		}
		if strings.IndexByte(reserved, c) < 0 {
			p.add(c)
			if isFirstByte(c) && c != '\r' {
				canStartQuote = false
			}
			continue
		}

		isEnd := false
		if len(stack) > 0 {
			if haveBlockquote && c == '\n' && (i+1 == n || at(i+1) != '>') {
				isEnd = true
			} else {
				switch stack[len(stack)-1].kind {
				case mdBold:
					isEnd = c == '*'
				case mdItalic:
					isEnd = c == '_' && at(i+1) != '_'
				case mdCode:
					isEnd = c == '`'
				case mdPre, mdPreCode:
					isEnd = c == '`' && at(i+1) == '`' && at(i+2) == '`'
				case mdTextURL, mdCustomEmoji:
					isEnd = c == ']'
				case mdUnderline:
					isEnd = c == '_' && at(i+1) == '_'
				case mdStrike:
					isEnd = c == '~'
				case mdSpoiler:
					isEnd = c == '|' && at(i+1) == '|'
				}
			}
		}

		if !isEnd {
			kind, arg, byteOffset := "", "", i
			switch c {
			case '_':
				kind = mdItalic
				if at(i+1) == '_' {
					kind = mdUnderline
					i++
				}
			case '*':
				kind = mdBold
			case '~':
				kind = mdStrike
			case '|', '!':
				// Two bytes open these: "||" a spoiler, "![" a custom
				// emoji; the first alone is reserved.
				second, opens := byte('|'), mdSpoiler
				if c == '!' {
					second, opens = '[', mdCustomEmoji
				}
				if at(i+1) != second {
					return "", nil, mdReserved(c)
				}
				i++
				kind = opens
			case '[':
				kind = mdTextURL
			case '`':
				if at(i+1) == '`' && at(i+2) == '`' {
					kind = mdPre
					arg, i = preLanguage(text, i+3)
					if arg != "" {
						kind = mdPreCode
					}
					i-- // the loop steps onto the block's text
				} else {
					kind = mdCode
				}
			case '\n':
				p.add('\n')
				canStartQuote = true
				continue
			case '>':
				if !canStartQuote {
					return "", nil, mdReserved(c)
				}
				if haveBlockquote {
					continue // continuation line of the current quote
				}
				kind = mdBlockQuote
				haveBlockquote = true
			default:
				return "", nil, mdReserved(c)
			}
			stack = append(stack, mdOpen{kind: kind, arg: arg, offset: p.u16, byteOffset: byteOffset, beginPos: len(p.text)})
			continue
		}

		top := stack[len(stack)-1]
		kind := top.kind
		if c == '\n' && kind != mdBlockQuote {
			// Only "||" right before the line break may close a spoiler that
			// turns the quote into an expandable one.
			if kind != mdSpoiler || !(top.byteOffset == i-2 ||
				(top.byteOffset == i-3 && len(p.text) != 0 && p.text[len(p.text)-1] == '\r')) {
				return "", nil, mdUnclosed(top)
			}
			stack = stack[:len(stack)-1]
			top = stack[len(stack)-1]
			if top.kind != mdBlockQuote {
				return "", nil, mdUnclosed(top)
			}
			kind = mdExpandableBQ
		}
		e := MessageEntity{Type: mdBotAPIType[kind], Offset: top.offset}
		skip := p.u16 == top.offset
		switch kind {
		case mdUnderline, mdSpoiler:
			i++
		case mdPre, mdPreCode:
			i += 2
			e.Language = top.arg
		case mdTextURL:
			var url string
			if at(i+1) != '(' {
				url = string(p.text[top.beginPos:])
			} else {
				var err error
				if url, i, err = readURL(i + 2); err != nil {
					return "", nil, err
				}
			}
			link, ok := linkEntity(url, top.offset, 0)
			if !ok {
				skip = true
			}
			e = link
		case mdCustomEmoji:
			if at(i+1) != '(' {
				return "", nil, fmt.Errorf("The entity must contain a tg://emoji or tg://time URL")
			}
			url, next, err := readURL(i + 2)
			if err != nil {
				return "", nil, err
			}
			i = next
			id, ok := customEmojiID(url)
			if !ok {
				return "", nil, fmt.Errorf("Invalid tg://emoji or tg://time URL specified")
			}
			e.CustomEmojiID = id
		case mdBlockQuote, mdExpandableBQ:
			haveBlockquote = false
			p.add(text[i])
			canStartQuote = true
			skip = false
		}
		if !skip {
			e.Length = p.u16 - top.offset
			p.ents = append(p.ents, e)
		}
		stack = stack[:len(stack)-1]
	}

	if haveBlockquote && len(stack) > 0 {
		kind := mdBlockQuote
		if top := stack[len(stack)-1]; top.kind == mdSpoiler && top.byteOffset == n-2 {
			stack = stack[:len(stack)-1]
			kind = mdExpandableBQ
		}
		if len(stack) > 0 && stack[len(stack)-1].kind == mdBlockQuote {
			top := stack[len(stack)-1]
			if length := p.u16 - top.offset; length != 0 {
				p.ents = append(p.ents, MessageEntity{Type: mdBotAPIType[kind], Offset: top.offset, Length: length})
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return "", nil, mdUnclosed(stack[len(stack)-1])
	}
	return p.done()
}

// customEmojiID extracts the id from a tg://emoji?id=N link.
func customEmojiID(url string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.ToLower(url), "tg://emoji?id=")
	if !ok {
		return "", false
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id == 0 {
		return "", false
	}
	return strconv.FormatInt(id, 10), true
}
