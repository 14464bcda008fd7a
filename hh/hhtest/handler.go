package hhtest

import (
	"bytes"
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchboard/internal/testkit"
)

// HH's paging limits (hhru/api:docs/general.md#pagination, hhru/api:docs/vacancies.md).
const (
	DefaultPerPage = 20
	MaxPerPage     = 100
	// MaxDepth bounds (page+1)*per_page: per_page=10&page=199 is fine,
	// per_page=10&page=200 is refused.
	MaxDepth = 2000
)

// StatusClientClosedRequest is logged (nginx's convention) for requests whose
// client went away while the fake was delaying them; nothing is written.
const StatusClientClosedRequest = 499

const jsonType = "application/json; charset=UTF-8"

// salaryTolerance widens a vacancy's salary range when matching the salary
// parameter: HH's documentation only promises vacancies "close to" the value.
const salaryTolerance = 0.2

// currencyRates converts to roubles for the salary filter and sorting. HH
// uses the Central Bank's daily rates; fixed round numbers keep tests stable.
// Its keys are HH's whole currency dictionary (the dictionaries' currency):
// any other code, ISO's RUB included, answers 400 bad_argument=currency.
var currencyRates = map[string]float64{
	"RUR": 1, "USD": 90, "EUR": 100, "KZT": 0.18, "BYR": 28, "UZS": 0.007,
	"AZN": 53, "GEL": 33, "KGS": 1, "UAH": 2.2,
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if s.oauth.serves(r) {
		s.serveOAuth(w, r)
		return
	}
	at := time.Now()
	kind, id := classify(r.URL.Path)
	s.arrive(kind, id)
	if s.hook != nil {
		s.hook(r)
	}
	// The answer is held until the request is logged, so a client that
	// has its answer finds its request in Requests.
	bw := &heldWriter{header: http.Header{}}
	status := s.handle(bw, r, kind, id)
	defer bw.release(w)
	s.record(Request{
		Method:      r.Method,
		Path:        r.URL.Path,
		Query:       r.URL.Query(),
		Endpoint:    kind,
		VacancyID:   id,
		UserAgent:   r.Header.Get("User-Agent"),
		HHUserAgent: r.Header.Get("HH-User-Agent"),
		Status:      status,
		At:          at,

		Authorization: r.Header.Get("Authorization"),
	})
}

// classify maps a path to an endpoint. HH serves the search with and
// without the trailing slash.
func classify(path string) (Endpoint, string) {
	if path == "/vacancies" || path == "/vacancies/" {
		return SearchEndpoint, ""
	}
	if id, ok := strings.CutPrefix(path, "/vacancies/"); ok && id != "" && !strings.Contains(id, "/") {
		return DetailEndpoint, id
	}
	return OtherEndpoint, ""
}

// handle answers the request and returns the status for the log. The order
// mirrors where things happen in reality: network latency first, then
// failures of the infrastructure in front of the API (injected faults), then
// the API's own validation.
func (s *Server) handle(w http.ResponseWriter, r *http.Request, kind Endpoint, id string) int {
	if d := s.latencyFor(kind); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return StatusClientClosedRequest
		case <-s.done:
			t.Stop()
			return testkit.WriteBody(w, http.StatusServiceUnavailable, jsonType, serviceUnavailableBody())
		}
	}
	if f, ok := s.takeFault(kind, r.URL.Query()); ok {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		return testkit.WriteBody(w, f.Status, f.ContentType, f.Body)
	}
	if (kind == SearchEndpoint || kind == DetailEndpoint) && s.captcha.refuses(r, time.Now()) {
		return testkit.WriteBody(w, http.StatusForbidden, jsonType, captchaBody())
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return testkit.WriteBody(w, http.StatusMethodNotAllowed, jsonType, mustJSON(errorBody{Errors: []errorItem{{Type: "method_not_allowed"}}}))
	}
	if v := s.checkUserAgent(r); v != "" {
		return testkit.WriteBody(w, http.StatusBadRequest, jsonType, badUserAgentBody(v))
	}
	if v := s.oauth.refusal(r, time.Now()); v != "" {
		return testkit.WriteBody(w, http.StatusForbidden, jsonType, oauthErrorBody(v))
	}
	switch kind {
	case SearchEndpoint:
		status, body := s.search(r.URL.Query())
		return testkit.WriteBody(w, status, jsonType, body)
	case DetailEndpoint:
		status, body := s.detail(id)
		return testkit.WriteBody(w, status, jsonType, body)
	}
	return testkit.WriteBody(w, http.StatusNotFound, jsonType, notFoundBody())
}

// checkUserAgent returns the bad_user_agent value to refuse with, or "".
// HH-User-Agent wins over User-Agent when both are sent.
func (s *Server) checkUserAgent(r *http.Request) string {
	ua := strings.TrimSpace(r.Header.Get("HH-User-Agent"))
	if ua == "" {
		ua = strings.TrimSpace(r.Header.Get("User-Agent"))
	}
	switch {
	case ua == "":
		return "unset"
	case s.strictUA && strings.HasPrefix(ua, "Go-http-client/"):
		return "blacklisted"
	case s.uaPrefix != "" && !strings.HasPrefix(ua, s.uaPrefix):
		return "blacklisted"
	}
	return ""
}

