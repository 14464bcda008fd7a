package hhtest

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is HH's timestamp format: ISO 8601 with a colon-less offset
// ("2013-07-08T16:17:21+0400"). time.RFC3339 does not parse it.
const TimeLayout = "2006-01-02T15:04:05-0700"

// Experience ids of HH's https://api.hh.ru/dictionaries key "experience".
const (
	NoExperience = "noExperience"
	Between1And3 = "between1And3"
	Between3And6 = "between3And6"
	MoreThan6    = "moreThan6"
)

// Schedule ids of HH's https://api.hh.ru/dictionaries key "schedule".
const (
	FullDay     = "fullDay"
	Shift       = "shift"
	Flexible    = "flexible"
	Remote      = "remote"
	FlyInFlyOut = "flyInFlyOut"
)

// Employment ids of HH's https://api.hh.ru/dictionaries key "employment".
const (
	FullEmployment    = "full"
	PartEmployment    = "part"
	ProjectEmployment = "project"
	Volunteer         = "volunteer"
	Probation         = "probation"
)

// Area ids used by the generator (HH's https://api.hh.ru/areas ids).
const (
	AreaRussia = "113"
	AreaMoscow = "1"
	AreaSPb    = "2"
)

// The names are served by HH's live https://api.hh.ru/dictionaries; the fake needs them so
// that hand-made vacancies only have to carry ids.
var (
	experienceNames = map[string]string{
		NoExperience: "Нет опыта",
		Between1And3: "От 1 года до 3 лет",
		Between3And6: "От 3 до 6 лет",
		MoreThan6:    "Более 6 лет",
	}
	scheduleNames = map[string]string{
		FullDay:     "Полный день",
		Shift:       "Сменный график",
		Flexible:    "Гибкий график",
		Remote:      "Удаленная работа",
		FlyInFlyOut: "Вахтовый метод",
	}
	employmentNames = map[string]string{
		FullEmployment:    "Полная занятость",
		PartEmployment:    "Частичная занятость",
		ProjectEmployment: "Проектная работа",
		Volunteer:         "Волонтерство",
		Probation:         "Стажировка",
	}
)

// areaInfo is a small slice of HH's https://api.hh.ru/areas tree. Every city hangs directly
// under Russia (113) here; HH has regions in between, which does not matter
// for area filtering as long as area=113 still covers the cities.
type areaInfo struct {
	name   string
	parent string
	offset int // hours east of UTC used when the generator renders dates
	lat    float64
	lng    float64
}

var areas = map[string]areaInfo{
	AreaRussia: {name: "Россия", offset: 3, lat: 55.7558, lng: 37.6173},
	AreaMoscow: {name: "Москва", parent: AreaRussia, offset: 3, lat: 55.7558, lng: 37.6173},
	AreaSPb:    {name: "Санкт-Петербург", parent: AreaRussia, offset: 3, lat: 59.9386, lng: 30.3141},
	"3":        {name: "Екатеринбург", parent: AreaRussia, offset: 3, lat: 56.8380, lng: 60.5975},
	"4":        {name: "Новосибирск", parent: AreaRussia, offset: 3, lat: 55.0302, lng: 82.9204},
	"66":       {name: "Нижний Новгород", parent: AreaRussia, offset: 3, lat: 56.3269, lng: 44.0059},
	"78":       {name: "Самара", parent: AreaRussia, offset: 4, lat: 53.1959, lng: 50.1002},
	"88":       {name: "Казань", parent: AreaRussia, offset: 3, lat: 55.7887, lng: 49.1221},
}

