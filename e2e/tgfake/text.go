package tgfake

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Telegram's limits for bot messages. Telegram counts Unicode code points
// (TDLib's utf8_length), not UTF-16 units or bytes.
const (
	maxMessageText  = 4096
	maxCaption      = 1024
	maxRawTextBytes = 1 << 15 // the Bot API rejects longer raw parameters before parsing
	maxCallbackData = 64      // bytes
	maxAnswerText   = 200
	// maxEntities is the most formatting entities Telegram keeps in one
	// text: it accepts more and silently drops those past the 100th, so a
	// link or a code span late in a long list is shown as plain text.
	maxEntities = 100
)

// formattedText is text after entity parsing, as Telegram stores it.
type formattedText struct {
	Text     string
	Entities []MessageEntity
}

func (f formattedText) equal(o formattedText) bool {
	if f.Text != o.Text || len(f.Entities) != len(o.Entities) {
		return false
	}
	for i := range f.Entities {
		a, b := f.Entities[i], o.Entities[i]
		if a.Type != b.Type || a.Offset != b.Offset || a.Length != b.Length || a.URL != b.URL ||
			a.Language != b.Language || a.CustomEmojiID != b.CustomEmojiID {
			return false
		}
		if (a.User == nil) != (b.User == nil) || (a.User != nil && a.User.ID != b.User.ID) {
			return false
		}
	}
	return true
}

// utf16Len is the length of s in UTF-16 code units, the unit of entity
// offsets.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// isFirstByte reports whether c starts a UTF-8 sequence. Parsers use it to
// advance the UTF-16 offset per byte, counting 4-byte sequences twice.
func isFirstByte(c byte) bool { return c&0xC0 != 0x80 }

func utf16Step(c byte) int {
	if !isFirstByte(c) {
		return 0
	}
	if c >= 0xF0 {
		return 2
	}
	return 1
}

// parsed is what a parse mode's parser has made of a text so far: the
// plain text, its length in UTF-16 code units (the unit of entity offsets)
// kept in step with every byte written, and the entities.
type parsed struct {
	text []byte
	u16  int
	ents []MessageEntity
}

// add writes one byte of the plain text; a UTF-8 sequence counts at its
// first byte.
func (p *parsed) add(c byte) {
	p.text = append(p.text, c)
	p.u16 += utf16Step(c)
}

// addRune writes r, decoded from an escape.
func (p *parsed) addRune(r rune) {
	p.text = utf8.AppendRune(p.text, r)
	p.u16 += utf16Len(string(r))
}

// done returns the plain text and its entities in Telegram's order.
func (p *parsed) done() (string, []MessageEntity, error) {
	sortEntities(p.ents)
	return string(p.text), p.ents, nil
}

// formatText turns a text parameter into Telegram's stored form: parse_mode
// parsing (or explicit entities), trimming, entity auto-detection. It mirrors
// the order of checks of the Bot API server and TDLib so that the first error
// reported is the one Telegram would report. allowEmpty is true for captions.
func (s *Server) formatText(text, parseMode, entitiesJSON string, allowEmpty bool) (formattedText, *APIError) {
	if len(text) > maxRawTextBytes {
		return formattedText{}, badRequest("Text is too long")
	}
	if !utf8.ValidString(text) {
		return formattedText{}, badRequest("Strings must be encoded in UTF-8")
	}
	var (
		out formattedText
		err error
	)
	mode := strings.ToLower(parseMode)
	switch {
	case text == "" || mode == "" || mode == "none":
		out.Text = text
		out.Entities, err = s.explicitEntities(entitiesJSON)
		if err != nil {
			return formattedText{}, badRequest("Can't parse MessageEntity: %s", err.Error())
		}
	case mode == "html":
		out.Text, out.Entities, err = parseHTMLFor(text, !s.lacks(FeatureDateTime))
	case mode == "markdown":
		out.Text, out.Entities, err = parseMarkdown(text)
	case mode == "markdownv2":
		out.Text, out.Entities, err = parseMarkdownV2(text)
	default:
		return formattedText{}, errDesc(400, DescUnsupportedParse)
	}
	if err != nil {
		return formattedText{}, errDesc(400, DescCantParsePrefix+err.Error())
	}
	for i := range out.Entities {
		s.resolveMention(&out.Entities[i])
	}
	out, ok := trimFormatted(out)
	if !ok {
		if allowEmpty {
			return formattedText{}, nil
		}
		return formattedText{}, badRequest("Text must be non-empty")
	}
	if n := len(out.Entities); n > maxEntities {
		// Refused rather than cut as Telegram cuts it, like an unescaped
		// '&': the reader would lose formatting and links without a word.
		return formattedText{}, errDesc(400, fmt.Sprintf(DescTooManyEntities, n))
	}
	out.Entities = mergeEntities(out.Entities, detectEntities(out.Text))
	return out, nil
}

