package storage_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"switchboard/config"
	"switchboard/domain/vacancy"
	"switchboard/hh"
	"switchboard/hh/hhtest"
	"switchboard/internal/testkit"
	"switchboard/storage"
	"switchboard/storage/storagetest"
)

// These tests run the application token as app.go wires it (config.HHToken
// over Store.HHTokens), on a real
// PostgreSQL per test and the fake HH over HTTP; each "replica" has its own
// pool, token source and client, sharing only the database.

const hhTestUA = "switchboard-test/1.0 (dev@example.com)"

var hhTestOAuth = hhtest.OAuth{ClientID: "client-1", ClientSecret: "secret-1", Require: true}

type tokenBundle struct {
	t     *testing.T
	srv   *hhtest.Server
	dbURL string
	logs  *testkit.SyncBuffer
}

func newTokenBundle(t *testing.T, opts ...hhtest.Option) *tokenBundle {
	t.Helper()
	srv := hhtest.New(append([]hhtest.Option{hhtest.WithVacancies(hhtest.Generate(30, hhtest.GenOptions{Seed: 1})...)}, opts...)...)
	t.Cleanup(srv.Close)
	return &tokenBundle{t: t, srv: srv, dbURL: storagetest.NewURL(t), logs: &testkit.SyncBuffer{}}
}

// env is the configuration of a replica talking to the fake.
func (b *tokenBundle) env(extra map[string]string) config.Config {
	b.t.Helper()
	m := map[string]string{"TELEGRAM_TOKEN": "1:x", "HH_API_URL": b.srv.URL(), "HH_OAUTH_URL": b.srv.OAuthURL(), "HH_USER_AGENT": hhTestUA}
	for k, v := range extra {
		m[k] = v
	}
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok }, "dev")
	require.NoError(b.t, err)
	return cfg
}

func (b *tokenBundle) credentials() map[string]string {
	return map[string]string{"HH_CLIENT_ID": hhTestOAuth.ClientID, "HH_CLIENT_SECRET": hhTestOAuth.ClientSecret}
}

func (b *tokenBundle) log() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *tokenBundle) store() *storage.Store {
	b.t.Helper()
	st, err := storage.Open(context.Background(), b.dbURL, slog.New(slog.DiscardHandler))
	require.NoError(b.t, err)
	b.t.Cleanup(st.Close)
	return st
}

// replica wires a client from cfg as app.go does.
func (b *tokenBundle) replica(cfg config.Config) *hh.Client {
	b.t.Helper()
	tok, err := cfg.HHToken(b.store().HHTokens(), b.log())
	require.NoError(b.t, err)
	return b.client(tok)
}

