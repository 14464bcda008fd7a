package tgfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// Rich messages (Bot API 10.1): sendRichMessage takes an InputRichMessage
// whose html the server parses into blocks (RichMessage), and
// editMessageText's rich_message replaces a rich message's content. The
// fake parses the part of "Rich HTML style" a bot writes text with
// (paragraphs, headings, lists, quotations, tables, details, footers,
// preformatted blocks and the inline tags) and refuses the rest of the
// documented tags (media, maps, collages, formulas, anchors, references)
// as not modelled; markdown and the blocks of Bot API 10.2 likewise.
// The Bot API documents the limits but not the words of any refusal of a
// rich message, so every one of those descriptions is the fake's own,
// marked "(tgfake)".

// The documented limits of a rich message.
const (
	MaxRichText    = 32768 // characters of text, all blocks together
	MaxRichBlocks  = 500   // blocks, nested ones, list items, table rows included
	MaxRichNesting = 16    // levels of nested formatting and blocks
	MaxRichColumns = 20    // columns of a table
)

// RichMessage is the Bot API RichMessage object, a message's
// rich_message.
type RichMessage struct {
	Blocks []RichBlock `json:"blocks"`
	IsRTL  bool        `json:"is_rtl,omitempty"`
}

// RichBlock is one RichBlock of the kinds the fake parses; Type says
// which, and only that kind's fields are set.
type RichBlock struct {
	// Type: "paragraph", "heading", "pre", "footer", "divider", "list",
	// "blockquote", "table", "details".
	Type string `json:"type"`
	// Text of a paragraph, heading, pre or footer.
	Text *RichText `json:"text,omitempty"`
	// Size of a heading: 1 (<h1>) to 6.
	Size     int    `json:"size,omitempty"`
	Language string `json:"language,omitempty"`
	// Items of a list.
	Items []RichBlockListItem `json:"items,omitempty"`
	// Blocks of a blockquote or details.
	Blocks []RichBlock `json:"blocks,omitempty"`
	Credit *RichText   `json:"credit,omitempty"`
	// Cells of a table, row by row.
	Cells      [][]RichBlockTableCell `json:"cells,omitempty"`
	IsBordered bool                   `json:"is_bordered,omitempty"`
	IsStriped  bool                   `json:"is_striped,omitempty"`
	Caption    *RichText              `json:"caption,omitempty"`
	// Summary of a details block, always shown; IsOpen shows its blocks
	// too.
	Summary *RichText `json:"summary,omitempty"`
	IsOpen  bool      `json:"is_open,omitempty"`
}

// RichBlockListItem is the Bot API RichBlockListItem object.
type RichBlockListItem struct {
	Label  string      `json:"label"`
	Blocks []RichBlock `json:"blocks"`
}

// RichBlockTableCell is the Bot API RichBlockTableCell object.
type RichBlockTableCell struct {
	Text     *RichText `json:"text,omitempty"`
	IsHeader bool      `json:"is_header,omitempty"`
	Colspan  int       `json:"colspan,omitempty"`
	Rowspan  int       `json:"rowspan,omitempty"`
	// Align and Valign are not optional in the Bot API; what a cell with
	// no attribute gets is not documented, and the fake says "left" and
	// "top".
	Align  string `json:"align"`
	Valign string `json:"valign"`
}

// RichText is the Bot API RichText: a plain string, an array of RichText,
// or a typed object around a RichText ("bold", "italic", "url", "date_time"
// …); it marshals to whichever of the three it is.
type RichText struct {
	// Plain is a plain string (no Type, no Parts).
	Plain string
	// Parts is an array (no Type).
	Parts []RichText
	// Type is a typed object's type, Inner its text.
	Type  string
	Inner *RichText
	// URL of a "url"; UnixTime and DateTimeFormat of a "date_time".
	URL            string
	UnixTime       int64
	DateTimeFormat string
}

// MarshalJSON writes the union as the Bot API does.
func (t RichText) MarshalJSON() ([]byte, error) {
	switch {
	case t.Type != "":
		obj := map[string]any{"type": t.Type}
		if t.Inner != nil {
			obj["text"] = t.Inner
		}
		if t.URL != "" {
			obj["url"] = t.URL
		}
		if t.Type == "date_time" {
			obj["unix_time"], obj["date_time_format"] = t.UnixTime, t.DateTimeFormat
		}
		return json.Marshal(obj)
	case t.Parts != nil:
		return json.Marshal(t.Parts)
	}
	return json.Marshal(t.Plain)
}

