// Package hhtest is a fake HH.ru (api.hh.ru) vacancy API for tests and
// benchmarks, plus a deterministic generator of realistic vacancies.
//
// The fake follows the rules HH published (see the fixtures in testdata,
// copied from github.com/hhru/api) closely enough that a client tested
// against it should work against the real API: same JSON shapes, same
// paging limits, same error bodies, same timestamp format.
//
// # Usage
//
//	srv := hhtest.New(hhtest.WithVacancies(hhtest.Generate(2500, hhtest.GenOptions{Seed: 1})...))
//	defer srv.Close()
//	client := srv.Client() // closed with the server; or any *http.Client
//
//	req, _ := http.NewRequest("GET", srv.URL()+"/vacancies?text=go&per_page=100", nil)
//	req.Header.Set("HH-User-Agent", "switchboard/1.0 (dev@example.com)")
//	resp, err := client.Do(req)
//	...
//	srv.PublishN(3)               // three new vacancies on top of page 0
//	srv.FailNext(2, 503, hhtest.SearchEndpoint) // next two searches fail
//	_ = srv.SearchCalls()         // what the client did
//
// # Endpoints
//
// GET /vacancies (also /vacancies/) answers the paginated root
// {"items","found","pages","page","per_page","clusters":null,
// "arguments":null,"fixes":null,"suggests":null,"alternate_url"} with items
// in HH's short representation. Paging is HH's: page is zero-based,
// per_page defaults to 20 and may not exceed 100, and (page+1)*per_page may
// not exceed 2000; violations answer 400 with bad_argument errors. found is
// the true number of matches, pages = ceil(found/per_page) capped at what the
// depth limit lets a client fetch; pages past the end are empty.
//
// GET /vacancies/{id} answers the full representation (HTML description,
// key_skills...), or 404 {"errors":[{"type":"not_found"}]} for unknown,
// archived and DetailNotFound ids. Any other path answers that 404 too.
//
// # Search
//
// Honoured parameters: text (every whitespace-separated word must occur,
// case-insensitively, as a substring of the name or the snippet; HH's query
// language is not modelled), search_field (name, company_name, description;
// description also covers the snippet), area (multi; a region covers its
// cities, e.g. 113 covers 1), experience, schedule, employment, employer_id
// (multi), salary with currency (vacancies whose range, widened by 20%,
// contains the value, plus vacancies without salary), only_with_salary,
// date_from/date_to (inclusive, not rounded to 5 minutes as HH does),
// order_by (publication_time, relevance, salary_desc, salary_asc) and
// responses_count_enabled. Dictionary-valued parameters with unknown ids and
// malformed numbers answer 400 bad_argument; unknown parameters are ignored,
// as HH ignores them. Documented parameters the fake does not model (period,
// metro, industry, label, geo boxes, no_magic...) are ignored too, except
// order_by=distance, which answers 400 rather than pretend to sort.
//
// Results are newest first: published_at descending, ties by larger id.
// The fake has no relevance model, so relevance (the default) orders the
// same way, which keeps paging stable for tests. With a text query, the
// words are wrapped in <highlighttext> in the snippet, as HH does.
//
// # User agent
//
// HH refuses requests without User-Agent or HH-User-Agent (the latter wins)
// with 400 bad_user_agent/unset; so does the fake. HH accepts any other
// value, including Go's default "Go-http-client/1.1", which net/http sends
// when the client sets none. To catch a client that forgot its own UA use
// StrictUserAgent (refuses Go's default with bad_user_agent/blacklisted) or
// RequireUserAgent(prefix). To send no User-Agent at all from Go, set the
// header to an empty value: req.Header["User-Agent"] = []string{""}.
//
// # Catalogue and mutations
//
// Add puts hand-made vacancies in as given; Publish and PublishN add
// vacancies newer than everything so far (larger ids, later published_at);
// Archive removes vacancies from search and makes detail answer 404. All of
// it is safe while requests are in flight.
//
// # Faults
//
// FailNext/InjectFault make the next N requests (to search, detail or both)
// answer a given status: 503 with HH's JSON service_unavailable, other 5xx
// with a non-JSON proxy page; a Fault's Query narrows it to the requests
// with those parameters (HH refusing one search). SetLatency/WithLatency
// delay requests but give up as soon as the client cancels or the server
// closes. DetailNotFound makes chosen ids answer 404 on detail while they
// stay in search.
//
// # Application authorization
//
// WithOAuth serves POST /oauth/token with the client_credentials grant for
// one client id and secret (RFC 6749 errors: invalid_client,
// unsupported_grant_type; optionally HH's "app token refresh too early"), a
// new token revoking the one before as at HH, and checks every bearer token
// an API request carries: 403 {"errors":[{"type":"oauth","value":...}]}
// with bad_authorization, token_revoked or token_expired. With Require,
// requests without a token are refused too. TokenCalls, IssueToken,
// RevokeToken, CurrentToken and FailTokenRequests let tests drive it; the
// request log records each request's Authorization header.
//
// # Observing the client
//
// Requests returns the log (path, query, both UA headers, status);
// SearchCalls and DetailCalls count attempts, faulted and cancelled ones
// included. WaitRequests and OnRequest let tests synchronise with a client
// running in the background without sleeping.
package hhtest
