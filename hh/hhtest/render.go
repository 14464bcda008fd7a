package hhtest

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The wire structs below follow the key sets of the published examples
// (testdata/vacancies_search.json, testdata/vacancy_detail.json). Keys the
// examples have but the fake does not model are rendered with HH's "empty"
// values (null, [] or false) so that decoders see the same field set.

type idName struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type wireArea struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
}

type wireSalary struct {
	From     *int   `json:"from"`
	To       *int   `json:"to"`
	Currency string `json:"currency"`
	Gross    *bool  `json:"gross"`
}

type wireEmployer struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	URL          string            `json:"url"`
	AlternateURL string            `json:"alternate_url"`
	LogoURLs     map[string]string `json:"logo_urls"`
	Trusted      bool              `json:"trusted"`
}

type wireEmployerFull struct {
	wireEmployer
	Blacklisted       bool              `json:"blacklisted"`
	ApplicantServices applicantServices `json:"applicant_services"`
}

type applicantServices struct {
	TargetEmployer struct {
		Count int `json:"count"`
	} `json:"target_employer"`
}

type wireAddress struct {
	City          string   `json:"city"`
	Street        string   `json:"street"`
	Building      string   `json:"building"`
	Description   *string  `json:"description"`
	Lat           float64  `json:"lat"`
	Lng           float64  `json:"lng"`
	MetroStations []string `json:"metro_stations"`
}

type wireSnippet struct {
	Requirement    *string `json:"requirement"`
	Responsibility *string `json:"responsibility"`
}

type wireCounters struct {
	Responses int `json:"responses"`
}

// shortVacancy is the "short representation" of a search item.
type shortVacancy struct {
	ID                     string        `json:"id"`
	Name                   string        `json:"name"`
	Department             *idName       `json:"department"`
	HasTest                bool          `json:"has_test"`
	ResponseLetterRequired bool          `json:"response_letter_required"`
	Area                   wireArea      `json:"area"`
	Salary                 *wireSalary   `json:"salary"`
	Type                   idName        `json:"type"`
	Address                *wireAddress  `json:"address"`
	ResponseURL            *string       `json:"response_url"`
	PublishedAt            string        `json:"published_at"`
	CreatedAt              string        `json:"created_at"`
	Archived               bool          `json:"archived"`
	ApplyAlternateURL      string        `json:"apply_alternate_url"`
	InsiderInterview       *struct{}     `json:"insider_interview"`
	URL                    string        `json:"url"`
	AlternateURL           string        `json:"alternate_url"`
	Relations              []string      `json:"relations"`
	Employer               wireEmployer  `json:"employer"`
	Snippet                wireSnippet   `json:"snippet"`
	Contacts               *struct{}     `json:"contacts"`
	Schedule               idName        `json:"schedule"`
	Experience             idName        `json:"experience"`
	Employment             idName        `json:"employment"`
	Counters               *wireCounters `json:"counters,omitempty"`
}

type keySkill struct {
	Name string `json:"name"`
}

type vacancyTest struct {
	Required bool `json:"required"`
}

