package vacancy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
)

// DESIGN.md's table, written out independently of the code's, plus the
// archive of every open match of a vacancy HH no longer serves.
func TestTransitionTableIsDesigns(t *testing.T) {
	t.Parallel()
	allowed := map[[2]vacancy.Status]bool{
		{vacancy.New, vacancy.Queued}:               true,
		{vacancy.Queued, vacancy.InArchive}:         true,
		{vacancy.Queued, vacancy.Analyzed}:          true,
		{vacancy.Queued, vacancy.NotSuitable}:       true,
		{vacancy.Queued, vacancy.Skipped}:           true,
		{vacancy.Analyzed, vacancy.SentToUser}:      true,
		{vacancy.SentToUser, vacancy.Applied}:       true,
		{vacancy.SentToUser, vacancy.NotInterested}: true,
		{vacancy.Skipped, vacancy.New}:              true,
		{vacancy.New, vacancy.InArchive}:            true,
		{vacancy.Skipped, vacancy.InArchive}:        true,
	}
	for _, from := range vacancy.Statuses {
		for _, to := range vacancy.Statuses {
			require.Equal(t, allowed[[2]vacancy.Status{from, to}], vacancy.CanTransition(from, to), "%s → %s", from, to)
		}
	}
	for _, s := range []vacancy.Status{vacancy.NotSuitable, vacancy.InArchive, vacancy.Applied, vacancy.NotInterested} {
		require.True(t, s.Final(), s)
	}
	require.False(t, vacancy.Status("DONE").Valid())
}

func TestParseParams(t *testing.T) {
	t.Parallel()
	p, err := vacancy.ParseParams("golang  backend area=1 salary=250000 experience=between3And6 schedule=remote")
	require.NoError(t, err)
	require.Equal(t, vacancy.Params{Text: "golang backend", Area: "1", Salary: 250000, Experience: "between3And6", Schedule: "remote"}, p)
	require.Equal(t, "golang backend area=1 salary=250000 experience=between3And6 schedule=remote", p.String())

	for args, key := range map[string]string{
		"":                         "search.error_no_text",
		"area=1":                   "search.error_no_text",
		"go city=1":                "search.error_unknown",
		"go salary=lots":           "search.error_salary",
		"go salary=-5":             "search.error_salary",
		"go area=moscow":           "search.error_area",
		"go experience=moreThan6":  "search.error_experience",
		"go schedule=night":        "search.error_schedule",
		"go area=1 area=2":         "search.error_duplicate",
		strings.Repeat("go ", 100): "search.error_too_long",
	} {
		_, err := vacancy.ParseParams(args)
		var pe *vacancy.ParamError
		require.True(t, errors.As(err, &pe), "%q: %v", args, err)
		require.Equal(t, key, pe.Key, args)
	}
}

func TestSearchKeyIgnoresCaseSpacingAndOrder(t *testing.T) {
	t.Parallel()
	a, _ := vacancy.ParseParams("Go  Developer salary=100 area=1")
	b, _ := vacancy.ParseParams("area=1 go developer salary=100")
	c, _ := vacancy.ParseParams("go developer area=2 salary=100")
	require.Equal(t, a.Key(), b.Key())
	require.NotEqual(t, a.Key(), c.Key())
	require.Len(t, a.Key(), 64)
}

func TestBansMatchWholeWordsAndPhrases(t *testing.T) {
	t.Parallel()
	bans := vacancy.NewBans([]string{vacancy.NormalizeBanWord("Java"), vacancy.NormalizeBanWord("1С-Битрикс"),
		vacancy.NormalizeBanWord("C++"), vacancy.NormalizeBanWord("  Тех   Поддержка ")})
	for text, want := range map[string]string{
		"Senior JAVA developer":         "java",
		"JavaScript developer":          "",
		"Программист 1с-битрикс":        "1с битрикс",
		"Битрикс24 интегратор":          "",
		"C++ engineer":                  "c++",
		"C engineer":                    "",
		"Инженер тех. поддержки":        "",
		"Инженер техподдержки":          "",
		"Инженер: тех — поддержка, 2/2": "тех поддержка",
		"Ёлка и ТЕХ ПОДДЕРЖКА":          "тех поддержка",
	} {
		require.Equal(t, want, bans.Match(text), text)
	}
	require.Equal(t, "ежик", vacancy.NormalizeBanWord("Ёжик"), "ё folds to е")
	require.Equal(t, "ежик", vacancy.NewBans([]string{"ежик"}).Match("Продаём ЁЖИК"))
	require.Empty(t, vacancy.NormalizeBanWord(" -- "))
}

func TestPlainText(t *testing.T) {
	t.Parallel()
	in := `<p><strong>Обязанности:</strong></p><ul><li>писать&nbsp;код</li><li>ревью &lt;PR&gt;</li></ul>` +
		`<style>p{}</style><p>Мы &mdash; команда.<br/>Удалёнка.</p>`
	require.Equal(t, "Обязанности:\n\n• писать код\n• ревью <PR>\n\nМы — команда.\nУдалёнка.", vacancy.PlainText(in))
	require.Equal(t, "plain text", vacancy.PlainText("  plain   text "))
	require.Equal(t, "Go <highlighttext>", vacancy.PlainText("Go &lt;highlighttext&gt;"))
}
