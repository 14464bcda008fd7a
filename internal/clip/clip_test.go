package clip_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"switchboard/internal/clip"
)

func TestClipKeepsRunes(t *testing.T) {
	assert.Equal(t, "ab", clip.Clip("ab", 5))
	assert.Equal(t, "ab…", clip.Clip("abc", 2))
	assert.Equal(t, "ж…", clip.Clip("жж", 3), "a cut inside a rune backs off to its start")
}

func TestUTF16LenCountsAsTelegram(t *testing.T) {
	assert.Equal(t, 0, clip.UTF16Len(""))
	assert.Equal(t, 3, clip.UTF16Len("abc"))
	assert.Equal(t, 2, clip.UTF16Len("жж"), "a Cyrillic letter is one unit, though two bytes")
	assert.Equal(t, 2, clip.UTF16Len("😀"), "a rune past the BMP is a surrogate pair")
}
