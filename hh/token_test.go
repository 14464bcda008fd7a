package hh_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
)

// The application token obtained with client_credentials and shared in
// PostgreSQL is tested with the real store in the root package
// (hhtoken_test.go); these cover what needs no database.

var testOAuth = hhtest.OAuth{ClientID: "client-1", ClientSecret: "secret-1"}

// searchAndFetch makes a search and a vacancy request, both answered, and
// returns the two requests as the fake saw them.
func searchAndFetch(t *testing.T, c *hh.Client, srv *hhtest.Server) []hhtest.Request {
	t.Helper()
	_, err := c.Search(context.Background(), vacancy.Params{}, 0, 10)
	require.NoError(t, err)
	_, err = c.Vacancy(context.Background(), idOf(t, srv.Vacancies()[0]))
	require.NoError(t, err)
	log := srv.Requests()
	require.Len(t, log, 2)
	return log
}

func TestNoTokenSendsNoAuthorization(t *testing.T) {
	t.Parallel()
	srv := catalogue(t, hhtest.WithOAuth(testOAuth))
	c, _ := newClient(t, srv.URL(), nil)

	for _, r := range searchAndFetch(t, c, srv) {
		require.Empty(t, r.Authorization)
	}
	require.Zero(t, srv.TokenCalls())
}

func TestStaticTokenOnEveryRequest(t *testing.T) {
	t.Parallel()
	o := testOAuth
	o.Require = true
	srv := catalogue(t, hhtest.WithOAuth(o))
	tok := srv.IssueToken()
	c, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Token = hh.StaticToken(tok) })

	for _, r := range searchAndFetch(t, c, srv) {
		require.Equal(t, "Bearer "+tok, r.Authorization)
		require.Equal(t, http.StatusOK, r.Status)
	}
	require.Zero(t, srv.TokenCalls(), "a token given is used as it is")
}

// A static token HH refuses has no replacement: the request is not sent
// again with the same token, and the refusal is an *APIError.
func TestStaticTokenRefusedIsReported(t *testing.T) {
	t.Parallel()
	srv := catalogue(t, hhtest.WithOAuth(testOAuth))
	tok := srv.IssueToken()
	srv.RevokeToken(tok)
	c, _ := newClient(t, srv.URL(), func(cfg *hh.Config) { cfg.Token = hh.StaticToken(tok) })

	_, err := c.Search(context.Background(), vacancy.Params{}, 0, 10)
	var apiErr *hh.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.Status)
	require.Equal(t, []struct{ Type, Value string }{{"oauth", "token_revoked"}}, apiErr.Errors)
	require.False(t, errors.Is(err, vacancy.ErrUnavailable))
	require.False(t, errors.Is(err, vacancy.ErrHHBlocked), "a refused token is not HH refusing us as a client")
	require.Len(t, srv.Requests(), 1)
	require.Nil(t, c.Block(), "the breaker stays closed")
}

func TestNewAppTokenValidates(t *testing.T) {
	t.Parallel()
	good := hh.AppTokenConfig{ClientID: "id", ClientSecret: "secret", UserAgent: testUA}
	cases := []struct {
		name   string
		mutate func(*hh.AppTokenConfig)
		want   string
	}{
		{"bad url", func(c *hh.AppTokenConfig) { c.URL = "hh.ru" }, "AppTokenConfig.URL"},
		{"no secret", func(c *hh.AppTokenConfig) { c.ClientSecret = "" }, "ClientID and ClientSecret"},
		{"no id", func(c *hh.AppTokenConfig) { c.ClientID = "" }, "ClientID and ClientSecret"},
		{"no user agent", func(c *hh.AppTokenConfig) { c.UserAgent = " " }, "UserAgent"},
		{"no store", func(*hh.AppTokenConfig) {}, "Store is nil"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.mutate(&cfg)
			_, err := hh.NewAppToken(cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
