package vacancy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// docs/ARCHITECTURE.md's table ("Vacancies"), written out independently of the code's, plus the
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
		{vacancy.NotInterested, vacancy.SentToUser}: true, // the owner's Undo
		{vacancy.Skipped, vacancy.New}:              true,
		{vacancy.New, vacancy.InArchive}:            true,
		{vacancy.Skipped, vacancy.InArchive}:        true,
		// The job seeker's pipeline, as issue 26 lays it out.
		{vacancy.Applied, vacancy.Invited}:   true,
		{vacancy.Applied, vacancy.Rejected}:  true,
		{vacancy.Applied, vacancy.NoAnswer}:  true,
		{vacancy.NoAnswer, vacancy.Invited}:  true,
		{vacancy.NoAnswer, vacancy.Rejected}: true,
		{vacancy.Invited, vacancy.Offer}:     true,
		{vacancy.Invited, vacancy.Rejected}:  true,
	}
	for _, from := range vacancy.Statuses {
		for _, to := range vacancy.Statuses {
			require.Equal(t, allowed[[2]vacancy.Status{from, to}], vacancy.CanTransition(from, to), "%s → %s", from, to)
		}
	}
	for _, s := range []vacancy.Status{vacancy.NotSuitable, vacancy.InArchive, vacancy.Offer, vacancy.Rejected} {
		require.True(t, s.Final(), s)
	}
	for _, s := range []vacancy.Status{vacancy.Applied, vacancy.NoAnswer, vacancy.Invited} {
		require.False(t, s.Final(), "%s waits for the employer", s)
	}
	require.False(t, vacancy.NotInterested.Final(), "Undo takes it back")
	require.False(t, vacancy.Status("DONE").Valid())
}

func TestParseParams(t *testing.T) {
	t.Parallel()
	p, err := vacancy.ParseParams("golang  backend area=1 salary=250000 experience=between3And6 schedule=remote")
	require.NoError(t, err)
	require.Equal(t, vacancy.Params{Text: "golang backend", Salary: 250000, Filters: map[string][]string{
		"area": {"1"}, "experience": {"between3And6"}, "schedule": {"remote"},
	}}, p)
	require.Equal(t, "golang backend area=1 salary=250000 experience=between3And6 schedule=remote", p.String())
	again, err := vacancy.ParseParams(p.String())
	require.NoError(t, err)
	require.Equal(t, p, again, "String reads back")

	for args, key := range map[string]string{
		"":                         "search.error_no_text",
		"area=1":                   "search.error_no_text",
		"go city=1":                "search.error_unknown",
		"go salary=lots":           "search.error_salary",
		"go salary=-5":             "search.error_salary",
		"go area=moscow":           "search.error_area",
		"go experience=ancient":    "search.error_experience",
		"go schedule=night":        "search.error_schedule",
		"go period=31":             "search.error_period",
		"go salary=1 salary=2":     "search.error_duplicate",
		"go employment=sometimes":  "search.error_choice",
		strings.Repeat("go ", 100): "search.error_too_long",
		"go area=1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21": "search.error_too_many",
	} {
		_, err := vacancy.ParseParams(args)
		var pe *domain.InputError
		require.True(t, errors.As(err, &pe), "%q: %v", args, err)
		require.Equal(t, key, pe.Key, args)
		require.LessOrEqual(t, len([]rune(pe.Arg())), 40, "a short prefix of what was typed")
	}
}

// Experience and schedule take HH's ids and the words people type, in
// the three languages; several areas make one search.
func TestParseParamsHumanWords(t *testing.T) {
	t.Parallel()
	for args, want := range map[string][2]string{
		"go experience=noExperience schedule=fullDay":       {"noExperience", "fullDay"},
		`go experience="no experience" schedule=remote`:     {"noExperience", "remote"},
		`go experience="1–3 года" schedule=удалённо`:        {"between1And3", "remote"},
		`go experience=«від 3 до 6 років» schedule=вахта`:   {"between3And6", "flyInFlyOut"},
		`go experience=6+ schedule="полный день"`:           {"moreThan6", "fullDay"},
		"go experience=more_than_6 schedule=гнучкий_графік": {"moreThan6", "flexible"},
		"go experience=1-3 schedule=shift":                  {"between1And3", "shift"},
		`go experience="более 6 лет" schedule=rotation`:     {"moreThan6", "flyInFlyOut"},
	} {
		p, err := vacancy.ParseParams(args)
		require.NoError(t, err, args)
		require.Equal(t, "go", p.Text, args)
		require.Equal(t, []string{want[0]}, p.Values("experience"), args)
		require.Equal(t, []string{want[1]}, p.Values("schedule"), args)
	}
	a, err := vacancy.ParseParams("go area=2 area=1 area=1")
	require.NoError(t, err)
	b, err := vacancy.ParseParams("go area=1,2")
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, a.Values("area"))
	require.Equal(t, a.Key(), b.Key())
	q, err := vacancy.ParseParams(`"golang developer" NOT java`)
	require.NoError(t, err)
	require.Equal(t, `"golang developer" NOT java`, q.Text, "HH's query language keeps its quotes")
}

