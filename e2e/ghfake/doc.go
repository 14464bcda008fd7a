// Package ghfake is a strict fake of GitHub's REST API for end-to-end
// tests: the issues, labels and search endpoints a bot files its reports
// through, with GitHub's limits and refusals. A test (or the built binary,
// over real HTTP) points its GitHub client at URL() instead of
// https://api.github.com.
//
// It follows GitHub's REST documentation (docs.github.com/rest, API
// version 2022-11-28): the same paths, status codes, JSON shapes and
// headers, so that a client that works here fails here where it would
// fail on GitHub. Where GitHub documents no exact wording, the fake's own
// says "(ghfake)".
//
// # Usage
//
//	srv := ghfake.New(t)
//	srv.AddRepo("acme/jobs")
//	srv.AddToken("tok", "switchboard-bot", ghfake.Write("acme/jobs"))
//	srv.AddCollaborator("acme/jobs", "alice")
//	// point the client at srv.URL() with "Authorization: Bearer tok"
//	is := srv.WaitIssue(t, "acme/jobs", func(is ghfake.Issue) bool { return is.Title == "…" })
//	srv.CloseIssue("acme/jobs", is.Number, "completed") // someone on GitHub closes it
//
// A program that is no test (the bench) calls Start instead of New and
// Close when done; the Wait* helpers, which fail a test, are New's.
//
// # Endpoints
//
//	POST  /repos/{owner}/{repo}/issues           201, Location
//	GET   /repos/{owner}/{repo}/issues           state, labels, creator, since, sort, direction, per_page, page
//	GET   /repos/{owner}/{repo}/issues/{number}
//	PATCH /repos/{owner}/{repo}/issues/{number}  title, body, state, state_reason, labels, assignees
//	POST  /repos/{owner}/{repo}/labels           201; 422 already_exists
//	GET   /repos/{owner}/{repo}/labels           per_page, page
//	GET   /repos/{owner}/{repo}/labels/{name}
//	GET   /search/issues                         q, sort, order, per_page, page
//	GET   /rate_limit
//	GET   /user                                  the token's user
//
// Anything else, a trailing slash included, answers 404 as GitHub does.
// GitHub's list of a repository's issues holds its pull requests too; the
// fake has none, so it lists issues only. Lists page as GitHub does
// (per_page 30 by default, at most 100) with a Link header.
//
// # Tokens and access
//
// The fake plays fine-grained personal access tokens. AddToken registers
// one acting as a user, with Read or Write grants on repositories.
// "Authorization: Bearer <token>" and the older "token <token>" both work.
// No header answers 401 "Requires authentication" (GitHub serves public
// reads to anonymous clients at 60 an hour; the fake serves none); an
// unknown or revoked (RevokeToken) token answers 401 "Bad credentials".
// A private repository the token has no grant for answers 404, as GitHub
// hides it; a write with a read grant answers 403 "Resource not accessible
// by personal access token" with X-Accepted-GitHub-Permissions. Requests
// without a User-Agent are refused with GitHub's plain-text 403, and an
// X-GitHub-Api-Version other than SupportedAPIVersions with 400.
//
// # Issues
//
// Creating an issue needs a title (422 missing_field), at most 256
// characters, and a body of at most 65536 (422 custom, GitHub's
// observed messages), counted in code points as GitHub counts them. A
// label name holds at most 50: a label create longer is refused with
// GitHub's "name is too long (maximum is 50 characters)", an issue naming
// one with {"resource":"Label","field":"name","code":"invalid","value":
// name}. A 422 lists every error the request has, as GitHub's does, not
// only the first. RefuseIssues makes a repository refuse every new issue
// with the errors a test gives (GitHub's refusals of content the fake
// does not model), until called again without any. Issues disabled on the repository (IssuesDisabled,
// SetIssuesEnabled) answer 410 "Issues are disabled for this repo"; an
// issue deleted on GitHub's side (DeleteIssue) answers 410 "This issue was
// deleted". An archived repository (Archived, SetArchived) answers every
// write with 403 "Repository was archived so is read-only.", reads as
// before. An assignee who is neither the owner nor a collaborator
// (AddCollaborator, or the user of a token with a write grant) gives 422
// Validation Failed with one {"resource":"Issue","field":"assignees",
// "code":"invalid","value":login} per login. Only users with push access
// set labels and assignees; GitHub drops them silently for anyone else.
//
// The docs do not say what a label name the repository lacks does on a
// new issue; GitHub creates the label (grey, ededed), and so does the
// fake. RefuseUnknownLabels answers 422 instead, for a test that proves a
// client creates its labels first rather than relying on that.
//
// CloseIssue, ReopenIssue and AddIssue act as a person on GitHub would;
// Issues, Issue and WaitIssue show what the fake holds.
//
// # Search
//
// GET /search/issues takes repo:owner/name (several allowed), is:issue,
// is:pr, type:issue, is:open, is:closed, state:, in:title, in:body,
// label:, author:, bare words and "quoted phrases". Every word and phrase
// must occur, case-insensitively and as whole words (the fake does not
// stem), in the fields in: names (title and body by default). The query
// must say is:issue or is:pull-request, as GitHub requires of
// fine-grained tokens (422 "Query must include 'is:issue' or
// 'is:pull-request'"); the text may hold 256 characters and five
// AND/OR/NOT (422 Validation Failed). Other qualifiers, OR, NOT and
// '-' exclusions are refused with a "(ghfake)" 422 rather than ignored. A
// query whose repo: qualifiers all name repositories that do not exist
// or that the token cannot read answers GitHub's 422 "The listed users
// and repositories cannot be searched…"; some of them only are left out
// silently. Only the first 1000 results can be paged to (422 beyond).
// There is no relevance: best match orders newest first. WithSearchLag
// makes a change reach the results only after a delay, as GitHub's
// index does.
//
// # Rate limits
//
// Every authenticated answer carries X-RateLimit-Limit, -Remaining,
// -Used, -Reset (epoch seconds) and -Resource. The primary limits are
// per user, all their tokens together: "core", 5000 requests an hour, and
// "search", 30 a minute; each window opens with its first request and
// resets at the whole second X-RateLimit-Reset names.
// GET /rate_limit counts against neither. An exhausted limit answers 403
// (or 429, WithRateLimitStatus) with "API rate limit exceeded for user ID
// …" and X-RateLimit-Remaining 0; a refused request takes nothing.
//
// Secondary limits answer 403 (or 429) "You have exceeded a secondary
// rate limit…" with Retry-After. TripSecondaryLimit switches them on for
// mutating requests for a while; the content limits (80 new issues and
// labels a minute, 500 an hour, as documented; Limits) trip them on their
// own. GitHub's other secondary limits (100 concurrent requests, 900
// points a minute per endpoint, CPU time) are not modelled.
//
// WithTimeScale(k) shortens every limit's period k times (the minute to
// 60s/k, the hour to 3600s/k) and keeps the counts, so that a load
// GitHub's content limits would spread over hours (1000 new issues at 500
// an hour) runs in minutes at the same shape: at k = 60, 80 a second and
// 500 a minute. The headers stay in real time: X-RateLimit-Reset is the
// epoch second the shortened window ends, Retry-After the real seconds to
// wait, rounded up to whole seconds as HTTP requires (a 0.2 s wait says
// 1), and early requests are judged on the real clock.
//
// A user told to wait (Retry-After, or X-RateLimit-Reset of an exhausted
// limit) who sends any request before the time has passed is recorded:
// Request.Early and EarlyRequests. A client that honours both has none.
//
// # Conditional requests
//
// A successful GET carries a weak ETag that changes with the answer and
// with the user asking. If-None-Match with it answers 304 with no body,
// and, as documented, a 304 does not count against the primary limit.
// Last-Modified is not sent.
//
// # Faults and observation
//
// FailNext, HangNext and InjectFault make the next requests fail in front
// of the API: 500 with GitHub's JSON "Server Error", 502-504 with an HTML
// page, or a hang until the client's deadline. Requests logs every
// request (method, path, query, headers, body, status, user); the log is
// printed when the test fails. WaitFor, WaitRequests and WaitIssue wait
// on the fake's state without sleeping. WithClock replaces the clock the
// limits read, so a test can pass an hour without waiting one.
package ghfake
