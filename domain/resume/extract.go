package resume

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
	"golang.org/x/text/encoding/charmap"
	xunicode "golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// Format is what kind of file a résumé came in.
type Format string

// The formats a résumé is read from.
const (
	PDF  Format = "pdf"
	DOCX Format = "docx"
	Text Format = "text"
)

// Telegram's names for the formats' files; a client may send any of them,
// or application/octet-stream, so the file's name decides too.
var (
	formatByMIME = map[string]Format{
		"application/pdf": PDF,
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document": DOCX,
		"text/plain":    Text,
		"text/markdown": Text,
	}
	formatByExt = map[string]Format{".pdf": PDF, ".docx": DOCX, ".txt": Text, ".md": Text, ".text": Text}
)

// FormatOf says which format a document is by its MIME type, else by its
// file name's extension (clients label a .docx or a .txt
// application/octet-stream at times); ok is false for anything else (an
// image, a .doc, an archive).
func FormatOf(fileName, mimeType string) (Format, bool) {
	mt, _, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mimeType)), ";")
	if f, ok := formatByMIME[strings.TrimSpace(mt)]; ok {
		return f, true
	}
	f, ok := formatByExt[strings.ToLower(path.Ext(fileName))]
	return f, ok
}

// Extraction failures the user is told about, each with its own reply.
var (
	// ErrNoText: the file holds no text to read; for a PDF, it has no
	// text layer (a scan, or a photo saved as PDF).
	ErrNoText = errors.New("no text in the file")
	// ErrUnreadable: the file is not what it claims to be, is damaged, or
	// is encrypted.
	ErrUnreadable = errors.New("file unreadable")
	// ErrTooManyPages: a PDF longer than the limit (TooManyPagesError
	// says how long).
	ErrTooManyPages = errors.New("too many pages")
)

// TooManyPagesError is ErrTooManyPages with the page count.
type TooManyPagesError struct{ Pages, Max int }

func (e *TooManyPagesError) Error() string {
	return fmt.Sprintf("%d pages, at most %d", e.Pages, e.Max)
}

func (e *TooManyPagesError) Unwrap() error { return ErrTooManyPages }

// minText is the fewest letters and digits a file must hold to count as
// having text: a scan often carries a page number or a scanner's stamp.
const minText = 20

// Extract reads a résumé's text: a PDF's text layer page by page (at most
// maxPages), a DOCX's paragraphs, a text file in UTF-8, UTF-16 with a BOM
// or Windows-1251. The text is tidied (spaces collapsed, at most one
// blank line in a row) and nothing of it is kept here.
func Extract(data []byte, f Format, maxPages int) (string, error) {
	var (
		text string
		err  error
	)
	switch f {
	case PDF:
		text, err = pdfText(data, maxPages)
	case DOCX:
		text, err = docxText(data)
	case Text:
		text, err = plainText(data)
	default:
		return "", fmt.Errorf("%w: unknown format %q", ErrUnreadable, f)
	}
	if err != nil {
		return "", err
	}
	text = tidy(text) // also drops NUL, U+FFFD and bad bytes, which PostgreSQL would refuse
	if letters(text) < minText {
		return "", ErrNoText
	}
	return text, nil
}

// pdfText reads every page's text. The library panics on some damaged
// files; that is the file's fault, not ours, and is told as unreadable.
func pdfText(data []byte, maxPages int) (text string, err error) {
	if !bytes.HasPrefix(bytes.TrimLeft(data[:min(len(data), 1024)], "\x00\t\r\n "), []byte("%PDF-")) {
		return "", fmt.Errorf("%w: not a PDF", ErrUnreadable)
	}
	defer func() {
		if p := recover(); p != nil {
			text, err = "", fmt.Errorf("%w: pdf: %v", ErrUnreadable, p)
		}
	}()
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("%w: pdf: %w", ErrUnreadable, err)
	}
	n := r.NumPage()
	if n <= 0 {
		return "", fmt.Errorf("%w: pdf: no pages", ErrUnreadable)
	}
	if maxPages > 0 && n > maxPages {
		return "", &TooManyPagesError{Pages: n, Max: maxPages}
	}
	// GetPlainText starts a line at each text block, which is how most
	// producers write a line; its grouping by rows follows only absolute
	// positioning and merges a page's lines into one.
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		p := r.Page(i)
		if p.V.IsNull() {
			continue
		}
		t, err := p.GetPlainText(nil) // nil: the page's own fonts
		if err != nil {
			return "", fmt.Errorf("%w: pdf page %d: %w", ErrUnreadable, i, err)
		}
		sb.WriteString(t + "\n\n")
	}
	return sb.String(), nil
}

