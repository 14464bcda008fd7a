package hh

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"switchboard/domain/vacancy"
)

// Application authorization (hhru/api:docs/authorization_for_application.md):
// an application registered at dev.hh.ru gets a token with the
// client_credentials grant, POST https://hh.ru/oauth/token, and sends it as
// "Authorization: Bearer …" to the API. The token does not expire; asking
// for another revokes the previous one, and HH gives one at most every
// five minutes. So one token serves every replica (TokenStore keeps it in
// PostgreSQL) and a new one is asked for only when HH refuses the current
// one (403 oauth bad_authorization, token_expired or token_revoked,
// hhru/api:docs/errors.md#oauth).

// TokenSource gives the application token every request to the API
// carries. It is safe for concurrent use.
type TokenSource interface {
	// Token returns the token to send.
	Token(ctx context.Context) (string, error)
	// Refused tells the source HH refused token, so that the next Token
	// gives another if it can.
	Refused(ctx context.Context, token string)
}

// StaticToken is a token given by configuration (HH_APP_TOKEN): always the
// same, nothing to obtain and nothing to replace when HH refuses it.
type StaticToken string

// Token returns the token.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

// Refused does nothing: there is no other token to give.
func (StaticToken) Refused(context.Context, string) {}

// StoredToken is an application token as a TokenStore keeps it; times are
// the store's, which every replica shares.
type StoredToken struct {
	Token string
	// Age is how long ago it was obtained.
	Age time.Duration
	// Expires reports whether it has a lifetime (HH's have none unless the
	// answer carried expires_in); TTL is then what is left, negative once
	// expired.
	Expires bool
	TTL     time.Duration
	// Refused: HH refused it, and it waits to be replaced.
	Refused bool
}

// NewToken is a token just obtained from HH, to be stored.
type NewToken struct {
	Token string
	// Lifetime is expires_in; zero for a token that does not expire.
	Lifetime time.Duration
}

// TokenStore keeps the application token where every replica finds it
// (storage.HHTokens implements it on PostgreSQL).
type TokenStore interface {
	// AppToken calls renew with the token stored for clientID (nil if
	// none) while holding a lock that makes every other caller for
	// clientID, on any replica, wait; a token renew returns replaces the
	// stored one, nil keeps it. It returns the token stored in the end, or
	// renew's error.
	AppToken(ctx context.Context, clientID string, renew func(ctx context.Context, stored *StoredToken) (*NewToken, error)) (StoredToken, error)
	// RefuseAppToken marks token refused if it is still the one stored for
	// clientID (another replica may have replaced it already); whether it
	// did.
	RefuseAppToken(ctx context.Context, clientID, token string) (bool, error)
}

// DefaultOAuthURL is where HH issues tokens (HH_OAUTH_URL).
const DefaultOAuthURL = "https://hh.ru"

const (
	// DefaultTokenInterval is how often HH issues an application token at
	// most ("app token refresh too early" otherwise).
	DefaultTokenInterval = 5 * time.Minute
	// DefaultTokenRetry is how long a failure to obtain a token is
	// reported before another request for one is made.
	DefaultTokenRetry = 30 * time.Second
	// expirySkew renews a token that expires (only with expires_in) this
	// long before it does, so that a request in flight does not outlive it.
	expirySkew = 30 * time.Second
)

// AppTokenConfig configures NewAppToken.
type AppTokenConfig struct {
	// URL is where HH issues tokens, https://hh.ru (not the API's host);
	// the token is asked for at URL/oauth/token. Empty means
	// DefaultOAuthURL.
	URL string
	// ClientID and ClientSecret are the application's, from dev.hh.ru.
	ClientID, ClientSecret string
	// UserAgent is sent as User-Agent and HH-User-Agent, as to the API.
	UserAgent string
	// Store keeps the token for every replica.
	Store TokenStore
	// Timeout bounds the token request; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient is used as given; nil means a client of its own without
	// keep-alive (a token is asked for seldom).
	HTTPClient *http.Client
	// MinInterval: a refused token younger than this is not replaced
	// before it is this old, since HH would refuse to issue one; requests
	// report the refusal meanwhile. Zero means DefaultTokenInterval;
	// negative, no limit.
	MinInterval time.Duration
	// RetryAfter is how long a failure to obtain a token is reported to
	// every request before HH is asked again. Zero means
	// DefaultTokenRetry; negative, no pause.
	RetryAfter time.Duration
	// Log defaults to slog.Default(). The token is never logged.
	Log *slog.Logger
}

// AppToken is a TokenSource that obtains the application token with
// client_credentials and shares it through a TokenStore: across replicas
// one token is obtained however many ask at once, and a refused one is
// replaced once. It keeps the token in memory between refusals.
type AppToken struct {
	url         string
	id, secret  string
	ua          string
	store       TokenStore
	hc          *http.Client
	timeout     time.Duration
	minInterval time.Duration
	retryAfter  time.Duration
	log         *slog.Logger

	// sem lets one caller at a time in this process ask the store, so the
	// others wait for its answer instead of queueing on the store's lock.
	sem chan struct{}

	mu        sync.Mutex
	token     string    // cached; "" when none
	expires   time.Time // zero: never
	failErr   error     // the last failure to obtain one, reported until failUntil
	failUntil time.Time
}

