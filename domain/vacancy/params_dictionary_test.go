package vacancy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// currency is checked against HH's dictionary at /search, so that HH never
// has to refuse it: RUB (ISO) and BYN are taken as HH's RUR and BYR and
// stored so, a search with RUR being the one without a currency (HH's
// default); a code HH does not know is refused, naming HH's codes.
func TestParseParamsCurrencyIsHHsDictionary(t *testing.T) {
	t.Parallel()
	rur, err := vacancy.ParseParams("golang salary=200000")
	require.NoError(t, err)
	for _, args := range []string{"golang salary=200000 currency=RUB", "golang salary=200000 currency=rub", "golang salary=200000 currency=RUR"} {
		p, err := vacancy.ParseParams(args)
		require.NoError(t, err, args)
		require.Equal(t, rur, p, "%s is HH's RUR, HH's default", args)
		require.Equal(t, rur.Key(), p.Key(), "one search, one discovery")
	}
	p, err := vacancy.ParseParams("golang salary=3000 currency=byn")
	require.NoError(t, err)
	require.Equal(t, []string{"BYR"}, p.Values("currency"))
	require.Equal(t, "golang salary=3000 currency=BYR", p.String())
	p, err = vacancy.ParseParams("golang salary=500000 currency=kzt")
	require.NoError(t, err)
	require.Equal(t, []string{"KZT"}, p.Values("currency"))

	for _, args := range []string{"golang salary=1000 currency=GBP", "golang currency=RU", "golang currency=рубли"} {
		_, err := vacancy.ParseParams(args)
		var ie *domain.InputError
		require.True(t, errors.As(err, &ie), "%q: %v", args, err)
		require.Equal(t, "search.error_currency", ie.Key, args)
		require.Equal(t, "currency", ie.Args["Name"])
		require.Equal(t, "RUR, AZN, BYR, EUR, GEL, KGS, KZT, UAH, USD, UZS", ie.Args["Accepted"])
	}
}

// The other parameters whose whole dictionary the search knows are
// refused at /search too, naming what HH takes; HH's upper-case ids are
// taken in any case.
func TestParseParamsDictionaryFilters(t *testing.T) {
	t.Parallel()
	p, err := vacancy.ParseParams("golang work_format=remote,hybrid employment_form=full")
	require.NoError(t, err)
	require.Equal(t, []string{"HYBRID", "REMOTE"}, p.Values("work_format"))
	require.Equal(t, []string{"FULL"}, p.Values("employment_form"))
	p, err = vacancy.ParseParams("golang work_schedule_by_days=five_on_two_off")
	require.NoError(t, err)
	require.Equal(t, []string{"FIVE_ON_TWO_OFF"}, p.Values("work_schedule_by_days"))

	for args, accepted := range map[string]string{
		"golang work_format=office":     "ON_SITE, REMOTE, HYBRID, FIELD_WORK",
		"golang employment_form=maybe":  "FULL, PART, PROJECT, FLY_IN_FLY_OUT",
		"golang search_field=title":     "name, company_name, description",
		"golang only_with_salary=false": "true",
		"golang employment=freelance":   "full, part, project, volunteer, probation",
	} {
		_, err := vacancy.ParseParams(args)
		var ie *domain.InputError
		require.True(t, errors.As(err, &ie), "%q: %v", args, err)
		require.Equal(t, "search.error_choice", ie.Key, args)
		require.Equal(t, accepted, ie.Args["Accepted"], args)
	}
}

// Setting renders what the search sets for a parameter HH named, for the
// note that HH refused it.
func TestParamsSetting(t *testing.T) {
	t.Parallel()
	p := vacancy.Params{Text: "golang", Salary: 200000, Filters: map[string][]string{"currency": {"RUB"}, "area": {"1", "2"}}}
	require.Equal(t, "currency=RUB", p.Setting("currency"))
	require.Equal(t, "area=1,2", p.Setting("area"))
	require.Equal(t, "salary=200000", p.Setting("salary"))
	require.Equal(t, "text=golang", p.Setting("text"))
	require.Equal(t, "metro", p.Setting("metro"), "not the search's: the name alone")
}
