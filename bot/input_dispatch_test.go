package bot_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDispatchNonMasterPhotoAndLocationAnswered: with the dispatch
// workflow, a photo or a location from someone who is not a master is
// answered, in their language, instead of met with silence.
func TestDispatchNonMasterPhotoAndLocationAnswered(t *testing.T) {
	t.Parallel()
	env := setupDispatch(t)
	ola := env.srv.User(44, "Оля", "uk")
	photo := ola.SendPhoto(ola.ID(), "ось")
	require.Equal(t, unreadUK, env.srv.WaitMessageAfter(t, ola.ID(), photo.MessageID, nil).Text)
	loc := ola.SendLocation(ola.ID(), 50.45, 30.52)
	require.Equal(t, unreadUK, env.srv.WaitMessageAfter(t, ola.ID(), loc.MessageID, nil).Text)
}
