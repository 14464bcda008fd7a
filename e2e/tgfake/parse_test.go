package tgfake

import (
	"testing"

	"github.com/stretchr/testify/require"
)

type parseCase struct {
	name string
	in   string
	text string
	ents []MessageEntity
	err  string
}

func ent(typ string, off, length int) MessageEntity {
	return MessageEntity{Type: typ, Offset: off, Length: length}
}

func runParseCases(t *testing.T, parse func(string) (string, []MessageEntity, error), cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text, ents, err := parse(tc.in)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.text, text)
			if len(tc.ents) == 0 {
				require.Empty(t, ents)
			} else {
				require.Equal(t, tc.ents, ents)
			}
		})
	}
}

// The expectations below follow TDLib's parse_html, which the Bot API uses;
// error strings are Telegram's.
func TestParseHTML(t *testing.T) {
	withURL := func(e MessageEntity, url string) MessageEntity { e.URL = url; return e }
	withLang := func(e MessageEntity, lang string) MessageEntity { e.Language = lang; return e }
	emoji := ent("custom_emoji", 0, 2)
	emoji.CustomEmojiID = "5368324170671202286"
	mention := ent("text_mention", 0, 3)
	mention.User = &User{ID: 42}
	when := func(e MessageEntity, unix int64, format string) MessageEntity {
		e.UnixTime, e.DateTimeFormat = unix, format
		return e
	}

	runParseCases(t, parseHTML, []parseCase{
		{name: "plain", in: "hello", text: "hello"},
		{name: "bold and italic", in: "<b>bold</b> <i>it</i>", text: "bold it", ents: []MessageEntity{ent("bold", 0, 4), ent("italic", 5, 2)}},
		{name: "tag aliases", in: "<strong>a</strong><em>b</em><ins>c</ins><strike>d</strike><del>e</del><s>f</s><u>g</u>", text: "abcdefg",
			ents: []MessageEntity{ent("bold", 0, 1), ent("italic", 1, 1), ent("underline", 2, 1), ent("strikethrough", 3, 1),
				ent("strikethrough", 4, 1), ent("strikethrough", 5, 1), ent("underline", 6, 1)}},
		{name: "tags are case-insensitive", in: "<B>x</B>", text: "x", ents: []MessageEntity{ent("bold", 0, 1)}},
		{name: "nested", in: "<b>a<i>b</i></b>", text: "ab", ents: []MessageEntity{ent("bold", 0, 2), ent("italic", 1, 1)}},
		{name: "empty end tag closes the innermost", in: "<b>x</>", text: "x", ents: []MessageEntity{ent("bold", 0, 1)}},
		{name: "empty element has no entity", in: "<b></b>x", text: "x"},
		{name: "spoilers", in: `<span class="tg-spoiler">a</span><tg-spoiler>b</tg-spoiler>`, text: "ab",
			ents: []MessageEntity{ent("spoiler", 0, 1), ent("spoiler", 1, 1)}},
		{name: "link with raw ampersand in attribute", in: `<a href="https://example.com/?a=1&b=2">x</a>`, text: "x",
			ents: []MessageEntity{withURL(ent("text_link", 0, 1), "https://example.com/?a=1&b=2")}},
		{name: "link without href uses the text", in: `<a>example.com</a>`, text: "example.com",
			ents: []MessageEntity{withURL(ent("text_link", 0, 11), "http://example.com/")}},
		{name: "invalid link is dropped silently", in: `<a href="javascript:alert(1)">x</a>`, text: "x"},
		{name: "user mention", in: `<a href="tg://user?id=42">Bob</a>`, text: "Bob", ents: []MessageEntity{mention}},
		{name: "pre with language", in: `<pre><code class="language-go">x := 1</code></pre>`, text: "x := 1",
			ents: []MessageEntity{withLang(ent("pre", 0, 6), "go")}},
		{name: "code and pre", in: "<code>c</code> <pre>p</pre>", text: "c p", ents: []MessageEntity{ent("code", 0, 1), ent("pre", 2, 1)}},
		{name: "blockquotes", in: "<blockquote>q</blockquote><blockquote expandable>e</blockquote>", text: "qe",
			ents: []MessageEntity{ent("blockquote", 0, 1), ent("expandable_blockquote", 1, 1)}},
		{name: "custom emoji", in: `<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>`, text: "👍", ents: []MessageEntity{emoji}},
		{name: "date and time", in: `Due <tg-time unix="1795975880" format="wDT">29 Nov, 17:31</tg-time>.`, text: "Due 29 Nov, 17:31.",
			ents: []MessageEntity{when(ent("date_time", 4, 13), 1795975880, "wDT")}},
		{name: "date and time shown as written", in: `<tg-time unix="1795975880">today</tg-time>`, text: "today",
			ents: []MessageEntity{when(ent("date_time", 0, 5), 1795975880, "")}},
		{name: "relative time", in: `<tg-time unix="1795975880" format="r">soon</tg-time>`, text: "soon",
			ents: []MessageEntity{when(ent("date_time", 0, 4), 1795975880, "r")}},
		{name: "entities", in: "&lt;&gt;&amp;&quot;&#60;&#x3E;&#1071;", text: `<>&"<>Я`},
		{name: "bare greater-than is fine", in: "a > b", text: "a > b"},
		{name: "offsets in UTF-16", in: "😀я<b>x</b>", text: "😀яx", ents: []MessageEntity{ent("bold", 3, 1)}},

		{name: "unclosed", in: "<b>x", err: `Can't find end tag corresponding to start tag "b"`},
		{name: "unknown tag", in: "<foo>x</foo>", err: `Unsupported start tag "foo" at byte offset 0`},
		{name: "br is not supported", in: "a<br>b", err: `Unsupported start tag "br" at byte offset 1`},
		{name: "mismatched", in: "a <b>x</i></b>", err: `Unmatched end tag at byte offset 6, expected "</b>", found "</i>"`},
		{name: "unexpected end tag", in: "x</b>", err: "Unexpected end tag at byte offset 1"},
		{name: "bare less-than", in: "1 < 2", err: `Unsupported start tag "" at byte offset 2`},
		{name: "less-than at the end", in: "a <", err: "Unclosed start tag at byte offset 2"},
		{name: "unclosed end tag", in: "<b>x</b", err: "Unclosed end tag at byte offset 4"},
		{name: "span without class", in: "<span>x</span>", err: `Tag "span" must have class "tg-spoiler" at byte offset 0`},
		{name: "bad emoji id", in: `<tg-emoji emoji-id="abc">x</tg-emoji>`, err: "Invalid custom emoji identifier specified"},
		{name: "time without unix", in: `<tg-time format="t">x</tg-time>`, err: `Invalid Unix time "" in the tag "tg-time" (tgfake)`},
		{name: "time with a bad format", in: `<tg-time unix="1" format="rT">x</tg-time>`,
			err: `Invalid date and time format "rT" in the tag "tg-time" (tgfake)`},
		{name: "time format out of order", in: `<tg-time unix="1" format="Tw">x</tg-time>`,
			err: `Invalid date and time format "Tw" in the tag "tg-time" (tgfake)`},
		{name: "bad name token", in: `<a href=x"y">z</a>`, err: "Unexpected end of name token at byte offset 8"},
		{name: "unescaped ampersand", in: "AT&T", err: `Character '&' at byte offset 2 must be escaped as "&amp;"`},
		{name: "entity without semicolon", in: "&lt", err: `Character '&' at byte offset 0 must be escaped as "&amp;"`},
		{name: "unsupported named entity", in: "&apos;", err: `Character '&' at byte offset 0 must be escaped as "&amp;"`},
		{name: "zero code point", in: "&#0;", err: `Character '&' at byte offset 0 must be escaped as "&amp;"`},
	})
}