var _ TokenSource = (*AppToken)(nil)

// NewAppToken validates cfg and builds an AppToken. It contacts nobody.
func NewAppToken(cfg AppTokenConfig) (*AppToken, error) {
	cfg.URL = cmp.Or(cfg.URL, DefaultOAuthURL)
	base, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || base.Scheme != "http" && base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("hh: AppTokenConfig.URL %q: want http(s)://host", cfg.URL)
	}
	if cfg.ClientID == "" || cfg.ClientSecret == "" {
		return nil, errors.New("hh: AppTokenConfig needs both ClientID and ClientSecret")
	}
	ua := strings.TrimSpace(cfg.UserAgent)
	if ua == "" || strings.ContainsAny(ua, "\r\n\x00") {
		return nil, errors.New("hh: AppTokenConfig.UserAgent is empty or contains a control character")
	}
	if cfg.Store == nil {
		return nil, errors.New("hh: AppTokenConfig.Store is nil")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("hh: AppTokenConfig.Timeout %s is negative", cfg.Timeout)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.MinInterval = cmp.Or(cfg.MinInterval, DefaultTokenInterval)
	cfg.RetryAfter = cmp.Or(cfg.RetryAfter, DefaultTokenRetry)
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DisableKeepAlives = true
		hc = &http.Client{Transport: tr}
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	return &AppToken{
		url: base.JoinPath("oauth", "token").String(),
		id:  cfg.ClientID, secret: cfg.ClientSecret, ua: ua,
		store: cfg.Store, hc: hc, timeout: cfg.Timeout,
		minInterval: cfg.MinInterval, retryAfter: cfg.RetryAfter,
		log: log.With(slog.String("component", "hh")),
		sem: make(chan struct{}, 1),
	}, nil
}

// Token returns the token in memory, or the stored one, or a new one from
// HH when none is stored or the stored one was refused or expires.
func (a *AppToken) Token(ctx context.Context) (string, error) {
	if tok, ok := a.cached(); ok {
		return tok, nil
	}
	select {
	case a.sem <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-a.sem }()
	if tok, ok := a.cached(); ok {
		return tok, nil // the caller before us got it
	}
	if err := a.failing(); err != nil {
		return "", err
	}
	var renewErr error
	st, err := a.store.AppToken(ctx, a.id, func(ctx context.Context, stored *StoredToken) (*NewToken, error) {
		fresh, err := a.renew(ctx, stored)
		renewErr = err
		return fresh, err
	})
	if err != nil {
		if renewErr != nil && ctx.Err() == nil {
			a.log.Warn("hh application token not obtained", slog.String("error", renewErr.Error()))
			a.fail(renewErr)
		}
		return "", err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token, a.expires = st.Token, time.Time{}
	if st.Expires {
		a.expires = time.Now().Add(st.TTL)
	}
	return st.Token, nil
}

// Refused forgets token and marks it refused in the store, unless another
// replica has replaced it already.
func (a *AppToken) Refused(ctx context.Context, token string) {
	a.mu.Lock()
	if a.token == token {
		a.token, a.expires = "", time.Time{}
	}
	a.mu.Unlock()
	// Recorded even if the request's caller gives up now: the token is
	// refused either way.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	ok, err := a.store.RefuseAppToken(ctx, a.id, token)
	switch {
	case err != nil:
		a.log.Warn("hh application token: could not record HH's refusal", slog.String("error", err.Error()))
	case ok:
		a.log.Warn("HH refused the application token; a new one will be obtained")
	}
}

func (a *AppToken) cached() (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == "" || !a.expires.IsZero() && !time.Now().Before(a.expires.Add(-expirySkew)) {
		return "", false
	}
	return a.token, true
}

// failing is the last failure to obtain a token while it is still
// reported instead of asking HH again.
func (a *AppToken) failing() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failErr != nil && time.Now().Before(a.failUntil) {
		return a.failErr
	}
	a.failErr = nil
	return nil
}

func (a *AppToken) fail(err error) {
	hold := a.retryAfter
	var early *tooEarlyError
	if errors.As(err, &early) {
		hold = early.wait
	}
	if hold <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failErr, a.failUntil = err, time.Now().Add(hold)
}

// usable reports whether a stored token can be sent as it is.
func usable(t StoredToken) bool {
	return !t.Refused && (!t.Expires || t.TTL > expirySkew)
}

// renew runs under the store's lock: it keeps a usable stored token (one
// another replica obtained while this one waited, say) and otherwise
// obtains a new one, unless HH would refuse to issue it yet.
func (a *AppToken) renew(ctx context.Context, stored *StoredToken) (*NewToken, error) {
	if stored != nil && usable(*stored) {
		return nil, nil
	}
	if stored != nil && a.minInterval > 0 && stored.Age < a.minInterval {
		if !stored.Refused && stored.TTL > 0 {
			return nil, nil // about to expire, still good until HH gives another
		}
		return nil, &tooEarlyError{age: stored.Age, interval: a.minInterval, wait: a.minInterval - stored.Age}
	}
	return a.obtain(ctx)
}

