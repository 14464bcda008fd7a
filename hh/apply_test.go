package hh_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh/hhtest"
)

// HH's published examples (a search item and a detail) carry how to apply:
// the apply page, no response_url (an open vacancy), and an employer who
// requires a letter and a test.
func TestApplyingFromPublishedExamples(t *testing.T) {
	t.Parallel()
	want := "https://hh.ru/applicant/vacancy_response?vacancyId=8331228"

	search, _ := newClient(t, fixedServer(t, 200, fixture(t, "vacancies_search.json")).URL, nil)
	page, err := search.Search(context.Background(), vacancy.Params{}, 0, 1)
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	item := page.Items[0]
	require.Equal(t, want, item.ApplyURL)
	require.Empty(t, item.ResponseURL, "response_url null: an open vacancy")
	require.True(t, item.LetterRequired)
	require.True(t, item.HasTest)
	require.Equal(t, want, item.ApplyLink())

	detail, _ := newClient(t, fixedServer(t, 200, fixture(t, "vacancy_detail.json")).URL, nil)
	v, err := detail.Vacancy(context.Background(), 8331228)
	require.NoError(t, err)
	require.Equal(t, want, v.ApplyURL)
	require.Empty(t, v.ResponseURL)
	require.True(t, v.LetterRequired)
	require.True(t, v.HasTest)
}

// A direct vacancy of the fake HH is answered on the employer's site: its
// response_url reaches the vacancy from search and from the detail, and is
// where ApplyLink points; an open one's ApplyLink is HH's apply page.
func TestApplyingDirectVacancy(t *testing.T) {
	t.Parallel()
	vs := hhtest.Generate(2, hhtest.GenOptions{Seed: 3, FirstID: 500, Newest: time.Now().Add(-time.Hour)})
	vs[0].ResponseURL = "https://jobs.example.com/apply/500"
	vs[0].ResponseLetterRequired, vs[0].HasTest = false, false
	vs[1].ResponseLetterRequired, vs[1].HasTest = true, false
	srv := hhtest.Start(t, hhtest.WithVacancies(vs...))
	c, _ := newClient(t, srv.URL(), nil)

	page, err := c.Search(context.Background(), vacancy.Params{}, 0, 10)
	require.NoError(t, err)
	got := map[string][2]string{}
	for _, v := range page.Items {
		got[strconv.FormatInt(v.ID, 10)] = [2]string{v.ResponseURL, v.ApplyLink()}
	}
	require.Equal(t, [2]string{"https://jobs.example.com/apply/500", "https://jobs.example.com/apply/500"}, got[vs[0].ID])
	require.Equal(t, [2]string{"", "https://hh.ru/applicant/vacancy_response?vacancyId=" + vs[1].ID}, got[vs[1].ID])

	direct, err := c.Vacancy(context.Background(), idOf(t, vs[0]))
	require.NoError(t, err)
	require.Equal(t, "https://jobs.example.com/apply/500", direct.ResponseURL)
	require.False(t, direct.LetterRequired)
	open, err := c.Vacancy(context.Background(), idOf(t, vs[1]))
	require.NoError(t, err)
	require.Empty(t, open.ResponseURL)
	require.True(t, open.LetterRequired)
	require.False(t, open.HasTest)
}