// UnmarshalJSON reads the union back (a bot's client, the fake's tests).
func (t *RichText) UnmarshalJSON(data []byte) error {
	*t = RichText{}
	switch {
	case len(data) > 0 && data[0] == '"':
		return json.Unmarshal(data, &t.Plain)
	case len(data) > 0 && data[0] == '[':
		if err := json.Unmarshal(data, &t.Parts); err != nil {
			return err
		}
		if t.Parts == nil {
			t.Parts = []RichText{}
		}
		return nil
	}
	var obj struct {
		Type           string    `json:"type"`
		Text           *RichText `json:"text"`
		URL            string    `json:"url"`
		UnixTime       int64     `json:"unix_time"`
		DateTimeFormat string    `json:"date_time_format"`
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return err
	}
	t.Type, t.Inner, t.URL, t.UnixTime, t.DateTimeFormat = obj.Type, obj.Text, obj.URL, obj.UnixTime, obj.DateTimeFormat
	return nil
}

// String is the text as the reader sees it, its formatting dropped.
func (t *RichText) String() string {
	if t == nil {
		return ""
	}
	switch {
	case t.Type != "":
		return t.Inner.String()
	case t.Parts != nil:
		var sb strings.Builder
		for i := range t.Parts {
			sb.WriteString(t.Parts[i].String())
		}
		return sb.String()
	}
	return t.Plain
}

// Find returns the first text of type typ within t (t itself included).
func (t *RichText) Find(typ string) (*RichText, bool) {
	if t == nil {
		return nil, false
	}
	if t.Type == typ {
		return t, true
	}
	if t.Inner != nil {
		if f, ok := t.Inner.Find(typ); ok {
			return f, true
		}
	}
	for i := range t.Parts {
		if f, ok := t.Parts[i].Find(typ); ok {
			return f, true
		}
	}
	return nil, false
}

// Find returns the first block of type typ in blocks, depth first.
func Find(blocks []RichBlock, typ string) (RichBlock, bool) {
	for _, b := range blocks {
		if b.Type == typ {
			return b, true
		}
		if f, ok := Find(b.Blocks, typ); ok {
			return f, true
		}
		for _, it := range b.Items {
			if f, ok := Find(it.Blocks, typ); ok {
				return f, true
			}
		}
	}
	return RichBlock{}, false
}

// Rows is a table's cells as the reader sees them, row by row.
func (b RichBlock) Rows() [][]string {
	out := make([][]string, 0, len(b.Cells))
	for _, row := range b.Cells {
		r := make([]string, 0, len(row))
		for _, c := range row {
			r = append(r, c.Text.String())
		}
		out = append(out, r)
	}
	return out
}

// Shown is what the reader sees of a message: its text, its caption, or
// a rich message's blocks as PlainText.
func (m Message) Shown() string {
	switch {
	case m.RichMessage != nil:
		return m.RichMessage.PlainText()
	case m.Location != nil:
		// The map, as a transcript can show it: where, and whether it
		// moves (a stopped or ended live location shows no period).
		l := m.Location
		if l.LivePeriod == 0 {
			return fmt.Sprintf("[map: %g, %g]", l.Latitude, l.Longitude)
		}
		return fmt.Sprintf("[live map: %g, %g]", l.Latitude, l.Longitude)
	case m.Text == "":
		return m.Caption
	}
	return m.Text
}

// PlainText is a rich message's text as the reader sees it with every
// block open, one block (a table row, a list item) a line.
func (m *RichMessage) PlainText() string {
	if m == nil {
		return ""
	}
	var lines []string
	var walk func([]RichBlock)
	walk = func(blocks []RichBlock) {
		for _, b := range blocks {
			switch b.Type {
			case "table":
				if b.Caption != nil {
					lines = append(lines, b.Caption.String())
				}
				for _, row := range b.Rows() {
					lines = append(lines, strings.Join(row, " | "))
				}
			case "details":
				lines = append(lines, b.Summary.String())
			case "list":
				for _, it := range b.Items {
					walk(it.Blocks)
				}
			case "divider":
				lines = append(lines, "———")
			default:
				if b.Text != nil {
					lines = append(lines, b.Text.String())
				}
			}
			walk(b.Blocks)
			if b.Credit != nil {
				lines = append(lines, b.Credit.String())
			}
		}
	}
	walk(m.Blocks)
	return strings.Join(lines, "\n")
}