// docxText reads word/document.xml: the text runs of each paragraph, tabs
// and breaks as they are, a line per paragraph (table cells included).
// Headers, footers and comments are left out: a résumé's facts are in the
// body.
func docxText(data []byte) (string, error) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return "", fmt.Errorf("%w: docx: %w", ErrUnreadable, err)
	}
	var doc *zip.File
	for _, f := range zr.File {
		if f.Name == "word/document.xml" {
			doc = f
			break
		}
	}
	if doc == nil {
		return "", fmt.Errorf("%w: docx: no word/document.xml", ErrUnreadable)
	}
	// A compressed bomb stops at the budget: a résumé's body is far smaller.
	const maxXML = 32 << 20
	rc, err := doc.Open()
	if err != nil {
		return "", fmt.Errorf("%w: docx: %w", ErrUnreadable, err)
	}
	defer rc.Close()
	dec := xml.NewDecoder(io.LimitReader(rc, maxXML))
	var sb strings.Builder
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%w: docx: %w", ErrUnreadable, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "t":
				inText = true
			case "tab":
				sb.WriteByte('\t')
			case "br", "cr":
				sb.WriteByte('\n')
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "t":
				inText = false
			case "p":
				sb.WriteByte('\n')
			case "tc":
				sb.WriteByte('\t')
			}
		case xml.CharData:
			if inText {
				sb.Write(t)
			}
		}
	}
	return sb.String(), nil
}

// plainText decodes a text file: UTF-8 (with or without a BOM), UTF-16 or
// UTF-32 with a BOM, else Windows-1251, which is what a Russian or
// Ukrainian Windows saves "plain text" in.
func plainText(data []byte) (string, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0xEF, 0xBB, 0xBF}):
		data = data[3:]
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE, 0, 0}), bytes.HasPrefix(data, []byte{0, 0, 0xFE, 0xFF}):
		return decodeWith(utf32.UTF32(utf32.BigEndian, utf32.ExpectBOM).NewDecoder().Bytes(data))
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}), bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return decodeWith(xunicode.UTF16(xunicode.BigEndian, xunicode.ExpectBOM).NewDecoder().Bytes(data))
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return "", fmt.Errorf("%w: binary data in a text file", ErrUnreadable)
	}
	if utf8.Valid(data) {
		return string(data), nil
	}
	return decodeWith(charmap.Windows1251.NewDecoder().Bytes(data))
}

func decodeWith(b []byte, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("%w: text: %w", ErrUnreadable, err)
	}
	return string(b), nil
}

// tidy collapses runs of spaces, drops control characters, trims each
// line and keeps at most one blank line in a row.
func tidy(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	var out strings.Builder
	blank := 0
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.Join(strings.FieldsFunc(line, func(r rune) bool {
			return unicode.IsSpace(r) || (unicode.IsControl(r) && r != '\t') || r == '\uFFFD' || r == '\u00AD'
		}), " ")
		if line == "" {
			blank++
			continue
		}
		if out.Len() > 0 {
			if blank > 0 {
				out.WriteString("\n\n")
			} else {
				out.WriteByte('\n')
			}
		}
		blank = 0
		out.WriteString(line)
	}
	return out.String()
}

// letters counts the letters and digits in s.
func letters(s string) int {
	n := 0
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			n++
		}
	}
	return n
}

// Clip cuts text to at most max characters at the last line break (else
// space) before the cut, so the LLM reads whole lines; cut says whether
// anything was left out.
func Clip(text string, max int) (clipped string, cut bool) {
	if utf8.RuneCountInString(text) <= max {
		return text, false
	}
	r := []rune(text)[:max]
	s := string(r)
	if i := strings.LastIndexByte(s, '\n'); i > len(s)/2 {
		return s[:i], true
	}
	if i := strings.LastIndexByte(s, ' '); i > len(s)/2 {
		return s[:i], true
	}
	return s, true
}
