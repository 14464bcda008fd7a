// Package markdown turns the Markdown a language model writes into
// Telegram HTML, or into plain text for places that show one line.
//
// Models (Qwen, Llama, GPT-style) answer in Markdown unless told otherwise,
// and Telegram shows `**bold**` as it is typed. The text is parsed by
// goldmark (CommonMark with GFM strikethrough, tables and task lists) and
// the syntax tree is written out with only what Telegram's HTML parse mode
// accepts:
//
//   - emphasis, strong and strikethrough become <i>, <b> and <s>; headings
//     become bold lines; inline code <code>; code blocks <pre>, with
//     <code class="language-…"> when the fence names a language;
//   - lists become lines with "•" (nested: "◦", "▪") or their numbers,
//     nested items indented; block quotes <blockquote>; a rule "———";
//   - tables become aligned columns in <pre> (a quote cannot hold <pre>,
//     so there the cells are joined by " | ");
//   - links and autolinks become <a href> only for http, https, tg and
//     mailto; any other destination (javascript:, relative paths) leaves
//     the link's text alone; an image is its alt text, linked the same way;
//   - raw HTML in the model's text (a <script>, a <b>) is shown as the
//     characters it is, never passed through, and every text is escaped.
//
// A text with a line that opens more than maxNesting lists or quotes is
// shown as typed, escaped: its rendering would cost the square of its depth.
//
// Telegram nests tags only so far, so the writer never puts a tag inside
// <code> or <pre>, a link inside a link, or a quote inside a quote; every
// tag it opens it closes, innermost first. The result is one string of any
// length; bot.Split cuts it into messages, closing and reopening the tags
// open at each cut.
package markdown

