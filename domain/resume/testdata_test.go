package resume_test

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-pdf/fpdf"
	"github.com/stretchr/testify/require"
)

// The files under testdata are made by TestMakeTestdata (RESUME_TESTDATA=1
// go test ./domain/resume -run MakeTestdata): a made-up person, no real
// data. Each holds a phrase found nowhere else, so a test can look for it.
const (
	PDFPhrase  = "quokka ledger reconciler"
	DOCXPhrase = "heron telemetry pipeline"
	TextPhrase = "otter billing gateway"
)

// resumeLines is the made-up résumé, in English and Russian: the PDF reads
// its Cyrillic through an embedded font's ToUnicode map.
func resumeLines(phrase string) []string {
	return []string{
		"Alex Example — Senior Go Developer",
		"alex@example.com, +7 900 000-00-00",
		"",
		"Experience: 7 years of backend development.",
		"2021–now: Acme Corp, senior developer. Built the " + phrase + " in Go and PostgreSQL.",
		"2018–2021: Example Bank, developer. Payment services, Kafka, Redis.",
		"",
		"Skills: Go, PostgreSQL, Kafka, Redis, Kubernetes, gRPC.",
		"Образование: МГУ, прикладная математика, 2017.",
		"Ищу: удалённая работа, senior backend.",
	}
}

func TestMakeTestdata(t *testing.T) {
	if os.Getenv("RESUME_TESTDATA") == "" {
		t.Skip("set RESUME_TESTDATA=1 to write the files under testdata")
	}
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "resume.pdf"), textPDF(t, resumeLines(PDFPhrase), 2), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "scanned.pdf"), scannedPDF(t), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "resume.docx"), docx(t, resumeLines(DOCXPhrase)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join("testdata", "resume.txt"), []byte(strings.Join(resumeLines(TextPhrase), "\n")), 0o644))
}

// fontDir is where fpdf keeps the DejaVu font it ships.
func fontDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GOMODCACHE")
	if dir == "" {
		dir = filepath.Join(os.Getenv("HOME"), "go", "pkg", "mod")
	}
	font := filepath.Join(dir, "github.com", "go-pdf", "fpdf@v0.9.0", "font")
	if _, err := os.Stat(filepath.Join(font, "DejaVuSansCondensed.ttf")); err != nil {
		_, file, _, _ := runtime.Caller(0)
		t.Fatalf("no DejaVu font of fpdf at %s (%v; %s)", font, err, file)
	}
	return font
}

// textPDF lays lines out over pages pages with a Unicode font.
func textPDF(t *testing.T, lines []string, pages int) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", fontDir(t))
	p.AddUTF8Font("dejavu", "", "DejaVuSansCondensed.ttf")
	per := (len(lines) + pages - 1) / pages
	for i := range pages {
		p.AddPage()
		p.SetFont("dejavu", "", 12)
		for _, l := range lines[min(i*per, len(lines)):min((i+1)*per, len(lines))] {
			p.Cell(0, 8, l)
			p.Ln(8)
		}
	}
	var buf bytes.Buffer
	require.NoError(t, p.Output(&buf))
	return compliantCMap(t, buf.Bytes())
}