// resolveMention fills the user of a text_mention from the fake's users, as
// Telegram returns the full User object.
func (s *Server) resolveMention(e *MessageEntity) {
	if e.Type != "text_mention" || e.User == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.users[e.User.ID]; ok {
		u := p.user
		e.User = &u
	}
}

var knownEntityTypes = map[string]bool{
	"mention": true, "hashtag": true, "cashtag": true, "bot_command": true, "url": true, "email": true,
	"phone_number": true, "bold": true, "italic": true, "underline": true, "strikethrough": true,
	"spoiler": true, "blockquote": true, "expandable_blockquote": true, "code": true, "pre": true,
	"text_link": true, "text_mention": true, "custom_emoji": true,
}

// explicitEntities parses an entities/caption_entities parameter. Like the
// Bot API server, a value that is not valid JSON is ignored.
func (s *Server) explicitEntities(raw string) ([]MessageEntity, error) {
	if raw == "" {
		return nil, nil
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, nil //nolint:nilerr // malformed JSON is ignored by Telegram too
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, nil
	}
	var out []MessageEntity
	for _, item := range arr {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("expected an Object")
		}
		o := jsonObject(m)
		typ, err := o.reqString("type")
		if err != nil {
			return nil, err
		}
		off, err := o.reqInt("offset")
		if err != nil {
			return nil, err
		}
		length, err := o.reqInt("length")
		if err != nil {
			return nil, err
		}
		if !knownEntityTypes[typ] {
			return nil, fmt.Errorf("Unsupported type specified")
		}
		e := MessageEntity{Type: typ, Offset: int(off), Length: int(length)}
		switch typ {
		case "text_link":
			if e.URL, err = o.reqString("url"); err != nil {
				return nil, err
			}
		case "pre":
			if e.Language, _, err = o.optString("language"); err != nil {
				return nil, err
			}
		case "custom_emoji":
			if e.CustomEmojiID, err = o.reqString("custom_emoji_id"); err != nil {
				return nil, err
			}
		case "text_mention":
			u, ok, err := o.optObject("user")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("Can't find field \"user\"")
			}
			id, err := u.reqInt("id")
			if err != nil {
				return nil, err
			}
			e.User = &User{ID: id}
		}
		if e.Offset < 0 || e.Length < 0 {
			return nil, fmt.Errorf("Receive an entity with incorrect offset or length")
		}
		out = append(out, e)
	}
	sortEntities(out)
	return out, nil
}

// trimFormatted applies TDLib's fix_formatted_text trimming for bots: empty
// entities and entities past the end are dropped, trailing spaces and
// newlines are cut, and leading ones are cut up to the first entity. It
// reports false when nothing but whitespace is left.
func trimFormatted(f formattedText) (formattedText, bool) {
	text := f.Text
	total := utf16Len(text)
	var ents []MessageEntity
	for _, e := range f.Entities {
		if e.Length <= 0 || e.Offset >= total {
			continue
		}
		if e.Offset+e.Length > total {
			e.Length = total - e.Offset
		}
		ents = append(ents, e)
	}

	end := strings.TrimRight(text, " \n")
	if end == "" {
		return formattedText{}, false
	}
	endU16 := utf16Len(end)
	kept := ents[:0]
	for _, e := range ents {
		if e.Offset >= endU16 {
			continue
		}
		if e.Offset+e.Length > endU16 {
			e.Length = endU16 - e.Offset
		}
		kept = append(kept, e)
	}
	ents = kept

	limit := len(end)
	if len(ents) > 0 {
		limit = ents[0].Offset // leading bytes are ASCII, so bytes == UTF-16 units here
	}
	cut := 0
	for cut < limit && cut < len(end) && (end[cut] == ' ' || end[cut] == '\n') {
		cut++
	}
	for i := range ents {
		ents[i].Offset -= cut
	}
	sortEntities(ents)
	if len(ents) == 0 {
		ents = nil
	}
	return formattedText{Text: end[cut:], Entities: ents}, true
}

