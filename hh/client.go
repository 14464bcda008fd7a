package hh

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"

	"switchboard/domain"
	"switchboard/domain/vacancy"
)

// HH's paging limits (hhru/api:docs/general.md#pagination): checked locally so that a
// caller's bug costs no request and reads as ours, not as HH's bad_argument.
const (
	maxPerPage = 100
	maxDepth   = 2000
)

// DefaultTimeout bounds one request when Config.Timeout is zero.
const DefaultTimeout = 15 * time.Second

// TimeLayout is HH's timestamp format: the offset has no colon, so
// time.RFC3339 does not parse it.
const TimeLayout = "2006-01-02T15:04:05-0700"

const (
	// maxBody caps a successful answer; a full vacancy is tens of KiB, a
	// page of 100 short ones a few hundred.
	maxBody = 4 << 20
	// maxErrorBody caps error answers: HH's envelope is tiny, and a proxy's
	// HTML page is not worth more.
	maxErrorBody = 64 << 10
)

// Endpoints and outcomes, the label values of the metrics.
const (
	endpointSearch  = "search"
	endpointVacancy = "vacancy"

	outcomeOK          = "ok"
	outcomeNotFound    = "not_found"
	outcomeUnavailable = "unavailable"
	outcomeRefused     = "refused"
	outcomeError       = "error"
)

// Config configures New.
type Config struct {
	// URL is the API root, e.g. https://api.hh.ru; a path prefix is kept.
	URL string
	// UserAgent is required by HH ("name/version (contact e-mail)"); it is
	// sent as both User-Agent and HH-User-Agent.
	UserAgent string
	// Timeout bounds each request, body included; zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient is used as given; nil means a client with its own
	// transport, released by Close. Its Timeout, if any, also applies.
	HTTPClient *http.Client
	// Registerer receives the metrics; nil keeps them unexported.
	Registerer prometheus.Registerer
	// Log defaults to slog.Default().
	Log *slog.Logger
	// Pacer, when set, paces every request (HH_RATE), and a 429's
	// Retry-After pauses it; nil sends at once.
	Pacer Pacer
	// BreakerOpenFor is how long no request goes to HH after it refused us
	// (captcha, forbidden, 429); each failed probe doubles it up to
	// BreakerMaxOpen. Zero means DefaultBreakerOpenFor and
	// DefaultBreakerMaxOpen.
	BreakerOpenFor, BreakerMaxOpen time.Duration
	// Token, when set, gives the application token every request carries
	// (Authorization: Bearer); a request HH refuses for its token (403
	// oauth bad_authorization, token_expired, token_revoked) is sent once
	// more with a fresh one. nil sends requests anonymously.
	Token TokenSource
}

// Client is the HH.ru vacancy API. It is safe for concurrent use.
type Client struct {
	base    *url.URL
	ua      string
	timeout time.Duration
	hc      *http.Client
	ownHC   bool
	log     *slog.Logger
	m       *metrics
	pace    Pacer
	br      *breaker
	token   TokenSource // nil: anonymous
}

var _ vacancy.Source = (*Client)(nil)

