package ghfake

import (
	"fmt"
	"net/http"
	"strconv"
)

// Messages a client may meet, as GitHub words them. Where GitHub's docs
// or its observed answers give no exact wording, the text says "(ghfake)"
// so that nobody mistakes it for GitHub's.
const (
	MsgBadCredentials     = "Bad credentials"
	MsgRequiresAuth       = "Requires authentication"
	MsgNotFound           = "Not Found"
	MsgNotAccessible      = "Resource not accessible by personal access token"
	MsgIssuesDisabled     = "Issues are disabled for this repo"
	MsgIssueDeleted       = "This issue was deleted"
	MsgArchived           = "Repository was archived so is read-only."
	MsgValidationFailed   = "Validation Failed"
	MsgProblemsParsing    = "Problems parsing JSON"
	MsgBodyNotObject      = "Body should be a JSON object"
	MsgSearchNeedsType    = "Query must include 'is:issue' or 'is:pull-request'"
	MsgSearchCannotSearch = "The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them."
	MsgSearchFirst1000    = "Only the first 1000 search results are available"
	MsgServerError        = "Server Error"
	// MsgSecondaryPrefix starts every secondary-limit message; GitHub
	// appends a request id, which clients must not match on.
	MsgSecondaryPrefix = "You have exceeded a secondary rate limit."
	// MsgPrimaryPrefix starts every primary-limit message; the user id and
	// the request id follow.
	MsgPrimaryPrefix = "API rate limit exceeded for user ID "
	MsgTitleTooLong  = "title is too long (maximum is 256 characters)"
	MsgBodyTooLong   = "body is too long (maximum is 65536 characters)"
	// MsgLabelNameTooLong is a label create's; an issue naming a label that
	// long is refused with the name as the value instead.
	MsgLabelNameTooLong = "name is too long (maximum is 50 characters)"
)

// Documentation links GitHub puts in its error bodies.
const (
	docRest         = "https://docs.github.com/rest"
	docCreateIssue  = "https://docs.github.com/rest/issues/issues#create-an-issue"
	docGetIssue     = "https://docs.github.com/rest/issues/issues#get-an-issue"
	docUpdateIssue  = "https://docs.github.com/rest/issues/issues#update-an-issue"
	docListIssues   = "https://docs.github.com/rest/issues/issues#list-repository-issues"
	docCreateLabel  = "https://docs.github.com/rest/issues/labels#create-a-label"
	docGetLabel     = "https://docs.github.com/rest/issues/labels#get-a-label"
	docSearchIssues = "https://docs.github.com/rest/search/search#search-issues-and-pull-requests"
	docSearchV3     = "https://docs.github.com/v3/search"
	docPrimary      = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits"
	docSecondary    = "https://docs.github.com/free-pro-team@latest/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// ErrorBody is GitHub's error document. Status repeats the HTTP status as
// a string, as GitHub has sent it since 2023.
type ErrorBody struct {
	Message          string       `json:"message"`
	Errors           []FieldError `json:"errors,omitempty"`
	DocumentationURL string       `json:"documentation_url"`
	Status           string       `json:"status,omitempty"`
}

// FieldError is one entry of a 422's errors. Code is one of the documented
// missing, missing_field, invalid, already_exists, unprocessable, custom.
type FieldError struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Value    any    `json:"value,omitempty"`
	Message  string `json:"message,omitempty"`
}

// apiError is an answer that is not a success: its status, body and the
// headers that go with it (Retry-After, X-Accepted-GitHub-Permissions).
type apiError struct {
	status int
	body   ErrorBody
	header http.Header
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.body.Message) }

func newError(status int, msg, doc string) *apiError {
	return &apiError{status: status, body: ErrorBody{Message: msg, DocumentationURL: doc, Status: strconv.Itoa(status)}}
}

func notFound(doc string) *apiError { return newError(http.StatusNotFound, MsgNotFound, doc) }

// notAccessible is a fine-grained token's refusal to write; the header
// names the permission it lacks, as GitHub does.
func notAccessible(doc, permission string) *apiError {
	e := newError(http.StatusForbidden, MsgNotAccessible, doc)
	e.header = http.Header{"X-Accepted-Github-Permissions": {permission}}
	return e
}

func validationFailed(doc string, errs ...FieldError) *apiError {
	e := newError(http.StatusUnprocessableEntity, MsgValidationFailed, doc)
	e.body.Errors = errs
	return e
}

// invalidRequest is the answer to a parameter of the wrong type, worded as
// GitHub's schema validation words it.
func invalidRequest(doc, format string, args ...any) *apiError {
	return newError(http.StatusUnprocessableEntity, "Invalid request.\n\n"+fmt.Sprintf(format, args...), doc)
}

// gatewayPage is the HTML a proxy in front of the API answers 502-504
// with: not JSON, so a client must cope with a body it cannot parse.
func gatewayPage(status int) []byte {
	return []byte(fmt.Sprintf("<!DOCTYPE html>\n<html><head><title>%d %s</title></head>\n<body><h1>%d %s</h1><p>(ghfake) the gateway in front of the API failed.</p></body></html>\n",
		status, http.StatusText(status), status, http.StatusText(status)))
}