// compliantCMap rewrites fpdf's ToUnicode map, one range over every
// two-byte code, which the PDF reference forbids (a range's ends differ in
// the last byte only) and readers that follow it decode wrongly, as the
// 256 ranges Word or LibreOffice would write, then renumbers the xref table.
func compliantCMap(t *testing.T, b []byte) []byte {
	t.Helper()
	const bad = "1 beginbfrange\n<0000> <FFFF> <0000>\nendbfrange\n"
	var good strings.Builder
	for block := 0; block < 256; block += 64 {
		good.WriteString("64 beginbfrange\n")
		for hi := block; hi < block+64; hi++ {
			fmt.Fprintf(&good, "<%02X00> <%02XFF> <%02X00>\n", hi, hi, hi)
		}
		good.WriteString("endbfrange\n")
	}
	s := string(b)
	i := strings.Index(s, bad)
	require.GreaterOrEqual(t, i, 0, "fpdf's ToUnicode map as expected")
	// The stream's /Length precedes it.
	head := s[:i]
	ls := strings.LastIndex(head, "/Length ")
	le := ls + len("/Length ") + strings.IndexByte(head[ls+len("/Length "):], '>')
	var n int
	_, err := fmt.Sscanf(head[ls+len("/Length "):le], "%d", &n)
	require.NoError(t, err)
	s = head[:ls] + fmt.Sprintf("/Length %d", n-len(bad)+good.Len()) + head[le:] + good.String() + s[i+len(bad):]
	// Renumber the cross-reference table from the objects' new offsets.
	x := strings.LastIndex(s, "\nxref\n") + 1
	var first, count int
	_, err = fmt.Sscanf(s[x:], "xref\n%d %d\n", &first, &count)
	require.NoError(t, err)
	var table strings.Builder
	fmt.Fprintf(&table, "xref\n%d %d\n0000000000 65535 f \n", first, count)
	for obj := 1; obj < count; obj++ {
		off := strings.Index(s, fmt.Sprintf("\n%d 0 obj", obj)) + 1
		require.Positive(t, off, "object %d", obj)
		fmt.Fprintf(&table, "%010d 00000 n \n", off)
	}
	trailer := s[strings.Index(s[x:], "trailer")+x:]
	trailer = trailer[:strings.Index(trailer, "startxref")]
	return []byte(s[:x] + table.String() + trailer + fmt.Sprintf("startxref\n%d\n%%%%EOF\n", x))
}

// manyPagesPDF is a PDF of n pages with a line of core-font text each.
func manyPagesPDF(t *testing.T, n int) []byte {
	t.Helper()
	p := fpdf.New("P", "mm", "A4", "")
	for i := range n {
		p.AddPage()
		p.SetFont("Helvetica", "", 12)
		p.Cell(0, 8, fmt.Sprintf("Page %d of a very long curriculum vitae", i+1))
	}
	var buf bytes.Buffer
	require.NoError(t, p.Output(&buf))
	return buf.Bytes()
}

// scannedPDF is a page holding only a picture, as a scanner makes: grey
// lines where text would be, no text layer.
func scannedPDF(t *testing.T) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 420, 594))
	for y := range 594 {
		for x := range 420 {
			c := uint8(250)
			if y > 40 && y%24 < 8 && x > 40 && x < 380-(y*7)%90 {
				c = 60
			}
			img.SetGray(x, y, color.Gray{Y: c})
		}
	}
	var pic bytes.Buffer
	require.NoError(t, png.Encode(&pic, img))
	p := fpdf.New("P", "mm", "A4", "")
	p.AddPage()
	p.RegisterImageOptionsReader("scan", fpdf.ImageOptions{ImageType: "PNG"}, &pic)
	p.ImageOptions("scan", 0, 0, 210, 297, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	var buf bytes.Buffer
	require.NoError(t, p.Output(&buf))
	return buf.Bytes()
}

// docx is the smallest WordprocessingML package Word opens: the content
// types, the package relationship and the document, a paragraph a line.
func docx(t *testing.T, lines []string) []byte {
	t.Helper()
	var body strings.Builder
	for _, l := range lines {
		var esc bytes.Buffer
		require.NoError(t, xml.EscapeText(&esc, []byte(l)))
		body.WriteString(`<w:p><w:r><w:t xml:space="preserve">` + esc.String() + `</w:t></w:r></w:p>`)
	}
	files := []struct{ name, body string }{
		{"[Content_Types].xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>`},
		{"_rels/.rels", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>`},
		{"word/document.xml", `<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>` + body.String() + `</w:body></w:document>`},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		w, err := zw.Create(f.name)
		require.NoError(t, err)
		_, err = w.Write([]byte(f.body))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}
