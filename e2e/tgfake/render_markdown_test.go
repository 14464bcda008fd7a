package tgfake

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/bot/markdown"
)

// mdPieces are Markdown's pieces, HTML and entities a model may write,
// combined at random (mostly unbalanced) by the tests below.
var mdPieces = []string{
	"**", "*", "_", "__", "~~", "`", "```", "```go\n", "```c++ x\n", "\n", "\n\n", "- ", "  - ", "    - ", "1. ", "2) ",
	"> ", "> > ", "# ", "### ", "[", "]", "(", ")", "](https://x.y/?a=1&b=2)", "](javascript:alert(1))", "](tg://user?id=5)",
	"![", "<", ">", "<b>", "</b>", "<script>", "</i>", "<a href=\"x\">", "&", "&amp;", "&lt;", "&#0;", "&#x1F600;",
	"&nbsp;", "\\", "|", "|---|", "| a | b |\n|---|---|\n", "word", " ", "слово", "😀", "👨‍👩‍👧", "<https://a.b>",
	"<a@b.c>", "---", "\t", "    ", "- [ ] ", "- [x] ", "\"", "'", "\r\n", "  \n",
}

func randomMarkdown(rng *rand.Rand) string {
	var sb strings.Builder
	for range 1 + rng.IntN(80) {
		sb.WriteString(mdPieces[rng.IntN(len(mdPieces))])
	}
	return sb.String()
}

// checkRendered requires that the fake Telegram's HTML parser accepts the
// rendering of src and every part bot.Split cuts of it at limit.
func checkRendered(t *testing.T, src string, limit int) {
	t.Helper()
	out := markdown.HTML(src)
	_, _, err := parseHTML(out)
	require.NoError(t, err, "Markdown %q rendered as %q", src, out)
	for _, p := range bot.Split(out, limit) {
		_, _, err := parseHTML(p)
		require.NoError(t, err, "Markdown %q: part %q of %q", src, p, out)
	}
}

// Whatever Markdown a model writes, the bot's rendering of it, whole and
// split into messages, is HTML this fake Telegram (TDLib's parser) takes.
func TestMarkdownRenderingParses(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5000) {
		rng := rand.New(rand.NewPCG(seed, 23))
		checkRendered(t, randomMarkdown(rng), 16+rng.IntN(400))
	}
}

func FuzzMarkdownRenderingParses(f *testing.F) {
	for seed := range uint64(20) {
		f.Add(randomMarkdown(rand.New(rand.NewPCG(seed, 5))), 64)
	}
	f.Add("**Got it.** You wrote…\n\n- I will keep this in mind.\n\n# Plan\n\n```go\nx := a < b\n```\n[site](https://x.y) <script>alert(1)</script> & done", 4096)
	f.Fuzz(func(t *testing.T, src string, limit int) {
		checkRendered(t, src, 16+abs(limit)%4096)
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