import (
	"bufio"
	"bytes"
	"html"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// parser is safe for concurrent use: goldmark's parser keeps no state
// between Parse calls.
var parser = goldmark.New(goldmark.WithExtensions(
	extension.Strikethrough, extension.Table, extension.TaskList,
)).Parser()

// HTML renders Markdown as Telegram HTML. Text without Markdown comes back
// escaped and otherwise unchanged (line breaks kept). A text whose
// rendering would show nothing (only markup) comes back escaped as typed.
func HTML(src string) string {
	src = strings.ToValidUTF8(src, "\uFFFD")
	if tooDeep(src) {
		return html.EscapeString(strings.TrimSpace(src))
	}
	out := render(src, false)
	if !visible(out) {
		return html.EscapeString(strings.TrimSpace(src))
	}
	return out
}

// Text renders Markdown as plain text without any markup, not escaped: for
// a title or a one-line reason that the caller escapes and clips.
func Text(src string) string {
	src = strings.ToValidUTF8(src, "\uFFFD")
	if tooDeep(src) {
		return strings.TrimSpace(src)
	}
	out := html.UnescapeString(render(src, true))
	if strings.TrimSpace(out) == "" {
		return strings.TrimSpace(src)
	}
	return out
}

// maxNesting is how many list and quote markers one line may open before
// the text is shown as typed. The parse and the writer's copies grow with
// the square of the depth: a model writing "- - - … x" 16 000 deep took 5 s
// to render, and a streamed answer is rendered again at every draft. No
// text a reader can follow nests this deep.
const maxNesting = 16

// tooDeep reports whether a line of src opens more than maxNesting lists or
// quotes ("- ", "* ", "+ ", "1. ", "1) ", ">").
func tooDeep(src string) bool {
	for line := range strings.Lines(src) {
		for depth := 1; ; depth++ {
			line = strings.TrimLeft(line, " \t")
			n := markerLen(line)
			if n == 0 {
				break
			}
			if depth > maxNesting {
				return true
			}
			line = line[n:]
		}
	}
	return false
}

// markerLen is the length of the list or quote marker that line starts
// with, its space included; 0 if it starts with none.
func markerLen(line string) int {
	blank := func(i int) bool { return i < len(line) && (line[i] == ' ' || line[i] == '\t') }
	switch {
	case strings.HasPrefix(line, ">"):
		return 1
	case line != "" && strings.ContainsRune("-*+", rune(line[0])) && blank(1):
		return 2
	}
	n := 0
	for n < len(line) && n < 9 && line[n] >= '0' && line[n] <= '9' {
		n++
	}
	if n > 0 && n < len(line) && (line[n] == '.' || line[n] == ')') && blank(n+1) {
		return n + 2
	}
	return 0
}

func render(src string, plain bool) string {
	source := []byte(src)
	doc := parser.Parse(text.NewReader(source))
	r := &writer{src: source, buf: &bytes.Buffer{}}
	if plain {
		r.noTags = 1
	}
	r.blocks(doc, "\n\n")
	return strings.TrimSpace(r.buf.String())
}

// visible reports whether HTML has a character outside its tags that is
// not white space: Telegram refuses a message without one.
func visible(s string) bool {
	inTag := false
	for _, c := range s {
		switch {
		case c == '<':
			inTag = true
		case c == '>':
			inTag = false
		case !inTag && !unicode.IsSpace(c):
			return true
		}
	}
	return false
}

// writer walks the tree. noTags > 0 writes text only (plain mode, table
// cells); the in* flags keep tags out of where Telegram refuses them.
type writer struct {
	src    []byte
	buf    *bytes.Buffer
	noTags int
	inLink bool
	inCode bool
	quote  bool
}

// wrap writes f's output inside <tag attrs>…</tag>, or bare where tags are
// not allowed; the decision is taken once, so the closing tag always
// matches the opening one.
func (r *writer) wrap(tag, attrs string, f func()) {
	if r.noTags > 0 || r.inCode {
		f()
		return
	}
	r.buf.WriteString("<" + tag + attrs + ">")
	f()
	r.buf.WriteString("</" + tag + ">")
}

// capture returns what f writes instead of writing it.
func (r *writer) capture(f func()) string {
	old := r.buf
	r.buf = &bytes.Buffer{}
	f()
	out := r.buf.String()
	r.buf = old
	return out
}

// escaped writes s as text: entities and backslash escapes resolved as
// CommonMark says, then &, <, > and " escaped.
func (r *writer) escaped(s []byte) {
	w := bufio.NewWriter(r.buf)
	ghtml.DefaultWriter.Write(w, s)
	_ = w.Flush()
}

// literal writes s as the characters it is (code, raw HTML).
func (r *writer) literal(s []byte) {
	r.buf.WriteString(html.EscapeString(strings.ToValidUTF8(string(s), "\uFFFD")))
}

// blocks writes n's block children separated by sep, skipping those that
// render to nothing.
func (r *writer) blocks(n ast.Node, sep string) {
	first := true
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		out := strings.Trim(r.capture(func() { r.block(c) }), "\n")
		if out == "" {
			continue
		}
		if !first {
			r.buf.WriteString(sep)
		}
		first = false
		r.buf.WriteString(out)
	}
}

func (r *writer) block(n ast.Node) {
	switch n := n.(type) {
	case *ast.Paragraph, *ast.TextBlock:
		r.inlines(n)
	case *ast.Heading:
		r.wrap("b", "", func() { r.inlines(n) })
	case *ast.ThematicBreak:
		r.buf.WriteString("———")
	case *ast.CodeBlock:
		r.code(n, "")
	case *ast.FencedCodeBlock:
		r.code(n, language(n.Language(r.src)))
	case *ast.HTMLBlock:
		r.lines(n)
		if n.HasClosure() {
			r.literal(n.ClosureLine.Value(r.src))
		}
	case *ast.Blockquote:
		if r.quote {
			r.blocks(n, "\n")
			return
		}
		r.quote = true
		r.wrap("blockquote", "", func() { r.blocks(n, "\n") })
		r.quote = false
	case *ast.List:
		r.list(n)
	case *east.Table:
		r.table(n)
	default:
		// Anything else goldmark may grow (a link reference definition
		// renders nothing): its blocks, or its inlines.
		if n.Type() == ast.TypeBlock && n.FirstChild() != nil && n.FirstChild().Type() == ast.TypeBlock {
			r.blocks(n, "\n\n")
		} else {
			r.inlines(n)
		}
	}
}