// Vacancy is one catalogue entry. It carries what is needed to render both
// HH representations: the short one of GET /vacancies and the full one of
// GET /vacancies/{id}. Fields HH always fills with fixed values in practice
// (type "open", billing_type, relations...) are not modelled.
//
// Only IDs of dictionaries are stored; names are looked up when rendering,
// so a hand-made Vacancy{Name: "...", Experience: hhtest.Between1And3} is
// enough.
type Vacancy struct {
	// ID is a numeric string; HH's ids grow with time and the fake relies on
	// that to break publication-time ties (larger id first).
	ID   string
	Name string
	Area Area
	// Salary is nil for vacancies without a published salary.
	Salary     *Salary
	Employer   Employer
	Experience string // experience id, e.g. Between1And3
	Schedule   string // schedule id, e.g. Remote
	Employment string // employment id, e.g. FullEmployment
	// PublishedAt is rendered in its own location's offset, so keep it in a
	// +0300/+0400 zone to look like HH.
	PublishedAt time.Time
	// CreatedAt defaults to PublishedAt.
	CreatedAt time.Time
	// Requirement and Responsibility form the search snippet: plain text
	// that the server decorates with <highlighttext> for text queries.
	// Empty renders as null, as HH does for vacancies without a snippet.
	Requirement    string
	Responsibility string
	// Description is HTML (<p>, <ul><li>, <strong>, entities), only in the
	// full representation.
	Description            string
	KeySkills              []string
	Address                *Address
	ResponseLetterRequired bool
	HasTest                bool
	// ResponseURL makes the vacancy "direct" (type direct, its
	// response_url this address): applicants answer on the employer's site.
	ResponseURL string
	// Responses feeds counters.responses, rendered only when the search
	// asks for responses_count_enabled=true.
	Responses int
	// Archived vacancies leave search results and answer 404 on detail.
	Archived bool
}

// Area is an HH region. Name may be left empty for ids the fake knows
// (1, 2, 113 and a few big cities).
type Area struct {
	ID   string
	Name string
}

// Salary mirrors HH's salary object: either bound may be absent (nil) and
// gross may be unknown (nil).
type Salary struct {
	From     *int
	To       *int
	Currency string // "RUR", "USD", "EUR"...
	Gross    *bool
}

// NewSalary builds a Salary; a zero bound means "not published" (null).
func NewSalary(from, to int, currency string, gross bool) *Salary {
	s := &Salary{Currency: currency, Gross: &gross}
	if from != 0 {
		s.From = &from
	}
	if to != 0 {
		s.To = &to
	}
	return s
}

// Employer is the employer summary embedded in both representations.
type Employer struct {
	ID      string
	Name    string
	Trusted bool
	// HasLogo switches logo_urls between an object and null.
	HasLogo bool
}

// Address is a vacancy's street address.
type Address struct {
	City     string
	Street   string
	Building string
	Lat, Lng float64
}

// clone deep-copies the pointer and slice fields so that the catalogue never
// shares memory with callers.
func (v Vacancy) clone() Vacancy {
	if v.Salary != nil {
		s := *v.Salary
		if s.From != nil {
			f := *s.From
			s.From = &f
		}
		if s.To != nil {
			t := *s.To
			s.To = &t
		}
		if s.Gross != nil {
			g := *s.Gross
			s.Gross = &g
		}
		v.Salary = &s
	}
	if v.Address != nil {
		a := *v.Address
		v.Address = &a
	}
	v.KeySkills = slices.Clone(v.KeySkills)
	return v
}

// normalize fills the defaults that make a hand-made vacancy renderable.
func (v *Vacancy) normalize() {
	if v.Area.ID == "" {
		v.Area.ID = AreaMoscow
	}
	if v.Area.Name == "" {
		v.Area.Name = areas[v.Area.ID].name
	}
	if v.Experience == "" {
		v.Experience = NoExperience
	}
	if v.Schedule == "" {
		v.Schedule = FullDay
	}
	if v.Employment == "" {
		v.Employment = FullEmployment
	}
	if v.Salary != nil && v.Salary.Currency == "" {
		v.Salary.Currency = "RUR"
	}
	if v.CreatedAt.IsZero() {
		v.CreatedAt = v.PublishedAt
	}
}

// nameOf returns the dictionary name of id, falling back to the id itself so
// that unknown ids still render as {"id": x, "name": x}.
func nameOf(dict map[string]string, id string) string {
	if n, ok := dict[id]; ok {
		return n
	}
	return id
}

// areaWithin reports whether area id lies in (or is) the area want.
func areaWithin(id, want string) bool {
	for range 8 { // the tree is shallow; the bound protects against cycles
		if id == want {
			return true
		}
		info, ok := areas[id]
		if !ok || info.parent == "" {
			return false
		}
		id = info.parent
	}
	return false
}

// idNumber parses a numeric id; ok is false for ids that are not numbers.
func idNumber(id string) (int64, bool) {
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil && n >= 0
}

// htmlEscape escapes like HH's descriptions do (&quot; rather than Go's
// &#34;), which client-side HTML stripping must cope with.
var htmlEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace
