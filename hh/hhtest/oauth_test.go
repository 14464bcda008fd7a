package hhtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/hh/hhtest"
)

var testOAuth = hhtest.OAuth{ClientID: "client-1", ClientSecret: "secret-1"}

// postToken sends POST /oauth/token with form as its body.
func postToken(t *testing.T, srv *hhtest.Server, form url.Values) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.OAuthURL()+"/oauth/token", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HH-User-Agent", testUA)
	return send(t, srv, req)
}

func credentials(id, secret string) url.Values {
	return url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret}}
}

type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   *int   `json:"expires_in"`
}

func obtain(t *testing.T, srv *hhtest.Server) tokenAnswer {
	t.Helper()
	r := postToken(t, srv, credentials(testOAuth.ClientID, testOAuth.ClientSecret))
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var a tokenAnswer
	require.NoError(t, json.Unmarshal(r.body, &a))
	return a
}

func requireTokenError(t *testing.T, r response, status int, code, description string) {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.body)
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	require.NoError(t, json.Unmarshal(r.body, &e), "body: %s", r.body)
	require.Equal(t, code, e.Error)
	if description != "" {
		require.Equal(t, description, e.Description)
	}
}

func bearer(tok string) map[string]string {
	return map[string]string{"HH-User-Agent": testUA, "Authorization": "Bearer " + tok}
}

func TestOAuthIssuesApplicationTokens(t *testing.T) {
	t.Parallel()
	srv := hhtest.Start(t, hhtest.WithOAuth(testOAuth))

	a := obtain(t, srv)
	require.NotEmpty(t, a.AccessToken)
	require.Equal(t, "bearer", a.TokenType)
	require.Nil(t, a.ExpiresIn, "HH's application tokens do not expire")
	require.Equal(t, a.AccessToken, srv.CurrentToken())

	requireTokenError(t, postToken(t, srv, credentials("client-1", "wrong")), 400, "invalid_client", "client_id or client_secret not found")
	requireTokenError(t, postToken(t, srv, credentials("client-2", "secret-1")), 400, "invalid_client", "")
	requireTokenError(t, postToken(t, srv, credentials("", "")), 400, "invalid_request", "")
	form := credentials("client-1", "secret-1")
	form.Set("grant_type", "authorization_code")
	requireTokenError(t, postToken(t, srv, form), 400, "unsupported_grant_type", "unsupported grant_type")
	get := do(t, srv, "/oauth/token", nil, map[string]string{"HH-User-Agent": testUA})
	require.Equal(t, http.StatusMethodNotAllowed, get.status)
	require.Equal(t, 6, srv.TokenCalls(), "every attempt counts")
	require.Equal(t, a.AccessToken, srv.CurrentToken(), "refused requests issue nothing")
	require.Empty(t, srv.Requests(), "token requests stay out of the API's request log")

	// A new token revokes the one before, as at HH.
	b := obtain(t, srv)
	require.NotEqual(t, a.AccessToken, b.AccessToken)
	requireHHError(t, do(t, srv, "/vacancies", nil, bearer(a.AccessToken)), 403, "oauth", "token_revoked")
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", nil, bearer(b.AccessToken)).status)
}

func TestOAuthChecksBearerTokens(t *testing.T) {
	t.Parallel()
	srv := hhtest.Start(t, hhtest.WithOAuth(testOAuth), hhtest.WithVacancies(hhtest.Generate(3, hhtest.GenOptions{Seed: 1})...))
	tok := obtain(t, srv).AccessToken

	// Not required: anonymous requests are served, a token sent is checked.
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", nil, map[string]string{"HH-User-Agent": testUA}).status)
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", nil, bearer(tok)).status)
	requireHHError(t, do(t, srv, "/vacancies", nil, bearer("nonsense")), 403, "oauth", "bad_authorization")
	requireHHError(t, do(t, srv, "/vacancies", nil, map[string]string{"HH-User-Agent": testUA, "Authorization": "Basic eDp5"}), 403, "oauth", "bad_authorization")

	srv.RevokeToken(tok)
	requireHHError(t, do(t, srv, "/vacancies", nil, bearer(tok)), 403, "oauth", "token_revoked")
	require.Empty(t, srv.CurrentToken())

	log := srv.Requests()
	require.Len(t, log, 5)
	require.Empty(t, log[0].Authorization)
	require.Equal(t, "Bearer "+tok, log[1].Authorization)
	require.Equal(t, http.StatusForbidden, log[4].Status)
}

func TestOAuthRequired(t *testing.T) {
	t.Parallel()
	o := testOAuth
	o.Require = true
	srv := hhtest.Start(t, hhtest.WithOAuth(o), hhtest.WithVacancies(hhtest.Generate(3, hhtest.GenOptions{Seed: 1})...))
	v := srv.Vacancies()[0]

	requireHHError(t, do(t, srv, "/vacancies", nil, map[string]string{"HH-User-Agent": testUA}), 403, "oauth", "bad_authorization")
	requireHHError(t, do(t, srv, "/vacancies/"+v.ID, nil, map[string]string{"HH-User-Agent": testUA}), 403, "oauth", "bad_authorization")
	tok := srv.IssueToken()
	require.Zero(t, srv.TokenCalls(), "a token from the site is not a request")
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies", nil, bearer(tok)).status)
	require.Equal(t, http.StatusOK, do(t, srv, "/vacancies/"+v.ID, nil, bearer(tok)).status)
	// The user agent is checked first, as for anonymous requests.
	r := do(t, srv, "/vacancies", nil, map[string]string{"User-Agent": "", "Authorization": "Bearer " + tok})
	requireHHError(t, r, 400, "bad_user_agent", "unset")
}

func TestOAuthExpiryAndPace(t *testing.T) {
	t.Parallel()
	o := testOAuth
	o.ExpiresIn, o.MinInterval = 50*time.Millisecond, time.Hour
	srv := hhtest.Start(t, hhtest.WithOAuth(o))

	a := obtain(t, srv)
	require.NotNil(t, a.ExpiresIn)
	require.Equal(t, 1, *a.ExpiresIn, "whole seconds, rounded up")
	requireTokenError(t, postToken(t, srv, credentials(o.ClientID, o.ClientSecret)), 403, "forbidden", "app token refresh too early")
	require.Equal(t, a.AccessToken, srv.CurrentToken(), "the refused request revoked nothing")

	require.Eventually(t, func() bool {
		return do(t, srv, "/vacancies", nil, bearer(a.AccessToken)).status == http.StatusForbidden
	}, 5*time.Second, 20*time.Millisecond)
	requireHHError(t, do(t, srv, "/vacancies", nil, bearer(a.AccessToken)), 403, "oauth", "token_expired")
}

func TestOAuthFaultsAndAbsence(t *testing.T) {
	t.Parallel()
	srv := hhtest.Start(t, hhtest.WithOAuth(testOAuth))
	srv.FailTokenRequests(1, http.StatusBadGateway)
	r := postToken(t, srv, credentials(testOAuth.ClientID, testOAuth.ClientSecret))
	require.Equal(t, http.StatusBadGateway, r.status)
	require.Contains(t, string(r.body), "<html>")
	obtain(t, srv)
	require.Equal(t, 2, srv.TokenCalls())

	// Without WithOAuth there is no /oauth/token and tokens are ignored.
	plain := hhtest.Start(t)
	requireHHError(t, postToken(t, plain, credentials("a", "b")), 405, "method_not_allowed")
	require.Equal(t, http.StatusOK, do(t, plain, "/vacancies", nil, bearer("whatever")).status)
	require.Zero(t, plain.TokenCalls())
}