// richDesc is a refusal of a rich message's content: the Bot API gives
// none of their words.
func richDesc(format string, args ...any) *APIError {
	return badRequest("can't parse rich message: "+format+" (tgfake)", args...)
}

// parseRichParam reads a rich_message parameter: exactly one of html or
// markdown (blocks since 10.2), is_rtl, skip_entity_detection.
func parseRichParam(raw string, dateTime bool) (*RichMessage, *APIError) {
	if strings.TrimSpace(raw) == "" {
		return nil, badRequest("rich message must be non-empty (tgfake)")
	}
	obj, apiErr := decodeObject(raw, "Can't parse rich message JSON object (tgfake)", "Object expected as rich message (tgfake)")
	if apiErr != nil {
		return nil, apiErr
	}
	htmlText, hasHTML, err := obj.optString("html")
	if err != nil {
		return nil, badRequest("%s", err.Error())
	}
	_, hasMD := obj["markdown"]
	_, hasBlocks := obj["blocks"]
	switch {
	case hasMD && !hasHTML && !hasBlocks:
		return nil, badRequest("the fake models no rich Markdown (tgfake)")
	case hasBlocks && !hasHTML && !hasMD:
		return nil, badRequest("the fake models no rich blocks (tgfake)")
	case !hasHTML || hasMD || hasBlocks:
		return nil, badRequest("exactly one of html or markdown must be used in a rich message (tgfake)")
	}
	rtl, err := obj.optBool("is_rtl")
	if err != nil {
		return nil, badRequest("%s", err.Error())
	}
	if _, err := obj.optBool("skip_entity_detection"); err != nil {
		return nil, badRequest("%s", err.Error())
	}
	blocks, apiErr := parseRichHTML(htmlText, dateTime)
	if apiErr != nil {
		return nil, apiErr
	}
	return &RichMessage{Blocks: blocks, IsRTL: rtl}, nil
}

// richTags are the tags of Rich HTML style the fake parses, and
// richUnmodelled the documented ones it does not.
var (
	richInline = map[string]string{
		"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline", "ins": "underline",
		"s": "strikethrough", "strike": "strikethrough", "del": "strikethrough", "code": "code", "mark": "marked",
		"sub": "subscript", "sup": "superscript", "tg-spoiler": "spoiler", "a": "url", "tg-time": "date_time",
	}
	richUnmodelled = map[string]bool{
		"tg-reference": true, "tg-emoji": true, "img": true, "tg-math": true, "video": true, "audio": true,
		"figure": true, "figcaption": true, "tg-map": true, "tg-collage": true, "tg-slideshow": true,
		"tg-math-block": true, "aside": true, "input": true,
	}
	// richNamedEntities are the only named entities the API takes.
	richNamedEntities = map[string]bool{
		"lt": true, "gt": true, "amp": true, "quot": true, "apos": true, "nbsp": true, "hellip": true,
		"mdash": true, "ndash": true, "lsquo": true, "rsquo": true, "ldquo": true, "rdquo": true,
	}
	namedEntity = regexp.MustCompile(`&([A-Za-z][A-Za-z0-9]*);`)
)

// richNode is a parsed element, before it becomes blocks.
type richNode struct {
	tag   string
	attrs map[string]string
	text  string // a text node's (tag "")
	kids  []*richNode
}