// lines writes a block's source lines as they are.
func (r *writer) lines(n ast.Node) {
	for i := 0; i < n.Lines().Len(); i++ {
		seg := n.Lines().At(i)
		r.literal(seg.Value(r.src))
	}
}

// code writes a code block: <pre>, with the fence's language if any. A
// quote cannot hold a <pre>, so there it is <code>.
func (r *writer) code(n ast.Node, lang string) {
	body := strings.TrimRight(r.capture(func() { r.lines(n) }), "\n")
	if strings.TrimSpace(body) == "" {
		return
	}
	switch {
	case r.quote:
		r.wrap("code", "", func() { r.buf.WriteString(body) })
	case lang != "":
		r.wrap("pre", "", func() {
			r.wrap("code", ` class="language-`+lang+`"`, func() { r.buf.WriteString(body) })
		})
	default:
		r.wrap("pre", "", func() { r.buf.WriteString(body) })
	}
}

// language is the fence's language as Telegram takes it: letters, digits
// and + # . _ - only, so it can never leave its attribute.
func language(info []byte) string {
	var sb strings.Builder
	for _, c := range string(info) {
		if c < utf8.RuneSelf && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("+#._-", c)) {
			sb.WriteRune(c)
		}
		if sb.Len() == 32 {
			break
		}
	}
	return sb.String()
}

var bullets = []string{"•", "◦", "▪"}

// list writes one item a line, its marker first; an item's further lines
// (its other paragraphs, a nested list) are indented under its text.
func (r *writer) list(l *ast.List) {
	depth := 0
	for p := l.Parent(); p != nil; p = p.Parent() {
		if _, ok := p.(*ast.List); ok {
			depth++
		}
	}
	num := l.Start
	first := true
	for item := l.FirstChild(); item != nil; item = item.NextSibling() {
		marker := bullets[depth%len(bullets)]
		if l.IsOrdered() {
			marker = strconv.Itoa(num) + "."
			num++
		}
		sep := "\n"
		if !l.IsTight {
			sep = "\n\n"
		}
		body := strings.Trim(r.capture(func() { r.blocks(item, sep) }), "\n")
		if !first {
			r.buf.WriteString("\n")
		}
		first = false
		r.buf.WriteString(marker + " " + indent(body, "   "))
	}
}

// indent puts pad before every line of s but the first, except empty ones.
func indent(s, pad string) string {
	lines := strings.Split(s, "\n")
	for i := 1; i < len(lines); i++ {
		if lines[i] != "" {
			lines[i] = pad + lines[i]
		}
	}
	return strings.Join(lines, "\n")
}

// table writes a GFM table as aligned columns in <pre> (Telegram has no
// tables); in a quote, or in plain text, as rows of cells joined by " | ".
func (r *writer) table(t *east.Table) {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			r.noTags++
			cells = append(cells, strings.TrimSpace(strings.ReplaceAll(r.capture(func() { r.inlines(c) }), "\n", " ")))
			r.noTags--
		}
		rows = append(rows, cells)
	}
	if r.quote || r.noTags > 0 || r.inCode {
		for i, cells := range rows {
			if i > 0 {
				r.buf.WriteString("\n")
			}
			r.buf.WriteString(strings.Join(cells, " | "))
		}
		return
	}
	var widths []int
	for _, cells := range rows {
		for i, c := range cells {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(html.UnescapeString(c)))
		}
	}
	r.wrap("pre", "", func() {
		for i, cells := range rows {
			if i > 0 {
				r.buf.WriteString("\n")
			}
			var line strings.Builder
			for j, c := range cells {
				if j > 0 {
					line.WriteString(" │ ")
				}
				line.WriteString(c)
				if j < len(cells)-1 {
					line.WriteString(strings.Repeat(" ", widths[j]-utf8.RuneCountInString(html.UnescapeString(c))))
				}
			}
			r.buf.WriteString(strings.TrimRight(line.String(), " "))
			if i == 0 && len(rows) > 1 {
				var rule []string
				for _, w := range widths {
					rule = append(rule, strings.Repeat("─", w))
				}
				r.buf.WriteString("\n" + strings.Join(rule, "─┼─"))
			}
		}
	})
}

