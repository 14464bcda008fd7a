package vacancy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"switchboard/domain"
)

// Params is one saved search: the text, the salary and the other filters
// of HH's GET /vacancies, which the client sends as they are.
type Params struct {
	Text   string
	Salary int // in Currency (roubles unless the "currency" filter says); 0 = any
	// Filters maps an HH parameter (one of Filters' names) to its values,
	// sorted and distinct: {"area": {"1", "2"}, "schedule": {"remote"}}.
	Filters map[string][]string
}

// Experience and schedule ids (HH's https://api.hh.ru/dictionaries).
const (
	NoExperience = "noExperience"
	Between1And3 = "between1And3"
	Between3And6 = "between3And6"
	MoreThan6    = "moreThan6"
)

// Accepted values of the dictionary filters (HH's https://api.hh.ru/dictionaries ids).
var (
	ExperienceIDs = []string{NoExperience, Between1And3, Between3And6, MoreThan6}
	ScheduleIDs   = []string{"remote", "fullDay", "shift", "flexible", "flyInFlyOut"}
	// CurrencyCodes are the dictionary's key "currency", field code. HH
	// keeps its own codes where ISO 4217 moved on: RUR for roubles, BYR
	// for Belarusian roubles; any other code HH answers 400 bad_argument.
	CurrencyCodes = []string{"RUR", "AZN", "BYR", "EUR", "GEL", "KGS", "KZT", "UAH", "USD", "UZS"}
)

// currencySynonyms are the ISO codes people type where HH keeps another:
// taken, and stored, as HH's.
var currencySynonyms = map[string]string{"RUB": "RUR", "BYN": "BYR"}

// humanWords are the words people type for the dictionary ids, in the
// three languages, after normalWord. The locale's own labels (the usage
// lists them) are among them; a bot test checks that.
var humanWords = map[string]map[string]string{
	"experience": aliases(map[string][]string{
		NoExperience: {"no experience", "none", "0", "без опыта", "нет опыта", "нет", "без досвіду", "немає досвіду", "немає"},
		Between1And3: {"1-3", "1-3 years", "1 to 3 years", "1-3 года", "1-3 лет", "от 1 до 3 лет", "1-3 роки", "1-3 років", "від 1 до 3 років"},
		Between3And6: {"3-6", "3-6 years", "3 to 6 years", "3-6 лет", "3-6 года", "от 3 до 6 лет", "3-6 років", "3-6 роки", "від 3 до 6 років"},
		MoreThan6: {"6+", "more than 6", "more than 6 years", "over 6 years", "более 6", "более 6 лет", "больше 6 лет",
			"от 6 лет", "понад 6", "понад 6 років", "більше 6 років", "від 6 років"},
	}),
	"schedule": aliases(map[string][]string{
		"remote":      {"remote", "remotely", "удаленно", "удаленка", "удаленная работа", "дистанционно", "віддалено", "віддалена робота", "дистанційно"},
		"fullDay":     {"full day", "full-day", "office", "полный день", "повний день"},
		"shift":       {"shift", "shifts", "сменный", "сменный график", "змінний", "змінний графік"},
		"flexible":    {"flexible", "гибкий", "гибкий график", "гнучкий", "гнучкий графік"},
		"flyInFlyOut": {"rotation", "fly-in fly-out", "fly in fly out", "вахта", "вахтовый", "вахтовый метод", "вахтовий", "вахтовий метод"},
	}),
}

func aliases(byID map[string][]string) map[string]string {
	out := map[string]string{}
	for id, words := range byID {
		out[normalWord(id)] = id
		for _, w := range words {
			out[normalWord(w)] = id
		}
	}
	return out
}

// normalWord folds what people vary when they type a value: case, ё,
// dashes, underscores and spacing ("1–3 года", "1-3_года" → "1-3 года").
func normalWord(s string) string {
	s = strings.ToLower(s)
	s = strings.NewReplacer("ё", "е", "–", "-", "—", "-", "−", "-", "_", " ").Replace(s)
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(strings.ReplaceAll(s, " -", "-"), "- ", "-")
}

// HumanID returns the id a human word stands for in a dictionary filter
// ("experience", "schedule"), or "" if it stands for none.
func HumanID(filter, word string) string { return humanWords[filter][normalWord(word)] }

// filter describes one GET /vacancies parameter a search keeps.
type filter struct {
	name  string
	multi bool
	ids   []string       // accepted values (the whole dictionary); nil: valid decides
	valid *regexp.Regexp // when ids is nil
	key   string         // locale key of the refusal; it may name ids as Accepted
	// upper: HH's ids are upper case, so a value is taken in any case.
	upper bool
	// synonyms map a value people type to the id HH uses for it.
	synonyms map[string]string
}

