package bot

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"

	"switchboard/e2e/tgfake"
)

func TestEscape(t *testing.T) {
	require.Equal(t, "&lt;b&gt;Go &amp; Rust&lt;/b&gt;", Escape("<b>Go & Rust</b>"))
}

func TestSplitTenThousandCharactersIntoThree(t *testing.T) {
	line := strings.Repeat("x", 99) + "\n" // 100 characters a line
	text := strings.Repeat(line, 100)      // 10 000 characters
	parts := Split(text, MaxMessageLen)
	require.Len(t, parts, 3)
	total := 0
	for _, p := range parts {
		require.LessOrEqual(t, utf16Len(p), MaxMessageLen)
		require.True(t, strings.HasSuffix(p, strings.Repeat("x", 99)), "cut on a line boundary")
		total += strings.Count(p, "x")
	}
	require.Equal(t, 9900, total, "nothing lost")
}

func TestSplitShortTextIsOneMessage(t *testing.T) {
	require.Equal(t, []string{"hello\nworld"}, Split("hello\nworld", MaxMessageLen))
}

func TestSplitOverlongLineAvoidsEntitiesAndTags(t *testing.T) {
	// One line, no newlines, with entities and tags everywhere.
	unit := "ab &amp; <b>cd</b> "
	text := strings.Repeat(unit, 1000)
	parts := Split(text, 100)
	var joined strings.Builder
	for _, p := range parts {
		require.LessOrEqual(t, utf16Len(p), 100)
		require.Equal(t, strings.Count(p, "<b>"), strings.Count(p, "</b>"), "tag split across chunks: %q", p)
		require.NotRegexp(t, `&[a-z]*$`, p, "entity split")
		joined.WriteString(p)
	}
	require.Equal(t, strings.ReplaceAll(text, " ", ""), strings.ReplaceAll(joined.String(), " ", ""))
}

func TestSplitCountsUTF16LikeTelegram(t *testing.T) {
	// Each emoji is two UTF-16 units: 3000 of them cannot fit in one message.
	text := strings.Repeat("😀", 3000)
	parts := Split(text, MaxMessageLen)
	require.Len(t, parts, 2)
	for _, p := range parts {
		require.True(t, utf8.ValidString(p))
		require.LessOrEqual(t, utf16Len(p), MaxMessageLen)
	}
	cyr := strings.Repeat("щ", 4096)
	require.Len(t, Split(cyr, MaxMessageLen), 1, "Cyrillic counts as one unit per letter")
}

func TestSplitClosesAndReopensAcrossLines(t *testing.T) {
	// Cut blind to tags, the first part would end inside <b> and the
	// second begin with a stray </b>, and Telegram refuses both.
	require.Equal(t, []string{"<b>first line</b>", "<b>second line</b>"},
		Split("<b>first line\nsecond line</b>", 20))
}

func TestSplitReopensTagsVerbatim(t *testing.T) {
	for _, tag := range [][2]string{
		{"<b>", "</b>"},
		{`<a href="https://example.com/?q=go&amp;page=2">`, "</a>"},
		{"<tg-spoiler>", "</tg-spoiler>"},
		{`<span class="tg-spoiler">`, "</span>"},
		{`<pre><code class="language-go">`, "</code></pre>"},
		{"<blockquote expandable>", "</blockquote>"},
		{"<b><i>", "</i></b>"},
	} {
		for _, body := range []string{
			strings.Repeat("word ", 80),            // one long line
			strings.Repeat("fmt.Println(1)\n", 30), // cuts between lines
		} {
			text := "before " + tag[0] + body + tag[1] + " after"
			parts := checkSplit(t, text, 120)
			require.Greater(t, len(parts), 2, text)
			for i, p := range parts {
				if i > 0 {
					require.True(t, strings.HasPrefix(p, tag[0]), "part %d reopens %s: %q", i, tag[0], p)
				}
				if i < len(parts)-1 {
					require.True(t, strings.HasSuffix(p, tag[1]), "part %d closes %s: %q", i, tag[1], p)
				}
			}
		}
	}
}