// fullVacancy is the representation of GET /vacancies/{id}.
type fullVacancy struct {
	ID                      string           `json:"id"`
	Name                    string           `json:"name"`
	Description             string           `json:"description"`
	BrandedDescription      *string          `json:"branded_description"`
	KeySkills               []keySkill       `json:"key_skills"`
	Schedule                idName           `json:"schedule"`
	AcceptHandicapped       bool             `json:"accept_handicapped"`
	AcceptKids              bool             `json:"accept_kids"`
	Experience              idName           `json:"experience"`
	Address                 *wireAddress     `json:"address"`
	AlternateURL            string           `json:"alternate_url"`
	ApplyAlternateURL       string           `json:"apply_alternate_url"`
	Code                    *string          `json:"code"`
	Department              *idName          `json:"department"`
	Employment              idName           `json:"employment"`
	Salary                  *wireSalary      `json:"salary"`
	Archived                bool             `json:"archived"`
	InsiderInterview        *struct{}        `json:"insider_interview"`
	Area                    wireArea         `json:"area"`
	InitialCreatedAt        string           `json:"initial_created_at"`
	CreatedAt               string           `json:"created_at"`
	PublishedAt             string           `json:"published_at"`
	Employer                wireEmployerFull `json:"employer"`
	ResponseLetterRequired  bool             `json:"response_letter_required"`
	Type                    idName           `json:"type"`
	HasTest                 bool             `json:"has_test"`
	ResponseURL             *string          `json:"response_url"`
	Test                    *vacancyTest     `json:"test"`
	Contacts                *struct{}        `json:"contacts"`
	BillingType             idName           `json:"billing_type"`
	AllowMessages           bool             `json:"allow_messages"`
	Premium                 bool             `json:"premium"`
	DriverLicenseTypes      []idName         `json:"driver_license_types"`
	AcceptIncompleteResumes bool             `json:"accept_incomplete_resumes"`
	WorkingDays             []idName         `json:"working_days"`
	WorkingTimeIntervals    []idName         `json:"working_time_intervals"`
	WorkingTimeModes        []idName         `json:"working_time_modes"`
	AcceptTemporary         bool             `json:"accept_temporary"`
	ProfessionalRoles       []idName         `json:"professional_roles"`
	Languages               []idName         `json:"languages"`
}

// searchPage is the paginated root of GET /vacancies.
type searchPage struct {
	Items        []shortVacancy `json:"items"`
	Found        int            `json:"found"`
	Pages        int            `json:"pages"`
	Page         int            `json:"page"`
	PerPage      int            `json:"per_page"`
	Clusters     *struct{}      `json:"clusters"`
	Arguments    *struct{}      `json:"arguments"`
	Fixes        *struct{}      `json:"fixes"`
	Suggests     *struct{}      `json:"suggests"`
	AlternateURL string         `json:"alternate_url"`
}

var (
	openType    = idName{ID: "open", Name: "Открытая"}
	directType  = idName{ID: "direct", Name: "Рекламная"}
	billingType = idName{ID: "standard", Name: "Стандарт"}
)

// renderer turns catalogue vacancies into wire structs. api is the fake's own
// base URL so that "url" fields can be followed back to the fake.
type renderer struct {
	api string
}

func (r renderer) common(v *Vacancy) (wireArea, *wireSalary, wireEmployer, *wireAddress) {
	area := wireArea{ID: v.Area.ID, Name: v.Area.Name, URL: r.api + "/areas/" + v.Area.ID}
	var sal *wireSalary
	if v.Salary != nil {
		sal = &wireSalary{From: v.Salary.From, To: v.Salary.To, Currency: v.Salary.Currency, Gross: v.Salary.Gross}
	}
	emp := wireEmployer{
		ID:           v.Employer.ID,
		Name:         v.Employer.Name,
		URL:          r.api + "/employers/" + v.Employer.ID,
		AlternateURL: "https://hh.ru/employer/" + v.Employer.ID,
		Trusted:      v.Employer.Trusted,
	}
	if v.Employer.HasLogo {
		emp.LogoURLs = map[string]string{
			"90":       "https://img.hhcdn.ru/employer-logo/" + v.Employer.ID + "-90.png",
			"240":      "https://img.hhcdn.ru/employer-logo/" + v.Employer.ID + "-240.png",
			"original": "https://img.hhcdn.ru/employer-logo-original/" + v.Employer.ID + ".png",
		}
	}
	var addr *wireAddress
	if v.Address != nil {
		addr = &wireAddress{
			City: v.Address.City, Street: v.Address.Street, Building: v.Address.Building,
			Lat: v.Address.Lat, Lng: v.Address.Lng, MetroStations: []string{},
		}
	}
	return area, sal, emp, addr
}

