package locales

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	texttemplate "text/template"
	"unicode"

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

// plural picks the form of a word that agrees with the count n, as
// CLDR's cardinal rules for whole numbers have it. A text writes the
// number itself and then the word:
//
//	{{.N}} {{plural .N "file" "files"}}                 English: one, other
//	{{.N}} {{plural .N "файл" "файла" "файлов"}}         Russian: one, few, many
//	{{.N}} {{plural .N "файл" "файли" "файлів"}}         Ukrainian: one, few, many
//
// The number of forms names the rule: two are English's, three are the
// rule Russian and Ukrainian share (one: 1, 21, 101; few: 2–4, 22–24;
// many: 0, 5–20, 25–30, 111). The form is the one the sentence needs,
// e.g. the genitive after "не больше": "1 символа", "5 символов". n is
// any integer or a number as Number writes it ("1,021", "1 021").
func plural(n any, forms ...string) (string, error) {
	v, err := count(n)
	if err != nil {
		return "", err
	}
	switch len(forms) {
	case 2:
		if v == 1 {
			return forms[0], nil
		}
		return forms[1], nil
	case 3:
		switch d, dd := v%10, v%100; {
		case d == 1 && dd != 11:
			return forms[0], nil
		case d >= 2 && d <= 4 && (dd < 12 || dd > 14):
			return forms[1], nil
		}
		return forms[2], nil
	}
	return "", fmt.Errorf("plural: %d forms; want 2 (one, other) or 3 (one, few, many)", len(forms))
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
