package domain_test

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
)

// Each character jsonb refuses becomes U+FFFD, wherever it stands (a text,
// a key, a nested name); a body with none is returned untouched, byte for
// byte, including its escaped emoji (a surrogate pair, which jsonb takes).
func TestCleanJSON(t *testing.T) {
	cases := []struct {
		name, in, text string
		changed        bool
	}{
		{"plain", `{"text":"hi"}`, "hi", false},
		{"pair", `{"text":"smile \ud83d\ude00"}`, "smile \U0001F600", false},
		{"pair upper", `{"text":"\uD83D\uDE00"}`, "\U0001F600", false},
		{"escaped backslash then u0000 text", `{"text":"\\u0000"}`, `\u0000`, false},
		{"nul", `{"text":"a\u0000b"}`, "a\uFFFDb", true},
		{"lone high", `{"text":"x\ud83d"}`, "x\uFFFD", true},
		{"high then plain", `{"text":"\ud83dA"}`, "\uFFFDA", true},
		{"high then high", `{"text":"\ud83d\ud83d"}`, "\uFFFD\uFFFD", true},
		{"lone low", `{"text":"\ude00y"}`, "\uFFFDy", true},
		{"bad utf8", "{\"text\":\"a\xffb\"}", "a\uFFFDb", true},
		{"nul at the end", `{"text":"oa:1\u0000"}`, "oa:1\uFFFD", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, changed := domain.CleanJSON([]byte(c.in))
			require.Equal(t, c.changed, changed)
			if !changed {
				require.Equal(t, c.in, string(out), "untouched")
			}
			var v struct{ Text string }
			require.NoError(t, json.Unmarshal(out, &v))
			require.Equal(t, c.text, v.Text)
		})
	}
	// Keys and nested strings too; big ids keep every digit.
	out, changed := domain.CleanJSON([]byte(`{"update_id":9007199254740993,"a\u0000":{"b":["\u0000"]}}`))
	require.True(t, changed)
	require.JSONEq(t, `{"update_id":9007199254740993,"a\uFFFD":{"b":["\uFFFD"]}}`, string(out))
}

func TestCleanText(t *testing.T) {
	require.Equal(t, "ok", domain.CleanText("ok"))
	require.Equal(t, "a\uFFFDb\uFFFD", domain.CleanText("a\x00b\xff"))
	require.True(t, utf8.ValidString(domain.CleanText("\xed\xa0\xbd"))) // a surrogate in UTF-8 form
}