func TestParseMarkdownV2(t *testing.T) {
	withURL := func(e MessageEntity, url string) MessageEntity { e.URL = url; return e }
	withLang := func(e MessageEntity, lang string) MessageEntity { e.Language = lang; return e }
	runParseCases(t, parseMarkdownV2, []parseCase{
		{name: "styles", in: "*b* _i_ __u__ ~s~ ||p||", text: "b i u s p",
			ents: []MessageEntity{ent("bold", 0, 1), ent("italic", 2, 1), ent("underline", 4, 1), ent("strikethrough", 6, 1), ent("spoiler", 8, 1)}},
		{name: "code and pre", in: "`code` ```go\nfmt.Println()```", text: "code fmt.Println()",
			ents: []MessageEntity{ent("code", 0, 4), withLang(ent("pre", 5, 13), "go")}},
		{name: "link", in: "[site](https://example.com)", text: "site", ents: []MessageEntity{withURL(ent("text_link", 0, 4), "https://example.com/")}},
		{name: "escapes", in: `1\.5 \! \- \_`, text: "1.5 ! - _"},
		{name: "reserved characters are literal in code", in: "`a.b-c`", text: "a.b-c", ents: []MessageEntity{ent("code", 0, 5)}},
		{name: "blockquote", in: ">quote line\n>second", text: "quote line\nsecond", ents: []MessageEntity{ent("blockquote", 0, 17)}},
		{name: "expandable blockquote", in: "**>abc\n>def||", text: "abc\ndef", ents: []MessageEntity{ent("expandable_blockquote", 0, 7)}},

		{name: "unescaped dot", in: "Hello.", err: `Character '.' is reserved and must be escaped with the preceding '\'`},
		{name: "unescaped dash", in: "a-b", err: `Character '-' is reserved and must be escaped with the preceding '\'`},
		{name: "unclosed bold", in: "*bold", err: "Can't find end of Bold entity at byte offset 0"},
		{name: "snake_case", in: "a_b", err: "Can't find end of Italic entity at byte offset 1"},
		{name: "unclosed url", in: "[text](https://x.com", err: "Can't find end of a URL at byte offset 7"},
		{name: "greater-than mid-line", in: "a > b", err: `Character '>' is reserved and must be escaped with the preceding '\'`},
		{name: "single pipe", in: "a|b", err: `Character '|' is reserved and must be escaped with the preceding '\'`},
	})
}

