package vacancy

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Vacancy is one HH.ru vacancy as Switchboard keeps it. Search results fill
// everything but Description and KeySkills; the detail request fills those.
type Vacancy struct {
	// ID is HH's numeric id; HH's ids grow with time, which discovery relies on.
	ID       int64
	Title    string
	Employer string
	// URL is the human page (alternate_url), used for the button.
	URL    string
	Area   string // area name, e.g. "Москва"
	Salary Salary
	// Experience and Schedule are HH dictionary ids ("between1And3", "remote");
	// Experience is empty when HH did not say (its short representation may omit it).
	Experience  string
	Schedule    string
	PublishedAt time.Time
	// Snippet is the search snippet (requirement and responsibility) as
	// plain text, HH's <highlighttext> tags removed.
	Snippet string
	// Description is HTML as HH sends it; only the detail request fills it.
	Description string
	KeySkills   []string
	// ApplyURL is HH's apply page (apply_alternate_url); ResponseURL the
	// employer's own, set for "direct" vacancies, where applying happens
	// there instead.
	ApplyURL, ResponseURL string
	// LetterRequired and HasTest: the employer requires a cover letter,
	// or asks applicants to pass a test.
	LetterRequired, HasTest bool
	// Raw is the JSON object HH sent, kept for later needs.
	Raw []byte
}

// ApplyLink is where the user applies: the employer's site for a direct
// vacancy, else HH's apply page ("" when HH gave neither).
func (v Vacancy) ApplyLink() string {
	if v.ResponseURL != "" {
		return v.ResponseURL
	}
	return v.ApplyURL
}

// Salary is HH's salary; a zero bound was not published.
type Salary struct {
	From, To int
	Currency string
	// Gross is nil when HH does not say whether the amount is before tax.
	Gross *bool
}

// Page is one page of search results.
type Page struct {
	Items []Vacancy
	// Found is HH's total number of matches; Pages how many pages HH will
	// serve at this page size (already capped by its depth limit).
	Found, Pages int
}

// Errors a Source reports; test with errors.Is.
var (
	// ErrArchived: HH no longer serves the vacancy (404, or archived:true).
	ErrArchived = errors.New("vacancy archived or removed")
	// ErrUnavailable: a network error, timeout or 5xx; worth retrying later.
	ErrUnavailable = errors.New("hh unavailable")
	// ErrHHBlocked: HH blocks us as a client (a captcha, forbidden, 429),
	// or holds requests back after such a refusal: an outage for the whole
	// deployment, not the match's failure, so the work waits QUEUED.
	ErrHHBlocked = errors.New("HH refuses our requests")
	// ErrSearchRefused: HH refuses the search itself (400 bad_argument): its
	// parameters are wrong, so asking again cannot help and it is no
	// outage. The error is a *SearchRefusal naming HH's arguments.
	ErrSearchRefused = errors.New("HH refuses the search's parameters")
)

// SearchRefusal is HH answering a search 400 bad_argument: Args are the
// parameters HH named (errors[].value, e.g. "currency"), empty when it
// named none. It matches ErrSearchRefused and never ErrUnavailable or
// ErrHHBlocked: the search is at fault, not HH nor us as a client.
type SearchRefusal struct {
	Args []string
	// Err is the source's own error for the answer (hh.APIError), if any.
	Err error
}

func (e *SearchRefusal) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	if len(e.Args) == 0 {
		return "HH answered 400 (bad_argument)"
	}
	return "HH answered 400 (bad_argument=" + strings.Join(e.Args, ", bad_argument=") + ")"
}

// Is makes a SearchRefusal match ErrSearchRefused.
func (e *SearchRefusal) Is(target error) bool { return target == ErrSearchRefused }

// Unwrap gives Err, so the source's error stays reachable with errors.As.
func (e *SearchRefusal) Unwrap() error { return e.Err }

// Source is HH.ru as the vacancy workflow needs it; package hh implements it.
type Source interface {
	// Search returns one page (zero-based) of results for p, newest first;
	// a search HH refuses for its parameters is an error wrapping a
	// *SearchRefusal (ErrSearchRefused), or ErrUnavailable or ErrHHBlocked.
	Search(ctx context.Context, p Params, page, perPage int) (Page, error)
	// Vacancy returns the full vacancy, or an error wrapping ErrArchived,
	// ErrUnavailable or ErrHHBlocked.
	Vacancy(ctx context.Context, id int64) (Vacancy, error)
	// Blocked reports whether HH blocks us (its breaker is open or
	// probing) and why, for /vacancies and /status.
	Blocked() (bool, string)
	// Holding reports whether a request now would be held back: then only
	// matches whose detail is at hand are judged, and fetches wait.
	Holding() bool
}

// LinkedMatch is a user's match of a vacancy whose link they pasted, as
// Matches.Linked reads it.
type LinkedMatch struct {
	// Found is false when the user has no match of the vacancy.
	Found   bool
	Match   Match
	Vacancy Vacancy
	// Claimed: a live claim holds the match (a worker judges it now).
	Claimed bool
	// DetailStale: the vacancy's detail is missing or older than asked.
	DetailStale bool
	// PastedBy is the message whose paste last wrote the match's card (0:
	// none did).
	PastedBy int
}
