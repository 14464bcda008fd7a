package hhtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Both highlight paths must agree; the byte path is only an optimisation.
func TestHighlightPathsAgree(t *testing.T) {
	cases := []struct {
		s     string
		words []string
		want  string
	}{
		{"Писать на Голанге.", []string{"голанг"}, "Писать на <highlighttext>Голанг</highlighttext>е."},
		{"Go и GO и go", []string{"go"}, "<highlighttext>Go</highlighttext> и <highlighttext>GO</highlighttext> и <highlighttext>go</highlighttext>"},
		{"Опыт с Kafka, опытный", []string{"опыт", "kafka"}, "<highlighttext>Опыт</highlighttext> с <highlighttext>Kafka</highlighttext>, <highlighttext>опыт</highlighttext>ный"},
		{"ничего", []string{"go"}, "ничего"},
		// 'İ' lower-cases to two runes' worth of bytes, forcing the rune path.
		{"İstanbul go", []string{"go"}, "İstanbul <highlighttext>go</highlighttext>"},
	}
	for _, c := range cases {
		require.Equal(t, c.want, highlight(c.s, c.words), c.s)
		require.Equal(t, c.want, highlightRunes(c.s, c.words), c.s)
	}
}
