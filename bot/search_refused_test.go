package bot_test

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/bot"
	"switchboard/domain/vacancy"
)

var tag = regexp.MustCompile(`<[^>]*>`)

// plain is Telegram HTML as the reader sees it.
func plain(t *testing.T, s string) string {
	t.Helper()
	return html.UnescapeString(tag.ReplaceAllString(s, ""))
}

// /search checks currency against HH's codes before HH has to: an unknown
// code is refused in the user's language, naming the codes HH takes; RUB,
// ISO's code for roubles, is HH's RUR, which is HH's default and so no
// filter at all.
func TestSearchCurrencyIsCheckedAgainstHHsCodes(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	ivan := env.srv.User(43, "Иван", "ru")

	require.Equal(t, "currency=GBP: hh.ru has no such currency. currency is one of hh.ru's codes: "+
		"RUR, AZN, BYR, EUR, GEL, KGS, KZT, UAH, USD, UZS. Roubles are RUR on hh.ru (RUB is taken as RUR), e.g. salary=150000 currency=RUR.",
		env.ask(t, ann, "/search golang salary=200000 currency=GBP").Text)
	require.True(t, strings.HasPrefix(env.ask(t, ivan, "/search golang salary=200000 currency=фунты").Text,
		"currency=фунты: такой валюты на hh.ru нет. currency — один из кодов hh.ru: RUR, AZN,"))
	require.Equal(t, "employment=freelance: hh.ru takes only these values for employment: full, part, project, volunteer, probation.",
		env.ask(t, ann, "/search golang employment=freelance").Text)

	reply := env.ask(t, ann, "/search golang salary=200000 currency=RUB").Text
	require.True(t, strings.HasPrefix(reply, "Saved: golang salary=200000\n"), reply)
	require.Contains(t, env.ask(t, ann, "/search golang salary=200000 currency=rur").Text,
		"You already have this search: golang salary=200000", "RUB and RUR are one search")
	list, err := env.svc.Searches(context.Background(), 42)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Empty(t, list[0].Params.Values("currency"), "stored as HH's default, RUR")
	require.Equal(t, vacancy.SearchActive, list[0].State)
}

// A search HH refused is told once, in the user's language, naming the
// parameter as the search sets it and the values HH takes; /searches shows
// it set aside, not as watched.
func TestRefusedSearchIsToldAndListedAsRefused(t *testing.T) {
	t.Parallel()
	env := setupVacancies(t)
	ann := env.srv.User(42, "Ann", "en")
	env.ask(t, ann, "/search go developer")
	ctx := context.Background()
	old := vacancy.Params{Text: "golang", Salary: 200000, Filters: map[string][]string{"currency": {"RUB"}}}
	sr, _, err := env.svc.AddSearch(ctx, 42, old)
	require.NoError(t, err)

	rd := testRenderer(bot.RenderConfig{})
	for lang, want := range map[string]string{
		"en": "hh.ru refuses the search golang salary=200000 currency=RUB: it does not accept currency=RUB. " +
			"I've set this search aside and no longer check it.\nTo fix it, save a corrected search with /search and delete this one in /searches. " +
			"Saving the same search again makes me ask hh.ru once more.\nFor currency hh.ru takes: RUR, AZN, BYR, EUR, GEL, KGS, KZT, UAH, USD, UZS.",
		"ru": "hh.ru отклоняет поиск golang salary=200000 currency=RUB: не принимает currency=RUB.",
		"uk": "hh.ru відхиляє пошук golang salary=200000 currency=RUB: не приймає currency=RUB.",
	} {
		msgs := rd.SearchRefused(vacancy.Refusal{Search: sr, Lang: lang, Args: []string{"currency"}})
		require.Len(t, msgs, 1)
		require.Equal(t, int64(42), msgs[0].ChatID)
		text := plain(t, msgs[0].Text)
		require.True(t, strings.HasPrefix(text, want), "%s: %s", lang, text)
	}
	none := rd.SearchRefused(vacancy.Refusal{Search: sr, Lang: "en"})
	require.Contains(t, plain(t, none[0].Text), "without saying which filter is wrong")

	n, err := env.st.Searches().SetAside(ctx, sr.Key, []string{"currency"}, nil)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	list := env.ask(t, ann, "/searches")
	require.Equal(t, "Your searches\n1. go developer\n2. golang salary=200000 currency=RUB\n"+
		"    ⛔ refused by hh.ru (currency): not checked; save it corrected or delete it\n\nPress ✖ N to delete search N.", list.Text)
	require.Len(t, list.ReplyMarkup.Buttons(), 2, "a refused search can be deleted like any other")
}