func (s *Server) detail(id string) (int, []byte) {
	s.mu.Lock()
	hidden := s.notFound[id]
	s.mu.Unlock()
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	e, ok := s.byID[id]
	if !ok || hidden || e.v.Archived {
		return http.StatusNotFound, notFoundBody()
	}
	return http.StatusOK, marshal(s.render.full(&e.v))
}

// marshal keeps HTML in descriptions readable (<p>, not \u003cp\u003e), as
// HH sends it.
func marshal(v any) []byte { return testkit.JSON("hhtest", v) }

type fieldMask uint8

const (
	fieldName fieldMask = 1 << iota
	fieldSnippet
	fieldDescription
	fieldCompany
)

// searchQuery is a validated GET /vacancies request.
type searchQuery struct {
	page, perPage  int
	words          []string // lower-cased text words, all must match
	fields         fieldMask
	areas          []string
	experience     []string
	schedule       []string
	employment     []string
	employers      []string
	salary         float64 // in roubles
	hasSalary      bool
	onlyWithSalary bool
	dateFrom       time.Time
	dateTo         time.Time
	order          string
	counters       bool
}

func parseSearch(q url.Values) (*searchQuery, *badArgumentErr) {
	sq := &searchQuery{perPage: DefaultPerPage, fields: fieldName | fieldSnippet}
	var err error
	if v := q.Get("per_page"); v != "" {
		sq.perPage, err = strconv.Atoi(v)
		if err != nil || sq.perPage < 1 || sq.perPage > MaxPerPage {
			return nil, badArg("per_page must be between 1 and "+strconv.Itoa(MaxPerPage), "per_page")
		}
	}
	if v := q.Get("page"); v != "" {
		sq.page, err = strconv.Atoi(v)
		if err != nil || sq.page < 0 {
			return nil, badArg("page must be a non-negative integer", "page")
		}
	}
	if (sq.page+1)*sq.perPage > MaxDepth {
		return nil, badArg(DepthLimitDescription, "page", "per_page")
	}

	sq.words = strings.Fields(strings.ToLower(q.Get("text")))
	if fs := q["search_field"]; len(fs) > 0 {
		sq.fields = 0
		for _, f := range fs {
			switch f {
			case "name":
				sq.fields |= fieldName
			case "company_name":
				sq.fields |= fieldCompany
			case "description":
				sq.fields |= fieldDescription
			default:
				return nil, badArg("unknown search_field "+f, "search_field")
			}
		}
	}

	sq.areas = q["area"]
	sq.employers = q["employer_id"]
	for _, d := range []struct {
		param string
		dict  map[string]string
		dst   *[]string
	}{
		{"experience", experienceNames, &sq.experience},
		{"schedule", scheduleNames, &sq.schedule},
		{"employment", employmentNames, &sq.employment},
	} {
		for _, v := range q[d.param] {
			if _, ok := d.dict[v]; !ok {
				return nil, badArg("unknown "+d.param+" "+v, d.param)
			}
		}
		*d.dst = q[d.param]
	}

	switch q.Get("only_with_salary") {
	case "", "false":
	case "true":
		sq.onlyWithSalary = true
	default:
		return nil, badArg("only_with_salary must be true or false", "only_with_salary")
	}
	currency := q.Get("currency")
	if currency == "" {
		currency = "RUR"
	}
	rate, ok := currencyRates[currency]
	if !ok {
		return nil, badArg("unknown currency "+currency, "currency")
	}
	if v := q.Get("salary"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badArg("salary must be a non-negative integer", "salary")
		}
		sq.salary, sq.hasSalary = float64(n)*rate, true
	}

	if v := q.Get("date_from"); v != "" {
		if sq.dateFrom, ok = parseDate(v); !ok {
			return nil, badArg("bad date_from", "date_from")
		}
	}
	if v := q.Get("date_to"); v != "" {
		if sq.dateTo, ok = parseDate(v); !ok || sq.dateFrom.IsZero() {
			return nil, badArg("date_to needs a valid date and date_from", "date_to")
		}
	}

	switch sq.order = q.Get("order_by"); sq.order {
	case "", "relevance", "publication_time", "salary_desc", "salary_asc":
	case "distance":
		return nil, badArg("hhtest does not model order_by=distance", "order_by")
	default:
		return nil, badArg("unknown order_by "+sq.order, "order_by")
	}
	sq.counters = q.Get("responses_count_enabled") == "true"
	return sq, nil
}

// parseDate accepts the two forms HH documents for date_from/date_to. HH
// rounds them to 5 minutes; the fake compares exactly.
func parseDate(v string) (time.Time, bool) {
	for _, layout := range []string{TimeLayout, time.RFC3339} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	t, err := time.ParseInLocation(time.DateOnly, v, msk)
	return t, err == nil
}

