package vacancy_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
)

func TestNamesSkill(t *testing.T) {
	t.Parallel()
	const profile = "Backend developer: 5 years of Golang and PostgreSQL, some k8s; Node.js on the side. " +
		"C++ at university. Английский — B2. Worked at Google."
	for _, tc := range []struct {
		skill string
		want  bool
	}{
		{"Go", true},              // through its alias golang
		{"GOLANG", true},          // case folded
		{"PostgreSQL", true},      // as written
		{"Postgres", true},        // alias of what is written
		{"Kubernetes", true},      // k8s
		{"Node.js", true},         // "node js" as words
		{"NodeJS", true},          // alias of node js
		{"C++", true},             // + is part of the word
		{"C", false},              // C++ is not C
		{"C#", false},             //
		{"Английский язык", true}, // through its alias английский
		{"English", true},         // alias of английский
		{"Goo", false},            // no word "goo"
		{"Docker", false},         //
		{"  ", false},             // no word at all
	} {
		require.Equal(t, tc.want, vacancy.NamesSkill(profile, tc.skill), tc.skill)
	}
	require.False(t, vacancy.NamesSkill("", "Go"))
	require.False(t, vacancy.NamesSkill("I like Google Cloud", "Go"), "a word inside another word is not the word")
}
