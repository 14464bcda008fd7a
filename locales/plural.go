package locales

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	texttemplate "text/template"
	"unicode"

	xplural "golang.org/x/text/feature/plural"
	"golang.org/x/text/language"

	i18ntemplate "github.com/nicksnyder/go-i18n/v2/i18n/template"
)

// funcs are the functions every text's template may call.
var funcs = texttemplate.FuncMap{"plural": plural}

// funcParser parses every text with funcs. go-i18n caches a parsed template
// only for a parser without functions; funcs are the same for every
// language and every call, so caching is safe here too.
type funcParser struct{ i18ntemplate.TextParser }

func (*funcParser) Cacheable() bool { return true }

var textParser = &funcParser{i18ntemplate.TextParser{Funcs: funcs}}

// plural picks the form of a word that agrees with the count n, by
// CLDR's cardinal rules for whole numbers (x/text's plural tables). A text
// writes the number itself and then the word:
//
//	{{.N}} {{plural .N "file" "files"}}                 English: one, other
//	{{.N}} {{plural .N "файл" "файла" "файлов"}}         Russian: one, few, many
//	{{.N}} {{plural .N "файл" "файли" "файлів"}}         Ukrainian: one, few, many
//
// The number of forms names the rule: two are English's, three are the
// rule Russian and Ukrainian share for whole numbers (one: 1, 21, 101;
// few: 2–4, 22–24; many: 0, 5–20, 25–30, 111). The form is the one the
// sentence needs, e.g. the genitive after "не больше": "1 символа",
// "5 символов". n is any integer or a number as Number writes it
// ("1,021", "1 021").
func plural(n any, forms ...string) (string, error) {
	v, err := count(n)
	if err != nil {
		return "", err
	}
	rule, ok := pluralRules[len(forms)]
	if !ok {
		return "", fmt.Errorf("plural: %d forms; want 2 (one, other) or 3 (one, few, many)", len(forms))
	}
	// MatchPlural reads the number's last digits only, so a count past an
	// int is taken by its last nine.
	form := xplural.Cardinal.MatchPlural(rule.lang, int(v%1_000_000_000), 0, 0, 0, 0)
	for i, f := range rule.forms {
		if f == form {
			return forms[i], nil
		}
	}
	return forms[len(forms)-1], nil
}

// pluralRules are the languages whose rules plural applies, by the number
// of forms a text gives, and the CLDR category of each form in order.
var pluralRules = map[int]struct {
	lang  language.Tag
	forms []xplural.Form
}{
	2: {language.English, []xplural.Form{xplural.One, xplural.Other}},
	3: {language.Russian, []xplural.Form{xplural.One, xplural.Few, xplural.Many}},
}

// count is n's absolute value as a whole number.
func count(n any) (uint64, error) {
	v := reflect.ValueOf(n)
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i := v.Int()
		if i < 0 {
			return uint64(-i), nil
		}
		return uint64(i), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint(), nil
	case reflect.String:
		// Number's grouping: commas, spaces, no-break spaces.
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			if r == ',' || r == '-' || unicode.IsSpace(r) || r == '\u00a0' || r == '\u202f' {
				return -1
			}
			return '!'
		}, v.String())
		if u, err := strconv.ParseUint(digits, 10, 64); err == nil {
			return u, nil
		}
	}
	return 0, fmt.Errorf("plural: %v (%T) is not a whole number", n, n)
}