// appTokenReplica is a replica whose token source is built with mutate
// applied, e.g. without HH's five minutes between tokens.
func (b *tokenBundle) appTokenReplica(mutate func(*hh.AppTokenConfig)) *hh.Client {
	b.t.Helper()
	cfg := hh.AppTokenConfig{
		URL: b.srv.OAuthURL(), ClientID: hhTestOAuth.ClientID, ClientSecret: hhTestOAuth.ClientSecret,
		UserAgent: hhTestUA, Store: b.store().HHTokens(), Log: b.log(),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	tok, err := hh.NewAppToken(cfg)
	require.NoError(b.t, err)
	return b.client(tok)
}

func (b *tokenBundle) client(tok hh.TokenSource) *hh.Client {
	b.t.Helper()
	c, err := hh.New(hh.Config{URL: b.srv.URL(), UserAgent: hhTestUA, Timeout: 5 * time.Second, Token: tok, Log: b.log()})
	require.NoError(b.t, err)
	b.t.Cleanup(c.Close)
	return c
}

func (b *tokenBundle) search(c *hh.Client) error {
	_, err := c.Search(context.Background(), vacancy.Params{}, 0, 10)
	return err
}

// storedToken is the token in the database, "" if none.
func (b *tokenBundle) storedToken(st *storage.Store) string {
	b.t.Helper()
	var tok string
	err := st.Pool().QueryRow(context.Background(), `SELECT coalesce(max(token), '') FROM hh_app_tokens`).Scan(&tok)
	require.NoError(b.t, err)
	return tok
}

// requireAuthorizations checks the bearer of every logged API request and
// its status.
func (b *tokenBundle) requireAuthorizations(want ...string) {
	b.t.Helper()
	log := b.srv.Requests()
	got := make([]string, len(log))
	for i, r := range log {
		got[i] = r.Authorization + " " + http.StatusText(r.Status)
	}
	require.Equal(b.t, want, got)
}

// requireNoSecretLogged checks that no token issued and not the client
// secret reached the logs, while the logs did say what happened.
func (b *tokenBundle) requireNoSecretLogged(tokens ...string) {
	b.t.Helper()
	out := b.logs.String()
	require.NotContains(b.t, out, hhTestOAuth.ClientSecret)
	for _, tok := range tokens {
		require.NotEmpty(b.t, tok)
		require.NotContains(b.t, out, tok)
	}
}

func bearer(tok string) string { return "Bearer " + tok }

func TestHHClientCredentialsTokenOnEveryRequest(t *testing.T) {
	t.Parallel()
	b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
	st := b.store()
	c := b.replica(b.env(b.credentials()))
	require.Zero(t, b.srv.TokenCalls(), "nothing asked before the first request")

	require.NoError(t, b.search(c))
	_, err := c.Vacancy(context.Background(), mustID(t, b.srv.Vacancies()[0].ID))
	require.NoError(t, err)
	require.NoError(t, b.search(c))

	tok := b.srv.CurrentToken()
	ok := bearer(tok) + " OK"
	b.requireAuthorizations(ok, ok, ok)
	require.Equal(t, 1, b.srv.TokenCalls())
	require.Equal(t, tok, b.storedToken(st), "kept in PostgreSQL")
	require.Contains(t, b.logs.String(), "hh application token obtained")
	b.requireNoSecretLogged(tok)

	// A restart finds the stored token and asks for none.
	again := b.replica(b.env(b.credentials()))
	require.NoError(t, b.search(again))
	require.Equal(t, 1, b.srv.TokenCalls())
	b.requireAuthorizations(ok, ok, ok, ok)
}

// Two replicas starting at once: the first to take the token's lock asks
// HH while the other waits on that lock, then finds the token stored.
func TestHHReplicasStartingTogetherShareOneToken(t *testing.T) {
	t.Parallel()
	var st atomic.Pointer[storage.Store]
	lockWaited := make(chan bool, 1)
	b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth), hhtest.OnRequest(func(r *http.Request) {
		if r.URL.Path != "/oauth/token" {
			return
		}
		// Hold the token request until the other replica waits on the lock.
		waited := false
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if waited = advisoryWaiters(r.Context(), st.Load()) == 1; waited {
				break
			}
		}
		select {
		case lockWaited <- waited:
		default: // a second token request: the count below fails the test
		}
	}))
	st.Store(b.store())
	cfg := b.env(b.credentials())
	replicas := []*hh.Client{b.replica(cfg), b.replica(cfg)}

	errs := make([]error, len(replicas))
	var wg sync.WaitGroup
	for i, c := range replicas {
		wg.Go(func() { errs[i] = b.search(c) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.True(t, <-lockWaited, "the second replica waited on the first's lock")
	require.Equal(t, 1, b.srv.TokenCalls(), "exactly one token obtained")
	tok := b.srv.CurrentToken()
	require.NotEmpty(t, tok, "and it was never revoked by a second one")
	b.requireAuthorizations(bearer(tok)+" OK", bearer(tok)+" OK")
	require.Equal(t, tok, b.storedToken(st.Load()))
}

// A revoked token is replaced once and the request sent again; a replica
// that still holds the revoked token takes the one already replaced
// instead of replacing it again.
func TestHHRevokedTokenReplacedOnce(t *testing.T) {
	t.Parallel()
	b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
	noWait := func(c *hh.AppTokenConfig) { c.MinInterval = -1 }
	first, second := b.appTokenReplica(noWait), b.appTokenReplica(noWait)

	require.NoError(t, b.search(first))
	require.NoError(t, b.search(second))
	old := b.srv.CurrentToken()
	require.Equal(t, 1, b.srv.TokenCalls())

	b.srv.RevokeToken(old)
	require.NoError(t, b.search(first), "replaced and sent again")
	fresh := b.srv.CurrentToken()
	require.NotEqual(t, old, fresh)
	require.Equal(t, 2, b.srv.TokenCalls(), "one more token")

	require.NoError(t, b.search(second), "the second replica takes the replaced token")
	require.Equal(t, 2, b.srv.TokenCalls(), "and does not replace it again")
	require.Equal(t, fresh, b.srv.CurrentToken(), "which would have revoked the first replica's")
	b.requireAuthorizations(
		bearer(old)+" OK", bearer(old)+" OK",
		bearer(old)+" Forbidden", bearer(fresh)+" OK",
		bearer(old)+" Forbidden", bearer(fresh)+" OK",
	)
	require.Contains(t, b.logs.String(), "HH refused the application token")
	b.requireNoSecretLogged(old, fresh)
}

// A fresh token refused too is reported, not replaced again and again.
func TestHHSecondRefusalIsReported(t *testing.T) {
	t.Parallel()
	b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
	c := b.appTokenReplica(func(c *hh.AppTokenConfig) { c.MinInterval = -1 })
	require.NoError(t, b.search(c))
	revoked := []byte(`{"errors":[{"type":"oauth","value":"token_revoked"}]}`)
	b.srv.InjectFault(hhtest.Fault{Count: 2, Status: http.StatusForbidden, On: hhtest.AnyEndpoint, Body: revoked})

	err := b.search(c)
	var apiErr *hh.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusForbidden, apiErr.Status)
	require.Equal(t, []struct{ Type, Value string }{{"oauth", "token_revoked"}}, apiErr.Errors)
	require.Equal(t, 2, b.srv.TokenCalls(), "one replacement only")
	require.Len(t, b.srv.Requests(), 3, "the request was sent twice")

	// The refused replacement is itself replaced by the next request.
	require.NoError(t, b.search(c))
	require.Equal(t, 3, b.srv.TokenCalls())
}

// HH issues a token at most every five minutes: a token refused sooner
// after it was obtained is not replaced, and requests report why until a
// replacement is allowed.
func TestHHRefusedTokenNotReplacedWithinFiveMinutes(t *testing.T) {
	t.Parallel()
	b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
	cfg := b.env(b.credentials()) // the defaults: DefaultTokenInterval
	c := b.replica(cfg)
	require.NoError(t, b.search(c))
	old := b.srv.CurrentToken()
	b.srv.RevokeToken(old)

	err := b.search(c)
	var apiErr *hh.APIError
	require.ErrorAs(t, err, &apiErr, "HH's refusal is reported")
	err = b.search(c)
	require.ErrorContains(t, err, "application token")
	require.ErrorContains(t, err, "at most every 5m0s")
	require.Equal(t, 1, b.srv.TokenCalls(), "HH was not asked too early")
	require.Len(t, b.srv.Requests(), 2, "nothing sent without a token")

	// Five minutes later, by the database's clock, a replica (this one
	// restarted, say) replaces it.
	_, err = b.store().Pool().Exec(context.Background(), `UPDATE hh_app_tokens SET obtained_at = now() - interval '6 minutes'`)
	require.NoError(t, err)
	require.NoError(t, b.search(b.replica(cfg)))
	require.Equal(t, 2, b.srv.TokenCalls())
	require.NotEqual(t, old, b.srv.CurrentToken())
}

func TestHHAppTokenGivenDirectly(t *testing.T) {
	t.Parallel()
	b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
	tok := b.srv.IssueToken()
	c := b.replica(b.env(map[string]string{"HH_APP_TOKEN": tok}))
	require.NoError(t, b.search(c))
	require.NoError(t, b.search(c))
	b.requireAuthorizations(bearer(tok)+" OK", bearer(tok)+" OK")
	require.Zero(t, b.srv.TokenCalls())
	require.Empty(t, b.storedToken(b.store()), "nothing stored")
	b.requireNoSecretLogged(tok)
}

func TestHHAnonymousWithoutCredentials(t *testing.T) {
	t.Parallel()
	o := hhTestOAuth
	o.Require = false
	b := newTokenBundle(t, hhtest.WithOAuth(o))
	c := b.replica(b.env(nil))
	require.NoError(t, b.search(c))
	b.requireAuthorizations(" OK")
	require.Zero(t, b.srv.TokenCalls())
	require.Contains(t, b.logs.String(), "requests are anonymous")
}

func TestHHTokenRequestFailures(t *testing.T) {
	t.Parallel()
	t.Run("wrong secret", func(t *testing.T) {
		t.Parallel()
		b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
		c := b.replica(b.env(map[string]string{"HH_CLIENT_ID": hhTestOAuth.ClientID, "HH_CLIENT_SECRET": "wrong-secret"}))
		err := b.search(c)
		var tokErr *hh.TokenError
		require.ErrorAs(t, err, &tokErr)
		require.Equal(t, hh.TokenError{Status: 400, Code: "invalid_client", Description: "client_id or client_secret not found"}, *tokErr)
		require.ErrorIs(t, err, vacancy.ErrHHBlocked, "wrong credentials refuse us: the breaker holds requests, the admin chat is told")
		refused, why := c.Blocked()
		require.True(t, refused)
		require.Contains(t, why, "invalid_client")
		require.NotContains(t, err.Error(), "wrong-secret")
		// Reported again without asking HH until DefaultTokenRetry passes.
		require.ErrorAs(t, b.search(c), &tokErr)
		require.Equal(t, 1, b.srv.TokenCalls())
		require.Empty(t, b.srv.Requests(), "no request goes without its token")
		require.NotContains(t, b.logs.String(), "wrong-secret")
	})
	t.Run("HH down", func(t *testing.T) {
		t.Parallel()
		b := newTokenBundle(t, hhtest.WithOAuth(hhTestOAuth))
		b.srv.FailTokenRequests(1, http.StatusBadGateway)
		c := b.appTokenReplica(func(c *hh.AppTokenConfig) { c.RetryAfter = -1 })
		err := b.search(c)
		require.ErrorIs(t, err, vacancy.ErrUnavailable, "worth retrying later: the vacancy is SKIPPED, not failed")
		require.NoError(t, b.search(c))
		require.Equal(t, 2, b.srv.TokenCalls())
	})
	t.Run("stored token expired", func(t *testing.T) {
		t.Parallel()
		o := hhTestOAuth
		o.ExpiresIn = time.Hour
		b := newTokenBundle(t, hhtest.WithOAuth(o))
		st := b.store()
		require.NoError(t, b.search(b.replica(b.env(b.credentials()))))
		var left int64
		require.NoError(t, st.Pool().QueryRow(context.Background(),
			`SELECT extract(epoch FROM expires_at - now())::bigint FROM hh_app_tokens`).Scan(&left))
		require.InDelta(t, time.Hour.Seconds(), float64(left), 60, "expires_in is kept")
		_, err := st.Pool().Exec(context.Background(),
			`UPDATE hh_app_tokens SET expires_at = now() - interval '1 second', obtained_at = now() - interval '1 hour'`)
		require.NoError(t, err)
		require.NoError(t, b.search(b.replica(b.env(b.credentials()))))
		require.Equal(t, 2, b.srv.TokenCalls(), "an expired token is replaced before it is sent")
	})
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return id
}