// parseRichHTML parses Rich HTML style into blocks, applying the
// documented limits.
func parseRichHTML(src string, dateTime bool) ([]RichBlock, *APIError) {
	for _, m := range namedEntity.FindAllStringSubmatch(src, -1) {
		if !richNamedEntities[m[1]] {
			return nil, richDesc("unsupported HTML entity \"&%s;\"", m[1])
		}
	}
	root := &richNode{tag: "#root"}
	stack := []*richNode{root}
	z := html.NewTokenizer(strings.NewReader(src))
	chars := 0
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			if !errors.Is(z.Err(), io.EOF) {
				return nil, richDesc("%v", z.Err())
			}
			if len(stack) > 1 {
				return nil, richDesc("unclosed tag \"%s\"", stack[len(stack)-1].tag)
			}
			if chars > MaxRichText {
				return nil, badRequest("rich message is too long (tgfake)")
			}
			blocks, apiErr := richBlocks(root.kids, 1)
			if apiErr != nil {
				return nil, apiErr
			}
			if n := countBlocks(blocks); n > MaxRichBlocks {
				return nil, badRequest("rich message has too many blocks: %d (tgfake)", n)
			}
			if len(blocks) == 0 {
				return nil, badRequest("rich message must be non-empty (tgfake)")
			}
			return blocks, nil
		case html.TextToken:
			t := string(z.Text())
			chars += utf8.RuneCountInString(t)
			top := stack[len(stack)-1]
			top.kids = append(top.kids, &richNode{text: t})
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			tag := string(name)
			n := &richNode{tag: tag, attrs: map[string]string{}}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				n.attrs[string(k)] = string(v)
			}
			if apiErr := richKnown(tag); apiErr != nil {
				return nil, apiErr
			}
			if tag == "tg-time" && !dateTime {
				// As in text: a server without date_time entities (older
				// than Bot API 9.5) does not know the tag.
				return nil, badRequest("can't parse rich message: Unsupported start tag \"tg-time\" (tgfake)")
			}
			top := stack[len(stack)-1]
			top.kids = append(top.kids, n)
			if tt == html.StartTagToken && tag != "br" && tag != "hr" {
				if len(stack) > MaxRichNesting {
					return nil, badRequest("rich message is nested too deeply (tgfake)")
				}
				stack = append(stack, n)
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			tag := string(name)
			if tag == "br" || tag == "hr" {
				continue
			}
			if len(stack) == 1 || stack[len(stack)-1].tag != tag {
				return nil, richDesc("unexpected end tag \"%s\"", tag)
			}
			stack = stack[:len(stack)-1]
		default:
			return nil, richDesc("unsupported HTML markup")
		}
	}
}

// richKnown refuses a tag the API does not support, or one the fake does
// not model.
func richKnown(tag string) *APIError {
	switch {
	case richInline[tag] != "":
	case richUnmodelled[tag]:
		return badRequest("the fake models no rich tag \"%s\" (tgfake)", tag)
	default:
		switch tag {
		case "br", "hr", "p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "footer", "ul", "ol", "li",
			"blockquote", "cite", "table", "caption", "tr", "th", "td", "details", "summary":
		default:
			return richDesc("unsupported start tag \"%s\"", tag)
		}
	}
	return nil
}

// isRichInline reports whether a node is inline content: text, an inline
// tag or a line break.
func isRichInline(n *richNode) bool {
	return n.tag == "" || n.tag == "br" || richInline[n.tag] != ""
}

// richBlocks turns nodes into blocks: runs of inline content not inside a
// block become paragraphs (whitespace alone between blocks is nothing).
func richBlocks(nodes []*richNode, depth int) ([]RichBlock, *APIError) {
	if depth > MaxRichNesting {
		return nil, badRequest("rich message is nested too deeply (tgfake)")
	}
	var out []RichBlock
	var run []*richNode
	flush := func() *APIError {
		if len(run) == 0 {
			return nil
		}
		t, apiErr := richInlineText(run)
		run = nil
		if apiErr != nil {
			return apiErr
		}
		if strings.TrimSpace(t.String()) != "" {
			out = append(out, RichBlock{Type: "paragraph", Text: t})
		}
		return nil
	}
	for _, n := range nodes {
		if isRichInline(n) {
			run = append(run, n)
			continue
		}
		if apiErr := flush(); apiErr != nil {
			return nil, apiErr
		}
		b, apiErr := richBlock(n, depth)
		if apiErr != nil {
			return nil, apiErr
		}
		out = append(out, b)
	}
	if apiErr := flush(); apiErr != nil {
		return nil, apiErr
	}
	return out, nil
}