// New validates cfg and builds a Client. It does not contact HH.
func New(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.URL) == "" {
		return nil, errors.New("hh: Config.URL is empty")
	}
	base, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil {
		return nil, fmt.Errorf("hh: Config.URL: %w", err)
	}
	if base.Scheme != "http" && base.Scheme != "https" || base.Host == "" {
		return nil, fmt.Errorf("hh: Config.URL %q: want http(s)://host", cfg.URL)
	}
	if base.RawQuery != "" || base.Fragment != "" || base.User != nil {
		return nil, fmt.Errorf("hh: Config.URL %q: want no query, fragment or credentials", cfg.URL)
	}
	ua := strings.TrimSpace(cfg.UserAgent)
	if ua == "" {
		return nil, errors.New("hh: Config.UserAgent is empty; HH refuses requests without one")
	}
	// Caught here because net/http would only refuse it per request, which
	// would then look like HH being unavailable.
	if strings.ContainsAny(ua, "\r\n\x00") {
		return nil, errors.New("hh: Config.UserAgent contains a control character")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("hh: Config.Timeout %s is negative", cfg.Timeout)
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	c := &Client{base: base, ua: ua, timeout: cfg.Timeout, hc: cfg.HTTPClient, pace: cfg.Pacer, token: cfg.Token}
	if c.hc == nil {
		// Our own transport, so that Close can drop its idle connections
		// without touching anyone else's. No http.Client.Timeout: the
		// deadline is a context, so that it can be told from the caller's.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		// Every worker of a replica talks to the one HH host; the default of
		// two idle connections would make most requests dial anew.
		tr.MaxIdleConnsPerHost = 32
		c.hc = &http.Client{Transport: tr}
		c.ownHC = true
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	c.log = log.With(slog.String("component", "hh"))
	if c.m, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	cfg.BreakerMaxOpen = cmp.Or(cfg.BreakerMaxOpen, DefaultBreakerMaxOpen)
	c.br = newBreaker(cfg.BreakerOpenFor, cfg.BreakerMaxOpen, c.m.breaker, func(from, to gobreaker.State) {
		c.log.Warn("hh circuit breaker state change", slog.String("from", from.String()), slog.String("to", to.String()))
	})
	return c, nil
}

// Close releases idle connections of the Client's own transport (not of a
// Config.HTTPClient). Requests in flight are not interrupted and the Client
// stays usable.
func (c *Client) Close() {
	if c.ownHC {
		c.hc.CloseIdleConnections()
	}
}

// APIError is HH refusing a request as malformed or not allowed: a 4xx
// other than 404 on a vacancy and 429 (those are ErrArchived and
// ErrUnavailable). Retrying the same request will not help.
type APIError struct {
	Status int
	// Errors is HH's errors[] envelope; empty when the body was not JSON.
	Errors []struct{ Type, Value string }
}

func (e *APIError) Error() string {
	return "HH answered " + strconv.Itoa(e.Status) + describeErrors(e.Errors)
}

// describeErrors renders errors[] as " (bad_argument=page, bad_argument=per_page)".
func describeErrors(items []struct{ Type, Value string }) string {
	if len(items) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (")
	for i, it := range items {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(it.Type)
		if it.Value != "" {
			b.WriteString("=")
			b.WriteString(it.Value)
		}
	}
	b.WriteString(")")
	return b.String()
}

// Search returns one zero-based page of vacancies matching p, newest first.
// Items HH sent with a non-numeric id or an unreadable published_at are
// skipped and logged rather than failing the page.
func (c *Client) Search(ctx context.Context, p vacancy.Params, page, perPage int) (vacancy.Page, error) {
	if perPage < 1 || perPage > maxPerPage {
		return vacancy.Page{}, fmt.Errorf("hh search: per_page %d outside 1..%d", perPage, maxPerPage)
	}
	// (page+1)*perPage ≤ maxDepth, written so that a huge page cannot overflow.
	if page < 0 || page >= maxDepth/perPage {
		return vacancy.Page{}, fmt.Errorf("hh search: page %d × per_page %d reaches past HH's first %d results", page, perPage, maxDepth)
	}
	q := url.Values{}
	if p.Text != "" {
		q.Set("text", p.Text)
	}
	for name, vals := range p.Filters {
		q[name] = vals
	}
	if p.Salary > 0 {
		q.Set("salary", strconv.Itoa(p.Salary))
		if q.Get("currency") == "" {
			// RUR is HH's default too; explicit because a search without a
			// currency means roubles.
			q.Set("currency", "RUR")
		}
	}
	q.Set("order_by", "publication_time")
	q.Set("page", strconv.Itoa(page))
	q.Set("per_page", strconv.Itoa(perPage))

	u := c.base.JoinPath("vacancies")
	u.RawQuery = q.Encode()
	out, err := request(ctx, c, endpointSearch, slog.Int("page", page), u.String(), false, c.decodePage)
	if err != nil {
		if r := refusalOf(err); r != nil {
			err = r
		}
		return vacancy.Page{}, fmt.Errorf("hh search page %d: %w", page, err)
	}
	return out, nil
}

// ownArgs are the parameters the client adds to every search itself: HH
// refusing one of them is our bug, not the saved search's.
var ownArgs = []string{"page", "per_page", "order_by"}

// refusalOf reads a search's *APIError as HH refusing the search's own
// parameters: a 400 whose errors[] holds bad_argument items, whose value
// names the parameter (hhru/api:docs/errors.md). nil for any other error,
// for a 400 of another type (bad_user_agent is about us as a client) and
// for one naming only the parameters the client adds.
func refusalOf(err error) *vacancy.SearchRefusal {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return nil
	}
	var r *vacancy.SearchRefusal
	for _, it := range ae.Errors {
		if it.Type != typeBadArgument {
			continue
		}
		if r == nil {
			r = &vacancy.SearchRefusal{Err: ae}
		}
		if it.Value != "" && !slices.Contains(r.Args, it.Value) {
			r.Args = append(r.Args, it.Value)
		}
	}
	if r != nil && len(r.Args) > 0 && !slices.ContainsFunc(r.Args, func(a string) bool { return !slices.Contains(ownArgs, a) }) {
		return nil
	}
	return r
}

// request GETs u (notFoundArchived: a 404 is vacancy.ErrArchived), reads
// the answer with decode and records the request, as endpoint with attr,
// in the metrics and the log, whatever its outcome.
func request[T any](ctx context.Context, c *Client, endpoint string, attr slog.Attr, u string, notFoundArchived bool, decode func(body []byte) (T, error)) (T, error) {
	start := time.Now()
	var out T
	body, err := c.call(ctx, u, notFoundArchived)
	if err == nil {
		// HH's texts are stored (the raw item in jsonb, the description in
		// text): what PostgreSQL cannot hold becomes U+FFFD first.
		body, _ = domain.CleanJSON(body)
		out, err = decode(body)
	}
	c.finish(endpoint, start, err, attr)
	return out, err
}

// decodePage reads a search page; an item it cannot read is logged and
// left out.
func (c *Client) decodePage(body []byte) (vacancy.Page, error) {
	var root struct {
		Items []json.RawMessage `json:"items"`
		Found int               `json:"found"`
		Pages int               `json:"pages"`
	}
	if err := json.Unmarshal(body, &root); err != nil {
		return vacancy.Page{}, fmt.Errorf("decode search answer: %w", err)
	}
	out := vacancy.Page{Items: make([]vacancy.Vacancy, 0, len(root.Items)), Found: root.Found, Pages: root.Pages}
	for i, raw := range root.Items {
		v, err := decodeItem(raw)
		if err != nil {
			c.log.Warn("hh search item skipped", slog.Int("index", i), slog.String("error", err.Error()))
			continue
		}
		out.Items = append(out.Items, v)
	}
	return out, nil
}

// decodeItem reads one item of a search page.
func decodeItem(raw json.RawMessage) (vacancy.Vacancy, error) {
	var it wireVacancy
	if err := json.Unmarshal(raw, &it); err != nil {
		return vacancy.Vacancy{}, err
	}
	return it.toVacancy(raw)
}

// Vacancy returns the full vacancy: search's fields plus Description and
// KeySkills. A vacancy HH no longer serves (404, or archived:true) is an
// error wrapping vacancy.ErrArchived.
func (c *Client) Vacancy(ctx context.Context, id int64) (vacancy.Vacancy, error) {
	if id <= 0 {
		return vacancy.Vacancy{}, fmt.Errorf("hh vacancy %d: invalid id", id)
	}
	u := c.base.JoinPath("vacancies", strconv.FormatInt(id, 10))
	v, err := request(ctx, c, endpointVacancy, slog.Int64("id", id), u.String(), true, decodeVacancy)
	if err != nil {
		return vacancy.Vacancy{}, fmt.Errorf("hh vacancy %d: %w", id, err)
	}
	return v, nil
}

// decodeVacancy reads a full vacancy; an archived one is
// vacancy.ErrArchived.
func decodeVacancy(body []byte) (vacancy.Vacancy, error) {
	var it wireVacancy
	if err := json.Unmarshal(body, &it); err != nil {
		return vacancy.Vacancy{}, fmt.Errorf("decode vacancy: %w", err)
	}
	// HH answers archived vacancies it still remembers with 200 and this
	// flag rather than 404; to the caller both mean "gone".
	if it.Archived {
		return vacancy.Vacancy{}, fmt.Errorf("archived: %w", vacancy.ErrArchived)
	}
	v, err := it.toVacancy(json.RawMessage(bytes.TrimSpace(body)))
	if err != nil {
		return vacancy.Vacancy{}, err
	}
	v.Description = it.Description
	v.KeySkills = make([]string, 0, len(it.KeySkills))
	for _, s := range it.KeySkills {
		v.KeySkills = append(v.KeySkills, s.Name)
	}
	return v, nil
}

// get is send with the application token, if any, retried once with a
// fresh token when HH refuses the one sent (authorized, token.go).
func (c *Client) get(ctx context.Context, u string, notFoundArchived bool) ([]byte, error) {
	return c.authorized(ctx, func(token string) ([]byte, error) { return c.send(ctx, u, notFoundArchived, token) })
}

// send performs one GET, with token as its bearer unless empty, and
// returns the body of a 2xx answer, or a classified error: the caller's
// context error, ErrUnavailable, ErrArchived (404 when notFoundArchived)
// or *APIError.
func (c *Client) send(ctx context.Context, u string, notFoundArchived bool, token string) ([]byte, error) {
	if c.pace != nil {
		if err := c.pace.Wait(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Redis down, say: pacing is a courtesy to HH, not a reason
			// to stop fetching.
			c.log.Warn("hh pacing unavailable, sending unpaced", "err", err)
		}
	}
	reqCtx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", c.ua)
	req.Header.Set("HH-User-Agent", c.ua)
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}

	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, transportError(ctx, reqCtx, c.timeout, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		if err != nil {
			return nil, transportError(ctx, reqCtx, c.timeout, fmt.Errorf("read body: %w", err))
		}
		if len(body) > maxBody {
			return nil, fmt.Errorf("answer larger than %d bytes", maxBody)
		}
		return body, nil
	}

	// The status alone classifies the answer; the body only adds detail,
	// so a failure to read it is not reported.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	// Cleaned as an answer is: what errors[] names is stored (a refused
	// search's arguments, a captcha's URL in the admins' notice), and a
	// write refused for a NUL in it would ask HH again at every tick.
	body, _ = domain.CleanJSON(body)
	items := errorItems(body)
	switch {
	case resp.StatusCode == http.StatusNotFound && notFoundArchived:
		return nil, fmt.Errorf("HH answered 404%s: %w", describeErrors(items), vacancy.ErrArchived)
	case resp.StatusCode == http.StatusTooManyRequests:
		d := retryAfter(resp.Header)
		if d > 0 && c.pace != nil {
			if err := c.pace.Pause(ctx, d); err != nil {
				c.log.Warn("hh pacing: could not pause for Retry-After", "retry_after", d, "err", err)
			} else {
				c.log.Warn("HH asked us to slow down", "retry_after", d)
			}
		}
		return nil, &Block{Status: resp.StatusCode, Type: "too_many_requests", Detail: describeErrors(items), RetryAfter: d}
	case resp.StatusCode == http.StatusForbidden:
		if r := blockOf(items); r != nil {
			return nil, r
		}
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("HH answered %d%s: %w", resp.StatusCode, describeErrors(items), vacancy.ErrUnavailable)
	}
	return nil, &APIError{Status: resp.StatusCode, Errors: items}
}

