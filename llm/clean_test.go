package llm_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"switchboard/llm"
)

// What the model writes is stored (an answer, a letter, a proposal), so
// the Client hands back nothing PostgreSQL refuses: NUL and the escapes
// jsonb cannot hold become U+FFFD, whichever provider answered.

func TestTextAnswerLosesNUL(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		srv.On().Reply("Dear team,\x00 I am\x00\x00 keen.")
		c, _ := newClient(t, srv, provider, nil)

		out, err := c.Text(context.Background(), llm.Request{Prompt: "write", Label: "letter"})
		require.NoError(t, err)
		require.Equal(t, "Dear team,\uFFFD I am\uFFFD\uFFFD keen.", out)
	})
}

type cleanedAnswer struct {
	Title string   `json:"title"`
	Notes []string `json:"notes"`
}

func TestJSONAnswerEscapesBecomeReplacement(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		// The escapes as the model wrote them, inside its JSON: Go's decoder
		// alone would make \u0000 a NUL (a lone half it already makes U+FFFD).
		srv.On().Reply(`{"title": "Go\u0000 dev", "notes": ["smile \ud83d", "\ude00 end", "pair \ud83d\ude00", "text \\u0000"]}`)
		c, _ := newClient(t, srv, provider, nil)

		var got cleanedAnswer
		require.NoError(t, c.JSON(context.Background(), llm.Request{Prompt: "extract", Label: "profile"}, &got))
		require.Equal(t, cleanedAnswer{
			Title: "Go\uFFFD dev",
			Notes: []string{"smile \uFFFD", "\uFFFD end", "pair \U0001F600", `text \u0000`},
		}, got, "a pair and an escaped backslash are kept")
		for _, s := range append(got.Notes, got.Title) {
			require.NotContains(t, s, "\x00")
			require.True(t, utf8.ValidString(s), "%q", s)
		}
	})
}

func TestStreamedPartialsLoseNUL(t *testing.T) {
	forEachProvider(t, func(t *testing.T, provider string) {
		srv := newServer(t)
		const answer = "Lviv\x00 is lovely\x00 in spring."
		srv.On().Reply(answer).ChunkDelay(time.Millisecond)
		c, _ := newClient(t, srv, provider, nil)

		var p partials
		out, err := c.Text(context.Background(), llm.Request{Prompt: "where", Partial: p.add})
		require.NoError(t, err)
		require.Equal(t, strings.ReplaceAll(answer, "\x00", "\uFFFD"), out)
		seen := p.all()
		require.Greater(t, len(seen), 1, "the answer came in pieces: %q", seen)
		for _, s := range seen {
			require.NotContains(t, s, "\x00", "a partial is shown (and may be stored) as it comes")
		}
		require.Equal(t, out, seen[len(seen)-1])
	})
}
