package domain

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// A change the table refuses wraps the workflow's sentinel and names the
// change; a state nothing leaves is final.
func TestTransitionsCheckNamesTheChange(t *testing.T) {
	type light string
	errIllegal := errors.New("illegal light change")
	table := NewTransitions(errIllegal, "lamp", map[light][]light{"red": {"green"}, "green": {"red", "off"}})

	require.True(t, table.Can("red", "green"))
	require.NoError(t, table.Check("red", "green"))
	err := table.Check("red", "off")
	require.ErrorIs(t, err, errIllegal)
	require.EqualError(t, err, "illegal light change: lamp red → off")
	require.EqualError(t, NewTransitions(errIllegal, "", map[light][]light{}).Check("off", "red"), "illegal light change: off → red")
	require.True(t, table.Final("off"))
	require.False(t, table.Final("green"))
}