// transportError classifies a failure to get an answer. The caller's own
// cancellation or deadline is reported as such and never as ErrUnavailable,
// so that shutting down does not look like HH being down; our per-request
// timeout is ErrUnavailable and deliberately does not match
// context.DeadlineExceeded, which callers read as their own deadline.
func transportError(ctx, reqCtx context.Context, timeout time.Duration, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(reqCtx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s: %w", timeout, vacancy.ErrUnavailable)
	}
	// url.Error repeats the whole URL, search text included; the operation
	// is already named by our own wrapping.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%w: %w", vacancy.ErrUnavailable, err)
}

// errorItems reads HH's {"errors":[{"type","value"}]} envelope, ignoring
// every other key but a captcha's captcha_url, which is carried as the
// item's Value; nil for non-JSON bodies (5xx from proxies are HTML).
func errorItems(body []byte) []struct{ Type, Value string } {
	var env struct {
		Errors []struct {
			Type       string `json:"type"`
			Value      string `json:"value"`
			CaptchaURL string `json:"captcha_url"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &env) != nil || len(env.Errors) == 0 {
		return nil
	}
	out := make([]struct{ Type, Value string }, len(env.Errors))
	for i, e := range env.Errors {
		out[i].Type, out[i].Value = e.Type, e.Value
		if e.Type == typeCaptcha && e.CaptchaURL != "" {
			out[i].Value = e.CaptchaURL
		}
	}
	return out
}

// finish records metrics and a short log line for one request.
func (c *Client) finish(endpoint string, start time.Time, err error, attr slog.Attr) {
	d := time.Since(start)
	outcome := outcomeOf(err)
	c.m.requests.WithLabelValues(endpoint, outcome).Inc()
	c.m.duration.WithLabelValues(endpoint).Observe(d.Seconds())
	level := slog.LevelDebug
	// HH refusing our request or sending what we cannot read is a bug or a
	// captcha on our side, unlike an outage, which the domain handles.
	if outcome == outcomeError && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		level = slog.LevelWarn
	}
	if !c.log.Enabled(context.Background(), level) {
		return
	}
	attrs := []slog.Attr{slog.String("endpoint", endpoint), attr, slog.String("outcome", outcome), slog.Duration("duration", d)}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	c.log.LogAttrs(context.Background(), level, "hh request", attrs...)
}

// outcomeOf maps an error to the outcome label. The caller's cancellation
// is "error": it says nothing about HH's health, so it must not inflate
// "unavailable".
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, vacancy.ErrArchived):
		return outcomeNotFound
	case errors.Is(err, vacancy.ErrHHBlocked):
		return outcomeRefused
	case errors.Is(err, vacancy.ErrUnavailable):
		return outcomeUnavailable
	}
	return outcomeError
}

// wireVacancy holds the keys both representations share plus the detail's
// extras; every other key HH sends, now or later, is ignored.
type wireVacancy struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	AlternateURL string `json:"alternate_url"`
	Employer     *struct {
		Name string `json:"name"`
	} `json:"employer"`
	Area *struct {
		Name string `json:"name"`
	} `json:"area"`
	Salary *struct {
		// Floats, because nothing in HH's docs promises integers and a
		// "30000.0" must not cost the item.
		From     *float64 `json:"from"`
		To       *float64 `json:"to"`
		Currency string   `json:"currency"`
		Gross    *bool    `json:"gross"`
	} `json:"salary"`
	Experience  *idName `json:"experience"`
	Schedule    *idName `json:"schedule"`
	PublishedAt string  `json:"published_at"`
	Snippet     *struct {
		Requirement    *string `json:"requirement"`
		Responsibility *string `json:"responsibility"`
	} `json:"snippet"`
	Archived    bool   `json:"archived"`
	Description string `json:"description"`
	KeySkills   []struct {
		Name string `json:"name"`
	} `json:"key_skills"`
	// Applying: HH's apply page, the employer's own for a direct vacancy
	// (null otherwise), and what the employer asks of applicants.
	ApplyAlternateURL      string  `json:"apply_alternate_url"`
	ResponseURL            *string `json:"response_url"`
	ResponseLetterRequired bool    `json:"response_letter_required"`
	HasTest                bool    `json:"has_test"`
}

type idName struct {
	ID string `json:"id"`
}

func (w *wireVacancy) toVacancy(raw json.RawMessage) (vacancy.Vacancy, error) {
	id, err := strconv.ParseInt(w.ID, 10, 64)
	if err != nil || id <= 0 {
		return vacancy.Vacancy{}, fmt.Errorf("id %q is not a positive number", w.ID)
	}
	published, err := parseTime(w.PublishedAt)
	if err != nil {
		return vacancy.Vacancy{}, fmt.Errorf("vacancy %d: published_at: %w", id, err)
	}
	v := vacancy.Vacancy{
		ID:          id,
		Title:       w.Name,
		URL:         w.AlternateURL,
		PublishedAt: published,
		Raw:         raw,

		ApplyURL:       w.ApplyAlternateURL,
		LetterRequired: w.ResponseLetterRequired,
		HasTest:        w.HasTest,
	}
	if w.ResponseURL != nil {
		v.ResponseURL = strings.TrimSpace(*w.ResponseURL)
	}
	if w.Employer != nil {
		v.Employer = w.Employer.Name
	}
	if w.Area != nil {
		v.Area = w.Area.Name
	}
	if s := w.Salary; s != nil {
		v.Salary = vacancy.Salary{From: deref(s.From), To: deref(s.To), Currency: s.Currency, Gross: s.Gross}
	}
	if w.Experience != nil {
		v.Experience = w.Experience.ID
	}
	if w.Schedule != nil {
		v.Schedule = w.Schedule.ID
	}
	if s := w.Snippet; s != nil {
		parts := make([]string, 0, 2)
		for _, p := range []*string{s.Requirement, s.Responsibility} {
			if p != nil && *p != "" {
				parts = append(parts, plainSnippet(*p))
			}
		}
		v.Snippet = strings.Join(parts, "\n")
	}
	return v, nil
}

// maxSalary bounds a salary figure taken as an amount: no monthly pay in any
// currency HH lists comes near it, and converting 1e300 to int would give
// whatever the machine makes of an overflow.
const maxSalary = 1_000_000_000

// deref reads a salary bound; one that is not an amount (negative, or past
// maxSalary) is no bound, as if HH had left it out.
func deref(p *float64) int {
	if p == nil || !(*p >= 0 && *p <= maxSalary) {
		return 0
	}
	return int(math.Round(*p))
}

// parseTime reads HH's format, and RFC 3339 in case HH (or a proxy) ever
// switches to the standard form.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err == nil {
		return t, nil
	}
	if t, err2 := time.Parse(time.RFC3339, s); err2 == nil {
		return t, nil
	}
	return time.Time{}, err
}

var stripHighlight = strings.NewReplacer("<highlighttext>", "", "</highlighttext>", "")

// plainSnippet removes the tags before unescaping, so that a literal
// "&lt;highlighttext&gt;" in the text survives as text.
func plainSnippet(s string) string {
	return html.UnescapeString(stripHighlight.Replace(s))
}

type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	breaker  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m, err := domain.NewMetrics(reg, "hh", func(r *domain.Registrar) *metrics {
		return &metrics{
			requests: r.CounterVec("hh_requests_total",
				"Requests to the HH.ru API by endpoint (search, vacancy) and outcome (ok, not_found, unavailable, refused, error); refused includes those the breaker held back.", "endpoint", "outcome"),
			// From a warm keep-alive answer to the default 15s timeout.
			duration: r.HistogramVec("hh_request_duration_seconds",
				"Duration of HH.ru API requests, body included, by endpoint.",
				[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30}, "endpoint"),
			breaker: r.Gauge("hh_breaker_state",
				"The HH circuit breaker: 0 closed, 1 probing, 2 open (HH refuses us: captcha, forbidden, 429)."),
		}
	})
	if err != nil {
		return nil, err
	}
	// Series exist at zero from the start, so that a rate over
	// "unavailable" is defined before the first outage.
	for _, e := range []string{endpointSearch, endpointVacancy} {
		for _, o := range []string{outcomeOK, outcomeNotFound, outcomeUnavailable, outcomeRefused, outcomeError} {
			m.requests.WithLabelValues(e, o)
		}
		m.duration.WithLabelValues(e)
	}
	return m, nil
}
