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