// richBlock is one block element.
func richBlock(n *richNode, depth int) (RichBlock, *APIError) {
	inline := func() (*RichText, *APIError) { return richInlineOnly(n) }
	switch n.tag {
	case "p", "footer":
		t, apiErr := inline()
		typ := "paragraph"
		if n.tag == "footer" {
			typ = "footer"
		}
		return RichBlock{Type: typ, Text: t}, apiErr
	case "h1", "h2", "h3", "h4", "h5", "h6":
		t, apiErr := inline()
		return RichBlock{Type: "heading", Text: t, Size: int(n.tag[1] - '0')}, apiErr
	case "pre":
		b := RichBlock{Type: "pre"}
		kids := n.kids
		if len(kids) == 1 && kids[0].tag == "code" {
			if lang, ok := strings.CutPrefix(kids[0].attrs["class"], "language-"); ok {
				b.Language = lang
			}
			kids = kids[0].kids
		}
		t, apiErr := richInlineText(kids)
		b.Text = t
		return b, apiErr
	case "hr":
		return RichBlock{Type: "divider"}, nil
	case "ul", "ol":
		b := RichBlock{Type: "list", Items: []RichBlockListItem{}}
		num := 1
		if s, ok := n.attrs["start"]; ok {
			v, err := strconv.Atoi(s)
			if err != nil {
				return b, richDesc("invalid start of a list %q", s)
			}
			num = v
		}
		for _, k := range n.kids {
			if k.tag == "" && strings.TrimSpace(k.text) == "" {
				continue
			}
			if k.tag != "li" {
				return b, richDesc("a list holds only <li>, not %s", describeNode(k))
			}
			blocks, apiErr := richBlocks(k.kids, depth+1)
			if apiErr != nil {
				return b, apiErr
			}
			label := "•"
			if n.tag == "ol" {
				label = strconv.Itoa(num) + "."
				num++
			}
			b.Items = append(b.Items, RichBlockListItem{Label: label, Blocks: blocks})
		}
		return b, nil
	case "blockquote":
		b := RichBlock{Type: "blockquote"}
		var body []*richNode
		for _, k := range n.kids {
			if k.tag == "cite" {
				t, apiErr := richInlineOnly(k)
				if apiErr != nil {
					return b, apiErr
				}
				b.Credit = t
				continue
			}
			body = append(body, k)
		}
		blocks, apiErr := richBlocks(body, depth+1)
		b.Blocks = blocks
		return b, apiErr
	case "details":
		b := RichBlock{Type: "details"}
		_, b.IsOpen = n.attrs["open"]
		body := n.kids
		for len(body) > 0 && body[0].tag == "" && strings.TrimSpace(body[0].text) == "" {
			body = body[1:]
		}
		if len(body) == 0 || body[0].tag != "summary" {
			return b, richDesc("<details> must begin with <summary>")
		}
		t, apiErr := richInlineOnly(body[0])
		if apiErr != nil {
			return b, apiErr
		}
		b.Summary = t
		blocks, apiErr := richBlocks(body[1:], depth+1)
		b.Blocks = blocks
		return b, apiErr
	case "table":
		return richTable(n)
	}
	return RichBlock{}, richDesc("%s is not a block here", describeNode(n))
}

// richTable is a <table>: an optional <caption>, then rows of cells.
func richTable(n *richNode) (RichBlock, *APIError) {
	b := RichBlock{Type: "table"}
	_, b.IsBordered = n.attrs["bordered"]
	_, b.IsStriped = n.attrs["striped"]
	for _, k := range n.kids {
		switch {
		case k.tag == "" && strings.TrimSpace(k.text) == "":
		case k.tag == "caption":
			t, apiErr := richInlineOnly(k)
			if apiErr != nil {
				return b, apiErr
			}
			b.Caption = t
		case k.tag == "tr":
			var row []RichBlockTableCell
			cols := 0
			for _, c := range k.kids {
				if c.tag == "" && strings.TrimSpace(c.text) == "" {
					continue
				}
				if c.tag != "td" && c.tag != "th" {
					return b, richDesc("a table row holds only <td> and <th>, not %s", describeNode(c))
				}
				// Table cells can contain only inline formatting.
				t, apiErr := richInlineOnly(c)
				if apiErr != nil {
					return b, apiErr
				}
				cell := RichBlockTableCell{Text: t, IsHeader: c.tag == "th", Align: "left", Valign: "top"}
				for _, span := range []struct {
					attr string
					to   *int
				}{{"colspan", &cell.Colspan}, {"rowspan", &cell.Rowspan}} {
					if s, ok := c.attrs[span.attr]; ok {
						v, err := strconv.Atoi(s)
						if err != nil || v < 1 {
							return b, richDesc("invalid %s %q", span.attr, s)
						}
						if v > 1 {
							*span.to = v
						}
					}
				}
				if a, ok := c.attrs["align"]; ok {
					if a != "left" && a != "center" && a != "right" {
						return b, richDesc("invalid align %q", a)
					}
					cell.Align = a
				}
				if a, ok := c.attrs["valign"]; ok {
					if a != "top" && a != "middle" && a != "bottom" {
						return b, richDesc("invalid valign %q", a)
					}
					cell.Valign = a
				}
				cols += max(cell.Colspan, 1)
				row = append(row, cell)
			}
			if cols > MaxRichColumns {
				return b, badRequest("a table of a rich message has more than %d columns (tgfake)", MaxRichColumns)
			}
			b.Cells = append(b.Cells, row)
		default:
			return b, richDesc("a table holds only <caption> and <tr>, not %s", describeNode(k))
		}
	}
	if len(b.Cells) == 0 {
		return b, richDesc("a table must have a row")
	}
	return b, nil
}

