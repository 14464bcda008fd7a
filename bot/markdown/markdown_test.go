package markdown_test

import (
	"fmt"
	"html"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/bot/markdown"
)

func TestHTML(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"plain text stays", "Just words, nothing else.", "Just words, nothing else."},
		{"line breaks kept", "one\ntwo  \nthree\\\nfour", "one\ntwo\nthree\nfour"},
		{"paragraphs", "one\n\n\n\ntwo", "one\n\ntwo"},
		{"bold and italics", "**b** __b__ *i* _i_ ***bi***", "<b>b</b> <b>b</b> <i>i</i> <i>i</i> <i><b>bi</b></i>"},
		{"strikethrough", "~~gone~~", "<s>gone</s>"},
		{"the issue's answer", "**Got it.** You wrote: “hi”.\n\n- I will keep this in mind.",
			"<b>Got it.</b> You wrote: “hi”.\n\n• I will keep this in mind."},
		{"nested bullets", "- a\n  - b\n    - c\n      - d", "• a\n   ◦ b\n      ▪ c\n         • d"},
		{"numbered from its start", "3. three\n4. four", "3. three\n4. four"},
		{"numbered with nested bullets", "1. one\n   - sub\n2. two", "1. one\n   ◦ sub\n2. two"},
		{"loose list", "- a\n\n  more of a\n- b", "• a\n\n   more of a\n• b"},
		{"task list", "- [ ] todo\n- [x] done", "• ☐ todo\n• ☑ done"},
		{"headings are bold lines", "# Title\n## Sub *it*\ntext", "<b>Title</b>\n\n<b>Sub <i>it</i></b>\n\ntext"},
		{"setext heading", "Title\n=====", "<b>Title</b>"},
		{"rule", "a\n\n---\n\nb", "a\n\n———\n\nb"},
		{"inline code escaped, no tags inside", "use `a<b> && **c**`", "use <code>a&lt;b&gt; &amp;&amp; **c**</code>"},
		{"fenced code with language", "```go\nif a < b {\n}\n```", "<pre><code class=\"language-go\">if a &lt; b {\n}</code></pre>"},
		{"fenced code without language", "```\nx\n```", "<pre>x</pre>"},
		{"language cannot leave its attribute", "```go\"><b>x\ny\n```", "<pre><code class=\"language-gobx\">y</code></pre>"},
		{"indented code", "text\n\n    code *x*\n", "text\n\n<pre>code *x*</pre>"},
		{"empty code block dropped", "a\n\n```\n```", "a"},
		{"blockquote", "> quoted **text**\n> more", "<blockquote>quoted <b>text</b>\nmore</blockquote>"},
		{"nested quote flattened", "> a\n>\n> > b", "<blockquote>a\nb</blockquote>"},
		{"code in a quote", "> ```\n> x\n> ```", "<blockquote><code>x</code></blockquote>"},
		{"link", "[docs](https://example.com/a?b=1&c=2)", `<a href="https://example.com/a?b=1&amp;c=2">docs</a>`},
		{"link schemes", "[a](http://x.y) [b](tg://user?id=1) [c](mailto:a@b.c) [d](HTTPS://X.Y)",
			`<a href="http://x.y">a</a> <a href="tg://user?id=1">b</a> <a href="mailto:a@b.c">c</a> <a href="HTTPS://X.Y">d</a>`},
		{"javascript link is text", "[click](javascript:alert(1))", "click"},
		{"relative link is text", "[file](/etc/passwd) [x](ftp://h/f)", "file x"},
		{"link without text shows its address", "[](https://x.y)", `<a href="https://x.y">https://x.y</a>`},
		{"link with quote in address", `[q](https://x.y/"onmouseover=")`, `<a href="https://x.y/%22onmouseover=%22">q</a>`},
		{"autolinks", "<https://x.y/z> <me@x.org>", `<a href="https://x.y/z">https://x.y/z</a> <a href="mailto:me@x.org">me@x.org</a>`},
		{"bare address left to Telegram", "see https://x.y now", "see https://x.y now"},
		{"code in a link is text", "[`f()` docs](https://x.y)", `<a href="https://x.y">f() docs</a>`},
		{"emphasis in a link", "[**bold** *it*](https://x.y)", `<a href="https://x.y"><b>bold</b> <i>it</i></a>`},
		{"image is its alt, linked", "![a chart](https://x.y/c.png)", `<a href="https://x.y/c.png">a chart</a>`},
		{"image with a bad address", "![a chart](data:image/png;base64,AAAA)", "a chart"},
		{"image without alt", "![](https://x.y/c.png)", `<a href="https://x.y/c.png">🖼</a>`},
		{"raw inline HTML is text", "a <script>alert('x')</script> <b>b</b>", "a &lt;script&gt;alert('x')&lt;/script&gt; &lt;b&gt;b&lt;/b&gt;"},
		{"raw HTML block is text", "<div onclick=\"x\">\nhi\n</div>", "&lt;div onclick=&#34;x&#34;&gt;\nhi\n&lt;/div&gt;"},
		{"HTML comment is text", "<!-- note -->", "&lt;!-- note --&gt;"},
		{"entities resolved then escaped", "AT&T &amp; &lt;b&gt; &copy; &#65; &bogus;", "AT&amp;T &amp; &lt;b&gt; © A &amp;bogus;"},
		{"backslash escapes", `\*not bold\* \<b\>`, "*not bold* &lt;b&gt;"},
		{"unclosed bold", "**never closed", "**never closed"},
		{"unclosed italic and code", "*open `tick", "*open `tick"},
		{"table", "| name | n |\n|---|---:|\n| **ann** | 1 |\n| bob | 22 |",
			"<pre>name │ n\n─────┼───\nann  │ 1\nbob  │ 22</pre>"},
		{"table with markup in cells", "| a<b> | `c` |\n|---|---|\n| & | [l](https://x.y) |",
			"<pre>a&lt;b&gt; │ c\n─────┼──\n&amp;    │ l</pre>"},
		{"only markup falls back to the source", "**", "**"},
		{"invalid UTF-8", "a\xffb", "a\uFFFDb"},
		{"NUL", "a\x00b", "a\uFFFDb"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := markdown.HTML(c.in)
			require.Equal(t, c.want, got)
			requireTelegramHTML(t, got)
		})
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, in, want string }{
		{"markup gone", "**Fix** the `login()` *page*", "Fix the login() page"},
		{"raw HTML kept as typed", "review my <b>PR</b> & merge", "review my <b>PR</b> & merge"},
		{"links keep their text", "[docs](https://x.y) and [x](javascript:1)", "docs and x"},
		{"heading", "## Plan", "Plan"},
		{"list", "- a\n- b", "• a\n• b"},
		{"entities", "&lt;x&gt; &amp;", "<x> &"},
		{"only markup", "__", "__"},
		{"table", "| a | b |\n|---|---|\n| 1 | 2 |", "a | b\n1 | 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, markdown.Text(c.in))
		})
	}
}