// tooEarlyError: the stored token was refused, and HH issues no new one so
// soon after the last.
type tooEarlyError struct {
	age, interval, wait time.Duration
}

func (e *tooEarlyError) Error() string {
	return fmt.Sprintf("HH refused the application token obtained %s ago and issues one at most every %s: a new one in %s",
		e.age.Round(time.Second), e.interval, e.wait.Round(time.Second))
}

// TokenError is HH refusing to issue an application token: a 4xx with
// RFC 6749's {"error","error_description"} (hhru/api:docs/errors.md
// #oauth-get-errors), e.g. 400 invalid_client for a wrong client id or
// secret, 403 forbidden when asked again within five minutes.
type TokenError struct {
	Status      int
	Code        string // "error"
	Description string // "error_description"
}

func (e *TokenError) Error() string {
	s := "HH refused an application token: " + strconv.Itoa(e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Description != "" {
		s += " (" + e.Description + ")"
	}
	return s
}

// obtain asks HH for a token with client_credentials. Network failures,
// timeouts, 429 and 5xx match vacancy.ErrUnavailable; HH's refusals are
// *TokenError.
func (a *AppToken) obtain(ctx context.Context) (*NewToken, error) {
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {a.id},
		"client_secret": {a.secret},
	}
	reqCtx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, a.url, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", a.ua)
	req.Header.Set("HH-User-Agent", a.ua)
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, a.unavailable(ctx, reqCtx, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return nil, a.unavailable(ctx, reqCtx, fmt.Errorf("read body: %w", err))
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, fmt.Errorf("obtain application token: HH answered %d: %w", resp.StatusCode, vacancy.ErrUnavailable)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e) // the status alone is the error; the body adds detail
		return nil, &TokenError{Status: resp.StatusCode, Code: e.Error, Description: e.Description}
	}
	var ans struct {
		AccessToken string   `json:"access_token"`
		TokenType   string   `json:"token_type"`
		ExpiresIn   *float64 `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("obtain application token: decode answer: %w", err)
	}
	switch {
	case ans.AccessToken == "":
		return nil, errors.New("obtain application token: HH's answer has no access_token")
	case !strings.EqualFold(ans.TokenType, "bearer"):
		return nil, fmt.Errorf("obtain application token: token_type %q, want bearer", ans.TokenType)
	case strings.ContainsFunc(ans.AccessToken, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		// It would not fit in a header, and net/http's refusal would look
		// like HH being unreachable.
		return nil, errors.New("obtain application token: access_token contains spaces or control characters")
	}
	fresh := &NewToken{Token: ans.AccessToken}
	attrs := []any{}
	if ans.ExpiresIn != nil && *ans.ExpiresIn > 0 {
		fresh.Lifetime = time.Duration(*ans.ExpiresIn * float64(time.Second))
		attrs = append(attrs, slog.Duration("expires_in", fresh.Lifetime))
	}
	a.log.Info("hh application token obtained", attrs...)
	return fresh, nil
}

// unavailable classifies a failure to get an answer as transportError does
// for the API, naming what failed unless the caller's context ended.
func (a *AppToken) unavailable(ctx, reqCtx context.Context, err error) error {
	err = transportError(ctx, reqCtx, a.timeout, err)
	if ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("obtain application token: %w", err)
}

// refusesToken reports whether err is HH refusing the request's token
// (hhru/api:docs/errors.md#oauth: 403 with type oauth and one of these values; the
// values are also recognised as types). application_not_found and
// user_auth_expected are not: another token would not help.
func refusesToken(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden {
		return false
	}
	for _, it := range ae.Errors {
		v := it.Value
		if it.Type != "oauth" {
			v = it.Type
		}
		switch v {
		case "bad_authorization", "token_expired", "token_revoked":
			return true
		}
	}
	return false
}

// authorized sends a request with the application token, if the Client
// has a source. A request HH refuses for its token is told to the source
// and sent once more with the token the source gives then, if it is
// another; a second refusal is reported as it is, never retried again.
func (c *Client) authorized(ctx context.Context, send func(token string) ([]byte, error)) ([]byte, error) {
	if c.token == nil {
		return send("")
	}
	tok, err := c.token.Token(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var te *TokenError
		if errors.As(err, &te) && te.Status >= 400 && te.Status < 500 {
			// Wrong credentials: no request can go, so the breaker
			// holds them and the admin chat is told what to fix.
			return nil, credentialsBlock(te)
		}
		return nil, fmt.Errorf("application token: %w", err)
	}
	body, err := send(tok)
	if !refusesToken(err) {
		return body, err
	}
	c.token.Refused(ctx, tok)
	fresh, terr := c.token.Token(ctx)
	if terr != nil || fresh == tok {
		if terr != nil && ctx.Err() == nil {
			c.log.Warn("hh: no other application token after HH refused one", slog.String("error", terr.Error()))
		}
		return nil, err
	}
	body, err = send(fresh)
	if refusesToken(err) {
		c.token.Refused(ctx, fresh)
	}
	return body, err
}
