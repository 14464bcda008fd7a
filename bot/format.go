package bot

import (
	"html"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxMessageLen is Telegram's limit on a message's text. Telegram counts it
// after parsing entities, in UTF-16 code units; we count the raw HTML, which
// is never shorter, so a chunk we accept Telegram accepts too.
const MaxMessageLen = 4096

// Escape makes a user-, LLM- or HH-originated string safe inside Telegram HTML.
func Escape(s string) string { return html.EscapeString(s) }

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// Split cuts text into chunks of at most limit UTF-16 units, preferring line
// boundaries, then spaces, and never cutting inside an HTML entity or tag (a
// cut there would make Telegram refuse the chunk). Our templates keep tags on
// one line, so line boundaries are also tag boundaries.
func Split(text string, limit int) []string {
	if limit <= 0 {
		limit = MaxMessageLen
	}
	var out []string
	var cur strings.Builder
	curLen := 0
	flush := func() {
		if s := strings.TrimRight(cur.String(), "\n"); strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
		cur.Reset()
		curLen = 0
	}
	lines := strings.SplitAfter(text, "\n")
	for _, line := range lines {
		l := utf16Len(line)
		if curLen+l <= limit {
			cur.WriteString(line)
			curLen += l
			continue
		}
		flush()
		for utf16Len(line) > limit {
			head, tail := cutLine(line, limit)
			out = append(out, strings.TrimRight(head, "\n"))
			line = tail
		}
		cur.WriteString(line)
		curLen = utf16Len(line)
	}
	flush()
	if len(out) == 0 {
		return []string{text}
	}
	return out
}

// cutLine splits one overlong line at the last space within limit, else at
// the limit, moving the cut back out of any entity or tag it would split.
func cutLine(line string, limit int) (string, string) {
	// Find the byte offset where limit UTF-16 units end.
	units, end := 0, 0
	for i, r := range line {
		u := utf16.RuneLen(r)
		if units+u > limit {
			end = i
			break
		}
		units += u
		end = i + utf8.RuneLen(r)
	}
	cut := end
	if sp := strings.LastIndexByte(line[:end], ' '); sp > end/2 {
		cut = sp + 1
	}
	// Do not split "&amp;" or "<a href=…>".
	if amp := strings.LastIndexByte(line[:cut], '&'); amp >= 0 && !strings.Contains(line[amp:cut], ";") {
		cut = amp
	}
	if lt := strings.LastIndexByte(line[:cut], '<'); lt >= 0 && !strings.Contains(line[lt:cut], ">") {
		cut = lt
	}
	if cut == 0 { // a single token longer than the limit: cut it anyway
		cut = end
	}
	return line[:cut], line[cut:]
}
