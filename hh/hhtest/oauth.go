package hhtest

import (
	"crypto/rand"
	"encoding/hex"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"switchboard/internal/testkit"
)

// OAuth configures the fake's application authorization (WithOAuth), as
// HH documents it (hhru/api:docs/authorization_for_application.md,
// hhru/api:docs/errors.md#oauth).
type OAuth struct {
	// ClientID and ClientSecret are the application's; POST /oauth/token
	// issues a token for exactly these.
	ClientID, ClientSecret string
	// Require refuses API requests without a bearer token with 403 oauth
	// bad_authorization. Without it anonymous requests are served as
	// before, and only a token that is sent is checked, as HH does.
	Require bool
	// ExpiresIn, when positive, is sent as expires_in (whole seconds) and
	// tokens stop working after it (403 oauth token_expired). HH's
	// application tokens do not expire, and its answer has no expires_in.
	ExpiresIn time.Duration
	// MinInterval refuses a token request sooner than this after the last
	// token was issued with 403 {"error":"forbidden","error_description":
	// "app token refresh too early"}, as HH does within five minutes. Zero:
	// no limit.
	MinInterval time.Duration
}

// oauth is the fake's token issuer; its zero value serves nothing.
type oauth struct {
	mu      sync.Mutex
	on      bool
	cfg     OAuth
	tokens  map[string]*issuedToken
	current string // the token issued last, revoked or not
	last    time.Time
	calls   int
	faults  []int // statuses for the next token requests
}

type issuedToken struct {
	at      time.Time
	revoked bool
}

// WithOAuth makes the fake serve POST /oauth/token with the
// client_credentials grant for o's client, and check the bearer token of
// every API request that carries one (all of them with o.Require). As at
// HH, issuing a token revokes the one issued before. Token requests are
// counted by TokenCalls and pass OnRequest's hook, but are not in the
// request log.
func WithOAuth(o OAuth) Option {
	return func(s *Server) {
		s.oauth.on, s.oauth.cfg, s.oauth.tokens = true, o, map[string]*issuedToken{}
	}
}

// OAuthURL is where the fake issues tokens: HH_OAUTH_URL's counterpart
// (hh.ru at HH, a host of its own; the fake serves both on one).
func (s *Server) OAuthURL() string { return s.ts.URL }

// TokenCalls counts POST /oauth/token requests received, refused ones
// included.
func (s *Server) TokenCalls() int {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	return s.oauth.calls
}

// IssueToken issues a token without a request, as the application's owner
// gets it on dev.hh.ru (HH_APP_TOKEN), revoking the one before. It panics
// without WithOAuth.
func (s *Server) IssueToken() string {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	if !s.oauth.on {
		panic("hhtest: IssueToken without WithOAuth")
	}
	return s.oauth.issue(time.Now())
}

// CurrentToken is the token issued last, "" if none or if it was revoked.
func (s *Server) CurrentToken() string {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	if t := s.oauth.tokens[s.oauth.current]; t == nil || t.revoked {
		return ""
	}
	return s.oauth.current
}

// RevokeToken makes requests with token answer 403 oauth token_revoked,
// as HH's do after the owner asked for a new token on dev.hh.ru or the
// token leaked. Unknown tokens are ignored.
func (s *Server) RevokeToken(token string) {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	if t := s.oauth.tokens[token]; t != nil {
		t.revoked = true
	}
}

// FailTokenRequests makes the next n token requests answer status: a 5xx
// with an nginx page, any other with RFC 6749's {"error":"invalid_request"}.
func (s *Server) FailTokenRequests(n, status int) {
	s.oauth.mu.Lock()
	defer s.oauth.mu.Unlock()
	for range n {
		s.oauth.faults = append(s.oauth.faults, status)
	}
}

// serves reports whether r is a token request the fake answers.
func (o *oauth) serves(r *http.Request) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.on && r.URL.Path == "/oauth/token"
}