// A search saved before filters could repeat keeps its key and reads back
// from its stored JSON.
func TestParamsKeyAndJSONOfOlderSearches(t *testing.T) {
	t.Parallel()
	var p vacancy.Params
	require.NoError(t, json.Unmarshal([]byte(`{"text":"golang","area":"1","salary":250000,"schedule":"remote"}`), &p))
	require.Equal(t, vacancy.Params{Text: "golang", Salary: 250000, Filters: map[string][]string{"area": {"1"}, "schedule": {"remote"}}}, p)
	// The key the code before this change computed for this search.
	sum := sha256.Sum256([]byte("area=1\nexperience=\nsalary=250000\nschedule=remote\ntext=golang"))
	require.Equal(t, hex.EncodeToString(sum[:]), p.Key())
	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.JSONEq(t, `{"text":"golang","area":"1","salary":250000,"schedule":"remote"}`, string(b))
	multi := vacancy.Params{Text: "go", Filters: map[string][]string{"area": {"1", "2"}}}
	b, err = json.Marshal(multi)
	require.NoError(t, err)
	var back vacancy.Params
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, multi, back)
}

func TestSearchKeyIgnoresCaseSpacingAndOrder(t *testing.T) {
	t.Parallel()
	a, _ := vacancy.ParseParams("Go  Developer salary=100 area=1")
	b, _ := vacancy.ParseParams("area=1 go developer salary=100")
	c, _ := vacancy.ParseParams("go developer area=2 salary=100")
	d, _ := vacancy.ParseParams("go developer area=1 salary=100 currency=RUR")
	require.Equal(t, a.Key(), b.Key())
	require.Equal(t, a.Key(), d.Key(), "RUR is HH's default")
	require.NotEqual(t, a.Key(), c.Key())
	require.Len(t, a.Key(), 64)
}

// A search stored before /search learned a rule (a raw JSON row, as the
// table holds it) reads as /search would save it now, and a value the
// rules would refuse stays for HH to judge.
func TestCanonicalIsWhatSearchWouldSaveNow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		stored, typed string
		changed       []string
	}{
		{`{"text":"go developer","area":"1","currency":"RUB"}`, "go developer area=1", []string{"currency"}},
		{`{"text":"go","currency":"byn","experience":"1-3 years"}`, "go currency=BYR experience=between1And3", []string{"experience", "currency"}},
		{`{"text":"go","work_format":["remote","HYBRID"],"area":["2","1"]}`, "go area=1,2 work_format=HYBRID,REMOTE", []string{"area", "work_format"}},
		{`{"text":"go","area":"1","salary":300}`, "go area=1 salary=300", nil},
	} {
		var p vacancy.Params
		require.NoError(t, json.Unmarshal([]byte(tc.stored), &p))
		want, err := vacancy.ParseParams(tc.typed)
		require.NoError(t, err, tc.typed)
		c, changed := p.Canonical()
		require.Equal(t, want, c, tc.stored)
		require.Equal(t, want.Key(), c.Key(), tc.stored)
		require.Equal(t, tc.changed, changed, tc.stored)
	}

	var p vacancy.Params
	require.NoError(t, json.Unmarshal([]byte(`{"text":"go","currency":"XYZ","period":"99","legacy":"x"}`), &p))
	c, changed := p.Canonical()
	require.Equal(t, p, c, "what /search refuses now is kept as stored")
	require.Empty(t, changed)
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

// Exclusions name why a user does not want a vacancy: a hidden employer
// first, then a ban word in its title, snippet or fetched description.
func TestExclusionsExcludes(t *testing.T) {
	t.Parallel()
	ex := vacancy.Exclusions{BanWords: []string{"delphi", "1с битрикс"}, HiddenEmployers: []string{"Acme & Sons"}}
	for _, c := range []struct {
		name string
		v    vacancy.Vacancy
		want string
	}{
		{"hidden employer", vacancy.Vacancy{Title: "Go developer", Employer: "Acme & Sons"}, vacancy.ExcludedEmployer},
		{"hidden employer before a ban word", vacancy.Vacancy{Title: "Delphi", Employer: "Acme & Sons"}, vacancy.ExcludedEmployer},
		{"another employer", vacancy.Vacancy{Title: "Go developer", Employer: "Acme"}, ""},
		{"no employer", vacancy.Vacancy{Title: "Go developer"}, ""},
		{"title", vacancy.Vacancy{Title: "Senior Delphi developer", Employer: "Acme"}, "delphi"},
		{"snippet", vacancy.Vacancy{Title: "Developer", Snippet: "Программист 1С-Битрикс"}, "1с битрикс"},
		{"description's text", vacancy.Vacancy{Title: "Developer", Description: "<p>Legacy <i>Delphi</i> code</p>"}, "delphi"},
		{"not in a tag", vacancy.Vacancy{Title: "Developer", Description: `<p class="delphi">Go</p>`}, ""},
	} {
		require.Equal(t, c.want, ex.Excludes(c.v), c.name)
	}
	require.Empty(t, vacancy.Exclusions{}.Excludes(vacancy.Vacancy{Title: "Delphi", Employer: "Acme & Sons"}), "nothing excluded")
}

func TestPlainText(t *testing.T) {
	t.Parallel()
	in := `<p><strong>Обязанности:</strong></p><ul><li>писать&nbsp;код</li><li>ревью &lt;PR&gt;</li></ul>` +
		`<style>p{}</style><p>Мы &mdash; команда.<br/>Удалёнка.</p>`
	require.Equal(t, "Обязанности:\n\n• писать код\n• ревью <PR>\n\nМы — команда.\nУдалёнка.", vacancy.PlainText(in))
	require.Equal(t, "plain text", vacancy.PlainText("  plain   text "))
	require.Equal(t, "Go <highlighttext>", vacancy.PlainText("Go &lt;highlighttext&gt;"))
}