// richInlineOnly is an element's content, which may only be inline.
func richInlineOnly(n *richNode) (*RichText, *APIError) {
	for _, k := range n.kids {
		if !isRichInline(k) {
			return nil, richDesc("<%s> can contain only inline formatting, not %s", n.tag, describeNode(k))
		}
	}
	return richInlineText(n.kids)
}

// richInlineText is inline nodes as one RichText.
func richInlineText(nodes []*richNode) (*RichText, *APIError) {
	parts := make([]RichText, 0, len(nodes))
	for _, n := range nodes {
		switch {
		case n.tag == "":
			parts = append(parts, RichText{Plain: n.text})
		case n.tag == "br":
			parts = append(parts, RichText{Plain: "\n"})
		case richInline[n.tag] != "":
			inner, apiErr := richInlineOnly(n)
			if apiErr != nil {
				return nil, apiErr
			}
			t := RichText{Type: richInline[n.tag], Inner: inner}
			switch n.tag {
			case "a":
				href, ok := n.attrs["href"]
				if !ok || href == "" {
					return nil, richDesc("<a> must have href")
				}
				t.URL = href
			case "tg-time":
				unix, err := strconv.ParseInt(n.attrs["unix"], 10, 64)
				if err != nil || unix < 0 {
					return nil, richDesc("invalid Unix time %q in the tag \"tg-time\"", n.attrs["unix"])
				}
				format := n.attrs["format"]
				if !dateTimeFormat.MatchString(format) {
					return nil, richDesc("invalid date and time format %q in the tag \"tg-time\"", format)
				}
				t.UnixTime, t.DateTimeFormat = unix, format
			}
			parts = append(parts, t)
		default:
			return nil, richDesc("%s is not inline", describeNode(n))
		}
	}
	if len(parts) == 1 {
		return &parts[0], nil
	}
	return &RichText{Parts: parts}, nil
}

func describeNode(n *richNode) string {
	if n.tag == "" {
		return fmt.Sprintf("text %q", strings.TrimSpace(n.text))
	}
	return "<" + n.tag + ">"
}

// countBlocks counts blocks as the limit does: nested blocks, list items
// and table rows included.
func countBlocks(blocks []RichBlock) int {
	n := 0
	for _, b := range blocks {
		n += 1 + len(b.Cells) + countBlocks(b.Blocks)
		for _, it := range b.Items {
			n += 1 + countBlocks(it.Blocks)
		}
	}
	return n
}

// sendRichMessage sends a rich message (Bot API 10.1): chat_id and
// rich_message are required; the rest are sendMessage's placing
// parameters. A server older than 10.1 knows no such method.
func sendRichMessage(s *Server, r *request) (any, *APIError) {
	if s.lacks(FeatureRichMessages) {
		return nil, errDesc(404, DescNotFound)
	}
	rich, apiErr := parseRichParam(r.str("rich_message"), s.knows(FeatureDateTime))
	if apiErr != nil {
		return nil, apiErr
	}
	return s.deliver(r, outgoing{rich: rich})
}

// editRichMessage replaces a rich message's content and inline keyboard
// (editMessageText with rich_message). The Bot API does not say whether a
// message may change between text and rich; the fake refuses both ways,
// so a bot that relies on either is caught here.
func editRichMessage(s *Server, r *request) (any, *APIError) {
	rich, apiErr := parseRichParam(r.str("rich_message"), s.knows(FeatureDateTime))
	if apiErr != nil {
		return nil, apiErr
	}
	markup, apiErr := s.editMarkup(r)
	if apiErr != nil {
		return nil, apiErr
	}
	return s.edit(r, anEdit{
		markup: markup,
		lacks: func(m Message) *APIError {
			if m.RichMessage == nil {
				return badRequest("a message of text is not edited to a rich one (tgfake)")
			}
			return nil
		},
		same:  func(m Message) bool { return marshalCompact(m.RichMessage) == marshalCompact(rich) },
		apply: func(m *Message) { m.RichMessage = rich },
	})
}
