package vacancy_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain"
	"switchboard/domain/vacancy"
	"switchboard/internal/testkit"
)

func TestParseSearchURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url     string
		want    string // Params.String()
		dropped []string
	}{
		{"https://hh.ru/search/vacancy?text=golang&area=1", "golang area=1", nil},
		{"hh.ru/search/vacancy?text=golang&area=1&area=2", "golang area=1 area=2", nil},
		{"www.hh.ru/search/vacancy/?text=go", "go", nil},
		{"http://spb.hh.ru/search/vacancy?text=go&area=2", "go area=2", nil},
		{"https://hh.kz/search/vacancy?text=go&area=160", "go area=160", nil},
		{"https://rabota.by/search/vacancy?text=go&area=1002", "go area=1002", nil},
		{"https://api.hh.ru/vacancies?text=go&schedule=remote", "go schedule=remote", nil},
		{
			"https://hh.ru/search/vacancy?text=golang+developer&salary=250000&currency_code=RUR&experience=between1And3" +
				"&schedule=remote&employment=full&only_with_salary=true&search_period=7&search_field=name" +
				"&search_field=description&professional_role=96&industry=7&label=not_from_agency&education=higher" +
				"&order_by=publication_time&hhtmFrom=main&hhtmFromLabel=x&enable_snippets=true&ored_clusters=true" +
				"&L_save_area=true&items_on_page=20&page=2",
			"golang developer area= salary=250000",
			[]string{"L_save_area", "enable_snippets", "hhtmFrom", "hhtmFromLabel", "items_on_page", "order_by", "ored_clusters", "page"},
		},
		{"https://hh.ru/search/vacancy?text=go&salary=&currency_code=RUR&search_period=0&only_with_salary=false", "go", nil},
		{"https://hh.ru/vacancies/programmist?text=go&area=1", "go area=1", nil},
		{"https://hh.ru/search/vacancy?professional_role=96&area=1", "area=1 professional_role=96", nil},
	} {
		p, dropped, err := vacancy.ParseSearchURL(tc.url)
		require.NoError(t, err, tc.url)
		require.Equal(t, tc.dropped, dropped, tc.url)
		if tc.want != "golang developer area= salary=250000" {
			require.Equal(t, tc.want, p.String(), tc.url)
			continue
		}
		require.Equal(t, vacancy.Params{Text: "golang developer", Salary: 250000, Filters: map[string][]string{
			"experience": {"between1And3"}, "schedule": {"remote"}, "employment": {"full"}, "only_with_salary": {"true"},
			"period": {"7"}, "search_field": {"description", "name"}, "professional_role": {"96"}, "industry": {"7"},
			"label": {"not_from_agency"}, "education": {"higher"},
		}}, p)
	}

	for raw, key := range map[string]string{
		"https://example.com/jobs/golang-remote":                  "search.error_url_host",
		"https://hh.ru.example.com/search/vacancy?text=go":        "search.error_url_host",
		"https://myhh.ru/search/vacancy?text=go":                  "search.error_url_host",
		"https://hh.ru:8080/search/vacancy?text=go":               "search.error_url_host",
		"ftp://hh.ru/search/vacancy?text=go":                      "search.error_url_scheme",
		"javascript:alert(1)":                                     "search.error_url_scheme",
		"https://hh.ru/vacancy/123456":                            "search.error_url_path",
		"https://hh.ru/":                                          "search.error_url_path",
		"https://hh.ru/vacancies/programmist":                     "search.error_url_path",
		"https://hh.ru/search/resume?text=go":                     "search.error_url_path",
		"https://hh.ru/search/vacancy?area=1":                     "search.error_url_no_text",
		"https://hh.ru/search/vacancy?text=go&experience=ancient": "search.error_experience",
		"https://hh.ru/search/vacancy?text=go&salary=lots":        "search.error_salary",
	} {
		_, _, err := vacancy.ParseSearchURL(raw)
		var pe *domain.InputError
		require.True(t, errors.As(err, &pe), "%s: %v", raw, err)
		require.Equal(t, key, pe.Key, raw)
		require.LessOrEqual(t, len([]rune(pe.Arg())), 40, raw)
	}
}

func TestLooksLikeURL(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"https://example.com/jobs":     true,
		"hh.ru/search/vacancy?text=go": true,
		"spb.hh.ru/search/vacancy":     true,
		"www.example.com":              true,
		"mailto:jobs@hh.ru":            true,
		"golang":                       false,
		"node.js/react":                false,
		"c++/go":                       false,
		"area=1":                       false,
	} {
		require.Equal(t, want, vacancy.LooksLikeURL(s), s)
	}
}

func TestVacancyLinkIn(t *testing.T) {
	t.Parallel()
	testkit.Recognizes(t, vacancy.VacancyLinkIn, map[string]int64{
		"https://hh.ru/vacancy/123456":                                   123456,
		"http://hh.ru/vacancy/123456":                                    123456,
		"hh.ru/vacancy/123456":                                           123456,
		"www.hh.ru/vacancy/123456/":                                      123456,
		"https://spb.hh.ru/vacancy/123456?from=share&hhtmFrom=vacancy":   123456,
		"https://hh.kz/vacancy/77#apply":                                 77,
		"https://rabota.by/vacancy/88":                                   88,
		"HTTPS://HH.RU/vacancy/5":                                        5,
		"what do you think of https://hh.ru/vacancy/42 for me?":          42,
		"look (https://hh.ru/vacancy/42).":                               42,
		"«https://hh.ru/vacancy/42»":                                     42,
		"first https://example.com/x then https://hh.ru/vacancy/9 later": 9,
	}, []string{
		"",
		"how do I write a cover letter?",
		"https://hh.ru/vacancy/abc",
		"https://hh.ru/vacancy/",
		"https://hh.ru/vacancy/12x",
		"https://hh.ru/vacancy/-1",
		"https://hh.ru/vacancy/0",
		"https://hh.ru/vacancy/99999999999999999999",
		"https://hh.ru/employer/1",
		"https://hh.ru/vacancy/1/edit",
		"https://hh.ru/search/vacancy?text=go",
		"https://evil.com/hh.ru/vacancy/1",
		"https://hh.ru.evil.com/vacancy/1",
		"https://myhh.ru/vacancy/1",
		"https://hh.ru:8080/vacancy/1",
		"https://user@hh.ru/vacancy/1",
		"https://api.hh.ru/vacancy/1",
		"ftp://hh.ru/vacancy/1",
		"javascript:hh.ru/vacancy/1",
	})
}
