// Package hh is the client of the HH.ru (api.hh.ru) vacancy API: GET
// /vacancies (search) and GET /vacancies/{id} (detail). *Client implements
// vacancy.Source; the vacancy workflow depends on that interface, never on
// this package, and tests use the fake in hh/hhtest.
//
// # What it does and does not do
//
// It sends HH's required user agent (Config.UserAgent, as both User-Agent
// and HH-User-Agent, the latter winning at HH), bounds every request with
// Config.Timeout, decodes HH's JSON leniently (unknown keys ignored, null
// salary bounds read as 0, timestamps in HH's "2006-01-02T15:04:05-0700"
// with RFC 3339 accepted too) and maps it to vacancy.Vacancy. Search
// snippets lose HH's <highlighttext> tags and HTML entities; descriptions
// stay HTML as sent. Paging limits (per_page ≤ 100, (page+1)·per_page ≤
// 2000) are checked before any request is made.
//
// It paces itself when given a Pacer (Config.Pacer: HH_RATE for the whole
// deployment, in process or shared through Redis), and a 429's Retry-After
// pauses every request of that pacer. It does not retry or cache: whether
// and when to try again is the domain's decision, made from the error
// class below. A Client is safe
// for concurrent use; create one and share it, and Close it at shutdown to
// release its idle connections.
//
// # Application token
//
// With Config.Token every request carries "Authorization: Bearer <token>".
// StaticToken is a token given as it is (HH_APP_TOKEN); AppToken obtains one
// with the client_credentials grant (HH_CLIENT_ID, HH_CLIENT_SECRET) and
// shares it through a TokenStore (PostgreSQL), one token for every replica,
// obtained under the store's lock. A 403 oauth bad_authorization,
// token_expired or token_revoked marks the token refused (only if it is
// still the stored one) and the request is sent once more with the next
// token; a second refusal is an *APIError. Failing to obtain a token is
// ErrUnavailable (HH unreachable, 5xx, 429) or a *TokenError (HH's 4xx,
// e.g. invalid_client). The token is never logged.
//
// # Errors
//
// Every error names the operation ("hh search page 3: ...", "hh vacancy
// 123: ...") and falls in one of these classes:
//
//   - vacancy.ErrArchived (errors.Is): the vacancy is gone. HH answers 404
//     for removed vacancies and 200 with "archived": true for archived ones
//     it still serves; both map here. Only Vacancy returns it.
//   - vacancy.ErrUnavailable (errors.Is): worth retrying later. Network
//     errors, the per-request timeout and 5xx (whose bodies may be proxy
//     HTML). The message carries the status and, for JSON bodies, HH's
//     errors[].type/value. It does not match context.DeadlineExceeded even
//     for the timeout, which callers would take for their own deadline.
//   - *Block (errors.As; matches vacancy.ErrHHBlocked and, for callers
//     that only wait out outages, ErrUnavailable): HH blocks us as a client — 403
//     captcha_required (with HH's captcha_url) or forbidden, a 403 that is
//     not HH's JSON (a firewall), or 429. It opens the Client's breaker
//     (breaker.go): until its hold ends every request returns a Block
//     without being sent, then one probe decides.
//   - *vacancy.SearchRefusal (errors.As; matches vacancy.ErrSearchRefused):
//     Search only, HH answered 400 bad_argument naming a parameter of the
//     saved search (Args: "currency", say). The search is wrong, not HH nor
//     us: it never opens the breaker and never matches ErrUnavailable or
//     ErrHHBlocked, and the domain sets the search aside. A bad_argument
//     naming only what the client adds (page, per_page, order_by) is our
//     bug and stays an *APIError.
//   - *APIError (errors.As): HH refused the request itself, any other 4xx
//     (400 bad_user_agent, a 404 on search, a second oauth refusal...).
//     Retrying the same request will not help. It never matches
//     ErrUnavailable.
//   - The caller's context error (errors.Is context.Canceled or
//     context.DeadlineExceeded) when the caller's ctx ended first; never
//     reported as ErrUnavailable, so a shutdown does not look like an outage.
//   - Anything else is a plain error: invalid arguments (checked locally,
//     no request made) or a 2xx answer that could not be decoded.
//
// Search skips, with a warning in the log, single items it cannot map (a
// non-numeric id, an unreadable published_at) instead of failing the page.
//
// # Metrics
//
// With Config.Registerer: hh_requests_total{endpoint="search"|"vacancy",
// outcome="ok"|"not_found"|"unavailable"|"error"} and
// hh_request_duration_seconds{endpoint}. "not_found" is ErrArchived,
// "unavailable" ErrUnavailable; "error" is everything else, including the
// caller's cancellation. Arguments refused locally are not requests and are
// not counted. Clients sharing a registry share the series.
package hh
