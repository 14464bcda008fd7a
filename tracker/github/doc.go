// Package github files approved tasks as issues of a GitHub repository
// through GitHub's REST API (version 2022-11-28). *Client implements
// tasks.Tracker for targets "owner/repo"; the worker depends on that
// interface, and tests run this client against e2e/ghfake over real HTTP.
//
// # Filing
//
// File makes sure the task's priority label exists ("priority: high",
// "priority: medium", "priority: low", each with its colour: GET the
// label, create it on 404, take 422 already_exists as a race won by
// someone else), then creates the issue with the title, the body, the
// label and the assignee. A label once seen is remembered for the
// Client's life, so only the first task of each priority in a repository
// costs the extra request. The label is made first rather than left to
// GitHub, which would create a missing one grey and without description.
// Filed.Created counts the label made and the issue: GitHub's content
// limits count both, and the worker paces its pushes by them.
//
// GitHub counts an issue's text in code points, as Go counts runes, and
// refuses what is longer with a 422 that no retry gets past; so the
// issue is made to fit. A title longer than GitHub's 256 characters is
// clipped, ending in "…". The body is
// Markdown: the description, the priority, the deadline, the assignee
// when GitHub does not show one, each source message quoted with its
// Telegram link (or, in a group without links, the chat's title and the
// time), who approved it, and last, on a line of its own, the task's
// marker as an HTML comment (<!-- switchboard-proposal-123 -->), which
// GitHub does not render. A body over GitHub's 65536 characters is
// clipped before the approval line with a note that it was, so the
// marker always survives. The priority labels' names and description fit
// GitHub's 50 and 100 characters.
//
// If GitHub refuses the assignee (422 naming the assignees field: a login
// that is no collaborator, or no user), the issue is filed again without
// one, the body naming the assignee instead, and Filed.AssigneeDropped
// says so.
//
// # Finding
//
// Find does not use the search API: its index lags a change by seconds to
// minutes, and a retry must see the issue an attempt filed a moment ago.
// It lists the repository's issues created by the token's user, newest
// first, 100 to a page, and looks for the marker's line in each body. It
// reads at most two pages: the worker calls Find for a push whose
// earlier attempt may have filed it moments before, so the issue, if any,
// is among the newest the bot filed there; 200 is more than GitHub's
// content limit lets the bot file in two minutes (80 a minute). The
// token's user is Config.Login, or else learnt once from GET /user (which
// a GitHub App's installation token may not call: give Config.Login,
// "app-name[bot]", then).
//
// Issue reads one issue's state for the /tasks view with If-None-Match:
// an unchanged issue answers 304, which costs no rate limit.
//
// # Open issues
//
// Open lists the repository's open issues (pull requests left out), the
// 300 most recently updated, for the worker's duplicate check before it
// files. Each of its three pages is asked with the ETag of its last
// answer, kept in the Client: an unchanged page is a 304, which costs no
// rate limit. A filing moves every page (the newest issue goes first), so
// a busy push costs up to three reads a task; GitHub's content limit
// (500 new issues an hour) binds long before the core one (5000 requests).
//
// # Errors
//
// Every error is an *Error naming the method, the path and the status,
// wrapping what the worker acts on:
//
//   - 401 (a token revoked, expired or wrong) and a 403 that is no limit
//     (“Resource not accessible by personal access token”: the token
//     lacks issues:write there): tasks.ErrAccess.
//   - 404 (the repository does not exist or the token cannot see it),
//     410 (its issues are disabled) and a 403 "Repository was archived so
//     is read-only.": tasks.ErrGone; the message says which. A target that is not "owner/repo" is ErrGone too, without a
//     request: it will never be a repository.
//   - 403 or 429 with X-RateLimit-Remaining 0 or GitHub's primary-limit
//     message: *tasks.RateLimited until X-RateLimit-Reset.
//   - 403 or 429 with Retry-After or the secondary-limit message:
//     *tasks.RateLimited{Secondary: true} until Retry-After from now, or a
//     minute from now without one, as GitHub's guidance says.
//   - 400 and 422 (Validation Failed, but for the assignee File drops and
//     a label someone else made first): tasks.ErrRefused. It is about the
//     request, which sent again is refused again; the message carries
//     what each of GitHub's errors says ("Validation Failed: Label name
//     invalid (priority: high)"), not "Validation Failed" alone. A 422
//     saying "was submitted too quickly" is GitHub's content throttle
//     instead: a secondary limit, as below.
//   - Anything else (5xx, an answer that cannot be read, a network error,
//     another 4xx): transient, with the cause wrapped.
//
// After a RateLimited the Client itself sends nothing before its Until:
// every call meanwhile returns the same RateLimited without a request,
// since GitHub counts requests made while told to wait against the
// account. The token is never logged nor put in an error.
//
// A Client is safe for concurrent use; share one per token.
package github