// apply is a vacancy's type and response_url: a direct vacancy is answered
// on the employer's site, every other one on hh.ru (response_url null).
func apply(v *Vacancy) (idName, *string) {
	if v.ResponseURL == "" {
		return openType, nil
	}
	u := v.ResponseURL
	return directType, &u
}

func (r renderer) short(e *entry, highlight []string, withCounters bool) shortVacancy {
	v := &e.v
	area, sal, emp, addr := r.common(v)
	typ, responseURL := apply(v)
	out := shortVacancy{
		ID:                     v.ID,
		Name:                   v.Name,
		HasTest:                v.HasTest,
		ResponseLetterRequired: v.ResponseLetterRequired,
		Area:                   area,
		Salary:                 sal,
		Type:                   typ,
		Address:                addr,
		ResponseURL:            responseURL,
		PublishedAt:            v.PublishedAt.Format(TimeLayout),
		CreatedAt:              v.CreatedAt.Format(TimeLayout),
		Archived:               v.Archived,
		ApplyAlternateURL:      "https://hh.ru/applicant/vacancy_response?vacancyId=" + v.ID,
		URL:                    r.api + "/vacancies/" + v.ID,
		AlternateURL:           "https://hh.ru/vacancy/" + v.ID,
		Relations:              []string{},
		Employer:               emp,
		Snippet: wireSnippet{
			Requirement:    snippetText(v.Requirement, e.req, highlight),
			Responsibility: snippetText(v.Responsibility, e.resp, highlight),
		},
		Schedule:   idName{ID: v.Schedule, Name: nameOf(scheduleNames, v.Schedule)},
		Experience: idName{ID: v.Experience, Name: nameOf(experienceNames, v.Experience)},
		Employment: idName{ID: v.Employment, Name: nameOf(employmentNames, v.Employment)},
	}
	if withCounters {
		out.Counters = &wireCounters{Responses: v.Responses}
	}
	return out
}

func (r renderer) full(v *Vacancy) fullVacancy {
	area, sal, emp, addr := r.common(v)
	skills := make([]keySkill, 0, len(v.KeySkills))
	for _, s := range v.KeySkills {
		skills = append(skills, keySkill{Name: s})
	}
	typ, responseURL := apply(v)
	var test *vacancyTest
	if v.HasTest {
		test = &vacancyTest{Required: false}
	}
	return fullVacancy{
		ID:                v.ID,
		Name:              v.Name,
		Description:       v.Description,
		KeySkills:         skills,
		Schedule:          idName{ID: v.Schedule, Name: nameOf(scheduleNames, v.Schedule)},
		Experience:        idName{ID: v.Experience, Name: nameOf(experienceNames, v.Experience)},
		Address:           addr,
		AlternateURL:      "https://hh.ru/vacancy/" + v.ID,
		ApplyAlternateURL: "https://hh.ru/applicant/vacancy_response?vacancyId=" + v.ID,
		Employment:        idName{ID: v.Employment, Name: nameOf(employmentNames, v.Employment)},
		Salary:            sal,
		Archived:          v.Archived,
		Area:              area,
		// HH keeps the first creation date of re-opened vacancies here; the
		// fake has no history, so it equals created_at.
		InitialCreatedAt:       v.CreatedAt.Format(TimeLayout),
		CreatedAt:              v.CreatedAt.Format(TimeLayout),
		PublishedAt:            v.PublishedAt.Format(TimeLayout),
		Employer:               wireEmployerFull{wireEmployer: emp},
		ResponseLetterRequired: v.ResponseLetterRequired,
		Type:                   typ,
		HasTest:                v.HasTest,
		ResponseURL:            responseURL,
		Test:                   test,
		BillingType:            billingType,
		AllowMessages:          true,
		DriverLicenseTypes:     []idName{},
		WorkingDays:            []idName{},
		WorkingTimeIntervals:   []idName{},
		WorkingTimeModes:       []idName{},
		// Roles are not modelled; an empty list beats claiming "developer"
		// for a secretary.
		ProfessionalRoles: []idName{},
		Languages:         []idName{},
	}
}

