package bot

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/locales"
)

// A commission deadline is typically whole days: "7 d", never "7 d 0 h".
func TestDurationOfWholeDays(t *testing.T) {
	rd := NewRenderer(RenderConfig{}, locales.MustLoad(), nil)
	for _, c := range []struct {
		lang string
		d    time.Duration
		want string
	}{
		{"en", 7 * 24 * time.Hour, "7 d"},
		{"ru", 7 * 24 * time.Hour, "7 д"},
		{"uk", 7 * 24 * time.Hour, "7 д"},
		{"en", 7*24*time.Hour + 3*time.Hour, "7 d 3 h"},
		{"uk", 26 * time.Hour, "1 д 2 год"},
		{"en", 3 * time.Hour, "3 h"},
	} {
		require.Equal(t, c.want, rd.duration(c.lang, c.d), "%s %s", c.lang, c.d)
	}
}