var (
	digits   = regexp.MustCompile(`^[0-9]{1,10}$`)
	dottedID = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,10}){0,3}$`)
	lowerID  = regexp.MustCompile(`^[a-z][a-z_]{0,40}$`)
	wordID   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,40}$`)
	upperID  = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,40}$`)
	// paramName is what a key=value word's key looks like; other words
	// with "=" are text.
	paramName = regexp.MustCompile(`^[a-z][a-z_]{0,40}$`)
)

// Filters are the HH GET /vacancies parameters a search keeps besides
// text and salary, in the order String writes them. Paging, sorting
// (discovery reads newest first) and fixed dates (a saved search watches
// what comes next) are not among them.
var Filters = []filter{
	{name: "area", multi: true, valid: digits, key: "search.error_area"},
	{name: "experience", multi: true, ids: ExperienceIDs, key: "search.error_experience"},
	{name: "schedule", multi: true, ids: ScheduleIDs, key: "search.error_schedule"},
	{name: "employment", multi: true, ids: []string{"full", "part", "project", "volunteer", "probation"}, key: "search.error_choice"},
	{name: "currency", ids: CurrencyCodes, upper: true, synonyms: currencySynonyms, key: "search.error_currency"},
	{name: "only_with_salary", ids: []string{"true"}, key: "search.error_choice"},
	{name: "period", valid: regexp.MustCompile(`^([1-9]|[12][0-9]|30)$`), key: "search.error_period"},
	{name: "search_field", multi: true, ids: []string{"name", "company_name", "description"}, key: "search.error_choice"},
	{name: "professional_role", multi: true, valid: digits, key: "search.error_value"},
	{name: "industry", multi: true, valid: dottedID, key: "search.error_value"},
	{name: "metro", multi: true, valid: dottedID, key: "search.error_value"},
	{name: "employer_id", multi: true, valid: digits, key: "search.error_value"},
	{name: "label", multi: true, valid: lowerID, key: "search.error_value"},
	{name: "education", multi: true, valid: lowerID, key: "search.error_value"},
	{name: "part_time", multi: true, valid: wordID, key: "search.error_value"},
	{name: "work_format", multi: true, ids: []string{"ON_SITE", "REMOTE", "HYBRID", "FIELD_WORK"}, upper: true, key: "search.error_choice"},
	{name: "employment_form", multi: true, ids: []string{"FULL", "PART", "PROJECT", "FLY_IN_FLY_OUT"}, upper: true, key: "search.error_choice"},
	{name: "working_hours", multi: true, valid: upperID, upper: true, key: "search.error_value"},
	{name: "work_schedule_by_days", multi: true, valid: upperID, upper: true, key: "search.error_value"},
}

func filterNamed(name string) (filter, bool) {
	i := slices.IndexFunc(Filters, func(f filter) bool { return f.name == name })
	if i < 0 {
		return filter{}, false
	}
	return Filters[i], true
}

// narrowing filters make a search without words a real search.
var narrowing = []string{"professional_role", "industry", "employer_id"}

// Limits on a search's text, salary and values.
const (
	MaxSearchText = 200
	MaxSalary     = 100_000_000
	// MaxValues bounds the values of one repeated filter.
	MaxValues = 20
	// argEcho bounds what an error repeats of the user's input.
	argEcho = 40
)

// paramError refuses a /search argument with key: arg is cut to a short
// prefix for the reply to repeat, name is the parameter at fault ("" for
// none), and the limit the key is about goes with them, as do the values
// HH accepts when the parameter's dictionary is known in full.
func paramError(key, name, arg string) *domain.InputError {
	limits := map[string]int{
		"search.error_too_long": MaxSearchText,
		"search.error_too_many": MaxValues,
	}
	args := map[string]any{"Arg": Prefix(arg, argEcho), "Name": name, "Max": limits[key]}
	if accepted := Accepted(name); len(accepted) > 0 {
		args["Accepted"] = strings.Join(accepted, ", ")
	}
	return &domain.InputError{Key: key, Args: args}
}

// Accepted is every value HH takes for the parameter name when the search
// knows its whole dictionary (currency: HH's codes), else nil.
func Accepted(name string) []string {
	if f, ok := filterNamed(name); ok {
		return f.ids
	}
	return nil
}

// Prefix is s cut to at most n characters, "…" marking a cut.
func Prefix(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// Values returns the values of a filter ("" for none).
func (p Params) Values(name string) []string { return p.Filters[name] }

// Has reports whether filter name has value v.
func (p Params) Has(name, v string) bool { return slices.Contains(p.Filters[name], v) }

// set validates and adds one value of a filter; human words of the
// dictionary filters are turned into their ids.
func (p *Params) set(name, val, typed string) error {
	if name == "salary" {
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 || n > MaxSalary {
			return paramError("search.error_salary", name, typed)
		}
		if p.Salary != 0 && p.Salary != n {
			return paramError("search.error_duplicate", name, typed)
		}
		p.Salary = n
		return nil
	}
	f, ok := filterNamed(name)
	if !ok {
		return paramError("search.error_unknown", name, typed)
	}
	if id := HumanID(name, val); id != "" {
		val = id
	}
	if f.upper {
		val = strings.ToUpper(val)
	}
	if id, ok := f.synonyms[val]; ok {
		val = id
	}
	switch {
	case f.ids != nil && !slices.Contains(f.ids, val), f.ids == nil && !f.valid.MatchString(val):
		return paramError(f.key, name, typed)
	}
	if p.Filters == nil {
		p.Filters = map[string][]string{}
	}
	have := p.Filters[name]
	if slices.Contains(have, val) {
		return nil
	}
	if len(have) > 0 && !f.multi {
		return paramError("search.error_duplicate", name, typed)
	}
	if len(have) >= MaxValues {
		return paramError("search.error_too_many", name, typed)
	}
	have = append(have, val)
	slices.Sort(have)
	p.Filters[name] = have
	return nil
}

// Canonical is p as /search would save it today: each value in the form
// its filter takes now (HH's id for a synonym or a human word, upper-case
// ids upper-cased), sorted, and HH's defaults dropped; changed names the
// filters it rewrote. A search saved before a rule grew ("currency=RUB",
// which HH refuses) gets the key it would be saved under now. A value the
// filter would refuse today is kept as it was: HH judges it.
func (p Params) Canonical() (c Params, changed []string) {
	c = Params{Text: p.Text, Salary: p.Salary}
	for name, vals := range p.Filters {
		for _, v := range vals {
			if c.set(name, v, v) == nil {
				continue
			}
			if c.Filters == nil {
				c.Filters = map[string][]string{}
			}
			if !slices.Contains(c.Filters[name], v) {
				c.Filters[name] = append(c.Filters[name], v)
				slices.Sort(c.Filters[name])
			}
		}
	}
	c.normalize()
	for _, f := range Filters {
		if !slices.Equal(p.Filters[f.name], c.Filters[f.name]) {
			changed = append(changed, f.name)
		}
	}
	return c, changed
}

// normalize drops what equals HH's defaults, so that equal searches share
// a key whichever way they were written.
func (p *Params) normalize() {
	if slices.Equal(p.Filters["currency"], []string{"RUR"}) {
		delete(p.Filters, "currency")
	}
	if len(p.Filters) == 0 {
		p.Filters = nil
	}
}

func (p Params) check(typed string) error {
	if p.Text == "" && !slices.ContainsFunc(narrowing, func(n string) bool { return len(p.Filters[n]) > 0 }) {
		return paramError("search.error_no_text", "text", typed)
	}
	if utf8.RuneCountInString(p.Text) > MaxSearchText {
		return paramError("search.error_too_long", "text", p.Text)
	}
	return nil
}

// splitArgs splits /search arguments at spaces, except inside a quoted
// value of key="…" (also «…» and “…”), whose quotes it removes: a value of
// several words ("полный день"). Quotes elsewhere stay: HH's query
// language uses them in the text.
func splitArgs(s string) []string {
	var out []string
	rs := []rune(s)
	for i := 0; i < len(rs); {
		if unicode.IsSpace(rs[i]) {
			i++
			continue
		}
		j := i
		for j < len(rs) && !unicode.IsSpace(rs[j]) && rs[j] != '=' {
			j++
		}
		if j+1 < len(rs) && rs[j] == '=' && j > i {
			if closing, ok := quotePairs[rs[j+1]]; ok {
				if end := slices.Index(rs[j+2:], closing); end >= 0 {
					out = append(out, string(rs[i:j+1])+string(rs[j+2:j+2+end]))
					i = j + 3 + end
					continue
				}
			}
		}
		for j < len(rs) && !unicode.IsSpace(rs[j]) {
			j++
		}
		out = append(out, string(rs[i:j]))
		i = j
	}
	return out
}

var quotePairs = map[rune]rune{'"': '"', '«': '»', '“': '”', '„': '“', '\'': '\''}

// ParseParams reads "/search" arguments: free words form the text, and
// key=value words set filters, in any order; a filter of several values
// is repeated or comma-separated (area=1,2). Experience and schedule take
// HH's ids or human words in English, Russian or Ukrainian. It refuses
// unknown keys, malformed values and an empty text, naming what is wrong.
func ParseParams(args string) (Params, error) {
	var p Params
	var words []string
	for _, f := range splitArgs(args) {
		key, val, ok := strings.Cut(f, "=")
		key = strings.ToLower(key)
		if !ok || !paramName.MatchString(key) {
			words = append(words, f)
			continue
		}
		if key == "text" {
			words = append(words, val)
			continue
		}
		vals := []string{val}
		if fl, ok := filterNamed(key); ok && fl.multi && HumanID(key, val) == "" {
			vals = strings.Split(val, ",")
		}
		for _, v := range vals {
			if err := p.set(key, strings.TrimSpace(v), f); err != nil {
				return Params{}, err
			}
		}
	}
	p.Text = strings.Join(strings.Fields(strings.Join(words, " ")), " ")
	p.normalize()
	if err := p.check(args); err != nil {
		return Params{}, err
	}
	return p, nil
}

// Key is the search_key: SHA-256 of the sorted parameters, with the text
// lower-cased and its spaces collapsed so "Go  Developer" and "go developer"
// share one discovery. Users whose searches have the same key share the
// fetch; each gets their own matches. The five original fields are always
// there and the others only when set, so a search saved before filters
// grew keeps its key.
func (p Params) Key() string {
	fields := []string{
		"area=" + strings.Join(p.Filters["area"], ","),
		"experience=" + strings.Join(p.Filters["experience"], ","),
		"salary=" + strconv.Itoa(p.Salary),
		"schedule=" + strings.Join(p.Filters["schedule"], ","),
		"text=" + strings.Join(strings.Fields(strings.ToLower(p.Text)), " "),
	}
	for name, vals := range p.Filters {
		switch name {
		case "area", "experience", "schedule":
		default:
			if len(vals) > 0 {
				fields = append(fields, name+"="+strings.Join(vals, ","))
			}
		}
	}
	slices.Sort(fields)
	sum := sha256.Sum256([]byte(strings.Join(fields, "\n")))
	return hex.EncodeToString(sum[:])
}

// String renders p as the user would type it after /search.
func (p Params) String() string {
	var parts []string
	if p.Text != "" {
		parts = append(parts, p.Text)
	}
	for _, f := range Filters {
		for _, v := range p.Filters[f.name] {
			parts = append(parts, f.name+"="+v)
		}
		if f.name == "area" && p.Salary > 0 {
			parts = append(parts, "salary="+strconv.Itoa(p.Salary))
		}
	}
	return strings.Join(parts, " ")
}

// Setting renders the search's own value of the parameter name as it is
// typed after /search ("currency=RUB"), or name alone when the search sets
// none (a parameter HH names that is not the search's).
func (p Params) Setting(name string) string {
	switch {
	case name == "text" && p.Text != "":
		return "text=" + p.Text
	case name == "salary" && p.Salary > 0:
		return "salary=" + strconv.Itoa(p.Salary)
	case len(p.Filters[name]) > 0:
		return name + "=" + strings.Join(p.Filters[name], ",")
	}
	return name
}

// MarshalJSON writes one flat object, a single value as a string: the
// shape searches were stored in before filters could repeat.
func (p Params) MarshalJSON() ([]byte, error) {
	m := map[string]any{"text": p.Text}
	if p.Salary > 0 {
		m["salary"] = p.Salary
	}
	for name, vals := range p.Filters {
		switch len(vals) {
		case 0:
		case 1:
			m[name] = vals[0]
		default:
			m[name] = vals
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes, and the older rows whose
// area, experience and schedule were single strings.
func (p *Params) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = Params{}
	for name, raw := range m {
		switch name {
		case "text":
			if err := json.Unmarshal(raw, &p.Text); err != nil {
				return fmt.Errorf("search text: %w", err)
			}
		case "salary":
			if err := json.Unmarshal(raw, &p.Salary); err != nil {
				return fmt.Errorf("search salary: %w", err)
			}
		default:
			var vals []string
			if err := json.Unmarshal(raw, &vals); err != nil {
				var one string
				if err := json.Unmarshal(raw, &one); err != nil {
					return fmt.Errorf("search filter %s: %w", name, err)
				}
				vals = []string{one}
			}
			if vals = slices.DeleteFunc(vals, func(v string) bool { return v == "" }); len(vals) > 0 {
				if p.Filters == nil {
					p.Filters = map[string][]string{}
				}
				p.Filters[name] = vals
			}
		}
	}
	return nil
}