// A long answer: every part bot.Split cuts is well-formed Telegram HTML,
// and together they hold the whole text.
func TestLongAnswerSplits(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	for i := range 120 {
		fmt.Fprintf(&sb, "## Step %d\n\n**Bold %d** with *italic [link](https://x.y/%d)* and `code`.\n\n", i, i, i)
		fmt.Fprintf(&sb, "- item with <tag> & entity\n  - nested ~~item~~\n\n> quote %d\n\n```go\nfunc f%d() { return a < b }\n```\n\n", i, i)
	}
	out := markdown.HTML(sb.String())
	parts := bot.Split(out, bot.MaxMessageLen)
	require.Greater(t, len(parts), 5)
	var all strings.Builder
	for _, p := range parts {
		require.LessOrEqual(t, len([]rune(p)), bot.MaxMessageLen)
		requireTelegramHTML(t, p)
		all.WriteString(plain(p))
	}
	for i := range 120 {
		require.Contains(t, all.String(), fmt.Sprintf("func f%d() { return a < b }", i))
	}
	require.NotContains(t, all.String(), "**")
}

// Random Markdown-ish text, cut at random limits: the rendering and every
// part of it are Telegram HTML. (e2e/tgfake checks the same with the fake
// Telegram's own parser.)
func TestRandomMarkdownIsTelegramHTML(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3000) {
		in := RandomMarkdown(seed)
		out := markdown.HTML(in)
		requireTelegramHTML(t, out, "input %q", in)
		rng := rand.New(rand.NewPCG(seed, 7))
		for _, p := range bot.Split(out, 20+rng.IntN(300)) {
			requireTelegramHTML(t, p, "input %q, part of %q", in, out)
		}
	}
}