// snippetText renders a snippet field: empty → null, and occurrences of the
// query words wrapped in <highlighttext> as HH does for text searches.
func snippetText(s, lowered string, words []string) *string {
	if s == "" {
		return nil
	}
	out := highlightLowered(s, lowered, words)
	return &out
}

// highlight wraps case-insensitive occurrences of words (already lower-case)
// in s.
func highlight(s string, words []string) string {
	return highlightLowered(s, strings.ToLower(s), words)
}

// highlightLowered is highlight with strings.ToLower(s) precomputed, which
// is the expensive part for Cyrillic text.
func highlightLowered(s, lowered string, words []string) string {
	if len(words) == 0 {
		return s
	}
	if !slices.ContainsFunc(words, func(w string) bool { return w != "" && strings.Contains(lowered, w) }) {
		return s // the common case
	}
	if len(lowered) == len(s) {
		if out, ok := highlightBytes(s, lowered, words); ok {
			return out
		}
	}
	return highlightRunes(s, words)
}

// highlightBytes maps matches in lowered back to s by byte offset, which is
// right whenever lower-casing kept every rune's length (Latin, Cyrillic). It
// reports false when a match does not line up, leaving it to highlightRunes.
func highlightBytes(s, lowered string, words []string) (string, bool) {
	var b strings.Builder
	b.Grow(len(s) + 32)
	last := 0
	for i := 0; i < len(lowered); {
		n := 0
		for _, w := range words {
			if len(w) > n && strings.HasPrefix(lowered[i:], w) {
				n = len(w)
			}
		}
		if n == 0 {
			i++
			continue
		}
		if !utf8.RuneStart(s[i]) || i+n < len(s) && !utf8.RuneStart(s[i+n]) || !strings.EqualFold(s[i:i+n], lowered[i:i+n]) {
			return "", false
		}
		b.WriteString(s[last:i])
		b.WriteString("<highlighttext>")
		b.WriteString(s[i : i+n])
		b.WriteString("</highlighttext>")
		i += n
		last = i
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// highlightRunes is the general path: it compares rune by rune because
// lower-casing may change the byte length of some runes.
func highlightRunes(s string, words []string) string {
	src := []rune(s)
	lower := make([]rune, len(src))
	for i, r := range src {
		lower[i] = unicode.ToLower(r)
	}
	pats := make([][]rune, 0, len(words))
	for _, w := range words {
		if w != "" {
			pats = append(pats, []rune(w))
		}
	}
	var b strings.Builder
	b.Grow(len(s) + 32)
	for i := 0; i < len(src); {
		n := 0
		for _, p := range pats {
			if len(p) > n && hasRunePrefix(lower[i:], p) {
				n = len(p)
			}
		}
		if n == 0 {
			b.WriteRune(src[i])
			i++
			continue
		}
		b.WriteString("<highlighttext>")
		for _, r := range src[i : i+n] {
			b.WriteRune(r)
		}
		b.WriteString("</highlighttext>")
		i += n
	}
	return b.String()
}

func hasRunePrefix(s, p []rune) bool {
	if len(p) > len(s) {
		return false
	}
	for i := range p {
		if s[i] != p[i] {
			return false
		}
	}
	return true
}

// stripTags removes HTML tags and decodes the few entities the generator
// emits, so that text search over descriptions sees words, not markup.
func stripTags(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	in := false
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		s = s[size:]
		switch {
		case r == '<':
			in = true
		case r == '>':
			in = false
			b.WriteByte(' ')
		case !in:
			b.WriteRune(r)
		}
	}
	return entityDecode(b.String())
}

var entityDecode = strings.NewReplacer("&quot;", `"`, "&amp;", "&", "&lt;", "<", "&gt;", ">", "&nbsp;", " ", "&#39;", "'").Replace
