package vacancy

import (
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// PlainText reduces HH's HTML (descriptions, snippets with <highlighttext>)
// to plain text for the LLM and for ban-word matching: tags dropped, entities
// decoded, block elements on lines of their own, list items bulleted,
// script and style removed, runs of blank space collapsed.
func PlainText(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return collapse(s)
	}
	z := html.NewTokenizer(strings.NewReader(s))
	var sb strings.Builder
	skip := 0 // inside <script> or <style>
	for {
		switch z.Next() {
		case html.ErrorToken:
			return collapse(sb.String())
		case html.TextToken:
			if skip == 0 {
				sb.Write(z.Text())
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			switch a := atom.Lookup(name); a {
			case atom.Script, atom.Style:
				skip++
			case atom.Li:
				sb.WriteString("\n• ")
			case atom.Br:
				sb.WriteString("\n")
			default:
				if block(a) {
					sb.WriteString("\n")
				}
			}
		case html.EndTagToken:
			name, _ := z.TagName()
			switch a := atom.Lookup(name); a {
			case atom.Script, atom.Style:
				if skip > 0 {
					skip--
				}
			default:
				if block(a) {
					sb.WriteString("\n")
				}
			}
		}
	}
}

func block(a atom.Atom) bool {
	switch a {
	case atom.P, atom.Div, atom.Ul, atom.Ol, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6,
		atom.Tr, atom.Table, atom.Blockquote, atom.Section, atom.Article, atom.Header, atom.Footer:
		return true
	}
	return false
}

// collapse trims every line, squeezes inner spaces and keeps at most one
// empty line between paragraphs.
func collapse(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\u00a0", " "), "\n")
	out := make([]string, 0, len(lines))
	blank := false
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" {
			blank = len(out) > 0
			continue
		}
		if blank {
			out = append(out, "")
			blank = false
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// truncate cuts s to at most n runes on a word boundary, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	cut := string(r[:n])
	if i := strings.LastIndexAny(cut, " \n"); i > n/2 {
		cut = cut[:i]
	}
	return cut + " …"
}
