package resume_test

import (
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"switchboard/domain/resume"
)

// A résumé's text is stored, and PostgreSQL's text refuses NUL: a text
// file in UTF-16 or UTF-32 (where NUL is two or four zero bytes, so the
// binary check on raw bytes cannot see it) comes back without one.
func TestExtractDropsNUL(t *testing.T) {
	t.Parallel()
	const written = "Go\x00developer,\x00\x00seven years\x00\nPostgreSQL\x00 and Kafka\x00"
	const want = "Go developer, seven years\nPostgreSQL and Kafka"

	utf16 := []byte{0xFF, 0xFE}
	utf32 := []byte{0xFF, 0xFE, 0, 0}
	for _, r := range written {
		utf16 = append(utf16, byte(r), byte(r>>8))
		utf32 = append(utf32, byte(r), byte(r>>8), byte(r>>16), byte(r>>24))
	}
	for name, data := range map[string][]byte{"utf-16le bom": utf16, "utf-32le bom": utf32} {
		text, err := resume.Extract(data, resume.Text, 20)
		require.NoError(t, err, name)
		require.NotContains(t, text, "\x00", name)
		require.True(t, utf8.ValidString(text), name)
		require.Equal(t, want, text, "%s: a NUL parts words as a space would", name)
	}

	// In UTF-8 a NUL byte marks a binary file, refused rather than read.
	_, err := resume.Extract([]byte(written), resume.Text, 20)
	require.ErrorIs(t, err, resume.ErrUnreadable)
}