// sortEntities orders entities like TDLib: by offset, longer first.
func sortEntities(ents []MessageEntity) {
	sort.SliceStable(ents, func(i, j int) bool {
		if ents[i].Offset != ents[j].Offset {
			return ents[i].Offset < ents[j].Offset
		}
		return ents[i].Length > ents[j].Length
	})
}

// mergeEntities adds auto-detected entities that do not overlap entities
// where Telegram never detects anything (code, pre, links).
func mergeEntities(parsed, detected []MessageEntity) []MessageEntity {
	if len(detected) == 0 {
		return parsed
	}
	out := append([]MessageEntity(nil), parsed...)
	for _, d := range detected {
		clash := false
		for _, p := range parsed {
			switch p.Type {
			case "code", "pre", "text_link", "text_mention", "custom_emoji", "url", "mention", "bot_command":
			default:
				continue
			}
			if d.Offset < p.Offset+p.Length && p.Offset < d.Offset+d.Length {
				clash = true
				break
			}
		}
		if !clash {
			out = append(out, d)
		}
	}
	sortEntities(out)
	return out
}

func isWordByte(c byte) bool {
	return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// isWordRune is TDLib's is_word_character: letters, digits and '_'.
func isWordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func runeBefore(text string, i int) rune {
	if i == 0 {
		return 0
	}
	r, _ := utf8.DecodeLastRuneInString(text[:i])
	return r
}

func runeAt(text string, i int) rune {
	if i >= len(text) {
		return 0
	}
	r, _ := utf8.DecodeRuneInString(text[i:])
	return r
}

// detectEntities finds the entities Telegram recognises in plain text that
// matter for bots, following TDLib's matchers: bot commands ("/cmd",
// "/cmd@bot"), @mentions and http(s) URLs. URL detection is deliberately
// simpler than TDLib's.
func detectEntities(text string) []MessageEntity {
	type span struct {
		typ        string
		begin, end int // byte offsets
	}
	var spans []span
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c == '/':
			prev := runeBefore(text, i)
			if isWordRune(prev) || prev == '/' || prev == '<' || prev == '>' {
				continue
			}
			j := i + 1
			for j < len(text) && isWordByte(text[j]) {
				j++
			}
			if n := j - i - 1; n < 1 || n > 64 {
				continue
			}
			if j < len(text) && text[j] == '@' {
				k := j + 1
				for k < len(text) && isWordByte(text[k]) {
					k++
				}
				if n := k - j - 1; n < 3 || n > 32 {
					continue
				}
				j = k
			}
			if next := runeAt(text, j); isWordRune(next) || next == '/' || next == '<' || next == '>' {
				continue
			}
			spans = append(spans, span{"bot_command", i, j})
			i = j - 1
		case c == '@':
			if isWordRune(runeBefore(text, i)) {
				continue
			}
			j := i + 1
			for j < len(text) && isWordByte(text[j]) {
				j++
			}
			// TDLib also accepts a few reserved 2-3 letter usernames; the fake
			// requires the usual minimum.
			if n := j - i - 1; n < 4 || n > 32 || isWordRune(runeAt(text, j)) {
				continue
			}
			spans = append(spans, span{"mention", i, j})
			i = j - 1
		case c == 'h' || c == 'H':
			if isWordRune(runeBefore(text, i)) {
				continue
			}
			lower := strings.ToLower(text[i:min(len(text), i+8)])
			if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
				continue
			}
			j := i
			for j < len(text) && text[j] > ' ' && text[j] != '<' && text[j] != '>' && text[j] != '"' {
				j++
			}
			for j > i && strings.ContainsRune(".,;:!?)'", rune(text[j-1])) {
				j--
			}
			if _, err := normalizeURL(text[i:j]); err != nil {
				continue
			}
			spans = append(spans, span{"url", i, j})
			i = j - 1
		}
	}
	out := make([]MessageEntity, 0, len(spans))
	for _, sp := range spans {
		off := utf16Len(text[:sp.begin])
		out = append(out, MessageEntity{Type: sp.typ, Offset: off, Length: utf16Len(text[sp.begin:sp.end])})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// normalizeURL validates and normalises an http(s) or tg/ton URL the way
// TDLib's LinkManager::check_link does for buttons and text links, returning
// Telegram's normalised form (scheme added, host lower-cased, "/" path).
func normalizeURL(raw string) (string, error) {
	lower := strings.ToLower(raw)
	for _, scheme := range []string{"tg:", "ton:", "tonsite:"} {
		if strings.HasPrefix(lower, scheme) {
			rest := strings.TrimPrefix(raw[len(scheme):], "//")
			host, query, _ := strings.Cut(rest, "?")
			if host == "" {
				return "", fmt.Errorf("URL host is empty")
			}
			for i := 0; i < len(host); i++ {
				c := host[i]
				if !isWordByte(c) && c != '-' && !(scheme == "tonsite:" && c == '.') {
					return "", fmt.Errorf("Unallowed characters in URL host")
				}
			}
			out := strings.TrimSuffix(scheme, ":") + "://" + strings.ToLower(host)
			if query != "" {
				out += "?" + query
			}
			return out, nil
		}
	}
	protocol := "http://"
	rest := raw
	if i := strings.IndexAny(raw, ":/?#@[]"); i >= 0 && strings.HasPrefix(raw[i:], "://") {
		switch strings.ToLower(raw[:i]) {
		case "http":
		case "https":
			protocol = "https://"
		default:
			return "", fmt.Errorf("Unsupported URL protocol")
		}
		rest = raw[i+3:]
	}
	hostPort, query := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		hostPort, query = rest[:i], rest[i:]
	}
	userinfo, host := "", hostPort
	if i := strings.LastIndexByte(hostPort, '@'); i >= 0 {
		userinfo, host = hostPort[:i], hostPort[i+1:]
	}
	port := ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host, port = host[:i], strings.TrimLeft(host[i+1:], "0")
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 {
			return "", fmt.Errorf("Wrong port number specified in the URL")
		}
	}
	if host == "" {
		return "", fmt.Errorf("URL host is empty")
	}
	if host == "." {
		return "", fmt.Errorf("Host is invalid")
	}
	host = strings.ToLower(host)
	for i := 0; i < len(host); i++ {
		c := host[i]
		if c >= 0x80 || isWordByte(c) || strings.IndexByte(".-!$,~*'();&+=", c) >= 0 {
			continue
		}
		if c == '%' && i+2 < len(host) && isHex(host[i+1]) && isHex(host[i+2]) {
			i += 2
			continue
		}
		return "", fmt.Errorf("Disallowed character in URL host")
	}
	if !strings.Contains(host, ".") && !strings.HasPrefix(host, "[") {
		return "", fmt.Errorf("Wrong HTTP URL")
	}
	query = strings.TrimRight(query, " \t\r\n")
	if query == "" || query[0] != '/' {
		query = "/" + query
	}
	var b strings.Builder
	b.WriteString(protocol)
	if userinfo != "" {
		b.WriteString(userinfo + "@")
	}
	b.WriteString(host)
	if port != "" {
		b.WriteString(":" + port)
	}
	for i := 0; i < len(query); i++ {
		if query[i] <= 0x20 {
			fmt.Fprintf(&b, "%%%02X", query[i])
		} else {
			b.WriteByte(query[i])
		}
	}
	return b.String(), nil
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// linkEntity builds the entity for a text link (HTML <a href>, Markdown
// [text](url)). Like Telegram, tg://user?id=N becomes a text_mention and an
// invalid URL silently produces no entity.
func linkEntity(url string, offset, length int) (MessageEntity, bool) {
	if id, ok := strings.CutPrefix(strings.ToLower(url), "tg://user?id="); ok {
		n, err := strconv.ParseInt(id, 10, 64)
		if err == nil && n > 0 {
			return MessageEntity{Type: "text_mention", Offset: offset, Length: length, User: &User{ID: n}}, true
		}
	}
	norm, err := normalizeURL(url)
	if err != nil {
		return MessageEntity{}, false
	}
	return MessageEntity{Type: "text_link", Offset: offset, Length: length, URL: norm}, true
}

// marshalCompact renders v as JSON for logs and comparisons.
func marshalCompact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<unmarshalable: %v>", err)
	}
	return string(b)
}
