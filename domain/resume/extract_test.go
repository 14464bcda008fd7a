package resume_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/charmap"

	"switchboard/domain/resume"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func TestExtractReadsEachFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file   string
		format resume.Format
		phrase string
	}{
		{"resume.pdf", resume.PDF, PDFPhrase},
		{"resume.docx", resume.DOCX, DOCXPhrase},
		{"resume.txt", resume.Text, TextPhrase},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			text, err := resume.Extract(readTestdata(t, tc.file), tc.format, 20)
			require.NoError(t, err)
			require.Contains(t, text, tc.phrase)
			require.Contains(t, text, "Skills: Go, PostgreSQL, Kafka")
			require.Contains(t, text, "Образование: МГУ, прикладная математика", "Cyrillic survives")
			require.Contains(t, text, "Ищу: удалённая работа")
			require.NotContains(t, text, "  ", "spaces collapsed")
			require.NotContains(t, text, "\n\n\n", "at most one blank line")
		})
	}
}

func TestExtractPDFLines(t *testing.T) {
	t.Parallel()
	text, err := resume.Extract(readTestdata(t, "resume.pdf"), resume.PDF, 20)
	require.NoError(t, err)
	lines := strings.Split(text, "\n")
	require.Contains(t, lines, "Experience: 7 years of backend development.", "a line of the page is a line of the text:\n%s", text)
	require.Less(t, strings.Index(text, "Alex Example"), strings.Index(text, "Ищу"), "pages in order")
}

func TestExtractRefuses(t *testing.T) {
	t.Parallel()
	_, err := resume.Extract(readTestdata(t, "scanned.pdf"), resume.PDF, 20)
	require.ErrorIs(t, err, resume.ErrNoText, "a scan has no text layer")

	_, err = resume.Extract(manyPagesPDF(t, 21), resume.PDF, 20)
	require.ErrorIs(t, err, resume.ErrTooManyPages)
	var tooMany *resume.TooManyPagesError
	require.ErrorAs(t, err, &tooMany)
	require.Equal(t, 21, tooMany.Pages)
	text, err := resume.Extract(manyPagesPDF(t, 20), resume.PDF, 20)
	require.NoError(t, err, "the limit itself passes")
	require.Contains(t, text, "Page 20 of a very long curriculum vitae")

	for name, tc := range map[string]struct {
		data   []byte
		format resume.Format
	}{
		"a JPEG called .pdf":   {[]byte("\xff\xd8\xff\xe0 not a pdf at all"), resume.PDF},
		"a cut-off PDF":        {readTestdata(t, "resume.pdf")[:2000], resume.PDF},
		"a PDF called .docx":   {readTestdata(t, "resume.pdf"), resume.DOCX},
		"a zip without a body": {docxWithout(t), resume.DOCX},
		"binary as text":       {[]byte("MZ\x90\x00\x03\x00\x00\x00 binary stuff here and there"), resume.Text},
	} {
		_, err := resume.Extract(tc.data, tc.format, 20)
		require.ErrorIs(t, err, resume.ErrUnreadable, name)
	}
	_, err = resume.Extract([]byte("  \n\n 12 \n"), resume.Text, 20)
	require.ErrorIs(t, err, resume.ErrNoText, "an empty text file")
}

// docxWithout is a zip holding no word/document.xml.
func docxWithout(t *testing.T) []byte {
	t.Helper()
	b := docx(t, []string{"x"})
	return []byte(strings.Replace(string(b), "word/document.xml", "word/documenX.xml", -1))
}

func TestExtractTextEncodings(t *testing.T) {
	t.Parallel()
	want := "Разработчик Go, опыт семь лет, PostgreSQL и Kafka"
	cp1251, err := charmap.Windows1251.NewEncoder().String(want)
	require.NoError(t, err)
	utf16 := []byte{0xFF, 0xFE}
	for _, r := range want {
		utf16 = append(utf16, byte(r), byte(r>>8))
	}
	for name, data := range map[string][]byte{
		"utf-8":        []byte(want),
		"utf-8 bom":    append([]byte{0xEF, 0xBB, 0xBF}, want...),
		"windows-1251": []byte(cp1251),
		"utf-16le bom": utf16,
	} {
		text, err := resume.Extract(data, resume.Text, 20)
		require.NoError(t, err, name)
		require.Equal(t, want, text, name)
	}
}

func TestFormatOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, mime string
		want       resume.Format
		ok         bool
	}{
		{"cv.pdf", "application/pdf", resume.PDF, true},
		{"CV.PDF", "application/octet-stream", resume.PDF, true},
		{"cv.docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", resume.DOCX, true},
		{"cv.docx", "", resume.DOCX, true},
		{"cv.txt", "text/plain; charset=utf-8", resume.Text, true},
		{"notes", "text/plain", resume.Text, true},
		{"photo.jpg", "image/jpeg", "", false},
		{"cv.doc", "application/msword", "", false},
		{"cv.odt", "application/vnd.oasis.opendocument.text", "", false},
		{"", "", "", false},
	} {
		got, ok := resume.FormatOf(tc.name, tc.mime)
		require.Equal(t, tc.ok, ok, tc.name)
		require.Equal(t, tc.want, got, tc.name)
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("строка текста\n", 100)
	got, cut := resume.Clip(text, 200)
	require.True(t, cut)
	require.LessOrEqual(t, len([]rune(got)), 200)
	require.True(t, strings.HasSuffix(got, "строка текста"), "cut at a line break: %q", got[len(got)-30:])
	same, cut := resume.Clip("short", 200)
	require.False(t, cut)
	require.Equal(t, "short", same)
}