// The /memory reply that Telegram refused: a summary's <i> ran for 5000
// characters, so the cut fell inside it.
func TestSplitLongItalicInOneLine(t *testing.T) {
	text := "<b>What I remember</b>:\n\n<b>Week of 2025-03-03</b> · <i>" +
		strings.Repeat("tag &amp; more, ", 320) + "</i>\nSummary."
	parts := checkSplit(t, text, MaxMessageLen)
	require.Len(t, parts, 3)
	require.Equal(t, "<b>What I remember</b>:", parts[0])
	require.True(t, strings.HasPrefix(parts[1], "<b>Week of 2025-03-03</b> · <i>tag &amp; more, "), parts[1])
	require.True(t, strings.HasSuffix(parts[1], " </i>"), "cut after a space, <i> closed")
	require.True(t, strings.HasPrefix(parts[2], "<i>more, tag &amp; more, "), "<i> reopened")
	require.True(t, strings.HasSuffix(parts[2], "</i>\nSummary."))
}

func TestSplitHardCutsKeepCharactersWhole(t *testing.T) {
	// No spaces, so every cut is a hard one: it may not fall inside a tag,
	// an entity, a surrogate pair, a ZWJ sequence, a flag, a skin-toned
	// emoji or a letter with its accent.
	unit := "&amp;😀👨‍👩‍👧🇺🇦👍🏽e\u0301<b>x&#128512;</b>&#x41;"
	text := strings.Repeat(unit, 60)
	for limit := 20; limit <= 90; limit++ {
		for _, p := range checkSplit(t, text, limit) {
			plain := string(mustParseTG(t, p).runes)
			for _, bad := range []string{"\u200d", "👩", "👧", "🇦", "🏽", "\u0301"} {
				require.False(t, strings.HasPrefix(plain, bad), "limit %d: part starts inside a character: %q", limit, p)
			}
			for _, bad := range []string{"\u200d", "👨", "🇺"} {
				require.False(t, strings.HasSuffix(plain, bad), "limit %d: part ends inside a character: %q", limit, p)
			}
		}
	}
}

func TestSplitPathologicalMarkup(t *testing.T) {
	t.Run("nesting deeper than a part", func(t *testing.T) {
		text := strings.Repeat("<b><i>", 100) + strings.Repeat("deep ", 100) + strings.Repeat("</i></b>", 100)
		parts := checkSplit(t, text, 100)
		// Reopened tags are held to half a part, so text still flows.
		require.Less(t, len(parts), 20)
	})
	t.Run("opening tag longer than a part", func(t *testing.T) {
		text := `<a href="https://example.com/` + strings.Repeat("x", 300) + `">click here</a> and more`
		parts := checkSplit(t, text, 100)
		require.Equal(t, []string{"click here and more"}, parts, "the link is lost, its text is not")
	})
	t.Run("limit shorter than a character", func(t *testing.T) {
		require.Equal(t, []string{"😀", "😀"}, Split("😀😀", 1), "over the limit, but it terminates")
		require.Equal(t, []string{"&amp;", "&amp;"}, Split("<b>&amp;&amp;</b>", 4))
	})
	t.Run("character that fits only without the reopened tags", func(t *testing.T) {
		require.Equal(t, []string{"<b>a</b>", "&#128512;", "&#128512;"}, Split("<b>a&#128512;&#128512;</b>", 14))
	})
}

// Tracking tags must change nothing for text without markup, accents or
// emoji sequences: Split cuts it where splitPlain, a split by length
// alone, does.
func TestSplitPlainTextLikeSplitPlain(t *testing.T) {
	words := []string{"a", "go", "split", "message", "щука", "😀", strings.Repeat("x", 120), "  "}
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		var sb strings.Builder
		for range rng.IntN(150) {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(6) == 0 {
				sb.WriteString("\n")
			} else {
				sb.WriteString(" ")
			}
		}
		limit := 20 + rng.IntN(200)
		require.Equal(t, splitPlain(sb.String(), limit), Split(sb.String(), limit), "seed %d limit %d", seed, limit)
	}
}

