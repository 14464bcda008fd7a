package vacancy_test

import (
	"testing"

	"switchboard/domain/vacancy"
)

// Whatever a user types after /search, ParseParams answers without a panic,
// and what it accepts it writes back (String) in a form it reads as the same
// search: the search is stored and shown in that form.
func FuzzParseParams(f *testing.F) {
	for _, s := range []string{
		"golang  backend area=1 salary=250000 experience=between3And6 schedule=remote",
		`"go developer" area=1,2 salary=1 period=30`, "«Go» experience=3-6 schedule=удалённо",
		"text=go area=", "go salary=1 salary=2", "=", "go =x", "go area=1,,2", "go \x00 area=1",
		"go experience=від 3 до 6", "„go“ 'rust", "go only_with_salary=true label=not_from_agency",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		p, err := vacancy.ParseParams(args)
		if err != nil {
			return
		}
		again, err := vacancy.ParseParams(p.String())
		if err != nil {
			t.Fatalf("%q read as %q, which is refused: %v", args, p.String(), err)
		}
		if again.Key() != p.Key() {
			t.Fatalf("%q read as %q, which reads as another search: %q", args, p.String(), again.String())
		}
	})
}

// Whatever is pasted as an hh.ru link, ParseSearchURL answers without a
// panic; what it accepts has search words.
func FuzzParseSearchURL(f *testing.F) {
	for _, s := range []string{
		"https://hh.ru/search/vacancy?text=golang&area=1&salary=250000&experience=between3And6&schedule=remote",
		"https://spb.hh.ru/search/vacancy?text=go&search_period=7&currency_code=RUR&page=2",
		"hh.ru/vacancies/programmist?text=go", "//hh.ru/search/vacancy?text=%ZZ", "https://api.hh.ru/vacancies?text=go",
		"https://hh.ru/vacancy/123456", "http://evil.example/search/vacancy?text=go", "https://hh.ru:99999/", "",
		"https://hh.ru/search/vacancy?text=go&area=1&area=2&area=", "https://hh.ru/search/vacancy?text=go&date_from=2026-01-01",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		p, _, err := vacancy.ParseSearchURL(raw)
		if err != nil {
			return
		}
		if p.Text == "" {
			t.Fatalf("%q accepted with no search words: %+v", raw, p)
		}
	})
}