func (r *writer) inlines(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		r.inline(c)
	}
}

func (r *writer) inline(n ast.Node) {
	switch n := n.(type) {
	case *ast.Text:
		r.escaped(n.Segment.Value(r.src))
		if n.SoftLineBreak() || n.HardLineBreak() {
			// Chat users read the model's line breaks as it wrote them.
			r.buf.WriteString("\n")
		}
	case *ast.String:
		if n.IsCode() || n.IsRaw() {
			r.literal(n.Value)
		} else {
			r.escaped(n.Value)
		}
	case *ast.Emphasis:
		tag := "i"
		if n.Level >= 2 {
			tag = "b"
		}
		r.wrap(tag, "", func() { r.inlines(n) })
	case *east.Strikethrough:
		r.wrap("s", "", func() { r.inlines(n) })
	case *ast.CodeSpan:
		r.codeSpan(n)
	case *ast.Link:
		r.link(util.URLEscape(n.Destination, true), func() { r.inlines(n) })
	case *ast.AutoLink:
		url := n.URL(r.src)
		if n.AutoLinkType == ast.AutoLinkEmail && !hasPrefixFold(url, "mailto:") {
			url = append([]byte("mailto:"), url...)
		}
		label := n.Label(r.src)
		r.link(util.URLEscape(url, false), func() { r.literal(label) })
	case *ast.Image:
		alt := strings.TrimSpace(r.capture(func() {
			r.noTags++
			r.inlines(n)
			r.noTags--
		}))
		if alt == "" {
			alt = "🖼"
		}
		r.link(util.URLEscape(n.Destination, true), func() { r.buf.WriteString(alt) })
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			r.literal(seg.Value(r.src))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			r.buf.WriteString("☑ ")
		} else {
			r.buf.WriteString("☐ ")
		}
	default:
		r.inlines(n)
	}
}

func (r *writer) codeSpan(n *ast.CodeSpan) {
	var body []byte
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			v := t.Segment.Value(r.src)
			if bytes.HasSuffix(v, []byte("\n")) {
				v = append(bytes.TrimSuffix(v, []byte("\n")), ' ')
			}
			body = append(body, v...)
		}
	}
	// Telegram refuses a link holding code, so in a link it is text.
	if r.inLink {
		r.literal(body)
		return
	}
	was := r.inCode
	r.wrap("code", "", func() {
		r.inCode = true
		r.literal(body)
	})
	r.inCode = was
}

// schemes are the link destinations Telegram opens; any other is dropped.
var schemes = []string{"http://", "https://", "tg://", "mailto:"}

func allowed(url []byte) bool {
	for _, s := range schemes {
		if hasPrefixFold(url, s) && len(url) > len(s) {
			return true
		}
	}
	return false
}

func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

// link writes text inside <a href> when the destination is allowed and a
// link may stand here; otherwise only the text. A link without visible
// text shows its destination.
func (r *writer) link(url []byte, label func()) {
	inner := r.capture(func() {
		was := r.inLink
		r.inLink = true
		label()
		r.inLink = was
	})
	ok := allowed(url) && !r.inLink && !r.inCode && r.noTags == 0
	if !visible(inner) {
		if !ok {
			return
		}
		inner = html.EscapeString(string(url))
	}
	if !ok {
		r.buf.WriteString(inner)
		return
	}
	r.buf.WriteString(`<a href="` + html.EscapeString(string(url)) + `">` + inner + `</a>`)
}
