package vacancy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Params is one saved search: the text and the HH filters we support.
type Params struct {
	Text       string `json:"text"`
	Area       string `json:"area,omitempty"`       // HH area id, e.g. "1" (Moscow)
	Salary     int    `json:"salary,omitempty"`     // roubles; 0 = any
	Experience string `json:"experience,omitempty"` // HH experience id
	Schedule   string `json:"schedule,omitempty"`   // HH schedule id
}

// Accepted values of the dictionary filters (HH's /dictionaries ids).
// moreThan6 is left out on purpose: such vacancies are dropped at fetch.
var (
	ExperienceIDs = []string{"noExperience", "between1And3", "between3And6"}
	ScheduleIDs   = []string{"fullDay", "shift", "flexible", "remote", "flyInFlyOut"}
)

// Limits on a search's text and salary.
const (
	MaxSearchText = 200
	MaxSalary     = 100_000_000
)

// ParamError is a /search argument we cannot accept. Key is the locale key
// of the explanation; Arg the offending argument as typed.
type ParamError struct {
	Key string
	Arg string
}

func (e *ParamError) Error() string { return fmt.Sprintf("search parameter %q: %s", e.Arg, e.Key) }

// ParseParams reads "/search" arguments: free words form the text, and
// key=value words set filters, in any order. It refuses unknown keys,
// malformed values and an empty text, naming what is accepted.
func ParseParams(args string) (Params, error) {
	var p Params
	var words []string
	seen := map[string]bool{}
	for _, f := range strings.Fields(args) {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			words = append(words, f)
			continue
		}
		key = strings.ToLower(key)
		if seen[key] {
			return Params{}, &ParamError{Key: "search.error_duplicate", Arg: f}
		}
		seen[key] = true
		switch key {
		case "area":
			if n, err := strconv.ParseUint(val, 10, 32); err != nil || n == 0 {
				return Params{}, &ParamError{Key: "search.error_area", Arg: f}
			}
			p.Area = val
		case "salary":
			n, err := strconv.Atoi(val)
			if err != nil || n <= 0 || n > MaxSalary {
				return Params{}, &ParamError{Key: "search.error_salary", Arg: f}
			}
			p.Salary = n
		case "experience":
			if !slices.Contains(ExperienceIDs, val) {
				return Params{}, &ParamError{Key: "search.error_experience", Arg: f}
			}
			p.Experience = val
		case "schedule":
			if !slices.Contains(ScheduleIDs, val) {
				return Params{}, &ParamError{Key: "search.error_schedule", Arg: f}
			}
			p.Schedule = val
		default:
			return Params{}, &ParamError{Key: "search.error_unknown", Arg: f}
		}
	}
	p.Text = strings.Join(words, " ")
	if p.Text == "" {
		return Params{}, &ParamError{Key: "search.error_no_text", Arg: args}
	}
	if utf8.RuneCountInString(p.Text) > MaxSearchText {
		return Params{}, &ParamError{Key: "search.error_too_long", Arg: string([]rune(p.Text)[:32])}
	}
	return p, nil
}

// Key is the search_key: SHA-256 of the sorted parameters, with the text
// lower-cased and its spaces collapsed so "Go  Developer" and "go developer"
// share one discovery. Users whose searches have the same key share the
// fetch; each gets their own matches.
func (p Params) Key() string {
	fields := []string{
		"area=" + p.Area,
		"experience=" + p.Experience,
		"salary=" + strconv.Itoa(p.Salary),
		"schedule=" + p.Schedule,
		"text=" + strings.Join(strings.Fields(strings.ToLower(p.Text)), " "),
	}
	slices.Sort(fields)
	sum := sha256.Sum256([]byte(strings.Join(fields, "\n")))
	return hex.EncodeToString(sum[:])
}

// String renders p as the user would type it after /search.
func (p Params) String() string {
	parts := []string{p.Text}
	if p.Area != "" {
		parts = append(parts, "area="+p.Area)
	}
	if p.Salary > 0 {
		parts = append(parts, "salary="+strconv.Itoa(p.Salary))
	}
	if p.Experience != "" {
		parts = append(parts, "experience="+p.Experience)
	}
	if p.Schedule != "" {
		parts = append(parts, "schedule="+p.Schedule)
	}
	return strings.Join(parts, " ")
}