// issue makes a new token the current one, revoking the one before; the
// caller holds mu.
func (o *oauth) issue(now time.Time) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := "APPL" + strings.ToUpper(hex.EncodeToString(b))
	if t := o.tokens[o.current]; t != nil {
		t.revoked = true
	}
	o.tokens[tok] = &issuedToken{at: now}
	o.current, o.last = tok, now
	return tok
}

// refusal is the oauth error value an API request is refused with, "" to
// serve it.
func (o *oauth) refusal(r *http.Request, now time.Time) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.on {
		return ""
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		if o.cfg.Require {
			return "bad_authorization"
		}
		return ""
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "bad_authorization"
	}
	t := o.tokens[strings.TrimSpace(tok)]
	switch {
	case t == nil:
		return "bad_authorization"
	case t.revoked:
		return "token_revoked"
	case o.cfg.ExpiresIn > 0 && !now.Before(t.at.Add(o.cfg.ExpiresIn)):
		return "token_expired"
	}
	return ""
}

// oauthErrorBody is HH's refusal of a request's authorization
// (hhru/api:docs/errors.md#oauth).
func oauthErrorBody(value string) []byte {
	return mustJSON(errorBody{Errors: []errorItem{{Type: "oauth", Value: value}}})
}

// tokenErrorBody is RFC 6749's error answer, which HH's /oauth/token uses
// (hhru/api:docs/errors.md#oauth-get-errors).
func tokenErrorBody(code, description string) []byte {
	return mustJSON(struct {
		Error       string `json:"error"`
		Description string `json:"error_description,omitempty"`
	}{code, description})
}

// serveOAuth answers POST /oauth/token.
func (s *Server) serveOAuth(w http.ResponseWriter, r *http.Request) {
	o := &s.oauth
	o.mu.Lock()
	o.calls++
	o.mu.Unlock()
	if s.hook != nil {
		s.hook(r)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.faults) > 0 {
		status := o.faults[0]
		o.faults = o.faults[1:]
		if status >= 500 {
			testkit.WriteBody(w, status, "text/html", gatewayBody(status, http.StatusText(status)))
			return
		}
		testkit.WriteBody(w, status, jsonType, tokenErrorBody("invalid_request", ""))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		testkit.WriteBody(w, http.StatusMethodNotAllowed, jsonType, tokenErrorBody("invalid_request", "method not allowed"))
		return
	}
	if v := s.checkUserAgent(r); v != "" {
		testkit.WriteBody(w, http.StatusBadRequest, jsonType, badUserAgentBody(v))
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		testkit.WriteBody(w, http.StatusBadRequest, jsonType, tokenErrorBody("invalid_request", "content type must be application/x-www-form-urlencoded"))
		return
	}
	if err := r.ParseForm(); err != nil {
		testkit.WriteBody(w, http.StatusBadRequest, jsonType, tokenErrorBody("invalid_request", "malformed body"))
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != "client_credentials":
		testkit.WriteBody(w, http.StatusBadRequest, jsonType, tokenErrorBody("unsupported_grant_type", "unsupported grant_type"))
		return
	case f.Get("client_id") == "" || f.Get("client_secret") == "":
		testkit.WriteBody(w, http.StatusBadRequest, jsonType, tokenErrorBody("invalid_request", "client_id or client_secret is empty"))
		return
	case f.Get("client_id") != o.cfg.ClientID || f.Get("client_secret") != o.cfg.ClientSecret:
		testkit.WriteBody(w, http.StatusBadRequest, jsonType, tokenErrorBody("invalid_client", "client_id or client_secret not found"))
		return
	}
	now := time.Now()
	if o.cfg.MinInterval > 0 && !o.last.IsZero() && now.Sub(o.last) < o.cfg.MinInterval {
		testkit.WriteBody(w, http.StatusForbidden, jsonType, tokenErrorBody("forbidden", "app token refresh too early"))
		return
	}
	ans := struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in,omitempty"`
	}{AccessToken: o.issue(now), TokenType: "bearer", ExpiresIn: int64((o.cfg.ExpiresIn + time.Second - 1) / time.Second)}
	testkit.WriteBody(w, http.StatusOK, jsonType, mustJSON(ans))
}