// splitPlain is Split without tags: whole lines packed into parts of at
// most limit UTF-16 units, a longer line cut at its last space in the
// second half of the limit, else at the limit.
func splitPlain(text string, limit int) []string {
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
	for _, line := range strings.SplitAfter(text, "\n") {
		l := utf16Len(line)
		if curLen+l <= limit {
			cur.WriteString(line)
			curLen += l
			continue
		}
		flush()
		for utf16Len(line) > limit {
			units, end := 0, 0
			for i, r := range line {
				if units+utf16.RuneLen(r) > limit {
					end = i
					break
				}
				units += utf16.RuneLen(r)
				end = i + utf8.RuneLen(r)
			}
			cut := end
			if sp := strings.LastIndexByte(line[:end], ' '); sp > end/2 {
				cut = sp + 1
			}
			out = append(out, strings.TrimRight(line[:cut], "\n"))
			line = line[cut:]
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

// openingTag finds the opening tags of Telegram HTML, one entity each at
// most.
var openingTag = regexp.MustCompile(`<[a-zA-Z]`)

// Telegram keeps 100 entities of a message and drops the rest silently
// (the fake refuses such a text): a list of short formatted lines, well
// within the length of one message, goes as two, every entity kept.
func TestSplitKeepsEntitiesUnderTelegramsLimit(t *testing.T) {
	var lines []string
	for i := range 150 {
		lines = append(lines, fmt.Sprintf(`<a href="t.me/%d">%d</a>`, i, i+1))
	}
	list := strings.Join(lines, "\n")
	require.Less(t, utf16Len(list), MaxMessageLen)
	parts := checkSplit(t, list, MaxMessageLen)
	require.Len(t, parts, 2)
	require.Equal(t, 150, strings.Count(strings.Join(parts, ""), "<a href"))

	// One line, and inside an element each part reopens.
	line := "<i>" + strings.Repeat("<b>x</b> ", 250) + "</i>"
	parts = checkSplit(t, line, MaxMessageLen)
	require.Len(t, parts, 3)
	require.Equal(t, 250, strings.Count(strings.Join(parts, ""), "<b>"))
	for _, p := range parts {
		require.True(t, strings.HasPrefix(p, "<i>"), p)
	}
}

// TestSplitProperties splits random Telegram HTML at random small limits,
// so that cuts fall inside elements, entities and emoji all the time; see
// checkSplit for what it asserts.
func TestSplitProperties(t *testing.T) {
	var multi, spanning, exact, degraded int
	for seed := range 2000 {
		text, limit := randomSplitCase(uint64(seed))
		parts, isExact, spans := checkSplitStats(t, text, limit)
		if len(parts) > 1 {
			multi++
		}
		if spans > 0 {
			spanning++
		}
		if isExact {
			exact++
		} else {
			degraded++
		}
	}
	t.Logf("multi %d spanning %d exact %d degraded %d", multi, spanning, exact, degraded)
	// The generator must keep exercising what the test is for.
	require.Greater(t, multi, 1200, "cases split at all")
	require.Greater(t, spanning, 900, "cases with an element open at a cut")
	require.Greater(t, exact, 800, "cases where formatting must survive unchanged")
	require.Greater(t, degraded, 700, "cases whose tags open at once outgrow half a part")
}

// Parts of random splits, and HTML a split blind to tags produces, go to the strict
// fake Telegram: it must accept exactly what parseTG accepts and see the
// same text, so that parseTG, which the property and fuzz tests rely on,
// follows Telegram's rules. Accepted messages are few: the fake may limit
// how fast a bot sends.
func TestSplitPartsAcceptedByFakeTelegram(t *testing.T) {
	t.Parallel()
	srv := tgfake.New(t)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	tb, err := tele.NewBot(tele.Settings{
		URL: srv.URL(), Token: srv.Token(), Offline: true,
		Client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
	})
	require.NoError(t, err)

	var chat int64 = 1000
	var accepted, inChat int
	newChat := func() {
		chat++
		inChat = 0
		u := srv.User(chat, "Ann", "en")
		u.SendText(u.ID(), "/start") // Telegram sends nothing to users who never wrote
	}
	newChat()
	send := func(html string) (tgfake.BotMessage, error) {
		if inChat == 3 {
			newChat() // Telegram holds a private chat to about a message a second
		}
		for {
			_, err := tb.Send(tele.ChatID(chat), html, &tele.SendOptions{ParseMode: tele.ModeHTML})
			var flood tele.FloodError
			if errors.As(err, &flood) {
				time.Sleep(time.Duration(flood.RetryAfter) * time.Second)
				continue
			}
			if err != nil {
				return tgfake.BotMessage{}, err
			}
			accepted++
			inChat++
			m, _ := srv.LastMessage(chat)
			return m, nil
		}
	}
	check := func(html string) {
		t.Helper()
		local, localErr := parseTG(html)
		m, err := send(html)
		if localErr != nil {
			require.Error(t, err, "the fake accepted %q, parseTG refused it: %v", html, localErr)
			require.Contains(t, err.Error(), "can't parse entities", html)
			return
		}
		require.NoError(t, err, "parseTG accepted %q", html)
		require.Equal(t, strings.Trim(string(local.runes), " \n"), strings.Trim(m.Text, " \n"), html)
	}

	for _, html := range []string{
		// What a split blind to tags makes of "<b>line1\nline2</b>" and of a long <i>.
		"<b>line1", "line2</b>", "<i>tag, tag, ", "tag</i>\nsummary",
		"<b>x</i>", "</b>", "<span>x</span>", "<a href=\"x\"", "&am", "a & b", "&#0;", "&#55357;", "<br>",
		"<b>x</>", "<B>x</b>", "<a href=\"https://example.com/?a=1&amp;b=2\">x</a>",
		`<pre><code class="language-go">x</code></pre>`, "<blockquote expandable>q</blockquote>",
		"&lt;&gt;&amp;&quot;&#65;&#x1F600;😀👨‍👩‍👧", " \n<b> x </b>\n ",
	} {
		check(html)
	}
	// Under 30 accepted messages, what Telegram lets a bot send in a second.
	for seed := uint64(0); accepted < 28; seed++ {
		text, limit := randomSplitCase(seed)
		for _, p := range Split(text, limit) {
			if accepted < 28 {
				check(p)
			}
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("<b>first line\nsecond line</b>", uint16(20))
	f.Add(`<a href="https://example.com/?a=1&amp;b=2">`+strings.Repeat("link ", 40)+"</a>", uint16(60))
	f.Add(`<pre><code class="language-go">`+strings.Repeat("x := 1\n", 20)+"</code></pre>", uint16(45))
	f.Add("<i>"+strings.Repeat("&amp;😀👨‍👩‍👧🇺🇦e\u0301", 30)+"</i>", uint16(40))
	f.Add(strings.Repeat("<b><i>", 30)+"deep"+strings.Repeat("</i></b>", 30), uint16(50))
	f.Add("<blockquote expandable><tg-spoiler>a\n\n\nb</tg-spoiler>\n<span class=\"tg-spoiler\">c</span></blockquote>", uint16(40))
	f.Add("unbalanced <b>bold\nand & more <i", uint16(24))
	for seed := range uint64(5) {
		text, limit := randomSplitCase(seed)
		f.Add(text, uint16(limit))
	}
	f.Fuzz(func(t *testing.T, text string, limit uint16) {
		// From twice the longest entity up, so that checkSplit may demand
		// unchanged formatting when the tags fit in half a part.
		lim := 20 + int(limit)%400
		if _, err := parseTG(text); err == nil {
			checkSplit(t, text, lim)
			return
		}
		// Input Telegram would refuse: Split must still terminate, keep
		// valid UTF-8 valid and send nothing blank.
		for _, p := range Split(text, lim) {
			if utf8.ValidString(text) {
				require.True(t, utf8.ValidString(p), "%q", p)
			}
			if strings.TrimSpace(text) != "" {
				require.NotEmpty(t, strings.TrimSpace(p), "%q", text)
			}
		}
	})
}

// checkSplit splits text, which must be Telegram HTML, and asserts:
//   - every part is at most limit UTF-16 units of raw HTML, is well-formed
//     (parseTG) and has visible text;
//   - the parts' texts, in order, are the input's text except for white
//     space between parts: the newlines Split drops at the end of a part
//     and parts it drops for having no visible text;
//   - each character keeps its formatting (the opening tags around it)
//     whenever the tags open at once fit in half the limit (and limit is
//     at least 20, twice the longest entity), and otherwise keeps a
//     subsequence of it (Split leaves elements closed in a part rather
//     than exceed the limit).
//
// A text of white space alone is returned unsplit, as Split always did.
func checkSplit(t testing.TB, text string, limit int) []string {
	t.Helper()
	parts, _, _ := checkSplitStats(t, text, limit)
	return parts
}

// checkSplitStats is checkSplit that also tells whether formatting had to
// survive unchanged and at how many cuts an element was open.
func checkSplitStats(t testing.TB, text string, limit int) (parts []string, exact bool, spans int) {
	t.Helper()
	want, err := parseTG(text)
	require.NoError(t, err, "not Telegram HTML: %q", text)
	parts = Split(text, limit)
	exact = want.markup <= limit/2
	if strings.TrimSpace(string(want.runes)) == "" {
		require.Equal(t, []string{text}, parts)
		return parts, exact, 0
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nlimit %d\ninput %q\nparts %q", fmt.Sprintf(format, args...), limit, text, parts)
	}
	got := make([]tgText, len(parts))
	texts := make([][]rune, len(parts))
	for i, p := range parts {
		if n := utf16Len(p); n > limit {
			fail("part %d is %d units long", i, n)
		}
		if got[i], err = parseTG(p); err != nil {
			fail("part %d is not well-formed: %v: %q", i, err, p)
		}
		if n := len(openingTag.FindAllStringIndex(p, -1)); n > MaxMessageEntities {
			fail("part %d has %d opening tags", i, n)
		}
		if strings.TrimSpace(string(got[i].runes)) == "" {
			fail("part %d has no visible text: %q", i, p)
		}
		texts[i] = got[i].runes
	}
	starts := alignParts(want.runes, texts)
	if starts == nil {
		fail("the parts' text is not the input's text")
	}
	for i, g := range got {
		for j := range g.runes {
			w := want.tags[starts[i]+j]
			if exact && !slices.Equal(g.tags[j], w) || !exact && !isSubsequence(g.tags[j], w) {
				fail("part %d, character %d %q: formatting %q, was %q", i, j, g.runes[j], g.tags[j], w)
			}
		}
		if i > 0 {
			before, after := want.elems[starts[i-1]+len(got[i-1].runes)-1], want.elems[starts[i]]
			if len(before) > 0 && len(after) > 0 && before[0] == after[0] {
				spans++
			}
		}
	}
	return parts, exact, spans
}

// alignParts returns where each part's text starts in want, such that only
// white space lies between, before and after the parts; nil if there is
// no such placement.
func alignParts(want []rune, parts [][]rune) []int {
	starts := make([]int, 0, len(parts))
	dead := map[[2]int]bool{}
	var place func(k, pos int) bool
	place = func(k, pos int) bool {
		if k == len(parts) {
			return !slices.ContainsFunc(want[pos:], func(r rune) bool { return !unicode.IsSpace(r) })
		}
		if dead[[2]int{k, pos}] {
			return false
		}
		for at := pos; at <= len(want); at++ {
			if end := at + len(parts[k]); end <= len(want) && slices.Equal(want[at:end], parts[k]) {
				starts = append(starts, at)
				if place(k+1, end) {
					return true
				}
				starts = starts[:len(starts)-1]
			}
			if at == len(want) || !unicode.IsSpace(want[at]) {
				break
			}
		}
		dead[[2]int{k, pos}] = true
		return false
	}
	if !place(0, 0) {
		return nil
	}
	return starts
}

func isSubsequence(sub, of []string) bool {
	for _, s := range of {
		if len(sub) > 0 && sub[0] == s {
			sub = sub[1:]
		}
	}
	return len(sub) == 0
}

func mustParseTG(t testing.TB, html string) tgText {
	t.Helper()
	p, err := parseTG(html)
	require.NoError(t, err, "%q", html)
	return p
}

var (
	randomWords = []string{
		"go", "split", "message", "привет", "naïve", "😀", "👨‍👩‍👧", "🇺🇦", "👍🏽", "e\u0301",
		"&lt;b&gt;", "&amp;", "&quot;q&quot;", "&#65;", "&#128512;", "&#x1F600;", "a&amp;b", "-",
	}
	randomChars = []string{"x", "y", "щ", "😀", "👨‍👩‍👧", "🇺🇦", "e\u0301", "&amp;", "&#128512;", "&lt;"}
	randomTags  = [][2]string{
		{"<b>", "</b>"}, {"<i>", "</i>"}, {"<u>", "</u>"}, {"<s>", "</s>"}, {"<code>", "</code>"}, {"<pre>", "</pre>"},
		{`<pre><code class="language-go">`, "</code></pre>"}, {`<a href="https://example.com/?q=1&amp;r=2">`, "</a>"},
		{"<tg-spoiler>", "</tg-spoiler>"}, {`<span class="tg-spoiler">`, "</span>"},
		{"<blockquote>", "</blockquote>"}, {"<blockquote expandable>", "</blockquote>"},
	}
)

// randomSplitCase makes nested Telegram HTML with words, entities, emoji
// sequences, runs of newlines and long unbroken words, and a limit small
// enough for many cuts.
func randomSplitCase(seed uint64) (string, int) {
	rng := rand.New(rand.NewPCG(seed, 2))
	var sb strings.Builder
	var item func(depth int)
	item = func(depth int) {
		switch k := rng.IntN(20); {
		case k < 9:
			sb.WriteString(randomWords[rng.IntN(len(randomWords))])
			sb.WriteString([]string{" ", " ", " ", "", "  "}[rng.IntN(5)])
		case k < 12:
			sb.WriteString(strings.Repeat("\n", 1+rng.IntN(3)))
		case k < 14:
			for range 5 + rng.IntN(60) {
				sb.WriteString(randomChars[rng.IntN(len(randomChars))])
			}
		case depth < 6:
			tag := randomTags[rng.IntN(len(randomTags))]
			sb.WriteString(tag[0])
			for range rng.IntN(5) {
				item(depth + 1)
			}
			sb.WriteString(tag[1])
		default:
			sb.WriteString("z")
		}
	}
	for range 1 + rng.IntN(15) {
		item(0)
	}
	return sb.String(), 40 + rng.IntN(161)
}

// tgText is Telegram HTML as Telegram reads it: the characters, and for
// each the opening tags of the elements around it, outermost first.
type tgText struct {
	runes []rune
	tags  [][]string
	elems [][]int // the same elements, numbered in the order they open
	// markup is the most UTF-16 units that the opening and closing tags of
	// the elements open at one point take.
	markup int
}

var tgTags = map[string]bool{
	"a": true, "b": true, "strong": true, "i": true, "em": true, "s": true, "strike": true, "del": true,
	"u": true, "ins": true, "tg-spoiler": true, "tg-emoji": true, "tg-time": true, "span": true,
	"pre": true, "code": true, "blockquote": true,
}

func tgSpace(c byte) bool { return strings.IndexByte(" \t\r\n\v", c) >= 0 }

// parseTG parses HTML by the rules of the strict fake Telegram
// (e2e/tgfake/html.go, which keeps its parser unexported), so that it can
// check thousands of parts without a server: supported tags only, properly
// nested and all closed, every '&' an entity Telegram knows, ';' included.
func parseTG(s string) (tgText, error) {
	var out tgText
	if !utf8.ValidString(s) {
		return out, errors.New("invalid UTF-8")
	}
	type open struct {
		name string
		size int
	}
	var (
		stack  []open
		opened int
		tags   []string // shared by the characters; a push copies it
		elems  []int    // likewise
		markup int
	)
	for i := 0; i < len(s); {
		switch {
		case s[i] == '&':
			r, n, err := tgEntity(s[i:])
			if err != nil {
				return out, fmt.Errorf("byte %d: %w", i, err)
			}
			out.runes, out.tags, out.elems = append(out.runes, r), append(out.tags, tags), append(out.elems, elems)
			i += n
		case strings.HasPrefix(s[i:], "</"):
			j := i + 2
			for j < len(s) && !tgSpace(s[j]) && s[j] != '>' {
				j++
			}
			name := strings.ToLower(s[i+2 : j])
			for j < len(s) && tgSpace(s[j]) {
				j++
			}
			switch {
			case j == len(s) || s[j] != '>':
				return out, fmt.Errorf("byte %d: unclosed end tag", i)
			case len(stack) == 0:
				return out, fmt.Errorf("byte %d: unexpected end tag", i)
			case name != "" && name != stack[len(stack)-1].name:
				return out, fmt.Errorf("byte %d: </%s> closes <%s>", i, name, stack[len(stack)-1].name)
			}
			markup -= stack[len(stack)-1].size
			stack, tags, elems = stack[:len(stack)-1], tags[:len(tags)-1], elems[:len(elems)-1]
			i = j + 1
		case s[i] == '<':
			raw, name, err := tgStartTag(s[i:])
			if err != nil {
				return out, fmt.Errorf("byte %d: %w", i, err)
			}
			size := utf16Len(raw) + len(name) + 3
			stack = append(stack, open{name, size})
			tags = append(tags[:len(tags):len(tags)], raw)
			elems = append(elems[:len(elems):len(elems)], opened)
			opened++
			markup += size
			out.markup = max(out.markup, markup)
			i += len(raw)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			out.runes, out.tags, out.elems = append(out.runes, r), append(out.tags, tags), append(out.elems, elems)
			i += n
		}
	}
	if len(stack) > 0 {
		return out, fmt.Errorf("<%s> is not closed", stack[len(stack)-1].name)
	}
	return out, nil
}

func tgEntity(s string) (rune, int, error) {
	if strings.HasPrefix(s, "&#") {
		j, base := 2, 10
		if j < len(s) && s[j] == 'x' {
			j, base = 3, 16
		}
		digits := j
		for j < len(s) && strings.IndexByte("0123456789abcdefABCDEF"[:base+max(0, base-10)], s[j]) >= 0 {
			j++
		}
		if j == digits || j >= 10 || j == len(s) || s[j] != ';' {
			return 0, 0, errors.New("bad numeric entity")
		}
		code, err := strconv.ParseInt(s[digits:j], base, 32)
		if err != nil || code == 0 || code >= 0x10ffff || code >= 0xd800 && code <= 0xdfff {
			return 0, 0, errors.New("bad character code")
		}
		return rune(code), j + 1, nil
	}
	for _, e := range []string{"&lt;<", "&gt;>", "&amp;&", "&quot;\""} {
		if name := e[:len(e)-1]; strings.HasPrefix(s, name) {
			return rune(e[len(e)-1]), len(name), nil
		}
	}
	return 0, 0, errors.New("'&' must be escaped")
}

// tgStartTag returns the opening tag s starts with and its name.
func tgStartTag(s string) (raw, name string, err error) {
	j := 1
	for j < len(s) && !tgSpace(s[j]) && s[j] != '>' {
		j++
	}
	name = strings.ToLower(s[1:j])
	if !tgTags[name] {
		return "", "", fmt.Errorf("unsupported tag %q", name)
	}
	class := ""
	for {
		for j < len(s) && tgSpace(s[j]) {
			j++
		}
		if j == len(s) {
			return "", "", errors.New("unclosed start tag")
		}
		if s[j] == '>' {
			break
		}
		a := j
		for j < len(s) && !tgSpace(s[j]) && strings.IndexByte("=>/\"'", s[j]) < 0 {
			j++
		}
		attr := s[a:j]
		if attr == "" {
			return "", "", errors.New("empty attribute name")
		}
		for j < len(s) && tgSpace(s[j]) {
			j++
		}
		if j == len(s) || s[j] != '=' {
			continue
		}
		j++
		for j < len(s) && tgSpace(s[j]) {
			j++
		}
		if j == len(s) {
			return "", "", errors.New("unclosed start tag")
		}
		var value string
		if q := s[j]; q == '"' || q == '\'' {
			k := strings.IndexByte(s[j+1:], q)
			if k < 0 {
				return "", "", errors.New("unclosed start tag")
			}
			value = s[j+1 : j+1+k]
			j += k + 2
		} else {
			v := j
			for j < len(s) && (s[j] == '.' || s[j] == '-' || s[j] >= '0' && s[j] <= '9' || unicode.IsLetter(rune(s[j])) && s[j] < utf8.RuneSelf) {
				j++
			}
			value = strings.ToLower(s[v:j])
			if j < len(s) && !tgSpace(s[j]) && s[j] != '>' {
				return "", "", errors.New("unexpected end of name token")
			}
		}
		if name == "span" && attr == "class" {
			class = value
		}
	}
	if name == "span" && class != "tg-spoiler" {
		return "", "", errors.New(`span without class "tg-spoiler"`)
	}
	return s[:j+1], name, nil
}