// RandomMarkdown is text of Markdown's pieces in random order, many of
// them unbalanced.
func RandomMarkdown(seed uint64) string {
	pieces := []string{
		"**", "*", "_", "__", "~~", "`", "```", "```go\n", "\n", "\n\n", "- ", "  - ", "1. ", "> ", "# ", "## ",
		"[", "]", "(", ")", "](https://x.y/?a=1&b=2)", "](javascript:alert(1))", "![", "<", ">", "<b>", "</b>",
		"<script>", "</i>", "&", "&amp;", "&lt;", "&#0;", "&#x1F600;", "\\", "|", "|---|", "word", " ", "слово",
		"😀", "👨‍👩‍👧", "<https://a.b>", "<a@b.c>", "---", "\t", "    ", "- [ ] ", "\"", "'",
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var sb strings.Builder
	for range 1 + rng.IntN(60) {
		sb.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return sb.String()
}

var (
	tagRx    = regexp.MustCompile(`^<(/?)([a-z-]+)((?: [a-z-]+="[^"<>]*")*)>`)
	entityRx = regexp.MustCompile(`^&(?:amp|lt|gt|quot|#\d{1,7}|#x[0-9a-fA-F]{1,6});`)
)

// requireTelegramHTML checks s by Telegram's rules for what the renderer
// writes: known tags only, balanced and properly nested, nothing inside
// <code> or <pre> but the <code> of a language, no link in a link, no
// quote in a quote, every & an entity, some visible text.
func requireTelegramHTML(t *testing.T, s string, msg ...any) {
	t.Helper()
	known := map[string]bool{"b": true, "i": true, "s": true, "u": true, "code": true, "pre": true, "a": true, "blockquote": true}
	var stack []string
	visible := false
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			m := tagRx.FindStringSubmatch(s[i:])
			require.NotNil(t, m, append([]any{"a '<' that is no tag at %d in %q", i, s}, msg...)...)
			name := m[2]
			require.True(t, known[name], "tag %q in %q", name, s)
			if m[1] == "" {
				if n := len(stack); n > 0 {
					top := stack[n-1]
					require.False(t, top == "code" || top == "pre" && name != "code", "<%s> inside <%s> in %q", name, top, s)
				}
				for _, open := range stack {
					require.False(t, open == name && (name == "a" || name == "blockquote" || name == "code" || name == "pre"),
						"<%s> inside <%s> in %q", name, open, s)
				}
				stack = append(stack, name)
			} else {
				require.NotEmpty(t, stack, "</%s> closes nothing in %q", name, s)
				require.Equal(t, stack[len(stack)-1], name, "misnested in %q", s)
				stack = stack[:len(stack)-1]
			}
			i += len(m[0])
		case '&':
			m := entityRx.FindString(s[i:])
			require.NotEmpty(t, m, append([]any{"a bare & at %d in %q", i, s}, msg...)...)
			visible = true
			i += len(m)
		case '>':
			t.Fatalf("a bare > at %d in %q", i, s)
		default:
			if s[i] != ' ' && s[i] != '\n' && s[i] != '\t' {
				visible = true
			}
			i++
		}
	}
	require.Empty(t, stack, "unclosed tags in %q", s)
	if s != "" {
		require.True(t, visible, "no visible text in %q", s)
	}
}

// plain is s without tags, unescaped.
func plain(s string) string {
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(s, ""))
}