func TestParseMarkdown(t *testing.T) {
	withURL := func(e MessageEntity, url string) MessageEntity { e.URL = url; return e }
	runParseCases(t, parseMarkdown, []parseCase{
		{name: "styles", in: "*b* _i_ `c` [x](https://example.com)", text: "b i c x",
			ents: []MessageEntity{ent("bold", 0, 1), ent("italic", 2, 1), ent("code", 4, 1), withURL(ent("text_link", 6, 1), "https://example.com/")}},
		{name: "escapes", in: `snake\_case`, text: "snake_case"},
		{name: "dots are fine", in: "Done.", text: "Done."},
		{name: "unclosed", in: "*unclosed", err: "Can't find end of the entity starting at byte offset 0"},
	})
}

// A server older than Bot API 9.5 does not know <tg-time>: it refuses the
// tag as any unknown one.
func TestDateTimeOnAnOlderServer(t *testing.T) {
	srv := New(t)
	text := `Due <tg-time unix="1795975880" format="dt">29 Nov, 17:31</tg-time>`
	f, err := srv.formatText(text, "HTML", "", false)
	require.Nil(t, err)
	require.Equal(t, "date_time", f.Entities[0].Type)

	srv.SetUnsupported(true, FeatureDateTime)
	_, err = srv.formatText(text, "HTML", "", false)
	require.NotNil(t, err)
	require.Equal(t, `Bad Request: can't parse entities: Unsupported start tag "tg-time" at byte offset 4`, err.Description)
}

func TestFormatTextTrimming(t *testing.T) {
	srv := New(t)
	f, err := srv.formatText("  \n<b>hi</b> there \n\n", "HTML", "", false)
	require.Nil(t, err)
	require.Equal(t, "hi there", f.Text)
	require.Equal(t, []MessageEntity{ent("bold", 0, 2)}, f.Entities)

	f, err = srv.formatText("run /start or see https://example.com, ask @support_team", "", "", false)
	require.Nil(t, err)
	require.Equal(t, []MessageEntity{ent("bot_command", 4, 6), ent("url", 18, 19), ent("mention", 43, 13)}, f.Entities)

	_, err = srv.formatText(" \n ", "", "", false)
	require.Equal(t, DescTextMustBeNonEmpty, err.Description)
	f, err = srv.formatText(" \n ", "", "", true)
	require.Nil(t, err, "captions may be empty")
	require.Empty(t, f.Text)
}
