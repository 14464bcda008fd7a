package hh_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"switchboard/storage/storagetest"
)

// HH's texts are stored (the description in text, the whole item in
// jsonb), so a vacancy comes back holding nothing PostgreSQL refuses: an
// escaped NUL and a surrogate half without its pair become U+FFFD.
func TestVacancyTextsAreCleaned(t *testing.T) {
	t.Parallel()
	body := fixture(t, "vacancy_detail.json")
	for old, bad := range map[string]string{
		`"description": "..."`: `"description": "<p>Go\u0000 developer \ud83d</p>"`,
		`"name": "Секретарь"`:  `"name": "Секретарь\u0000 \ude00 \ud83d\ude00"`,
	} {
		require.Equal(t, 1, bytes.Count(body, []byte(old)), "the fixture changed: %s", old)
		body = bytes.Replace(body, []byte(old), []byte(bad), 1)
	}
	c, _ := newClient(t, fixedServer(t, http.StatusOK, body).URL, nil)

	v, err := c.Vacancy(t.Context(), 8331228)
	require.NoError(t, err)
	require.Equal(t, "<p>Go\uFFFD developer \uFFFD</p>", v.Description)
	require.Equal(t, "Секретарь\uFFFD \uFFFD \U0001F600", v.Title, "a pair is an emoji, kept")
	for _, s := range []string{v.Description, v.Title} {
		require.NotContains(t, s, "\x00")
		require.True(t, utf8.ValidString(s), "%q", s)
	}

	// The item is kept as jsonb: PostgreSQL must take it as it is.
	require.NotEmpty(t, v.Raw)
	require.False(t, bytes.Contains(v.Raw, []byte(`\u0000`)), "%s", v.Raw)
	st := storagetest.New(t)
	var name, description string
	require.NoError(t, st.Pool().QueryRow(t.Context(), `SELECT $1::jsonb ->> 'name', $1::jsonb ->> 'description'`, string(v.Raw)).
		Scan(&name, &description))
	require.Equal(t, v.Title, name)
	require.Equal(t, v.Description, description)
}

// A clean answer is not rewritten: the raw item keeps HH's bytes, escapes
// and all.
func TestCleanVacancyKeepsItsBytes(t *testing.T) {
	t.Parallel()
	body := bytes.Replace(fixture(t, "vacancy_detail.json"),
		[]byte(`"description": "..."`), []byte(`"description": "\u003cp\u003e \ud83d\ude00 \\u0000"`), 1)
	require.True(t, strings.Contains(string(body), `\\u0000`), "the fixture changed")
	c, _ := newClient(t, fixedServer(t, http.StatusOK, body).URL, nil)

	v, err := c.Vacancy(t.Context(), 8331228)
	require.NoError(t, err)
	require.Equal(t, `<p> `+"\U0001F600"+` \u0000`, v.Description)
	require.Equal(t, bytes.TrimSpace(body), v.Raw)
}