func (sq *searchQuery) match(e *entry) bool {
	v := &e.v
	if v.Archived {
		return false
	}
	for _, w := range sq.words {
		if !(sq.fields&fieldName != 0 && strings.Contains(e.name, w) ||
			sq.fields&fieldSnippet != 0 && strings.Contains(e.snippet, w) ||
			sq.fields&fieldDescription != 0 && strings.Contains(e.desc, w) ||
			sq.fields&fieldCompany != 0 && strings.Contains(e.employer, w)) {
			return false
		}
	}
	if len(sq.areas) > 0 && !slices.ContainsFunc(sq.areas, func(a string) bool { return areaWithin(v.Area.ID, a) }) {
		return false
	}
	if len(sq.experience) > 0 && !slices.Contains(sq.experience, v.Experience) ||
		len(sq.schedule) > 0 && !slices.Contains(sq.schedule, v.Schedule) ||
		len(sq.employment) > 0 && !slices.Contains(sq.employment, v.Employment) ||
		len(sq.employers) > 0 && !slices.Contains(sq.employers, v.Employer.ID) {
		return false
	}
	if v.Salary == nil {
		if sq.onlyWithSalary {
			return false
		}
	} else if sq.hasSalary && !salaryNear(v.Salary, sq.salary) {
		return false
	}
	if !sq.dateFrom.IsZero() && v.PublishedAt.Before(sq.dateFrom) ||
		!sq.dateTo.IsZero() && v.PublishedAt.After(sq.dateTo) {
		return false
	}
	return true
}

// salaryNear reports whether rub lies in the vacancy's range widened by
// salaryTolerance; a missing bound leaves that side open.
func salaryNear(s *Salary, rub float64) bool {
	rate := rateOf(s.Currency)
	if s.From != nil && rub < float64(*s.From)*rate*(1-salaryTolerance) {
		return false
	}
	if s.To != nil && rub > float64(*s.To)*rate*(1+salaryTolerance) {
		return false
	}
	return true
}

func rateOf(currency string) float64 {
	if r, ok := currencyRates[currency]; ok {
		return r
	}
	return 1
}

// salaryKey is the value salary_desc (high=true) or salary_asc sorts by.
func salaryKey(s *Salary, high bool) float64 {
	rate := rateOf(s.Currency)
	from, to := s.From, s.To
	if high {
		from, to = to, from
	}
	if from != nil {
		return float64(*from) * rate
	}
	if to != nil {
		return float64(*to) * rate
	}
	return 0
}

func (s *Server) search(q url.Values) (int, []byte) {
	sq, berr := parseSearch(q)
	if berr != nil {
		return http.StatusBadRequest, berr.body()
	}
	s.catMu.RLock()
	defer s.catMu.RUnlock()
	var matches []*entry
	for _, e := range s.entries {
		if sq.match(e) {
			matches = append(matches, e)
		}
	}
	if sq.order == "salary_desc" || sq.order == "salary_asc" {
		high := sq.order == "salary_desc"
		// Stable: equal salaries stay newest first; no salary goes last.
		slices.SortStableFunc(matches, func(a, b *entry) int {
			switch {
			case a.v.Salary == nil || b.v.Salary == nil:
				return boolRank(a.v.Salary == nil) - boolRank(b.v.Salary == nil)
			case high:
				return cmp.Compare(salaryKey(b.v.Salary, true), salaryKey(a.v.Salary, true))
			default:
				return cmp.Compare(salaryKey(a.v.Salary, false), salaryKey(b.v.Salary, false))
			}
		})
	}
	found := len(matches)
	// pages counts only what can be fetched: HH never advertises pages
	// beyond the depth limit.
	pages := min((found+sq.perPage-1)/sq.perPage, MaxDepth/sq.perPage)
	start := min(sq.page*sq.perPage, found)
	end := min(start+sq.perPage, found)
	items := make([]shortVacancy, 0, end-start)
	for _, e := range matches[start:end] {
		items = append(items, s.render.short(e, sq.words, sq.counters))
	}
	return http.StatusOK, marshal(searchPage{
		Items:        items,
		Found:        found,
		Pages:        pages,
		Page:         sq.page,
		PerPage:      sq.perPage,
		AlternateURL: "https://hh.ru/search/vacancy?" + q.Encode(),
	})
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }

// heldWriter keeps an answer until release writes it out.
type heldWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (h *heldWriter) Header() http.Header { return h.header }

func (h *heldWriter) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

func (h *heldWriter) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return h.body.Write(p)
}

// release writes the held answer to w; nothing if none was written (the
// client went away while the fake was delaying it).
func (h *heldWriter) release(w http.ResponseWriter) {
	if h.status == 0 {
		return
	}
	for k, v := range h.header {
		w.Header()[k] = v
	}
	w.WriteHeader(h.status)
	_, _ = w.Write(h.body.Bytes())
}
